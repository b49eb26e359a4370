// src/cuda/model/device_weights.cpp — upload of the weight table to the device (device_weights.h).
// Tested by tests/cuda/test_gpu_runtime_memory.cpp and test_gpu_runtime_parity.cpp.
#include "cuda/model/device_weights.h"

#include <algorithm>
#include <vector>

#include "cuda/common/cuda_status.h"
#include "runtime/gpu_memory_plan.h"

namespace kascade::cuda {
namespace {

// Converts `view` to `dtype` on the host in chunks and copies it to dst (device).
Status copy_converted(const TensorView& view, DType dtype, void* dst, std::vector<uint8_t>& staging) {
  constexpr int64_t kChunk = int64_t{1} << 22;  // elements per conversion
  const int64_t n = view.numel();
  const size_t out_size = dtype_size(dtype), in_size = dtype_size(view.dtype);
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t count = std::min(kChunk, n - start);
    const void* src = static_cast<const uint8_t*>(view.data) + static_cast<size_t>(start) * in_size;
    void* out = static_cast<uint8_t*>(dst) + static_cast<size_t>(start) * out_size;
    if (view.dtype == dtype) {
      KC_CUDA_RETURN_IF_ERROR(cudaMemcpy(out, src, static_cast<size_t>(count) * out_size, cudaMemcpyHostToDevice));
      continue;
    }
    staging.resize(static_cast<size_t>(count) * out_size);
    convert_buffer(src, view.dtype, staging.data(), dtype, count);
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpy(out, staging.data(), staging.size(), cudaMemcpyHostToDevice));
  }
  return ok_status();
}

// Hands out aligned pieces of the one allocation, in the order of runtime::device_weight_bytes.
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<uint8_t*>(base)) {}
  void* take(size_t bytes) {
    void* p = base_ + used_;
    used_ += runtime::align_device_bytes(bytes);
    return p;
  }
  size_t used() const { return used_; }

 private:
  uint8_t* base_;
  size_t used_ = 0;
};

}  // namespace

Result<std::unique_ptr<DeviceWeights>> DeviceWeights::upload(const Weights& weights, const RopeFrequencies& rope,
                                                             DType act, cudaStream_t stream) {
  KC_CHECK_ARG(act == DType::kBF16 || act == DType::kF16, "device weights: activation dtype ", dtype_name(act),
               " (bf16 or f16)");
  const ModelConfig& c = weights.config();
  KC_CHECK_ARG(static_cast<int64_t>(rope.inv_freq.size()) * 2 == c.head_dim, "device weights: ",
               rope.inv_freq.size(), " RoPE frequencies for head_dim ", c.head_dim);
  const size_t total = runtime::device_weight_bytes(c, act);
  std::unique_ptr<DeviceWeights> w(new DeviceWeights());
  w->dtype_ = act;
  w->bytes_ = total;
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const cudaError_t error = cudaMalloc(&w->memory_, total);
  if (error != cudaSuccess) {
    w->memory_ = nullptr;
    (void)cudaGetLastError();
    return resource_exhausted("device weights: cannot allocate ", total, " bytes (", static_cast<double>(total) / (1 << 30),
                              " GiB) of device memory: ", cudaGetErrorString(error));
  }
  Carver carve(w->memory_);
  std::vector<uint8_t> staging;
  const size_t a = dtype_size(act);
  // Concatenated matrices: each part copied at its row offset.
  const auto upload_rows = [&](std::initializer_list<const TensorView*> parts, void** out) -> Status {
    size_t bytes = 0;
    for (const TensorView* v : parts) bytes += static_cast<size_t>(v->numel()) * a;
    uint8_t* dst = static_cast<uint8_t*>(carve.take(bytes));
    *out = dst;
    for (const TensorView* v : parts) {
      KC_RETURN_IF_ERROR(copy_converted(*v, act, dst, staging));
      dst += static_cast<size_t>(v->numel()) * a;
    }
    return ok_status();
  };
  const auto upload_f32 = [&](const TensorView& v, const float** out) -> Status {
    void* dst = carve.take(static_cast<size_t>(v.numel()) * sizeof(float));
    *out = static_cast<const float*>(dst);
    return copy_converted(v, DType::kF32, dst, staging);
  };
  void* p = nullptr;
  KC_RETURN_IF_ERROR(upload_rows({&weights.embed_tokens()}, &p));
  w->embed_ = p;
  if (c.tie_word_embeddings) {
    w->lm_head_ = w->embed_;
  } else {
    KC_RETURN_IF_ERROR(upload_rows({&weights.lm_head()}, &p));
    w->lm_head_ = p;
  }
  KC_RETURN_IF_ERROR(upload_f32(weights.final_norm(), &w->final_norm_));
  {
    float* freq = static_cast<float*>(carve.take(rope.inv_freq.size() * sizeof(float)));
    KC_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(freq, rope.inv_freq.data(), rope.inv_freq.size() * sizeof(float), cudaMemcpyHostToDevice));
    w->inv_freq_ = freq;
  }
  w->layers_ = std::make_unique<DeviceLayerWeights[]>(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& src = weights.layer(l);
    DeviceLayerWeights& dst = w->layers_[static_cast<size_t>(l)];
    KC_RETURN_IF_ERROR(upload_rows({&src.q_proj, &src.k_proj, &src.v_proj}, &p));
    dst.qkv = p;
    KC_RETURN_IF_ERROR(upload_rows({&src.o_proj}, &p));
    dst.o_proj = p;
    KC_RETURN_IF_ERROR(upload_rows({&src.gate_proj, &src.up_proj}, &p));
    dst.gate_up = p;
    KC_RETURN_IF_ERROR(upload_rows({&src.down_proj}, &p));
    dst.down_proj = p;
    KC_RETURN_IF_ERROR(upload_f32(src.input_layernorm, &dst.input_norm));
    KC_RETURN_IF_ERROR(upload_f32(src.post_attention_layernorm, &dst.post_norm));
    if (c.qk_norm) {
      KC_RETURN_IF_ERROR(upload_f32(src.q_norm, &dst.q_norm));
      KC_RETURN_IF_ERROR(upload_f32(src.k_norm, &dst.k_norm));
    }
  }
  if (carve.used() != total)
    return internal_error("device weights: carved ", carve.used(), " bytes of a plan of ", total);
  // cudaMemcpy from pageable memory may return before its DMA lands; the forward pass runs on a
  // non-blocking stream, so wait for every upload here.
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return w;
}

DeviceWeights::~DeviceWeights() {
  if (memory_ != nullptr) (void)cudaFree(memory_);  // cudaFree waits for the device
}

}  // namespace kascade::cuda
