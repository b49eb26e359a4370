// src/cuda/common/device_errors.cpp — names of the device error bits (device_errors.h).
// Tested by tests/cuda/test_device_errors.cpp.
#include "cuda/common/device_errors.h"

namespace kascade::cuda {

std::string describe_device_errors(uint32_t bits) {
  if (bits == 0) return "none";
  static constexpr struct {
    uint32_t bit;
    const char* name;
  } kNames[] = {{kErrorKvLen, "kv_len out of range"},
                {kErrorRowLen, "index row length out of range"},
                {kErrorIndex, "index entry out of range"},
                {kErrorHeadMap, "head_map entry out of range"},
                {kErrorPage, "page id out of range"}};
  std::string text;
  for (const auto& entry : kNames) {
    if (bits & entry.bit) text += (text.empty() ? "" : ", ") + std::string(entry.name);
  }
  const uint32_t known = kErrorKvLen | kErrorRowLen | kErrorIndex | kErrorHeadMap | kErrorPage;
  if (bits & ~known) text += (text.empty() ? "" : ", ") + std::string("unknown bits");
  return text;
}

}  // namespace kascade::cuda
