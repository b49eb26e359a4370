// test_collector_reference.h — an fp64 recomputation of the calibration statistics of DESIGN.md §2.5
// from captured attention inputs, written independently of src/ref and src/calibrate (plain loops,
// a full sort for Top-k), for tests/unit/calibrate/test_collector.cpp and
// tests/unit/runtime/test_calibration_collector.cpp. Header-only so both test binaries use it.
//
// A CapturedLayer is what one layer of one forward call (one sequence) saw: its queries, the keys
// and values of the whole cache so far, and what it wrote. From those, reference_units() computes
// every unit of the call at that layer (prefill tiles t >= 1 intersecting the call's queries, or the
// decode step): S[g][j] = Σ_{i in tile ∩ call} Σ_{h in g} p_{h,i}[j] over candidates, LT[g] the
// mass on the local keys; prompt_similarity() reduces a prompt's units with the Top-k_cal mass
// ratio and the min over units.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "kascade/attention.h"
#include "kascade/dtype.h"
#include "kascade/policy.h"

namespace kascade::testing {

struct CapturedLayer {
  ForwardMode mode = ForwardMode::kPrefill;
  int32_t layer = 0;
  int32_t q_len = 0;
  int32_t kv_len = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  double scale = 0.0;
  std::vector<float> q;    // [q_len, H, d]
  std::vector<float> k;    // [kv_len, G, d]
  std::vector<float> v;    // [kv_len, G, d]
  std::vector<float> out;  // [q_len, H, d] what the policy wrote
  IndexSnapshot rows;      // the policy's rows after the layer (sparse stats forward)
  int64_t start() const { return static_cast<int64_t>(kv_len) - q_len; }
};

// Copies a layer call (one sequence) out of the views: q and out as given, K/V through the block table.
inline CapturedLayer capture_layer(ForwardMode mode, int32_t layer, const QueryBatch& q, const PagedKv& kv,
                                   const AttentionParams& params, const AttentionOutput& out) {
  CapturedLayer c;
  c.mode = mode;
  c.layer = layer;
  c.q_len = q.cu_q_lens[1] - q.cu_q_lens[0];
  c.kv_len = kv.kv_lens[0];
  c.num_heads = q.num_heads;
  c.num_kv_heads = kv.num_kv_heads;
  c.head_dim = q.head_dim;
  c.scale = params.scale;
  const int64_t qrow = static_cast<int64_t>(q.num_heads) * q.head_dim;
  c.q.resize(static_cast<size_t>(c.q_len * qrow));
  c.out.resize(c.q.size());
  for (int64_t i = 0; i < c.q_len * qrow; ++i) {
    c.q[static_cast<size_t>(i)] = load_as_float(q.q, q.dtype, q.cu_q_lens[0] * qrow + i);
    c.out[static_cast<size_t>(i)] = load_as_float(out.o, out.dtype, q.cu_q_lens[0] * qrow + i);
  }
  const int64_t krow = static_cast<int64_t>(kv.num_kv_heads) * kv.head_dim;
  c.k.resize(static_cast<size_t>(c.kv_len * krow));
  c.v.resize(c.k.size());
  for (int64_t j = 0; j < c.kv_len; ++j) {
    const int64_t page = kv.block_table[j / kv.page_size];
    const int64_t base = (page * kv.page_size + j % kv.page_size) * krow;
    for (int64_t e = 0; e < krow; ++e) {
      c.k[static_cast<size_t>(j * krow + e)] = load_as_float(kv.k, kv.dtype, base + e);
      c.v[static_cast<size_t>(j * krow + e)] = load_as_float(kv.v, kv.dtype, base + e);
    }
  }
  return c;
}

// fp64 softmax of query qi (within the call), head h, over keys 0..position: p[j], j <= position.
inline std::vector<double> reference_probabilities(const CapturedLayer& c, int32_t qi, int32_t h) {
  const int32_t d = c.head_dim;
  const int32_t g = h / (c.num_heads / c.num_kv_heads);
  const int64_t position = c.start() + qi;
  std::vector<double> p(static_cast<size_t>(position + 1));
  const float* qv = c.q.data() + (static_cast<size_t>(qi) * c.num_heads + h) * d;
  double max_logit = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j <= position; ++j) {
    const float* kv = c.k.data() + (static_cast<size_t>(j) * c.num_kv_heads + g) * d;
    double dot = 0.0;
    for (int32_t e = 0; e < d; ++e) dot += static_cast<double>(qv[e]) * kv[e];
    p[static_cast<size_t>(j)] = c.scale * dot;
    max_logit = std::max(max_logit, p[static_cast<size_t>(j)]);
  }
  double sum = 0.0;
  for (double& x : p) sum += (x = std::exp(x - max_logit));
  for (double& x : p) x /= sum;
  return p;
}

struct ReferenceUnit {
  int64_t id = 0;  // tile t >= 1, or -n for a decode step
  int32_t layer = 0;
  int64_t num_candidates = 0;  // s_t, or n
  std::vector<double> scores;  // [G, num_candidates]
  std::vector<double> local;   // [G] (0 for decode)
};

