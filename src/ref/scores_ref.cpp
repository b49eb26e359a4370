// src/ref/scores_ref.cpp — pooled post-softmax scores of the anchor layers (scores_ref.h).
// Two passes per call: (1) the lse of every (query, head) over its full causal range, through the
// shared online-softmax core (blocks of (queries × heads of one KV group), in parallel); (2) the
// candidate keys in blocks of kScoreKeyBlock, in parallel: each block recomputes the logits (fp32),
// turns them into p = exp(σ q·k − lse) and reduces them into the rows it owns
// (disjoint key ranges, so no two threads write the same score). The local mass of a prefill tile
// is summed per (query, head) over keys s_t .. position and reduced the same way.
// Tested by tests/unit/ref/test_scores_ref.cpp (row sums, and an fp64 recomputation for sum and
// max pooling).
#include "ref/scores_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ref/attention_blocks.h"
#include "ref/attention_core.h"
#include "ref/convert_rows.h"
#include "ref/views.h"

namespace kascade::ref {
namespace {

constexpr int64_t kScoreKeyBlock = 256;

// The queries [i0, i0 + nq) of sequence b, scored against candidates j < num_candidates; the
// scores go to rows [num_rows, stride] at `scores`.
struct ScoreJob {
  int32_t b = 0;
  int32_t i0 = 0;
  int32_t nq = 0;
  int64_t num_candidates = 0;
  float* scores = nullptr;  // [num_rows, stride]
  int64_t stride = 0;
};

// Per job: the fp32 queries [nq, H, d] and their lse [nq, H].
struct JobState {
  std::vector<float> q;
  std::vector<float> lse;
};

Status validate_pooling(const PoolingSpec& pooling, const QueryBatch& q) {
  KC_CHECK_ARG(pooling.num_rows >= 1, "pooling.num_rows is ", pooling.num_rows, "; expected >= 1");
  KC_CHECK_ARG(q.num_heads % pooling.num_rows == 0, "pooling.num_rows ", pooling.num_rows,
               " does not divide q.num_heads ", q.num_heads);
  KC_CHECK_ARG(pooling.reduce == PoolReduce::kSum || pooling.reduce == PoolReduce::kMax,
               "pooling.reduce holds unknown value ", static_cast<int>(pooling.reduce));
  return ok_status();
}

inline void reduce_into(PoolReduce reduce, float& acc, float p) {
  if (reduce == PoolReduce::kSum) {
    acc += p;
  } else if (p > acc) {
    acc = p;
  }
}

// Pass 1: loads every job's queries and computes their lse over keys 0 .. position.
std::vector<JobState> compute_lse(const QueryBatch& q, const PagedKv& kv, float scale,
                                  const std::vector<ScoreJob>& jobs) {
  const int32_t d = q.head_dim;
  const int32_t heads = q.num_heads;
  const int32_t group = heads / kv.num_kv_heads;
  std::vector<JobState> state(jobs.size());
  for (size_t n = 0; n < jobs.size(); ++n) {
    const ScoreJob& job = jobs[n];
    state[n].q.resize(static_cast<size_t>(job.nq) * heads * d);
    state[n].lse.resize(static_cast<size_t>(job.nq) * heads);
    for (int32_t qi = 0; qi < job.nq; ++qi) {
      load_row_f32(q.q, q.dtype, q_offset(q, job.b, job.i0 + qi, 0), heads * d,
                   state[n].q.data() + static_cast<size_t>(qi) * heads * d);
    }
  }
  int64_t work = 0;  // multiply-adds of q·k
  for (const ScoreJob& job : jobs) {
    work += int64_t{job.nq} * heads * d * (query_position(q, kv, job.b, job.i0 + job.nq - 1) + 1);
  }
  const int64_t num_tasks = static_cast<int64_t>(jobs.size()) * kv.num_kv_heads;
#pragma omp parallel for schedule(dynamic, 1) if (detail::worth_parallel(work))
  for (int64_t t = 0; t < num_tasks; ++t) {
    const size_t n = static_cast<size_t>(t / kv.num_kv_heads);
    const int32_t g = static_cast<int32_t>(t % kv.num_kv_heads);
    const ScoreJob& job = jobs[n];
    const int32_t rows = job.nq * group;
    std::vector<float> q_rows(static_cast<size_t>(rows) * d);  // [nq, group, d]
    std::vector<int64_t> limits(static_cast<size_t>(rows));    // [nq, group]
    for (int32_t qi = 0; qi < job.nq; ++qi) {
      const float* src = state[n].q.data() + (static_cast<size_t>(qi) * heads + static_cast<size_t>(g) * group) * d;
      std::copy_n(src, static_cast<size_t>(group) * d, q_rows.data() + static_cast<size_t>(qi) * group * d);
      std::fill_n(limits.data() + static_cast<size_t>(qi) * group, group, query_position(q, kv, job.b, job.i0 + qi) + 1);
    }
    std::vector<float> lse_rows(static_cast<size_t>(rows));  // [nq, group]
    detail::AttendTask task;
    task.b = job.b;
    task.kv_group = g;
    task.num_keys = limits.back();
    task.num_rows = rows;
    task.q = q_rows.data();
    task.limits = limits.data();
    detail::attend_rows(kv, task, scale, nullptr, lse_rows.data());
    for (int32_t qi = 0; qi < job.nq; ++qi) {
      std::copy_n(lse_rows.data() + static_cast<size_t>(qi) * group, group,
                  state[n].lse.data() + static_cast<size_t>(qi) * heads + static_cast<size_t>(g) * group);
    }
  }
  return state;
}

// Calls fn(j, k_row) for the keys [j0, j1) of KV head g of sequence b, each converted once.
template <typename Fn>
void for_each_key(const PagedKv& kv, int32_t b, int32_t g, int64_t j0, int64_t j1, std::vector<float>& buffer, Fn&& fn) {
  buffer.resize(static_cast<size_t>(kv.head_dim));
  for (int64_t j = j0; j < j1; ++j) {
    load_row_f32(kv.k, kv.dtype, kv_offset(kv, b, j, g), kv.head_dim, buffer.data());
    fn(j, buffer.data());
  }
}

// Pass 2: the pooled scores of every job's candidates.
void compute_candidate_scores(const QueryBatch& q, const PagedKv& kv, float scale, const PoolingSpec& pooling,
                              const std::vector<ScoreJob>& jobs, const std::vector<JobState>& state) {
  const int32_t d = q.head_dim;
  const int32_t heads = q.num_heads;
  const int32_t group = heads / kv.num_kv_heads;
  const int32_t heads_per_row = heads / pooling.num_rows;
  std::vector<int64_t> first_task(jobs.size() + 1, 0);
  int64_t work = 0;  // multiply-adds of q·k
  for (size_t n = 0; n < jobs.size(); ++n) {
    first_task[n + 1] = first_task[n] + (jobs[n].num_candidates + kScoreKeyBlock - 1) / kScoreKeyBlock;
    work += jobs[n].num_candidates * jobs[n].nq * heads * d;
  }
#pragma omp parallel for schedule(dynamic, 1) if (detail::worth_parallel(work))
  for (int64_t t = 0; t < first_task.back(); ++t) {
    const size_t n = static_cast<size_t>(std::upper_bound(first_task.begin(), first_task.end(), t) - first_task.begin() - 1);
    const ScoreJob& job = jobs[n];
    const int64_t j0 = (t - first_task[n]) * kScoreKeyBlock;
    const int64_t j1 = std::min(j0 + kScoreKeyBlock, job.num_candidates);
    for (int32_t r = 0; r < pooling.num_rows; ++r) std::fill(job.scores + r * job.stride + j0, job.scores + r * job.stride + j1, 0.0f);
    std::vector<float> k_row;
    for (int32_t g = 0; g < kv.num_kv_heads; ++g) {
      for_each_key(kv, job.b, g, j0, j1, k_row, [&](int64_t j, const float* k) {
        for (int32_t h = g * group; h < (g + 1) * group; ++h) {
          float& acc = job.scores[static_cast<int64_t>(h / heads_per_row) * job.stride + j];
          for (int32_t qi = 0; qi < job.nq; ++qi) {
            const size_t row = static_cast<size_t>(qi) * heads + h;
            const float logit = scale * detail::dot_f32(state[n].q.data() + row * d, k, d);
            reduce_into(pooling.reduce, acc, std::exp(logit - state[n].lse[row]));
          }
        }
      });
    }
  }
}

// The mass each (query, head) of the job puts on its local keys num_candidates .. position,
// reduced into rows. local_mass: [num_rows].
void compute_local_mass(const QueryBatch& q, const PagedKv& kv, float scale, const PoolingSpec& pooling,
                        const ScoreJob& job, const JobState& state, float* local_mass) {
  const int32_t d = q.head_dim;
  const int32_t heads = q.num_heads;
  const int32_t group = heads / kv.num_kv_heads;
  const int32_t heads_per_row = heads / pooling.num_rows;
  std::vector<float> mass(static_cast<size_t>(job.nq) * heads, 0.0f);  // [nq, H]
  // At most tile_size local keys per query: small, so serial.
  for (int32_t g = 0; g < kv.num_kv_heads; ++g) {
    const int64_t last = query_position(q, kv, job.b, job.i0 + job.nq - 1);
    std::vector<float> k_row;
    for_each_key(kv, job.b, g, job.num_candidates, last + 1, k_row, [&](int64_t j, const float* k) {
      for (int32_t qi = 0; qi < job.nq; ++qi) {
        if (j > query_position(q, kv, job.b, job.i0 + qi)) continue;
        for (int32_t h = g * group; h < (g + 1) * group; ++h) {
          const size_t row = static_cast<size_t>(qi) * heads + h;
          const float logit = scale * detail::dot_f32(state.q.data() + row * d, k, d);
          mass[row] += std::exp(logit - state.lse[row]);
        }
      }
    });
  }
  for (int32_t r = 0; r < pooling.num_rows; ++r) {
    float acc = 0.0f;
    for (int32_t h = r * heads_per_row; h < (r + 1) * heads_per_row; ++h) {
      for (int32_t qi = 0; qi < job.nq; ++qi) reduce_into(pooling.reduce, acc, mass[static_cast<size_t>(qi) * heads + h]);
    }
    local_mass[r] = acc;
  }
}

}  // namespace

Status pooled_scores_decode_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                const PoolingSpec& pooling, float* scores, int64_t scores_row_stride) {
  KC_RETURN_IF_ERROR(validate_kv(kv, q));
  KC_RETURN_IF_ERROR(validate_params(params));
  KC_RETURN_IF_ERROR(validate_pooling(pooling, q));
  int32_t max_len = 0;
  for (int32_t b = 0; b < q.batch; ++b) {
    KC_CHECK_ARG(q_len(q, b) == 1, "decode scores need one query per sequence; sequence ", b, " has q_len ",
                 q_len(q, b));
    max_len = std::max(max_len, kv.kv_lens[b]);
  }
  KC_CHECK_ARG(scores != nullptr, "scores is null");
  KC_CHECK_ARG(scores_row_stride >= max_len, "scores_row_stride is ", scores_row_stride,
               " but the longest sequence has kv_len ", max_len);
  std::vector<ScoreJob> jobs(static_cast<size_t>(q.batch));
  for (int32_t b = 0; b < q.batch; ++b) {
    jobs[b].b = b;
    jobs[b].i0 = 0;
    jobs[b].nq = 1;
    jobs[b].num_candidates = kv.kv_lens[b];
    jobs[b].scores = scores + static_cast<int64_t>(b) * pooling.num_rows * scores_row_stride;
    jobs[b].stride = scores_row_stride;
  }
  const std::vector<JobState> state = compute_lse(q, kv, params.scale, jobs);
  compute_candidate_scores(q, kv, params.scale, pooling, jobs, state);
  return ok_status();
}

