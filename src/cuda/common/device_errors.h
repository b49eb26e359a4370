// src/cuda/common/device_errors.h — errors the decode kernels detect on the device, where no
// Status can be returned without a host round trip. A kernel that meets bad data (a length the
// plan did not allow, an index outside its sequence, a page id outside the cache) sets a bit in
// the workspace's error word, skips the bad element (clamps the length, masks the key) and goes
// on; the host reads and clears the word when it chooses (read_device_errors, a synchronising call
// kept out of the decode step). Results of a step that set a bit are unspecified.
// Tested by tests/cuda/test_device_errors.cpp.
#pragma once

#include <cstdint>
#include <string>

namespace kascade::cuda {

enum DeviceError : uint32_t {
  kErrorKvLen = 1u << 0,    // kv_len < 1 or > the plan's max_seq_len
  kErrorRowLen = 1u << 1,   // index row length < 0 or > k_max
  kErrorIndex = 1u << 2,    // index entry outside [0, kv_len)
  kErrorHeadMap = 1u << 3,  // head_map entry outside [0, num_rows)
  kErrorPage = 1u << 4,     // block-table page id outside [0, num_pages)
};

// "kv_len out of range, index out of range" for a set of bits; "none" for 0.
std::string describe_device_errors(uint32_t bits);

}  // namespace kascade::cuda
