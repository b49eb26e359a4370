// src/cuda/model/cuda_model.h — everything of the CUDA runtime that lives as long as the Runtime:
// the stream every op of the forward pass runs on, the cuBLAS context, the device weights (uploaded
// from the host weight table, device_weights.h) and the CUDA attention backend the policies run
// on (src/cuda/backend/cuda_backend.h), planned for max_batch sequences of max_seq_len keys.
// Before uploading, the weights are checked against the device's free memory
// (runtime::check_gpu_memory) and refused with a message naming the numbers.
// Tested by tests/cuda/test_gpu_runtime_parity.cpp and test_gpu_runtime_memory.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "cuda/backend/cuda_backend.h"
#include "cuda/model/device_weights.h"
#include "cuda/ops/gemm.h"
#include "kascade/budget.h"
#include "kascade/model_config.h"
#include "kascade/status.h"
#include "kascade/weights.h"
#include "model/rope_frequencies.h"

namespace kascade::cuda {

struct CudaModelOptions {
  int32_t device = 0;
  DType act_dtype = DType::kBF16;  // activations, linear weights and the KV cache
  int32_t max_batch = 8;           // most sequences of one forward call
  int32_t max_seq_len = 0;         // longest sequence (prompt + generated tokens), the backend's plan
  int32_t page_size = 16;          // KV cache page (block tables are planned for it)
  Budget budget;                   // the policies' Top-k budget (tunes the backend's sparse passes)
  bool programmatic_launch = false;  // the forward pass's own kernels (norm, small-m linear, RoPE / KV append,
                                     // SiLU·mul, decode attention) launch with programmatic dependent launch
                                     // (sm_90+; cuda/common/programmatic_launch.cuh; refused below sm_90)
};

// Free and total device memory of the current device (cudaMemGetInfo).
struct DeviceMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};
Result<DeviceMemoryInfo> device_memory_info();

// Unsupported naming the reason when no CUDA device can be used (no device, driver error).
Status cuda_device_usable(int32_t device);

class CudaModel {
 public:
  static Result<std::unique_ptr<CudaModel>> create(const Weights& weights, const CudaModelOptions& options);
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  const ModelConfig& config() const { return config_; }
  const CudaModelOptions& options() const { return options_; }
  const RopeFrequencies& rope() const { return rope_; }
  cudaStream_t stream() const { return stream_; }
  CublasContext& cublas() { return *cublas_; }
  const DeviceWeights& weights() const { return *weights_; }
  const std::shared_ptr<CudaBackend>& backend() const { return backend_; }
  float attention_scale() const { return attention_scale_; }
  // Block-table width: pages covering max_seq_len.
  int32_t max_pages_per_seq() const {
    return (options_.max_seq_len + options_.page_size - 1) / options_.page_size;
  }

 private:
  CudaModel() = default;
  ModelConfig config_;
  CudaModelOptions options_;
  RopeFrequencies rope_;
  float attention_scale_ = 1.0f;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CublasContext> cublas_;
  std::unique_ptr<DeviceWeights> weights_;
  std::shared_ptr<CudaBackend> backend_;
};

}  // namespace kascade::cuda
