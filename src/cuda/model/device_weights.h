// src/cuda/model/device_weights.h — the model's weights in device memory for the CUDA forward pass,
// uploaded from the host weight table (kascade/weights.h: a memory-mapped checkpoint or
// make_dummy_weights, so `--dummy-weights` gives the GPU exactly the numbers the CPU runtime sees,
// rounded once to the activation dtype):
//   linear weights in the activation dtype (bf16 / fp16), fused per layer: qkv = [q_proj; k_proj;
//   v_proj] ([(H + 2G)·d, hidden]) and gate_up = [gate_proj; up_proj] ([2I, hidden]); o_proj,
//   down_proj; the embedding table and lm_head (shared when tied) in the activation dtype;
//   RMSNorm weights (input, post-attention, final, Qwen3 q/k norms) in fp32 (exact for any source
//   dtype); the RoPE inverse frequencies [d/2] fp32.
// F32 / F16 / BF16 sources are converted on the host (round to nearest even) in bounded chunks and
// copied; one device allocation holds everything (256-byte aligned tensors); its size is
// device_weight_bytes() of src/runtime/gpu_memory_plan.h, which the runtime checks against free
// memory before the upload.
// Tested by tests/cuda/test_gpu_runtime_parity.cpp (through the forward pass) and
// tests/cuda/test_gpu_runtime_memory.cpp (size equals the plan; tensors read back equal the host
// values rounded to the dtype).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "kascade/dtype.h"
#include "kascade/status.h"
#include "kascade/weights.h"
#include "model/rope_frequencies.h"

namespace kascade::cuda {

struct DeviceLayerWeights {
  const void* qkv = nullptr;       // [(H + 2G)·d, hidden] act
  const void* o_proj = nullptr;    // [hidden, H·d] act
  const void* gate_up = nullptr;   // [2I, hidden] act
  const void* down_proj = nullptr; // [hidden, I] act
  const float* input_norm = nullptr;  // [hidden]
  const float* post_norm = nullptr;   // [hidden]
  const float* q_norm = nullptr;      // [d] (Qwen3) or null
  const float* k_norm = nullptr;      // [d] (Qwen3) or null
};

class DeviceWeights {
 public:
  // Uploads `weights` (validated against its config by the Weights object) on the current device.
  static Result<std::unique_ptr<DeviceWeights>> upload(const Weights& weights, const RopeFrequencies& rope,
                                                       DType act_dtype, cudaStream_t stream);
  ~DeviceWeights();
  DeviceWeights(const DeviceWeights&) = delete;
  DeviceWeights& operator=(const DeviceWeights&) = delete;

  DType dtype() const { return dtype_; }
  size_t bytes() const { return bytes_; }
  const DeviceLayerWeights& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }
  const void* embed_tokens() const { return embed_; }  // [vocab, hidden] act
  const void* lm_head() const { return lm_head_; }     // [vocab, hidden] act
  const float* final_norm() const { return final_norm_; }  // [hidden]
  const float* inv_freq() const { return inv_freq_; }      // [d / 2]

 private:
  DeviceWeights() = default;
  DType dtype_ = DType::kBF16;
  size_t bytes_ = 0;
  void* memory_ = nullptr;
  std::unique_ptr<DeviceLayerWeights[]> layers_;
  const void* embed_ = nullptr;
  const void* lm_head_ = nullptr;
  const float* final_norm_ = nullptr;
  const float* inv_freq_ = nullptr;
};

}  // namespace kascade::cuda
