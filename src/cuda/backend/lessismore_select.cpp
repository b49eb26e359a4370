// src/cuda/backend/lessismore_select.cpp — LessIsMore decode selection: per-head scores and
// Top-m on the GPU, rankings and the rank-by-rank merge on the host (lessismore_select.h).
// Tested by tests/cuda/test_backend_ops.cpp and test_backend_policies.cpp.
#include "cuda/backend/lessismore_select.h"

#include <algorithm>
#include <numeric>

#include "cuda/backend/baseline_kernels.h"
#include "cuda/common/cuda_status.h"

namespace kascade::cuda {
namespace {

// LessIsMore's split of a budget k: the recent window ceil(k/4) (as policy/cpu_baselines.h).
int64_t recent_window(int64_t k) { return (k + 3) / 4; }

// Keys in sinks [0, min(sinks, n)) ∪ recent [n - recent, n).
int64_t present_keys(int64_t n, int64_t sinks, int64_t recent) {
  const int64_t s = std::min(sinks, n);
  const int64_t overlap = std::max<int64_t>(0, s - (n - recent));
  return s + recent - overlap;
}

}  // namespace

Status LessIsMoreSelector::run(DecodePlanCache& plans, const DecodeKey& key, const QueryBatch& q, const PagedKv& kv,
                               const AttentionParams& params, const int32_t* k_per_seq, int32_t num_sinks,
                               const DecodeIndexRows& rows, int32_t* k_device, int32_t max_batch,
                               int32_t max_seq_len, int64_t* allocations, cudaStream_t stream) {
  constexpr const char* kOp = "select_lessismore_decode";
  KC_CHECK_ARG(num_sinks >= 0, kOp, ": num_sinks is ", num_sinks, "; expected >= 0");
  KC_CHECK_ARG(kv.kv_lens != nullptr, kOp, ": kv.kv_lens is null");
  const int32_t batch = q.batch;
  const int32_t heads = key.num_heads;

  // Lengths come to the host: the merge and its bounds need them.
  kv_lens_.assign(static_cast<size_t>(batch), 0);
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(kv_lens_.data(), kv.kv_lens, batch * sizeof(int32_t),
                                          cudaMemcpyDeviceToHost, stream));
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  m_.assign(static_cast<size_t>(batch), 0);
  int32_t m_max = 0;
  for (int32_t b = 0; b < batch; ++b) {
    const int64_t n = kv_lens_[b];
    const int64_t k = k_per_seq[b];
    KC_CHECK_ARG(n >= 1 && n <= max_seq_len, kOp, ": sequence ", b, " has kv_len ", n,
                 "; the cuda backend was created for 1..", max_seq_len);
    KC_CHECK_ARG(k >= 0 && k <= n, kOp, ": sequence ", b, " asks for ", k, " indices out of ", n, " candidates");
    const int64_t capacity = std::min<int64_t>(n, k + num_sinks);
    KC_CHECK_ARG(capacity <= rows.k_max, kOp, ": sequence ", b, " may select up to ", capacity,
                 " keys (budget + sinks); rows hold k_max = ", rows.k_max);
    const int64_t recent = recent_window(k);
    const int64_t to_merge = k - recent;
    const int64_t present = present_keys(n, num_sinks, recent);
    // Each head's top-m holds at least to_merge keys outside the present ones, so the merge of
    // these lists never runs short (the CPU backend's bound).
    if (to_merge > 0 && present < n) m_[b] = static_cast<int32_t>(std::min<int64_t>(n, to_merge + present));
    m_max = std::max(m_max, m_[b]);
  }

