// bench/bench_device.h — device helpers of the decode benchmark (bench_device.cu): deterministic
// random fill of f16/bf16 tensors without a host copy, and the read-bandwidth roof (a large
// read-only reduction with 16-byte loads). Exercised by every run of kascade_bench_decode.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kascade::bench {

// Fills n 16-bit values (bf16 when `bf16`, else f16) with hash(seed, i) mapped uniformly to
// [-range, range).
cudaError_t fill_random_16bit(void* data, size_t n, bool bf16, uint64_t seed, float range, cudaStream_t stream);

// Reads `bytes` (a multiple of 16) once with 16-byte loads and folds them into `sink` (so the
// loads cannot be removed). One launch; time it with events.
cudaError_t read_all(const void* data, size_t bytes, unsigned long long* sink, cudaStream_t stream);

}  // namespace kascade::bench