inline std::vector<ReferenceUnit> reference_units(const CapturedLayer& c, int32_t tile_size) {
  const int32_t G = c.num_kv_heads;
  const int32_t group = c.num_heads / G;
  std::vector<ReferenceUnit> units;
  if (c.mode == ForwardMode::kDecode) {
    ReferenceUnit u;
    u.id = -static_cast<int64_t>(c.kv_len);
    u.layer = c.layer;
    u.num_candidates = c.kv_len;
    u.scores.assign(static_cast<size_t>(G) * c.kv_len, 0.0);
    u.local.assign(static_cast<size_t>(G), 0.0);
    for (int32_t h = 0; h < c.num_heads; ++h) {
      const std::vector<double> p = reference_probabilities(c, 0, h);
      for (int64_t j = 0; j < c.kv_len; ++j) u.scores[static_cast<size_t>(h / group) * c.kv_len + j] += p[j];
    }
    units.push_back(std::move(u));
    return units;
  }
  const int64_t first = c.start() / tile_size;
  const int64_t last = (static_cast<int64_t>(c.kv_len) - 1) / tile_size;
  for (int64_t t = std::max<int64_t>(first, 1); t <= last; ++t) {
    const int64_t s = t * tile_size;
    ReferenceUnit u;
    u.id = t;
    u.layer = c.layer;
    u.num_candidates = s;
    u.scores.assign(static_cast<size_t>(G * s), 0.0);
    u.local.assign(static_cast<size_t>(G), 0.0);
    for (int64_t pos = std::max(s, c.start()); pos < std::min<int64_t>(s + tile_size, c.kv_len); ++pos) {
      const int32_t qi = static_cast<int32_t>(pos - c.start());
      for (int32_t h = 0; h < c.num_heads; ++h) {
        const std::vector<double> p = reference_probabilities(c, qi, h);
        const size_t g = static_cast<size_t>(h / group);
        for (int64_t j = 0; j < s; ++j) u.scores[g * s + j] += p[j];
        for (int64_t j = s; j <= pos; ++j) u.local[g] += p[j];
      }
    }
    units.push_back(std::move(u));
  }
  return units;
}

// The k largest entries of row (ties: lower index), by a full sort.
inline std::vector<int64_t> reference_topk(const double* row, int64_t n, int64_t k) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[a] > row[b]; });
  order.resize(static_cast<size_t>(k));
  return order;
}

// A prompt's sim[a][b][ga][gb] = min over its units of the Top-k_cal mass ratio ([N, N, G, G], 0
// where a > b); units: every layer of every unit of the prompt.
inline std::vector<double> prompt_similarity(const std::vector<ReferenceUnit>& units, int32_t num_layers,
                                             int32_t num_kv_heads, int64_t k_cal) {
  const int32_t N = num_layers, G = num_kv_heads;
  std::map<int64_t, std::vector<const ReferenceUnit*>> by_unit;  // unit -> [layer]
  for (const ReferenceUnit& u : units) {
    auto& layers = by_unit[u.id];
    layers.resize(static_cast<size_t>(N), nullptr);
    layers[static_cast<size_t>(u.layer)] = &u;
  }
  std::vector<double> sim(static_cast<size_t>(N) * N * G * G, std::numeric_limits<double>::infinity());
  for (const auto& [id, layers] : by_unit) {
    const int64_t n = layers[0]->num_candidates;
    const int64_t k = std::min(k_cal, n);
    for (int32_t b = 0; b < N; ++b) {
      for (int32_t gb = 0; gb < G; ++gb) {
        const double* row = layers[static_cast<size_t>(b)]->scores.data() + static_cast<size_t>(gb) * n;
        const double local = layers[static_cast<size_t>(b)]->local[static_cast<size_t>(gb)];
        const auto mass = [&](const std::vector<int64_t>& set) {
          double m = local;
          for (int64_t j : set) m += row[j];
          return m;
        };
        const double denominator = mass(reference_topk(row, n, k));
        for (int32_t a = 0; a <= b; ++a) {
          for (int32_t ga = 0; ga < G; ++ga) {
            const double* anchor_row = layers[static_cast<size_t>(a)]->scores.data() + static_cast<size_t>(ga) * n;
            const double ratio = mass(reference_topk(anchor_row, n, k)) / denominator;
            double& slot = sim[((static_cast<size_t>(a) * N + b) * G + ga) * G + gb];
            slot = std::min(slot, ratio);
          }
        }
      }
    }
  }
  for (int32_t a = 0; a < N; ++a)
    for (int32_t b = 0; b < a; ++b)
      for (int32_t i = 0; i < G * G; ++i) sim[(static_cast<size_t>(a) * N + b) * G * G + i] = 0.0;
  return sim;
}

// w contribution of one observation: Σ over its tokens of 1 − cos(x, x + attn), fp64.
// x, attn: [tokens, hidden].
inline double reference_importance_sum(const std::vector<float>& x, const std::vector<float>& attn, int64_t hidden) {
  double sum = 0.0;
  for (size_t t = 0; t < x.size() / static_cast<size_t>(hidden); ++t) {
    double xx = 0.0, yy = 0.0, xy = 0.0;
    for (int64_t c = 0; c < hidden; ++c) {
      const double xv = x[t * hidden + c];
      const double yv = xv + attn[t * hidden + c];
      xx += xv * xv;
      yy += yv * yv;
      xy += xv * yv;
    }
    sum += 1.0 - xy / std::sqrt(xx * yy);
  }
  return sum;
}

// fp64 attention of query qi, head h over the keys `keys` (softmax restricted to them): [d].
inline std::vector<double> reference_attention(const CapturedLayer& c, int32_t qi, int32_t h,
                                               const std::vector<int64_t>& keys) {
  const std::vector<double> p_full = reference_probabilities(c, qi, h);
  const int32_t d = c.head_dim;
  const int32_t g = h / (c.num_heads / c.num_kv_heads);
  double mass = 0.0;
  for (int64_t j : keys) mass += p_full[static_cast<size_t>(j)];
  std::vector<double> o(static_cast<size_t>(d), 0.0);
  for (int64_t j : keys) {
    const float* v = c.v.data() + (static_cast<size_t>(j) * c.num_kv_heads + g) * d;
    for (int32_t e = 0; e < d; ++e) o[static_cast<size_t>(e)] += p_full[static_cast<size_t>(j)] / mass * v[e];
  }
  return o;
}

}  // namespace kascade::testing
