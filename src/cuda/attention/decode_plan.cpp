// src/cuda/attention/decode_plan.cpp — supports(), split planning, workspace layout and the
// host-side validation shared by the decode ops (decode_plan.h). Tested by
// tests/cuda/test_decode_plan.cpp and every op test in tests/cuda/.
#include "cuda/attention/decode_plan.h"

#include <algorithm>
#include <cmath>

#include "cuda/common/cuda_status.h"
#include "cuda/common/plan_support.h"

namespace kascade::cuda {
namespace {

using detail::align_workspace_bytes;
using detail::workspace_at;

bool is_power_of_two(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

}  // namespace

Status supports_decode(const DecodeShape& s) {
  if (s.dtype != DType::kF16 && s.dtype != DType::kBF16)
    return unsupported("dtype is ", dtype_name(s.dtype), "; the decode kernels take f16 and bf16");
  KC_CHECK_ARG(s.batch >= 1 && s.batch <= 65535, "batch is ", s.batch, "; expected 1..65535");
  KC_CHECK_ARG(s.num_kv_heads >= 1, "num_kv_heads is ", s.num_kv_heads, "; expected >= 1");
  KC_CHECK_ARG(s.num_heads >= 1 && s.num_heads % s.num_kv_heads == 0, "num_heads is ", s.num_heads,
               "; expected a positive multiple of num_kv_heads ", s.num_kv_heads);
  KC_CHECK_ARG(s.num_heads <= 4096, "num_heads is ", s.num_heads, "; expected <= 4096");
  const int32_t group = s.num_heads / s.num_kv_heads;
  if (group > detail::kMaxHeadsPerSlot)
    return unsupported("GQA group size is ", group, " (num_heads ", s.num_heads, " / num_kv_heads ",
                       s.num_kv_heads, "); the decode kernels support group sizes 1 to ",
                       detail::kMaxHeadsPerSlot);
  if (s.head_dim != 64 && s.head_dim != 128)
    return unsupported("head_dim is ", s.head_dim, "; the decode kernels are built for 64 and 128");
  if (!is_power_of_two(s.page_size) || s.page_size < 16 || s.page_size > (1 << 30))
    return unsupported("page_size is ", s.page_size, "; the decode kernels need a power of two from 16 to 2^30");
  KC_CHECK_ARG(s.max_seq_len >= 1 && s.max_seq_len <= (1 << 30), "max_seq_len is ", s.max_seq_len,
               "; expected 1..2^30");
  return ok_status();
}

Status initialize_workspace(const WorkspaceLayout& layout, void* workspace, cudaStream_t stream) {
  KC_CHECK_ARG(workspace != nullptr, "workspace is null; allocate layout.total_bytes = ", layout.total_bytes);
  KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(workspace, 0, layout.header_bytes, stream));
  return ok_status();
}

Result<uint32_t> read_device_errors(const WorkspaceLayout& layout, void* workspace, cudaStream_t stream) {
  KC_CHECK_ARG(workspace != nullptr, "workspace is null");
  uint32_t bits = 0;
  auto* flags = workspace_at<uint32_t>(workspace, layout.error_flags);
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&bits, flags, sizeof(bits), cudaMemcpyDeviceToHost, stream));
  KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flags, 0, sizeof(uint32_t), stream));
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return bits;
}

