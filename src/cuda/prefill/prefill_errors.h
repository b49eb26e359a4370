// src/cuda/prefill/prefill_errors.h — the error bits the prefill kernels set on the device, in
// addition to the shared DeviceError bits (cuda/common/device_errors.h: kv_len, row length, index
// entry, head map, page id). A kernel that meets data outside what the plan and the views allow
// sets a bit in the workspace's error word and skips the bad unit (its outputs stay unwritten, or
// the bad key is masked); read_prefill_errors (prefill_plan.h) reads and clears the word.
// Tested by tests/cuda/test_prefill_errors.cpp.
#pragma once

#include <cstdint>
#include <string>

namespace kascade::cuda {

enum PrefillError : uint32_t {
  kPrefillErrorQueries = 1u << 8,   // cu_q_lens decreasing or past q.total_q, or a q_len > the plan's max_q_len
  kPrefillErrorTileBase = 1u << 9,  // tile_base does not give a sequence the tiles its call touches
  kPrefillErrorSelect = 1u << 10,   // a Top-k row came out with a length other than its planned k_t
};

// "kv_len out of range, tile_base inconsistent with the call" for a set of bits; "none" for 0.
std::string describe_prefill_errors(uint32_t bits);

}  // namespace kascade::cuda
