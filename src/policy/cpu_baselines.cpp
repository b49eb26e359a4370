// src/policy/cpu_baselines.cpp — Quest and LessIsMore decode selection on the CPU (see
// cpu_baselines.h). Tested by tests/unit/policy/test_baselines.cpp.
#include "policy/cpu_baselines.h"

#include <algorithm>
#include <vector>

#include "kascade/dtype.h"
#include "policy/cpu_select.h"
#include "policy/sequence_view.h"
#include "ref/scores_ref.h"
#include "ref/topk_ref.h"
#include "ref/views.h"

namespace kascade::policy {
namespace {

// Writes the keys marked in `member` (ascending) into `out`, pads with -1 to k_max; returns the count.
int32_t write_marked(const std::vector<uint8_t>& member, int32_t* out, int32_t k_max) {
  int32_t count = 0;
  for (size_t j = 0; j < member.size(); ++j) {
    if (member[j]) out[count++] = static_cast<int32_t>(j);
  }
  std::fill(out + count, out + k_max, -1);
  return count;
}

}  // namespace

Status cpu_select_quest_decode(const QueryBatch& q, const PagedKv& kv, int32_t page_size, const int32_t* k_per_seq,
                               const DecodeIndexRows& rows) {
  constexpr const char* kOp = "select_quest_decode";
  KC_RETURN_IF_ERROR(check_decode_inputs(q, kv, kOp));
  KC_RETURN_IF_ERROR(check_decode_rows(rows, q.batch, q.num_heads, kOp));
  KC_CHECK_ARG(rows.granularity == IndexGranularity::kPerQueryHead, kOp, ": rows must be per query head");
  KC_CHECK_ARG(page_size >= 1, kOp, ": page_size is ", page_size, "; expected >= 1");
  KC_CHECK_ARG(k_per_seq != nullptr, kOp, ": k_per_seq must be non-null");
  for (int32_t b = 0; b < q.batch; ++b) {
    const int64_t n = kv.kv_lens[b];
    const int64_t k = k_per_seq[b];
    KC_CHECK_ARG(k >= 0 && k <= n, kOp, ": sequence ", b, " asks for ", k, " indices out of ", n, " candidates");
    const int64_t capacity = std::min<int64_t>(n, k + page_size - 1);
    KC_CHECK_ARG(capacity <= rows.k_max, kOp, ": sequence ", b, " may select up to ", capacity,
                 " keys (whole pages); rows hold k_max = ", rows.k_max);
  }
  const int32_t num_heads = q.num_heads;
  const int32_t num_kv_heads = kv.num_kv_heads;
  const int32_t group = num_heads / num_kv_heads;
  const int32_t d = q.head_dim;
  std::vector<float> page_min, page_max;  // [G, num_pages, d]
  std::vector<double> score;              // [num_pages]
  std::vector<int32_t> order;             // [num_pages]
  for (int32_t b = 0; b < q.batch; ++b) {
    const int64_t n = kv.kv_lens[b];
    const int64_t k = k_per_seq[b];
    const int64_t num_pages = (n + page_size - 1) / page_size;
    page_min.assign(static_cast<size_t>(num_kv_heads * num_pages * d), 0.0f);
    page_max.assign(page_min.size(), 0.0f);
    for (int32_t g = 0; g < num_kv_heads; ++g) {
      for (int64_t pg = 0; pg < num_pages; ++pg) {
        float* lo = page_min.data() + (g * num_pages + pg) * d;
        float* hi = page_max.data() + (g * num_pages + pg) * d;
        const int64_t end = std::min<int64_t>(n, (pg + 1) * page_size);
        for (int64_t j = pg * page_size; j < end; ++j) {
          const int64_t at = ref::kv_offset(kv, b, j, g);
          for (int32_t c = 0; c < d; ++c) {
            const float x = load_as_float(kv.k, kv.dtype, at + c);
            lo[c] = j == pg * page_size ? x : std::min(lo[c], x);
            hi[c] = j == pg * page_size ? x : std::max(hi[c], x);
          }
        }
      }
    }
    for (int32_t h = 0; h < num_heads; ++h) {
      const int32_t g = h / group;
      const int64_t q_at = ref::q_offset(q, b, 0, h);
      score.assign(static_cast<size_t>(num_pages), 0.0);
      for (int64_t pg = 0; pg < num_pages; ++pg) {
        const float* lo = page_min.data() + (g * num_pages + pg) * d;
        const float* hi = page_max.data() + (g * num_pages + pg) * d;
        double s = 0.0;
        for (int32_t c = 0; c < d; ++c) {
          const double qc = load_as_float(q.q, q.dtype, q_at + c);
          s += std::max(qc * lo[c], qc * hi[c]);
        }
        score[static_cast<size_t>(pg)] = s;
      }
      order.resize(static_cast<size_t>(num_pages));
      for (int64_t pg = 0; pg < num_pages; ++pg) order[static_cast<size_t>(pg)] = static_cast<int32_t>(pg);
      std::sort(order.begin(), order.end(), [&](int32_t a, int32_t c) {
        if (score[a] != score[c]) return score[a] > score[c];
        return a < c;
      });
      std::vector<uint8_t> member(static_cast<size_t>(n), 0);
      int64_t taken = 0;
      for (size_t i = 0; i < order.size() && taken < k; ++i) {
        const int64_t begin = static_cast<int64_t>(order[i]) * page_size;
        const int64_t end = std::min<int64_t>(n, begin + page_size);
        for (int64_t j = begin; j < end; ++j) member[static_cast<size_t>(j)] = 1;
        taken += end - begin;
      }
      const int64_t row = static_cast<int64_t>(b) * num_heads + h;
      rows.row_lens[row] = write_marked(member, rows.indices + row * rows.k_max, rows.k_max);
    }
  }
  return ok_status();
}

Status cpu_select_lessismore_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                    const int32_t* k_per_seq, int32_t num_sinks, const DecodeIndexRows& rows) {
  constexpr const char* kOp = "select_lessismore_decode";
  KC_RETURN_IF_ERROR(check_decode_inputs(q, kv, kOp));
  KC_RETURN_IF_ERROR(check_decode_rows(rows, q.batch, 1, kOp));
  KC_CHECK_ARG(num_sinks >= 0, kOp, ": num_sinks is ", num_sinks, "; expected >= 0");
  KC_CHECK_ARG(k_per_seq != nullptr, kOp, ": k_per_seq must be non-null");
  for (int32_t b = 0; b < q.batch; ++b) {
    const int64_t n = kv.kv_lens[b];
    const int64_t k = k_per_seq[b];
    KC_CHECK_ARG(k >= 0 && k <= n, kOp, ": sequence ", b, " asks for ", k, " indices out of ", n, " candidates");
    const int64_t capacity = std::min<int64_t>(n, k + num_sinks);
    KC_CHECK_ARG(capacity <= rows.k_max, kOp, ": sequence ", b, " may select up to ", capacity,
                 " keys (budget + sinks); rows hold k_max = ", rows.k_max);
  }
  const int32_t num_heads = q.num_heads;
  ref::PoolingSpec per_head;
  per_head.num_rows = num_heads;
  per_head.reduce = ref::PoolReduce::kSum;
  std::vector<float> scores;  // [H, n] p_h of one sequence
  std::vector<int32_t> ranked;  // [H, m] each head's top-m keys, best first
  for (int32_t b = 0; b < q.batch; ++b) {
    const int64_t n = kv.kv_lens[b];
    const int64_t k = k_per_seq[b];
    const int64_t recent = lessismore_recent(k);
    const int64_t to_merge = k - recent;
    std::vector<uint8_t> member(static_cast<size_t>(n), 0);
    int64_t present = 0;
    auto add = [&](int64_t j) {
      if (!member[static_cast<size_t>(j)]) {
        member[static_cast<size_t>(j)] = 1;
        ++present;
        return true;
      }
      return false;
    };
    for (int64_t j = 0; j < std::min<int64_t>(num_sinks, n); ++j) add(j);
    for (int64_t j = n - recent; j < n; ++j) add(j);
    if (to_merge > 0 && present < n) {
      // Each head's top-m holds at least to_merge keys outside the present ones (m = to_merge +
      // present, or all n keys), so merging these lists never runs short.
      const int64_t m = std::min<int64_t>(n, to_merge + present);
      scores.assign(static_cast<size_t>(num_heads * n), 0.0f);
      SequenceView seq(q, kv, b);
      KC_RETURN_IF_ERROR(ref::pooled_scores_decode_ref(seq.q(), seq.kv(), params, per_head, scores.data(), n));
      ranked.assign(static_cast<size_t>(num_heads * m), 0);
      for (int32_t h = 0; h < num_heads; ++h) {
        const float* s = scores.data() + h * n;
        int32_t* list = ranked.data() + h * m;
        KC_RETURN_IF_ERROR(ref::topk_select_ref(s, n, m, list));
        std::sort(list, list + m, [s](int32_t a, int32_t c) {
          if (s[a] != s[c]) return s[a] > s[c];
          return a < c;
        });
      }
      int64_t added = 0;
      for (int64_t rank = 0; rank < m && added < to_merge; ++rank) {
        for (int32_t h = 0; h < num_heads && added < to_merge; ++h) {
          if (add(ranked[static_cast<size_t>(h * m + rank)])) ++added;
        }
      }
    }
    rows.row_lens[b] = write_marked(member, rows.indices + static_cast<int64_t>(b) * rows.k_max, rows.k_max);
  }
  return ok_status();
}

}  // namespace kascade::policy
