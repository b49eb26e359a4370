// head_map_import.cpp — turns a published head map (.npy, [layers, KV heads]) and its anchor list
// into a calibration file marked "imported": no statistics, dev set or collection settings, one
// anchor set without objective. Checks the shape against the model, the range of every entry and
// the identity on anchor rows.
// Tested by tests/unit/calibrate/test_npy_import.cpp.
#include "kascade/calibration.h"

namespace kascade::calib {

Result<CalibrationFile> import_head_map(const NpyIntMatrix& map, std::span<const int32_t> anchors,
                                        const ModelIdentity& model, std::string_view imported_from) {
  const std::string where = detail::concat("head map import from '", imported_from, "'");
  KC_CHECK_ARG(map.rows == model.num_layers && map.cols == model.num_kv_heads, where, ": the map has shape [",
               map.rows, ", ", map.cols, "] but the model has ", model.num_layers, " layers and ",
               model.num_kv_heads, " KV heads");
  KC_CHECK_ARG(static_cast<int64_t>(map.values.size()) == map.rows * map.cols, where, ": the map holds ",
               map.values.size(), " values; expected ", map.rows * map.cols);
  {
    Status s = validate_anchors(anchors, model.num_layers);
    if (!s.ok()) return s.with_context(where);
  }
  AnchorSet set;
  set.anchors.assign(anchors.begin(), anchors.end());
  set.head_map.reserve(map.values.size());
  for (int64_t b = 0; b < map.rows; ++b) {
    for (int64_t g = 0; g < map.cols; ++g) {
      const int64_t v = map.values[static_cast<size_t>(b * map.cols + g)];
      KC_CHECK_ARG(v >= 0 && v < model.num_kv_heads, where, ": head_map[", b, "][", g, "] = ", v,
                   " is out of range [0, ", model.num_kv_heads, ")");
      set.head_map.push_back(static_cast<int32_t>(v));
    }
  }
  {
    Status s = validate_head_map(set.head_map, model.num_layers, model.num_kv_heads, set.anchors);
    if (!s.ok()) return s.with_context(where);
  }
  CalibrationFile file;
  file.source = CalibrationSource::kImported;
  file.model = model;
  file.imported_from = std::string(imported_from);
  file.default_num_anchors = static_cast<int32_t>(set.anchors.size());
  file.anchor_sets.push_back(std::move(set));
  Status s = validate_calibration(file);
  if (!s.ok()) return s.with_context(where);
  return file;
}

Result<CalibrationFile> import_head_map_file(const std::string& npy_path, std::span<const int32_t> anchors,
                                             const ModelIdentity& model) {
  KC_ASSIGN_OR_RETURN(const NpyIntMatrix map, read_npy_int_matrix(npy_path));
  return import_head_map(map, anchors, model, npy_path);
}

}  // namespace kascade::calib
