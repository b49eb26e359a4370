// src/cuda/kascade/radix_topk.cpp — validation and launch of the decode Top-k (radix_topk.h).
// Tested by tests/cuda/test_radix_topk.cpp.
#include "cuda/kascade/radix_topk.h"

#include "cuda/common/cuda_status.h"
#include "cuda/kascade/selection_kernels.h"

namespace kascade::cuda {

Status radix_topk_decode(const float* scores, int64_t scores_stride, const int32_t* kv_lens, int32_t batch,
                         int32_t max_seq_len, const Budget& budget, const int32_t* k_per_seq,
                         const DecodeIndexRows& out, uint32_t* error_flags, cudaStream_t stream) {
  KC_RETURN_IF_ERROR(validate_budget(budget));
  KC_CHECK_ARG(scores != nullptr && kv_lens != nullptr && error_flags != nullptr,
               "scores, kv_lens or error_flags is null");
  KC_CHECK_ARG(batch >= 1 && batch <= 65535, "batch is ", batch, "; expected 1..65535");
  KC_CHECK_ARG(max_seq_len >= 1, "max_seq_len is ", max_seq_len, "; expected >= 1");
  KC_CHECK_ARG(scores_stride >= max_seq_len && scores_stride % 4 == 0, "scores_stride is ", scores_stride,
               "; expected a multiple of 4 >= max_seq_len ", max_seq_len);
  KC_CHECK_ARG(out.indices != nullptr && out.row_lens != nullptr, "out.indices or out.row_lens is null");
  KC_CHECK_ARG(out.batch == batch, "out.batch is ", out.batch, "; expected ", batch);
  KC_CHECK_ARG(out.num_rows >= 1 && out.num_rows <= 65535, "out.num_rows is ", out.num_rows, "; expected 1..65535");
  const int64_t k_needed = k_per_seq ? 1 : budget_k(max_seq_len, budget);
  KC_CHECK_ARG(out.k_max >= k_needed && out.k_max >= 1, "out.k_max is ", out.k_max, "; k(max_seq_len = ",
               max_seq_len, ") is ", k_needed);
  detail::TopkParams p;
  p.scores = scores;
  p.kv_lens = kv_lens;
  p.indices = out.indices;
  p.row_lens = out.row_lens;
  p.error_flags = error_flags;
  p.stride = scores_stride;
  p.k_per_seq = k_per_seq;
  p.rho_ppm = budget.rho_ppm;
  p.k_min = budget.k_min;
  p.k_round = budget.k_round;
  p.max_seq_len = max_seq_len;
  p.num_rows = out.num_rows;
  p.k_max = out.k_max;
  return cuda_status(detail::launch_radix_topk(p, batch, stream), "launch of radix_topk_kernel");
}

}  // namespace kascade::cuda
