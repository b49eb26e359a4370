// calibration_json.cpp — the calibration file as JSON (DESIGN.md §2.5): writer, reader and file
// I/O. Layout (version 1):
//   { "format": "kascade-calibration", "version": 1, "source": "collected" | "imported",
//     "model": {name, path, num_layers, num_kv_heads, num_heads, head_dim},
//     "dev_set": {description, decode_steps_per_prompt},                      (collected only)
//     "collection": {rho_ppm, k_min, tile_size, k_cal, forward: dense|sparse}, (collected only)
//     "statistics": {num_prompts,                                              (collected only)
//        "similarity": {"axes": ["anchor_layer","reuse_layer","anchor_kv_head","reuse_kv_head"],
//                       "values": [N][N] of null (a > b) or [G][G] numbers},
//        "importance": {"axes": ["layer"], "values": [N]}},
//     "imported_from": "...",                                                  (imported only)
//     "anchor_sets": [{num_anchors, anchors, objective (collected only),
//                      "head_map": {"axes": ["layer","kv_head"], "values": [N][G]},
//                      "refinement": {method: "agreement", dp_anchors, dp_objective, agreement, kl,
//                         dp_agreement, dp_kl, tokens, prompts, steps, max_rounds, rounds,
//                         local_optimum, sets_scored}}],  (refined sets only: `anchors` is the
//                                                          refined set, dp_anchors the DP's)
//     "default_num_anchors": K }
// Unknown keys are refused. Every error names its field.
// Tested by tests/unit/calibrate/test_calibration_file.cpp (round trip, every malformed case).
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "calibrate/json_fields.h"
#include "kascade/calibration.h"