Status pooled_scores_prefill_tile_ref(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                      const PoolingSpec& pooling, int32_t b, int64_t tile, int32_t tile_size,
                                      float* scores, float* local_mass) {
  KC_RETURN_IF_ERROR(validate_kv(kv, q));
  KC_RETURN_IF_ERROR(validate_params(params));
  KC_RETURN_IF_ERROR(validate_pooling(pooling, q));
  KC_CHECK_ARG(b >= 0 && b < q.batch, "b is ", b, "; expected a sequence in [0, q.batch = ", q.batch, ")");
  KC_CHECK_ARG(tile_size >= 1, "tile_size is ", tile_size, "; expected >= 1");
  KC_CHECK_ARG(q_len(q, b) >= 1, "sequence ", b, " has no queries in this call");
  const int64_t first_pos = query_position(q, kv, b, 0);
  const int64_t last_pos = static_cast<int64_t>(kv.kv_lens[b]) - 1;
  KC_CHECK_ARG(tile >= first_pos / tile_size && tile <= last_pos / tile_size, "tile ", tile,
               " does not intersect the call's queries of sequence ", b, " (positions ", first_pos, "..", last_pos,
               ", tiles ", first_pos / tile_size, "..", last_pos / tile_size, " of ", tile_size, ")");
  const int64_t tile_start = tile * tile_size;
  KC_CHECK_ARG(tile_start == 0 || scores != nullptr, "scores is null");
  ScoreJob job;
  job.b = b;
  const TileQueries queries = tile_queries(q, kv, b, tile, tile_size);
  job.i0 = queries.i0;
  job.nq = queries.nq;
  job.num_candidates = tile_start;
  job.scores = scores;
  job.stride = tile_start;
  const std::vector<ScoreJob> jobs = {job};
  const std::vector<JobState> state = compute_lse(q, kv, params.scale, jobs);
  compute_candidate_scores(q, kv, params.scale, pooling, jobs, state);
  if (local_mass != nullptr) compute_local_mass(q, kv, params.scale, pooling, job, state[0], local_mass);
  return ok_status();
}

}  // namespace kascade::ref
