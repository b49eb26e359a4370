// src/cuda/model/cuda_model.cpp — the Runtime-lifetime CUDA state (cuda_model.h).
// Tested by tests/cuda/test_gpu_runtime_parity.cpp and test_gpu_runtime_memory.cpp.
#include "cuda/model/cuda_model.h"

#include <cmath>

#include "cuda/common/cuda_status.h"
#include "runtime/gpu_memory_plan.h"

namespace kascade::cuda {

Result<DeviceMemoryInfo> device_memory_info() {
  DeviceMemoryInfo info;
  KC_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  return info;
}

Status cuda_device_usable(int32_t device) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return unsupported("--device cuda: no CUDA device is available (",
                       error != cudaSuccess ? cudaGetErrorString(error) : "the CUDA runtime reports 0 devices",
                       "); use --device cpu");
  }
  KC_CHECK_ARG(device >= 0 && device < count, "--device cuda: device ordinal ", device, "; this machine has ", count,
               " CUDA device(s)");
  return ok_status();
}

Result<std::unique_ptr<CudaModel>> CudaModel::create(const Weights& weights, const CudaModelOptions& options) {
  KC_RETURN_IF_ERROR(cuda_device_usable(options.device));
  KC_CHECK_ARG(options.act_dtype == DType::kBF16 || options.act_dtype == DType::kF16, "cuda runtime: activation dtype ",
               dtype_name(options.act_dtype), " is not supported (bf16 or f16)");
  KC_CHECK_ARG(options.max_batch >= 1 && options.max_seq_len >= 1, "cuda runtime: max_batch ", options.max_batch,
               " and max_seq_len ", options.max_seq_len, " must be >= 1");
  KC_CHECK_ARG(options.page_size >= 1 && (options.page_size & (options.page_size - 1)) == 0, "cuda runtime: page size ",
               options.page_size, " must be a power of two");
  const ModelConfig& c = weights.config();
  const AttentionShape shape{static_cast<int32_t>(c.num_attention_heads), static_cast<int32_t>(c.num_key_value_heads),
                             static_cast<int32_t>(c.head_dim)};
  KC_RETURN_IF_ERROR(cuda_backend_supports(BackendOp::kDense, shape).with_context("cuda runtime"));
  std::unique_ptr<CudaModel> m(new CudaModel());
  m->config_ = c;
  m->options_ = options;
  KC_ASSIGN_OR_RETURN(m->rope_, compute_rope_frequencies(c));
  m->attention_scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  KC_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  KC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&m->stream_, cudaStreamNonBlocking));
  KC_ASSIGN_OR_RETURN(const DeviceMemoryInfo memory, device_memory_info());
  runtime::GpuMemoryPlan plan;
  plan.weights = runtime::device_weight_bytes(c, options.act_dtype);
  KC_RETURN_IF_ERROR(runtime::check_gpu_memory(plan, 0, memory.free_bytes,
                                               std::string("the model's ") + dtype_name(options.act_dtype) + " weights"));
  KC_ASSIGN_OR_RETURN(m->cublas_, CublasContext::create(m->stream_));
  KC_ASSIGN_OR_RETURN(m->weights_, DeviceWeights::upload(weights, m->rope_, options.act_dtype, m->stream_));
  CudaBackendOptions backend;
  backend.device = options.device;
  backend.stream = m->stream_;
  backend.max_batch = options.max_batch;
  backend.max_seq_len = options.max_seq_len;
  backend.budget = options.budget;
  backend.programmatic_launch = options.programmatic_launch;
  KC_ASSIGN_OR_RETURN(m->backend_, CudaBackend::create(backend));
  return m;
}

CudaModel::~CudaModel() {
  backend_.reset();
  weights_.reset();
  cublas_.reset();
  if (stream_ != nullptr) {
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }
}

}  // namespace kascade::cuda
