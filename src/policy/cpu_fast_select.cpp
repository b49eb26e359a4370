// src/policy/cpu_fast_select.cpp — fast select_decode / select_prefill of the CPU backend
// (cpu_fast_select.h): lse pass, GEMM-shaped pooled scores per job, exact threshold Top-k.
// Tested by tests/unit/policy/test_cpu_fast_kernels.cpp.
#include "policy/cpu_fast_select.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

#include "policy/cpu_fast_attention.h"
#include "policy/cpu_fast_core.h"
#include "policy/cpu_select.h"
#include "ref/attention_blocks.h"
#include "ref/convert_rows.h"
#include "ref/index_rows.h"
#include "ref/topk_ref.h"
#include "ref/views.h"

namespace kascade::policy {
namespace {

// The queries [i0, i0 + nq) of sequence b (indices within the call), scored against the
// candidates j < num_candidates.
struct ScoreJob {
  int32_t b = 0;
  int32_t i0 = 0;
  int32_t nq = 0;
  int64_t num_candidates = 0;
  int64_t slot = 0;  // prefill: the tile slot; decode: unused
};

// Per-thread scratch of a job.
struct JobScratch {
  std::vector<float> q_rows;   // [nq · group, d] one KV group's query rows (query-major)
  std::vector<float> lse;      // [nq · group]
  std::vector<float> k_tile;   // [kFastKeyBlock, d]
  std::vector<float> logits;   // [nq · group, kFastKeyBlock]
  std::vector<float> scores;   // [num_rows, num_candidates]
  std::vector<float> topk;     // [num_candidates]
};

// scores[r][j] (row stride job.num_candidates) = reduce over (queries of the job, heads h of row r)
// of exp(scale · q_h·k_j − lse_h) for j < job.num_candidates. lse_all: [total_q, H].
void pooled_scores(const QueryBatch& q, const PagedKv& kv, float scale, const ScorePooling& pooling,
                   const ScoreJob& job, const float* lse_all, JobScratch& s) {
  const int32_t d = q.head_dim;
  const int32_t heads = q.num_heads;
  const int32_t group = heads / kv.num_kv_heads;
  const int32_t heads_per_row = heads / pooling.num_rows;
  const int64_t n = job.num_candidates;
  const int32_t m = job.nq * group;
  constexpr int32_t kBlock = fast::kFastKeyBlock;
  s.scores.assign(static_cast<size_t>(pooling.num_rows * n), 0.0f);  // kMax starts from 0 (all p >= 0)
  s.q_rows.resize(static_cast<size_t>(m) * d);
  s.lse.resize(static_cast<size_t>(m));
  s.k_tile.resize(static_cast<size_t>(kBlock) * d);
  s.logits.resize(static_cast<size_t>(m) * kBlock);
  for (int32_t g = 0; g < kv.num_kv_heads; ++g) {
    for (int32_t qi = 0; qi < job.nq; ++qi) {
      ref::load_row_f32(q.q, q.dtype, ref::q_offset(q, job.b, job.i0 + qi, g * group), group * d,
                        s.q_rows.data() + static_cast<size_t>(qi) * group * d);
      const int64_t lse_at = static_cast<int64_t>(q.cu_q_lens[job.b] + job.i0 + qi) * heads + g * group;
      std::copy_n(lse_all + lse_at, group, s.lse.data() + static_cast<size_t>(qi) * group);
    }
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
      const int32_t count = static_cast<int32_t>(std::min<int64_t>(kBlock, n - j0));
      fast::gather_rows(kv.k, kv, job.b, g, nullptr, j0, count, s.k_tile.data());
      fast::block_logits(s.q_rows.data(), m, s.k_tile.data(), count, d, scale, s.logits.data(), kBlock);
      for (int32_t row = 0; row < m; ++row) {
        float* p = s.logits.data() + static_cast<size_t>(row) * kBlock;
        const float lse = s.lse[static_cast<size_t>(row)];
        for (int32_t jj = 0; jj < count; ++jj) p[jj] -= lse;
        fast::exp_inplace(p, count);
        const int32_t h = g * group + row % group;
        float* acc = s.scores.data() + static_cast<int64_t>(h / heads_per_row) * n + j0;
        if (pooling.reduce == ScoreReduce::kSum) {
#pragma omp simd
          for (int32_t jj = 0; jj < count; ++jj) acc[jj] += p[jj];
        } else {
#pragma omp simd
          for (int32_t jj = 0; jj < count; ++jj) acc[jj] = std::max(acc[jj], p[jj]);
        }
      }
    }
  }
}

// Runs body(job_index, scratch) over `count` jobs, in parallel when `work` justifies it; returns
// the first failure in job order (so the reported error does not depend on the schedule).
Status run_jobs(int64_t count, int64_t work, const std::function<Status(int64_t, JobScratch&)>& body) {
  fast::use_single_threaded_blas();
  std::vector<Status> status(static_cast<size_t>(count));
#pragma omp parallel if (fast::worth_parallel(work) && count > 1)
  {
    JobScratch scratch;
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = count - 1; i >= 0; --i) status[static_cast<size_t>(i)] = body(i, scratch);  // largest first
  }
  for (const Status& st : status) KC_RETURN_IF_ERROR(st);
  return ok_status();
}

}  // namespace