namespace detail {

int32_t log2_exact(int64_t power_of_two) {
  int32_t log2 = 0;
  while ((int64_t{1} << log2) < power_of_two) ++log2;
  return log2;
}

Status validate_decode_run(const DecodeShape& s, const QueryBatch& q, const PagedKv& kv, const AttentionOutput& out,
                           bool needs_o) {
  KC_CHECK_ARG(q.q != nullptr, "q.q is null");
  KC_CHECK_ARG(q.dtype == s.dtype, "q.dtype is ", dtype_name(q.dtype), "; the plan is for ", dtype_name(s.dtype));
  KC_CHECK_ARG(q.batch >= 1 && q.batch <= s.batch, "q.batch is ", q.batch, "; the plan allows 1..", s.batch);
  KC_CHECK_ARG(q.total_q == q.batch, "q.total_q is ", q.total_q, "; decode takes one query per sequence (",
               q.batch, ")");
  KC_CHECK_ARG(q.num_heads == s.num_heads, "q.num_heads is ", q.num_heads, "; the plan is for ", s.num_heads);
  KC_CHECK_ARG(q.head_dim == s.head_dim, "q.head_dim is ", q.head_dim, "; the plan is for ", s.head_dim);
  KC_CHECK_ARG(kv.k != nullptr && kv.v != nullptr, "kv.k or kv.v is null");
  KC_CHECK_ARG(kv.dtype == s.dtype, "kv.dtype is ", dtype_name(kv.dtype), "; the plan is for ", dtype_name(s.dtype));
  KC_CHECK_ARG(kv.num_kv_heads == s.num_kv_heads, "kv.num_kv_heads is ", kv.num_kv_heads, "; the plan is for ",
               s.num_kv_heads);
  KC_CHECK_ARG(kv.head_dim == s.head_dim, "kv.head_dim is ", kv.head_dim, "; the plan is for ", s.head_dim);
  KC_CHECK_ARG(kv.page_size == s.page_size, "kv.page_size is ", kv.page_size, "; the plan is for ", s.page_size);
  KC_CHECK_ARG(kv.num_pages >= 1, "kv.num_pages is ", kv.num_pages, "; expected >= 1");
  KC_CHECK_ARG(kv.block_table != nullptr && kv.kv_lens != nullptr, "kv.block_table or kv.kv_lens is null");
  const int64_t pages_needed = (static_cast<int64_t>(s.max_seq_len) + s.page_size - 1) / s.page_size;
  KC_CHECK_ARG(kv.max_pages_per_seq >= pages_needed, "kv.max_pages_per_seq is ", kv.max_pages_per_seq,
               "; max_seq_len ", s.max_seq_len, " needs ", pages_needed, " pages of ", s.page_size);
  if (needs_o) {
    KC_CHECK_ARG(out.o != nullptr, "out.o is null");
    KC_CHECK_ARG(out.dtype == s.dtype, "out.dtype is ", dtype_name(out.dtype), "; the decode kernels write ",
                 dtype_name(s.dtype));
  }
  return ok_status();
}

Result<int32_t> choose_num_splits(int64_t pairs, int32_t ctas_per_sm, int32_t max_len) {
  KC_ASSIGN_OR_RETURN(const int32_t sms, current_multiprocessor_count());
  const int64_t slots = static_cast<int64_t>(sms) * std::max(ctas_per_sm, 1);
  // Chunks shorter than 256 keys cost more in merging than they gain in parallelism.
  const int32_t most = static_cast<int32_t>(
      std::clamp<int64_t>((static_cast<int64_t>(max_len) + 255) / 256, 1, kMaxSplits));
  int32_t best = 1;
  double best_efficiency = 0.0;
  for (int32_t s = 1; s <= most; ++s) {
    const double waves = static_cast<double>(pairs) * s / static_cast<double>(slots);
    const double efficiency = waves / std::ceil(waves);
    if (efficiency >= 0.95) return s;
    if (efficiency > best_efficiency + 1e-9) {
      best_efficiency = efficiency;
      best = s;
    }
  }
  return best;
}

WorkspaceLayout layout_workspace(const DecodeShape& s, int32_t max_splits, int64_t logits_stride,
                                 int32_t pooled_rows, size_t topk_scratch_bytes) {
  WorkspaceLayout w;
  size_t at = 0;
  w.error_flags = at;
  at += align_workspace_bytes(sizeof(uint32_t));
  w.counters = at;
  at += align_workspace_bytes(static_cast<size_t>(s.batch) * s.num_heads * sizeof(int32_t));
  if (logits_stride > 0) {
    w.topk_scratch = at;
    at += align_workspace_bytes(topk_scratch_bytes);
  }
  w.header_bytes = at;
  w.partial_lse = at;
  at += align_workspace_bytes(static_cast<size_t>(s.batch) * max_splits * s.num_heads * sizeof(float));
  w.partial_o = at;
  at += align_workspace_bytes(static_cast<size_t>(s.batch) * max_splits * s.num_heads * s.head_dim * sizeof(float));
  if (logits_stride > 0) {
    w.exact_lse = at;
    at += align_workspace_bytes(static_cast<size_t>(s.batch) * s.num_heads * sizeof(float));
    w.logits = at;
    const size_t logits_heads = logits_heads_for_group(s.num_heads / s.num_kv_heads);
    at += align_workspace_bytes(static_cast<size_t>(s.batch) * s.num_kv_heads * logits_heads * logits_stride *
                                sizeof(float));
    w.pooled = at;
    at += align_workspace_bytes(static_cast<size_t>(s.batch) * pooled_rows * logits_stride * sizeof(float));
  }
  w.total_bytes = at;
  return w;
}

DecodeKernelParams make_decode_params(const DecodeShape& s, const QueryBatch& q, const PagedKv& kv,
                                      const AttentionParams& params, const PassPlan& pass,
                                      const WorkspaceLayout& layout, void* workspace) {
  DecodeKernelParams p;
  p.q = q.q;
  p.k = kv.k;
  p.v = kv.v;
  p.block_table = kv.block_table;
  p.kv_lens = kv.kv_lens;
  p.max_pages_per_seq = kv.max_pages_per_seq;
  p.num_pages = kv.num_pages;
  p.log2_page_size = log2_exact(kv.page_size);
  p.num_heads = s.num_heads;
  p.num_kv_heads = s.num_kv_heads;
  p.group_size = s.num_heads / s.num_kv_heads;
  p.logits_heads = logits_heads_for_group(p.group_size);  // the block width of the key-major logits, if any
  p.max_seq_len = s.max_seq_len;
  p.scale = params.scale;
  p.num_splits = pass.num_splits;
  p.num_slots = pass.num_slots;
  p.partial_o = workspace_at<float>(workspace, layout.partial_o);
  p.partial_lse = workspace_at<float>(workspace, layout.partial_lse);
  p.counters = workspace_at<int32_t>(workspace, layout.counters);
  p.error_flags = workspace_at<uint32_t>(workspace, layout.error_flags);
  return p;
}

}  // namespace detail
}  // namespace kascade::cuda
