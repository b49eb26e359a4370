// src/cuda/prefill/dense_prefill_kernels.cu — dense causal prefill: o + lse over keys 0..position: the
// kPV = true, kSparse = false instantiations of prefill_attention_kernel (attention_kernel.cuh) for
// f16/bf16 × head dim 64/128 × (mma.sync | wgmma Q·Kᵀ). Entry points: prefill_ops.h. Tested by tests/cuda/test_prefill_*.cpp.
#include "cuda/prefill/attention_dispatch.cuh"
#include "cuda/prefill/prefill_launch.h"

namespace kascade::cuda::prefill {

cudaError_t launch_dense_attention(ElementType type, int head_dim, bool wgmma, const AttentionArgs& args,
                                   dim3 grid, cudaStream_t stream) {
  return launch_attention_instance<true, false>(type, head_dim, wgmma, args, grid, stream);
}

cudaError_t prepare_dense_attention(ElementType type, int head_dim, bool wgmma) {
  return prepare_attention_instance<true, false>(type, head_dim, wgmma);
}

}  // namespace kascade::cuda::prefill