namespace kascade::calib {

namespace {

constexpr std::string_view kFormatName = "kascade-calibration";
constexpr std::string_view kSimilarityAxes[] = {"anchor_layer", "reuse_layer", "anchor_kv_head", "reuse_kv_head"};
constexpr std::string_view kImportanceAxes[] = {"layer"};
constexpr std::string_view kHeadMapAxes[] = {"layer", "kv_head"};
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// ---- writer ----

Json axes_json(std::span<const std::string_view> axes) {
  Json j = Json::array();
  for (std::string_view a : axes) j.push_back(std::string(a));
  return j;
}

Json stats_json(const CalibrationStats& s) {
  const int32_t N = s.num_layers;
  const int32_t G = s.num_kv_heads;
  Json sim = Json::array();
  for (int32_t a = 0; a < N; ++a) {
    Json row = Json::array();
    for (int32_t b = 0; b < N; ++b) {
      if (a > b) {
        row.push_back(nullptr);
        continue;
      }
      Json block = Json::array();
      for (int32_t ga = 0; ga < G; ++ga) {
        Json heads = Json::array();
        for (int32_t gb = 0; gb < G; ++gb) heads.push_back(s.sim(a, b, ga, gb));
        block.push_back(std::move(heads));
      }
      row.push_back(std::move(block));
    }
    sim.push_back(std::move(row));
  }
  Json j = Json::object();
  j["num_prompts"] = s.num_prompts;
  j["similarity"] = {{"axes", axes_json(kSimilarityAxes)}, {"values", std::move(sim)}};
  j["importance"] = {{"axes", axes_json(kImportanceAxes)}, {"values", s.importance}};
  return j;
}

Json anchor_set_json(const AnchorSet& set, int32_t num_kv_heads) {
  Json j = Json::object();
  j["num_anchors"] = set.anchors.size();
  j["anchors"] = set.anchors;
  if (set.objective) j["objective"] = *set.objective;
  Json rows = Json::array();
  for (size_t r = 0; r < set.head_map.size() / static_cast<size_t>(num_kv_heads); ++r) {
    rows.push_back(std::vector<int32_t>(set.head_map.begin() + static_cast<ptrdiff_t>(r * num_kv_heads),
                                        set.head_map.begin() + static_cast<ptrdiff_t>((r + 1) * num_kv_heads)));
  }
  j["head_map"] = {{"axes", axes_json(kHeadMapAxes)}, {"values", std::move(rows)}};
  if (set.refinement) {
    const AnchorRefinement& r = *set.refinement;
    j["refinement"] = {{"method", refine_method_name(RefineMethod::kAgreement)},
                       {"dp_anchors", r.dp_anchors},
                       {"dp_objective", r.dp_objective},
                       {"agreement", r.agreement},
                       {"kl", r.kl},
                       {"dp_agreement", r.dp_agreement},
                       {"dp_kl", r.dp_kl},
                       {"tokens", r.tokens},
                       {"prompts", r.prompts},
                       {"steps", r.steps},
                       {"max_rounds", r.max_rounds},
                       {"rounds", r.rounds},
                       {"local_optimum", r.local_optimum},
                       {"sets_scored", r.sets_scored}};
  }
  return j;
}

Json calibration_json(const CalibrationFile& f) {
  Json j = Json::object();
  j["format"] = std::string(kFormatName);
  j["version"] = kCalibrationFileVersion;
  j["source"] = calibration_source_name(f.source);
  j["model"] = {{"name", f.model.name},           {"path", f.model.path},
                {"num_layers", f.model.num_layers}, {"num_kv_heads", f.model.num_kv_heads},
                {"num_heads", f.model.num_heads},   {"head_dim", f.model.head_dim}};
  if (f.dev_set) {
    j["dev_set"] = {{"description", f.dev_set->description},
                    {"decode_steps_per_prompt", f.dev_set->decode_steps_per_prompt}};
  }
  if (f.collection) {
    j["collection"] = {{"rho_ppm", f.collection->rho_ppm},     {"k_min", f.collection->k_min},
                       {"tile_size", f.collection->tile_size}, {"k_cal", f.collection->k_cal},
                       {"forward", stats_forward_name(f.collection->forward)}};
  }
  if (f.stats) j["statistics"] = stats_json(*f.stats);
  if (f.source == CalibrationSource::kImported) j["imported_from"] = f.imported_from;
  Json sets = Json::array();
  for (const AnchorSet& set : f.anchor_sets) sets.push_back(anchor_set_json(set, f.model.num_kv_heads));
  j["anchor_sets"] = std::move(sets);
  j["default_num_anchors"] = f.default_num_anchors;
  return j;
}

// ---- reader ----

Status expect_axes(const JsonField& holder, std::span<const std::string_view> expected) {
  KC_ASSIGN_OR_RETURN(const JsonField axes, holder.member("axes"));
  std::string want = "[";
  for (size_t i = 0; i < expected.size(); ++i) want += detail::concat(i ? ", " : "", "\"", expected[i], "\"");
  want += "]";
  KC_ASSIGN_OR_RETURN(const size_t n, axes.array_size());
  bool same = n == expected.size();
  for (size_t i = 0; same && i < n; ++i) {
    same = axes.element(i).value().is_string() && axes.element(i).value().get<std::string>() == expected[i];
  }
  KC_CHECK_ARG(same, axes.path(), " is ", axes.value().dump(), "; expected ", want);
  return ok_status();
}

Result<int32_t> read_int32(const JsonField& parent, std::string_view key, int64_t lo = kInt32Min,
                           int64_t hi = kInt32Max) {
  KC_ASSIGN_OR_RETURN(const JsonField f, parent.member(key));
  KC_ASSIGN_OR_RETURN(const int64_t v, f.as_int(lo, hi));
  return static_cast<int32_t>(v);
}

Result<int64_t> read_int64(const JsonField& parent, std::string_view key) {
  KC_ASSIGN_OR_RETURN(const JsonField f, parent.member(key));
  return f.as_int(std::numeric_limits<int64_t>::min(), kInt64Max);
}

Result<std::string> read_string(const JsonField& parent, std::string_view key) {
  KC_ASSIGN_OR_RETURN(const JsonField f, parent.member(key));
  return f.as_string();
}

Result<ModelIdentity> read_model(const JsonField& root) {
  KC_ASSIGN_OR_RETURN(const JsonField m, root.member("model"));
  KC_RETURN_IF_ERROR(m.expect_only_keys({"name", "path", "num_layers", "num_kv_heads", "num_heads", "head_dim"}));
  ModelIdentity model;
  KC_ASSIGN_OR_RETURN(model.name, read_string(m, "name"));
  KC_ASSIGN_OR_RETURN(model.path, read_string(m, "path"));
  // Bounded so that [N, N, G, G] tables stay addressable.
  KC_ASSIGN_OR_RETURN(model.num_layers, read_int32(m, "num_layers", 1, 4096));
  KC_ASSIGN_OR_RETURN(model.num_kv_heads, read_int32(m, "num_kv_heads", 1, 256));
  KC_ASSIGN_OR_RETURN(model.num_heads, read_int32(m, "num_heads", 1));
  KC_ASSIGN_OR_RETURN(model.head_dim, read_int32(m, "head_dim", 1));
  return model;
}

Result<DevSetInfo> read_dev_set(const JsonField& root) {
  KC_ASSIGN_OR_RETURN(const JsonField d, root.member("dev_set"));
  KC_RETURN_IF_ERROR(d.expect_only_keys({"description", "decode_steps_per_prompt"}));
  DevSetInfo dev;
  KC_ASSIGN_OR_RETURN(dev.description, read_string(d, "description"));
  KC_ASSIGN_OR_RETURN(const JsonField steps, d.member("decode_steps_per_prompt"));
  KC_ASSIGN_OR_RETURN(dev.decode_steps_per_prompt, steps.as_int(0, kInt64Max));
  return dev;
}

Result<CollectionSettings> read_collection(const JsonField& root) {
  KC_ASSIGN_OR_RETURN(const JsonField c, root.member("collection"));
  KC_RETURN_IF_ERROR(c.expect_only_keys({"rho_ppm", "k_min", "tile_size", "k_cal", "forward"}));
  CollectionSettings s;
  KC_ASSIGN_OR_RETURN(s.rho_ppm, read_int64(c, "rho_ppm"));
  KC_ASSIGN_OR_RETURN(s.k_min, read_int64(c, "k_min"));
  KC_ASSIGN_OR_RETURN(s.tile_size, read_int64(c, "tile_size"));
  KC_ASSIGN_OR_RETURN(s.k_cal, read_int64(c, "k_cal"));
  KC_ASSIGN_OR_RETURN(const std::string forward, read_string(c, "forward"));
  Result<StatsForward> parsed = parse_stats_forward(forward);
  if (!parsed.ok()) return invalid_argument("collection.forward is \"", forward, "\"; expected \"dense\" or \"sparse\"");
  s.forward = *parsed;
  return s;
}

Result<CalibrationStats> read_stats(const JsonField& root, int32_t N, int32_t G) {
  KC_ASSIGN_OR_RETURN(const JsonField st, root.member("statistics"));
  KC_RETURN_IF_ERROR(st.expect_only_keys({"num_prompts", "similarity", "importance"}));
  CalibrationStats stats;
  stats.num_layers = N;
  stats.num_kv_heads = G;
  KC_ASSIGN_OR_RETURN(const JsonField prompts, st.member("num_prompts"));
  KC_ASSIGN_OR_RETURN(stats.num_prompts, prompts.as_int(1, kInt64Max));

  KC_ASSIGN_OR_RETURN(const JsonField sim, st.member("similarity"));
  KC_RETURN_IF_ERROR(sim.expect_only_keys({"axes", "values"}));
  KC_RETURN_IF_ERROR(expect_axes(sim, kSimilarityAxes));
  KC_ASSIGN_OR_RETURN(const JsonField values, sim.member("values"));
  stats.similarity.assign(static_cast<size_t>(N) * N * G * G, 0.0);
  KC_RETURN_IF_ERROR(values.expect_array(N));
  for (int32_t a = 0; a < N; ++a) {
    const JsonField row = values.element(a);
    KC_RETURN_IF_ERROR(row.expect_array(N));
    for (int32_t b = 0; b < N; ++b) {
      const JsonField block = row.element(b);
      if (a > b) {
        Status s = block.expect_null();
        if (!s.ok()) return s.with_context("entries with anchor_layer > reuse_layer are null");
        continue;
      }
      KC_RETURN_IF_ERROR(block.expect_array(G));
      for (int32_t ga = 0; ga < G; ++ga) {
        const JsonField heads = block.element(ga);
        KC_RETURN_IF_ERROR(heads.expect_array(G));
        for (int32_t gb = 0; gb < G; ++gb) {
          KC_ASSIGN_OR_RETURN(const double v, heads.element(gb).as_finite_double());
          stats.similarity[((static_cast<size_t>(a) * N + b) * G + ga) * G + gb] = v;
        }
      }
    }
  }

  KC_ASSIGN_OR_RETURN(const JsonField imp, st.member("importance"));
  KC_RETURN_IF_ERROR(imp.expect_only_keys({"axes", "values"}));
  KC_RETURN_IF_ERROR(expect_axes(imp, kImportanceAxes));
  KC_ASSIGN_OR_RETURN(const JsonField w, imp.member("values"));
  KC_RETURN_IF_ERROR(w.expect_array(N));
  stats.importance.resize(N);
  for (int32_t l = 0; l < N; ++l) {
    KC_ASSIGN_OR_RETURN(stats.importance[l], w.element(l).as_finite_double());
  }
  return stats;
}

Result<std::vector<int32_t>> read_int32_list(const JsonField& list) {
  KC_ASSIGN_OR_RETURN(const size_t count, list.array_size());
  std::vector<int32_t> out;
  for (size_t m = 0; m < count; ++m) {
    KC_ASSIGN_OR_RETURN(const int64_t a, list.element(m).as_int(kInt32Min, kInt32Max));
    out.push_back(static_cast<int32_t>(a));
  }
  return out;
}

Result<double> read_double(const JsonField& parent, std::string_view key) {
  KC_ASSIGN_OR_RETURN(const JsonField f, parent.member(key));
  return f.as_finite_double();
}

Result<AnchorRefinement> read_refinement(const JsonField& s) {
  KC_ASSIGN_OR_RETURN(const JsonField j, s.member("refinement"));
  KC_RETURN_IF_ERROR(j.expect_only_keys({"method", "dp_anchors", "dp_objective", "agreement", "kl", "dp_agreement",
                                         "dp_kl", "tokens", "prompts", "steps", "max_rounds", "rounds", "local_optimum",
                                         "sets_scored"}));
  KC_ASSIGN_OR_RETURN(const std::string method, read_string(j, "method"));
  KC_CHECK_ARG(method == refine_method_name(RefineMethod::kAgreement), j.path(), ".method is \"", method,
               "\"; expected \"", refine_method_name(RefineMethod::kAgreement), "\"");
  AnchorRefinement r;
  KC_ASSIGN_OR_RETURN(const JsonField dp, j.member("dp_anchors"));
  KC_ASSIGN_OR_RETURN(r.dp_anchors, read_int32_list(dp));
  KC_ASSIGN_OR_RETURN(r.dp_objective, read_double(j, "dp_objective"));
  KC_ASSIGN_OR_RETURN(r.agreement, read_double(j, "agreement"));
  KC_ASSIGN_OR_RETURN(r.kl, read_double(j, "kl"));
  KC_ASSIGN_OR_RETURN(r.dp_agreement, read_double(j, "dp_agreement"));
  KC_ASSIGN_OR_RETURN(r.dp_kl, read_double(j, "dp_kl"));
  KC_ASSIGN_OR_RETURN(r.tokens, read_int64(j, "tokens"));
  KC_ASSIGN_OR_RETURN(r.prompts, read_int64(j, "prompts"));
  KC_ASSIGN_OR_RETURN(r.steps, read_int64(j, "steps"));
  KC_ASSIGN_OR_RETURN(r.max_rounds, read_int32(j, "max_rounds"));
  KC_ASSIGN_OR_RETURN(r.rounds, read_int32(j, "rounds"));
  KC_ASSIGN_OR_RETURN(const JsonField local, j.member("local_optimum"));
  KC_CHECK_ARG(local.value().is_boolean(), local.path(), " is ", local.value().dump(), "; expected true or false");
  r.local_optimum = local.value().get<bool>();
  KC_ASSIGN_OR_RETURN(r.sets_scored, read_int64(j, "sets_scored"));
  return r;
}

Result<AnchorSet> read_anchor_set(const JsonField& s, int32_t N, int32_t G) {
  KC_RETURN_IF_ERROR(s.expect_only_keys({"num_anchors", "anchors", "objective", "head_map", "refinement"}));
  AnchorSet set;
  KC_ASSIGN_OR_RETURN(const int32_t num_anchors, read_int32(s, "num_anchors"));
  KC_ASSIGN_OR_RETURN(const JsonField anchors, s.member("anchors"));
  KC_ASSIGN_OR_RETURN(set.anchors, read_int32_list(anchors));
  KC_CHECK_ARG(static_cast<int64_t>(set.anchors.size()) == num_anchors, s.path(), ".num_anchors is ", num_anchors,
               " but ", anchors.path(), " has ", set.anchors.size(), " entries");
  if (s.has("objective")) {
    KC_ASSIGN_OR_RETURN(const JsonField objective, s.member("objective"));
    KC_ASSIGN_OR_RETURN(set.objective, objective.as_finite_double());
  }
  KC_ASSIGN_OR_RETURN(const JsonField map, s.member("head_map"));
  KC_RETURN_IF_ERROR(map.expect_only_keys({"axes", "values"}));
  KC_RETURN_IF_ERROR(expect_axes(map, kHeadMapAxes));
  KC_ASSIGN_OR_RETURN(const JsonField rows, map.member("values"));
  KC_RETURN_IF_ERROR(rows.expect_array(N));
  for (int32_t b = 0; b < N; ++b) {
    const JsonField row = rows.element(b);
    KC_RETURN_IF_ERROR(row.expect_array(G));
    for (int32_t g = 0; g < G; ++g) {
      KC_ASSIGN_OR_RETURN(const int64_t v, row.element(g).as_int(kInt32Min, kInt32Max));
      set.head_map.push_back(static_cast<int32_t>(v));
    }
  }
  if (s.has("refinement")) {
    KC_ASSIGN_OR_RETURN(set.refinement, read_refinement(s));
  }
  return set;
}

Result<CalibrationFile> calibration_from_json(const Json& doc) {
  const JsonField root(doc, "");
  KC_RETURN_IF_ERROR(root.expect_only_keys({"format", "version", "source", "model", "dev_set", "collection",
                                            "statistics", "imported_from", "anchor_sets", "default_num_anchors"}));
  KC_ASSIGN_OR_RETURN(const std::string format, read_string(root, "format"));
  KC_CHECK_ARG(format == kFormatName, "format is \"", format, "\"; expected \"", kFormatName, "\"");
  KC_ASSIGN_OR_RETURN(const int64_t version, read_int64(root, "version"));
  if (version != kCalibrationFileVersion) {
    return unsupported("version is ", version, "; this build reads calibration files of version ",
                       kCalibrationFileVersion);
  }
  CalibrationFile file;
  KC_ASSIGN_OR_RETURN(const std::string source, read_string(root, "source"));
  Result<CalibrationSource> parsed_source = parse_calibration_source(source);
  if (!parsed_source.ok()) return invalid_argument("source is \"", source, "\"; expected \"collected\" or \"imported\"");
  file.source = *parsed_source;
  KC_ASSIGN_OR_RETURN(file.model, read_model(root));
  const int32_t N = file.model.num_layers;
  const int32_t G = file.model.num_kv_heads;
  if (root.has("dev_set")) {
    KC_ASSIGN_OR_RETURN(file.dev_set, read_dev_set(root));
  }
  if (root.has("collection")) {
    KC_ASSIGN_OR_RETURN(file.collection, read_collection(root));
  }
  if (root.has("statistics")) {
    KC_ASSIGN_OR_RETURN(file.stats, read_stats(root, N, G));
  }
  if (root.has("imported_from")) {
    KC_ASSIGN_OR_RETURN(file.imported_from, read_string(root, "imported_from"));
  }
  KC_CHECK_ARG(file.source != CalibrationSource::kImported || root.has("imported_from"),
               "imported_from is missing; an imported file names its source");

  KC_ASSIGN_OR_RETURN(const JsonField sets, root.member("anchor_sets"));
  KC_ASSIGN_OR_RETURN(const size_t num_sets, sets.array_size());
  for (size_t i = 0; i < num_sets; ++i) {
    KC_ASSIGN_OR_RETURN(AnchorSet set, read_anchor_set(sets.element(i), N, G));
    file.anchor_sets.push_back(std::move(set));
  }
  KC_ASSIGN_OR_RETURN(file.default_num_anchors, read_int32(root, "default_num_anchors"));
  KC_RETURN_IF_ERROR(validate_calibration(file));
  return file;
}

}  // namespace

Result<std::string> calibration_to_json(const CalibrationFile& file) {
  KC_RETURN_IF_ERROR(validate_calibration(file));
  return format_json(calibration_json(file));
}

Result<CalibrationFile> parse_calibration_json(std::string_view text) {
  KC_ASSIGN_OR_RETURN(const Json doc, parse_json_text(text));
  return calibration_from_json(doc);
}

Status write_calibration_file(const CalibrationFile& file, const std::string& path) {
  Result<std::string> text = calibration_to_json(file);
  if (!text.ok()) {
    Status s = text.status();
    return s.with_context(detail::concat("calibration file '", path, "'"));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return io_error("calibration file '", path, "': cannot open for writing");
  out.write(text->data(), static_cast<std::streamsize>(text->size()));
  out.close();
  if (!out) return io_error("calibration file '", path, "': write failed");
  return ok_status();
}

Result<CalibrationFile> read_calibration_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("calibration file '", path, "' cannot be opened (missing or unreadable)");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return io_error("calibration file '", path, "': read failed");
  Result<CalibrationFile> file = parse_calibration_json(buffer.str());
  if (!file.ok()) {
    Status s = file.status();
    return s.with_context(detail::concat("calibration file '", path, "'"));
  }
  return file;
}

}  // namespace kascade::calib