Status fast_topk(const float* scores, int64_t n, int64_t k, int32_t* out, std::vector<float>& scratch) {
  KC_RETURN_IF_ERROR(ref::validate_topk_args(scores, n, k, out));
  if (k == 0) return ok_status();
  if (k == n) {
    std::iota(out, out + n, 0);
    return ok_status();
  }
  scratch.assign(scores, scores + n);
  std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end(), std::greater<float>());
  const float threshold = scratch[static_cast<size_t>(k - 1)];
  int64_t above = 0;
  for (int64_t i = 0; i < n; ++i) above += scores[i] > threshold ? 1 : 0;
  int64_t ties_left = k - above;  // >= 1: the threshold itself is among the k largest
  int64_t written = 0;
  for (int64_t i = 0; i < n && written < k; ++i) {
    const float v = scores[i];
    if (v > threshold || (v == threshold && ties_left > 0)) {
      if (!(v > threshold)) --ties_left;
      out[written++] = static_cast<int32_t>(i);
    }
  }
  return ok_status();
}

Status fast_select_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                          const ScorePooling& pooling, const int32_t* k_per_seq, const DecodeIndexRows& rows) {
  constexpr const char* kOp = "select_decode";
  KC_RETURN_IF_ERROR(check_select_decode_call(q, kv, pooling, k_per_seq, rows, kOp));
  KC_RETURN_IF_ERROR(ref::validate_params(params));
  const int32_t num_rows = pooling.num_rows;
  bool any_scored = false;
  int64_t work = 0;
  for (int32_t b = 0; b < q.batch; ++b) {
    const int64_t n = kv.kv_lens[b];
    const int64_t k = k_per_seq[b];
    any_scored = any_scored || (k > 0 && k < n);
    work += n * q.num_heads * q.head_dim;
  }
  std::vector<float> lse_all;  // [batch, H] (one query per sequence)
  if (any_scored) {
    lse_all.resize(static_cast<size_t>(q.total_q) * q.num_heads);
    KC_RETURN_IF_ERROR(fast_causal_lse(q, kv, params, lse_all.data()));
  }
  return run_jobs(q.batch, work, [&](int64_t bi, JobScratch& s) -> Status {
    const int32_t b = static_cast<int32_t>(bi);
    const int64_t n = kv.kv_lens[b];
    const int64_t k = k_per_seq[b];
    const bool scored = k > 0 && k < n;
    if (scored) {
      ScoreJob job;
      job.b = b;
      job.nq = 1;
      job.num_candidates = n;
      pooled_scores(q, kv, params.scale, pooling, job, lse_all.data(), s);
    }
    return write_decode_rows(rows, b, num_rows, k, n, [&](int32_t r, int64_t kr, int32_t* out) {
      return fast_topk(s.scores.data() + r * n, n, kr, out, s.topk);
    });
  });
}

Status fast_select_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                           const ScorePooling& pooling, const PrefillIndexRows& rows) {
  constexpr const char* kOp = "select_prefill";
  KC_RETURN_IF_ERROR(ref::validate_queries(q));
  KC_RETURN_IF_ERROR(ref::validate_kv(kv, q));
  KC_RETURN_IF_ERROR(ref::validate_params(params));
  KC_RETURN_IF_ERROR(check_pooling(pooling, q.num_heads, kOp));
  KC_CHECK_ARG(rows.include_local, kOp, ": rows must have include_local (candidates j < s_t plus local keys)");
  KC_RETURN_IF_ERROR(check_prefill_rows(q, kv, rows, pooling.num_rows, kOp));
  const int32_t num_rows = pooling.num_rows;
  const int64_t tile_size = rows.tile_size;
  // One job per (sequence, tile) the call touches; saturated tiles (every row takes all s_t
  // candidates) need no scores.
  std::vector<ScoreJob> jobs;
  std::vector<uint8_t> saturated;
  int64_t work = 0;
  bool any_scored = false;
  for (int32_t b = 0; b < q.batch; ++b) {
    const ref::CallTiles tiles = ref::call_tiles(ref::q_len(q, b), kv.kv_lens[b], rows.tile_size);
    for (int64_t t = tiles.first; t < tiles.first + tiles.count; ++t) {
      const int64_t slot = rows.tile_base[b] + (t - tiles.first);
      const int64_t s_t = t * tile_size;
      KC_ASSIGN_OR_RETURN(const bool full, check_tile_rows_saturated(rows, b, t, slot, num_rows, s_t, kOp));
      ScoreJob job;
      job.b = b;
      const ref::TileQueries queries = ref::tile_queries(q, kv, b, t, rows.tile_size);
      job.i0 = queries.i0;
      job.nq = queries.nq;
      job.num_candidates = s_t;
      job.slot = slot;
      jobs.push_back(job);
      saturated.push_back(full ? 1 : 0);
      any_scored = any_scored || !full;
      if (!full) work += s_t * job.nq * q.num_heads * q.head_dim;
    }
  }
  std::vector<float> lse_all;  // [total_q, H]
  if (any_scored) {
    lse_all.resize(static_cast<size_t>(q.total_q) * q.num_heads);
    KC_RETURN_IF_ERROR(fast_causal_lse(q, kv, params, lse_all.data()));
  }
  return run_jobs(static_cast<int64_t>(jobs.size()), work, [&](int64_t i, JobScratch& s) -> Status {
    const ScoreJob& job = jobs[static_cast<size_t>(i)];
    const int64_t s_t = job.num_candidates;
    if (!saturated[static_cast<size_t>(i)]) pooled_scores(q, kv, params.scale, pooling, job, lse_all.data(), s);
    return write_tile_rows(rows, job.slot, num_rows, s_t, [&](int32_t r, int64_t len, int32_t* out) {
      return fast_topk(s.scores.data() + r * s_t, s_t, len, out, s.topk);
    });
  });
}

}  // namespace kascade::policy
