// src/cuda/prefill/prefill_errors.cpp — names of the prefill error bits (prefill_errors.h), after
// the shared decode bits. Tested by tests/cuda/test_prefill_errors.cpp.
#include "cuda/prefill/prefill_errors.h"

#include "cuda/common/device_errors.h"

namespace kascade::cuda {

std::string describe_prefill_errors(uint32_t bits) {
  if (bits == 0) return "none";
  constexpr uint32_t kShared = kErrorKvLen | kErrorRowLen | kErrorIndex | kErrorHeadMap | kErrorPage;
  static constexpr struct {
    uint32_t bit;
    const char* name;
  } kNames[] = {{kPrefillErrorQueries, "cu_q_lens inconsistent with q.total_q or the plan's max_q_len"},
                {kPrefillErrorTileBase, "tile_base inconsistent with the tiles of the call"},
                {kPrefillErrorSelect, "a Top-k row did not come out at its planned length"}};
  std::string text = (bits & kShared) ? describe_device_errors(bits & kShared) : std::string();
  uint32_t known = kShared;
  for (const auto& entry : kNames) {
    known |= entry.bit;
    if (bits & entry.bit) text += (text.empty() ? "" : ", ") + std::string(entry.name);
  }
  if (bits & ~known) text += (text.empty() ? "" : ", ") + std::string("unknown bits");
  return text;
}

}  // namespace kascade::cuda
