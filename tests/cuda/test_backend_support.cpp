// tests/cuda/test_backend_support.cpp — shared helpers of the CUDA backend tests
// (test_backend_support.h).
#include "test_backend_support.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace kascade::testing {

Budget test_budget() {
  Budget budget;
  budget.rho_ppm = 100000;
  budget.k_min = 16;
  return budget;
}

Schedule rotating_schedule(int32_t num_layers, const std::vector<int32_t>& anchors, int32_t num_kv_heads) {
  Schedule s;
  s.anchors = anchors;
  for (int32_t l = 0; l < num_layers; ++l) {
    const bool anchor = std::binary_search(s.anchors.begin(), s.anchors.end(), l);
    for (int32_t g = 0; g < num_kv_heads; ++g) s.head_map.push_back(anchor ? g : (g + l) % num_kv_heads);
  }
  return s;
}

PolicyConfig backend_policy_config(const std::string& name, int32_t num_layers, const std::vector<int32_t>& anchors,
                                   int32_t num_heads, int32_t num_kv_heads, int32_t head_dim) {
  PolicyConfig config;
  config.name = name;
  config.num_layers = num_layers;
  config.num_heads = num_heads;
  config.num_kv_heads = num_kv_heads;
  config.head_dim = head_dim;
  config.budget = test_budget();
  if (name.rfind("kascade", 0) == 0) config.schedule = rotating_schedule(num_layers, anchors, num_kv_heads);
  return config;
}

std::vector<double> head_probabilities(const DecodeProblem& p, int32_t b) {
  const DecodeCase& c = p.spec();
  const int64_t n = p.kv_lens()[b];
  const int32_t group = c.num_heads / c.num_kv_heads;
  const double scale = p.scale();
  std::vector<double> probs(static_cast<size_t>(c.num_heads) * n);
  for (int32_t h = 0; h < c.num_heads; ++h) {
    double* row = probs.data() + static_cast<int64_t>(h) * n;
    const float* q = p.q_row(b, h);
    double m = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      const float* k = p.k_row(b, static_cast<int32_t>(j), h / group);
      double dot = 0.0;
      for (int32_t ch = 0; ch < c.head_dim; ++ch) dot += static_cast<double>(q[ch]) * k[ch];
      row[j] = dot * scale;
      m = std::max(m, row[j]);
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp(row[j] - m);
    for (int64_t j = 0; j < n; ++j) row[j] = std::exp(row[j] - m) / sum;
  }
  return probs;
}

std::vector<float> pooled_rows(const std::vector<double>& probs, int32_t num_heads, int64_t n, int32_t num_rows,
                               bool reduce_max) {
  const int32_t per_row = num_heads / num_rows;
  std::vector<float> pooled(static_cast<size_t>(num_rows) * n);
  for (int32_t r = 0; r < num_rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int32_t h = r * per_row; h < (r + 1) * per_row; ++h) {
        const double x = probs[static_cast<size_t>(h) * n + j];
        acc = reduce_max ? std::max(acc, x) : acc + x;
      }
      pooled[static_cast<size_t>(r) * n + j] = static_cast<float>(acc);
    }
  }
  return pooled;
}

std::vector<int32_t> row_entries(const std::vector<int32_t>& indices, const std::vector<int32_t>& lens,
                                 int32_t num_rows, int32_t k_max, int32_t b, int32_t r) {
  const int64_t row = static_cast<int64_t>(b) * num_rows + r;
  const int32_t len = std::clamp(lens[row], 0, k_max);
  return std::vector<int32_t>(indices.begin() + row * k_max, indices.begin() + row * k_max + len);
}

::testing::AssertionResult well_formed_row(const std::vector<int32_t>& indices, const std::vector<int32_t>& lens,
                                           int32_t num_rows, int32_t k_max, int32_t b, int32_t r, int64_t n) {
  const int64_t row = static_cast<int64_t>(b) * num_rows + r;
  const int32_t len = lens[row];
  if (len < 0 || len > k_max) return ::testing::AssertionFailure() << "row length " << len << " outside [0, " << k_max << "]";
  std::set<int32_t> seen;
  for (int32_t i = 0; i < len; ++i) {
    const int32_t key = indices[row * k_max + i];
    if (key < 0 || key >= n) return ::testing::AssertionFailure() << "entry " << i << " = " << key << " outside [0, " << n << ")";
    if (!seen.insert(key).second) return ::testing::AssertionFailure() << "entry " << i << " = " << key << " repeats";
  }
  for (int32_t i = len; i < k_max; ++i) {
    if (indices[row * k_max + i] != -1)
      return ::testing::AssertionFailure() << "padding entry " << i << " is " << indices[row * k_max + i];
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_set(std::vector<int32_t> got, std::vector<int32_t> want) {
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  if (got == want) return ::testing::AssertionSuccess();
  std::vector<int32_t> extra, missing;
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing));
  auto result = ::testing::AssertionFailure();
  result << "sets differ (" << got.size() << " vs " << want.size() << " keys); extra:";
  for (size_t i = 0; i < std::min<size_t>(extra.size(), 8); ++i) result << " " << extra[i];
  result << "; missing:";
  for (size_t i = 0; i < std::min<size_t>(missing.size(), 8); ++i) result << " " << missing[i];
  return result;
}

::testing::AssertionResult lessismore_rows_equivalent(const std::vector<int32_t>& got,
                                                      const std::vector<int32_t>& want,
                                                      const std::vector<double>& probs, int32_t num_heads, int64_t n,
                                                      int64_t k, int32_t sinks, double eps_rel) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "row sizes differ: " << got.size() << " vs " << want.size();
  const std::set<int32_t> got_set(got.begin(), got.end()), want_set(want.begin(), want.end());
  if (got_set.size() != got.size()) return ::testing::AssertionFailure() << "the row holds duplicates";
  const int64_t recent = (k + 3) / 4;
  for (int64_t j = 0; j < n; ++j) {
    const bool fixed = j < sinks || j >= n - recent;
    if (fixed && !got_set.count(static_cast<int32_t>(j)))
      return ::testing::AssertionFailure() << "sink / recent key " << j << " missing";
  }
  std::vector<int32_t> extra, missing;
  for (int32_t j : got) {
    if (!want_set.count(j)) extra.push_back(j);
  }
  for (int32_t j : want) {
    if (!got_set.count(j)) missing.push_back(j);
  }
  auto near_tie = [&](int32_t a, int32_t b) {
    for (int32_t h = 0; h < num_heads; ++h) {
      const double pa = probs[static_cast<size_t>(h) * n + a], pb = probs[static_cast<size_t>(h) * n + b];
      if (std::fabs(pa - pb) <= eps_rel * std::max(pa, pb)) return true;
    }
    return false;
  };
  auto partnered = [&](const std::vector<int32_t>& from, const std::vector<int32_t>& to) {
    for (int32_t a : from) {
      if (std::none_of(to.begin(), to.end(), [&](int32_t b) { return near_tie(a, b); })) return a;
    }
    return -1;
  };
  if (const int32_t lone = partnered(extra, missing); lone >= 0)
    return ::testing::AssertionFailure() << "key " << lone << " selected but not expected, with no near-tied partner";
  if (const int32_t lone = partnered(missing, extra); lone >= 0)
    return ::testing::AssertionFailure() << "key " << lone << " expected but missing, with no near-tied partner";
  return ::testing::AssertionSuccess();
}

}  // namespace kascade::testing
