// src/cuda/ops/sampling.h — next-token selection on the GPU over fp32 logits, with the semantics of
// the CPU sampler (src/runtime/sampler.h):
//   greedy (temperature 0): argmax, ties to the lower token id — bit-identical to ref::argmax_ref
//     (an exact reduction: the same logits give the same token);
//   temperature / top-k / top-p: probabilities p_i = float(exp((l_i − max) / T) / Z) (fp64 exp and
//     sum, rounded to fp32 as ref::softmax_ref does), tokens ranked by logit (descending, ties to
//     the lower id) by a radix sort of (logit, id) keys, the top-k cut, renormalisation, the
//     nucleus cut (smallest prefix whose cumulative probability reaches top_p), renormalisation,
//     and the inverse CDF at the caller's uniform u — the same u the CPU Sampler would draw (the
//     runtime draws it on the host from the sequence's stream, Sampler::next_uniform). The sums
//     are block-parallel fp64 scans instead of the CPU's sequential fp64 loop, so device and CPU
//     sampling are NOT bit-identical: they draw from the same distribution with the same u and
//     agree except when u falls within a few fp64 roundings (~1e-15) of a CDF boundary, or when
//     a probability sits on an fp32 rounding tie. tests/cuda/test_ops_sampling.cpp checks both.
// NaN logits in a row: that row's token is −1 (the caller turns it into a Status).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "kascade/status.h"

namespace kascade::cuda {

// The sampler's settings (kascade::SamplerConfig without the seed: the uniforms come from the caller).
struct SamplingParams {
  float temperature = 0.0f;  // 0 → greedy
  int32_t top_k = 0;         // 0 → off
  float top_p = 1.0f;        // in (0, 1]; 1 → off
};

class DeviceSampler {
 public:
  // Device bytes a sampler for `max_rows` rows of `vocab` logits allocates (for memory planning).
  static Result<size_t> workspace_bytes(int32_t max_rows, int64_t vocab);
  // Allocates the workspace on the current device (sort keys, CUB scratch, row statistics).
  static Result<std::unique_ptr<DeviceSampler>> create(int32_t max_rows, int64_t vocab, cudaStream_t stream);
  ~DeviceSampler();
  DeviceSampler(const DeviceSampler&) = delete;
  DeviceSampler& operator=(const DeviceSampler&) = delete;

  // logits: [rows, vocab] fp32 (device); uniforms: [rows] fp64 in [0, 1) (device; read only when
  // temperature > 0); tokens: [rows] int32 (device). 1 <= rows <= max_rows. Asynchronous on the stream.
  Status sample(const float* logits, int32_t rows, const SamplingParams& config, const double* uniforms,
                int32_t* tokens);

  int32_t max_rows() const { return max_rows_; }
  int64_t vocab() const { return vocab_; }

 private:
  DeviceSampler() = default;
  int32_t max_rows_ = 0;
  int64_t vocab_ = 0;
  cudaStream_t stream_ = nullptr;
  void* memory_ = nullptr;  // one allocation: keys in/out, offsets, row statistics, CUB scratch
  size_t cub_bytes_ = 0;
  uint64_t* keys_in_ = nullptr;   // [max_rows, vocab]
  uint64_t* keys_out_ = nullptr;  // [max_rows, vocab]
  int32_t* offsets_ = nullptr;    // [max_rows + 1] = r · vocab
  double* stats_ = nullptr;       // [max_rows, 2]: max logit, Σ exp((l − max) / T); max NaN when a logit is NaN
  void* cub_scratch_ = nullptr;
};

}  // namespace kascade::cuda