  if (m_max > 0) {
    // Per-head scores and Top-m on the GPU.
    const size_t head_rows = static_cast<size_t>(max_batch) * heads;
    KC_RETURN_IF_ERROR(top_indices_.ensure(head_rows * max_seq_len * sizeof(int32_t), "LessIsMore rankings",
                                           allocations));
    KC_RETURN_IF_ERROR(top_lens_.ensure(head_rows * sizeof(int32_t), "LessIsMore ranking lengths", allocations));
    KC_RETURN_IF_ERROR(top_scores_.ensure(head_rows * max_seq_len * sizeof(float), "LessIsMore ranking scores",
                                          allocations));
    KC_RETURN_IF_ERROR(scratch_o_.ensure(head_rows * key.head_dim * dtype_size(key.dtype),
                                         "LessIsMore scratch output", allocations));
    ScorePooling per_head;
    per_head.num_rows = heads;
    per_head.reduce = ScoreReduce::kSum;
    KC_ASSIGN_OR_RETURN(const DecodePlanCache::Anchor* anchor, plans.anchor(key, per_head, /*dense_output=*/true));
    KC_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(k_device, m_.data(), batch * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    DecodeIndexRows top{top_indices_.as<int32_t>(), top_lens_.as<int32_t>(), batch, heads, m_max,
                        anchor->plan.granularity};
    AttentionOutput scratch{scratch_o_.data(), key.dtype, nullptr};
    AnchorRunExtras extras;
    extras.k_per_seq = k_device;
    extras.write_pooled_scores = true;  // gathered below
    KC_RETURN_IF_ERROR(anchor_decode(anchor->plan, q, kv, params, top, scratch, extras, anchor->workspace.data(),
                                     stream));
    detail::GatherScoresParams gather;
    gather.scores = anchor_pooled_scores(anchor->plan, anchor->workspace.data());
    gather.indices = top.indices;
    gather.row_lens = top.row_lens;
    gather.gathered = top_scores_.as<float>();
    gather.score_stride = anchor->plan.logits_stride;
    gather.num_rows = heads;
    gather.k_max = m_max;
    KC_RETURN_IF_ERROR(
        cuda_status(detail::launch_gather_scores(gather, batch, stream), "launch of gather_scores_kernel"));
    const size_t entries = static_cast<size_t>(batch) * heads * m_max;
    host_indices_.resize(entries);
    host_scores_.resize(entries);
    host_lens_.resize(static_cast<size_t>(batch) * heads);
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_indices_.data(), top.indices, entries * sizeof(int32_t),
                                            cudaMemcpyDeviceToHost, stream));
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_scores_.data(), gather.gathered, entries * sizeof(float),
                                            cudaMemcpyDeviceToHost, stream));
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_lens_.data(), top.row_lens, host_lens_.size() * sizeof(int32_t),
                                            cudaMemcpyDeviceToHost, stream));
    KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  }

  // The rank-by-rank merge on the host.
  row_indices_.assign(static_cast<size_t>(batch) * rows.k_max, -1);
  row_lens_.assign(static_cast<size_t>(batch), 0);
  std::vector<uint8_t> member;
  std::vector<int32_t> order;
  std::vector<int32_t> ranked;  // [H, m] each head's keys, best first
  for (int32_t b = 0; b < batch; ++b) {
    const int64_t n = kv_lens_[b];
    const int64_t k = k_per_seq[b];
    const int64_t recent = recent_window(k);
    const int64_t to_merge = k - recent;
    member.assign(static_cast<size_t>(n), 0);
    for (int64_t j = 0; j < std::min<int64_t>(num_sinks, n); ++j) member[static_cast<size_t>(j)] = 1;
    for (int64_t j = n - recent; j < n; ++j) member[static_cast<size_t>(j)] = 1;
    const int32_t m = m_[b];
    if (m > 0) {
      ranked.assign(static_cast<size_t>(heads) * m, 0);
      for (int32_t h = 0; h < heads; ++h) {
        const size_t row = (static_cast<size_t>(b) * heads + h);
        if (host_lens_[row] != m) {
          return internal_error(kOp, ": the GPU Top-", m, " of sequence ", b, " head ", h, " returned ",
                                host_lens_[row], " keys (device error bits follow in check_device_errors)");
        }
        const int32_t* keys = host_indices_.data() + row * m_max;
        const float* scores = host_scores_.data() + row * m_max;
        order.resize(static_cast<size_t>(m));
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int32_t a, int32_t c) {
          if (scores[a] != scores[c]) return scores[a] > scores[c];
          return keys[a] < keys[c];
        });
        for (int32_t i = 0; i < m; ++i) ranked[static_cast<size_t>(h) * m + i] = keys[order[i]];
      }
      int64_t added = 0;
      for (int32_t rank = 0; rank < m && added < to_merge; ++rank) {
        for (int32_t h = 0; h < heads && added < to_merge; ++h) {
          const int32_t j = ranked[static_cast<size_t>(h) * m + rank];
          if (j < 0 || j >= n) return internal_error(kOp, ": the GPU ranking holds key ", j, " outside [0, ", n, ")");
          if (!member[static_cast<size_t>(j)]) {
            member[static_cast<size_t>(j)] = 1;
            ++added;
          }
        }
      }
    }
    int32_t* out = row_indices_.data() + static_cast<size_t>(b) * rows.k_max;
    int32_t count = 0;
    for (int64_t j = 0; j < n; ++j) {
      if (member[static_cast<size_t>(j)]) out[count++] = static_cast<int32_t>(j);
    }
    row_lens_[b] = count;
  }
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(rows.indices, row_indices_.data(), row_indices_.size() * sizeof(int32_t),
                                          cudaMemcpyHostToDevice, stream));
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(rows.row_lens, row_lens_.data(), row_lens_.size() * sizeof(int32_t),
                                          cudaMemcpyHostToDevice, stream));
  return ok_status();
}

}  // namespace kascade::cuda
