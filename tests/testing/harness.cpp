// tests/testing/harness.cpp — implementation of the shared test helpers (harness.h).
#include "testing/harness.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

#include <unistd.h>

namespace kascade::testing {

std::filesystem::path test_temp_path(const std::string& name) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string stem = "kascade_";
  stem += info ? std::string(info->test_suite_name()) + "_" + info->name() : "no-test";
  stem += "_" + std::to_string(::getpid()) + "_" + name;
  std::replace(stem.begin(), stem.end(), '/', '_');  // parameterised suites and names: "Shapes/Suite", "Case/0"
  return std::filesystem::temp_directory_path() / stem;
}

uint64_t seed_from_test_name(uint64_t salt) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "no-test";
  uint64_t h = 1469598103934665603ull;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  h ^= salt + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

std::mt19937_64 rng_for_test(uint64_t salt) { return std::mt19937_64(seed_from_test_name(salt)); }

std::vector<float> random_floats(std::mt19937_64& rng, size_t n, float lo, float hi, DType dtype) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (auto& x : out) x = round_to_dtype(dist(rng), dtype);
  return out;
}

std::vector<uint8_t> pack_as(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> out(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) store_from_float(out.data(), dtype, static_cast<int64_t>(i), values[i]);
  return out;
}

CompareOptions tolerance_for(DType dtype) {
  const double eps = std::max(8.0 * dtype_epsilon(dtype), 1e-6);
  return CompareOptions{eps, eps};
}

namespace {

std::string format_index(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t extent = std::max<int64_t>(shape[d], 1);
    idx[d] = flat % extent;
    flat /= extent;
  }
  std::ostringstream os;
  os << "(";
  for (size_t d = 0; d < idx.size(); ++d) os << (d ? ", " : "") << idx[d];
  os << ")";
  return os.str();
}

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// Returns an empty string when the non-finite positions of a and b agree.
template <typename A, typename B>
std::string nonfinite_mismatch(std::span<const A> a, std::span<const B> b, const std::vector<int64_t>& shape) {
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a[i]);
    const double y = static_cast<double>(b[i]);
    const bool x_nan = std::isnan(x), y_nan = std::isnan(y);
    const bool x_inf = std::isinf(x), y_inf = std::isinf(y);
    if (x_nan != y_nan || x_inf != y_inf || (x_inf && y_inf && (x > 0) != (y > 0))) {
      std::ostringstream os;
      os << "non-finite mismatch at " << format_index(static_cast<int64_t>(i), shape) << ": got " << x
         << ", expected " << y;
      return os.str();
    }
  }
  return {};
}

}  // namespace

::testing::AssertionResult all_close(std::span<const float> got, std::span<const float> ref,
                                     const std::vector<int64_t>& shape, CompareOptions options) {
  if (got.size() != ref.size() || static_cast<int64_t>(got.size()) != shape_numel(shape)) {
    return ::testing::AssertionFailure() << "size mismatch: got " << got.size() << ", expected " << ref.size()
                                         << ", shape holds " << shape_numel(shape);
  }
  if (auto msg = nonfinite_mismatch(got, ref, shape); !msg.empty()) return ::testing::AssertionFailure() << msg;
  int64_t bad = 0, worst = -1;
  double worst_excess = 0.0, max_err = 0.0, err2 = 0.0, ref2 = 0.0, dot = 0.0, got2 = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(ref[i])) continue;
    const double g = got[i], r = ref[i], e = std::fabs(g - r);
    const double allowed = options.atol + options.rtol * std::fabs(r);
    max_err = std::max(max_err, e);
    err2 += e * e;
    ref2 += r * r;
    got2 += g * g;
    dot += g * r;
    if (e > allowed) {
      ++bad;
      if (e - allowed > worst_excess || worst < 0) {
        worst_excess = e - allowed;
        worst = static_cast<int64_t>(i);
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  const double nmse = ref2 > 0 ? err2 / ref2 : err2;
  const double cosine = (ref2 > 0 && got2 > 0) ? dot / std::sqrt(ref2 * got2) : 0.0;
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements exceed atol " << options.atol << " + rtol "
         << options.rtol << "·|ref|; worst at " << format_index(worst, shape) << ": got " << got[worst]
         << ", expected " << ref[worst] << " (max |err| " << max_err << ", NMSE " << nmse << ", cosine " << cosine
         << ")";
}

::testing::AssertionResult within_naive_error(std::span<const float> got, std::span<const float> naive,
                                              std::span<const double> ref64,
                                              const std::vector<int64_t>& shape, double atol) {
  if (got.size() != ref64.size() || naive.size() != ref64.size() ||
      static_cast<int64_t>(got.size()) != shape_numel(shape)) {
    return ::testing::AssertionFailure() << "size mismatch: got " << got.size() << ", naive " << naive.size()
                                         << ", ref64 " << ref64.size();
  }
  if (auto msg = nonfinite_mismatch(got, ref64, shape); !msg.empty()) return ::testing::AssertionFailure() << msg;
  double got_err = 0.0, naive_err = 0.0;
  int64_t worst = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(ref64[i])) continue;
    const double e = std::fabs(static_cast<double>(got[i]) - ref64[i]);
    if (e > got_err || worst < 0) {
      got_err = e;
      worst = static_cast<int64_t>(i);
    }
    naive_err = std::max(naive_err, std::fabs(static_cast<double>(naive[i]) - ref64[i]));
  }
  const double allowed = 2.0 * naive_err + atol;
  if (got_err <= allowed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |err| " << got_err << " exceeds 2 x naive error " << naive_err
                                       << " + atol " << atol << "; worst at " << format_index(worst, shape)
                                       << ": got " << got[worst] << ", fp64 reference " << ref64[worst];
}

::testing::AssertionResult topk_sets_equivalent(std::span<const int32_t> got, std::span<const int32_t> expected,
                                                std::span<const float> scores, double eps_rel) {
  const size_t k = expected.size();
  if (got.size() != k) return ::testing::AssertionFailure() << "got " << got.size() << " indices, expected " << k;
  std::unordered_set<int32_t> got_set, exp_set;
  for (int32_t i : got) {
    if (i < 0 || static_cast<size_t>(i) >= scores.size())
      return ::testing::AssertionFailure() << "index " << i << " outside [0, " << scores.size() << ")";
    if (!got_set.insert(i).second) return ::testing::AssertionFailure() << "duplicate index " << i;
  }
  for (int32_t i : expected) exp_set.insert(i);
  if (k == 0) return ::testing::AssertionSuccess();
  std::vector<float> sorted(scores.begin(), scores.end());
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<int64_t>(k - 1), sorted.end(), std::greater<float>());
  const double kth = sorted[k - 1];
  const double band = eps_rel * std::fabs(kth);
  for (int32_t i : got) {
    if (exp_set.count(i)) continue;
    if (std::fabs(scores[i] - kth) > band)
      return ::testing::AssertionFailure() << "index " << i << " (score " << scores[i]
                                           << ") selected but not expected, and not tied with the k-th score " << kth;
  }
  for (int32_t i : expected) {
    if (got_set.count(i)) continue;
    if (std::fabs(scores[i] - kth) > band)
      return ::testing::AssertionFailure() << "index " << i << " (score " << scores[i]
                                           << ") expected but missing, and not tied with the k-th score " << kth;
  }
  return ::testing::AssertionSuccess();
}

int64_t count_nan(std::span<const float> values) {
  return std::count_if(values.begin(), values.end(), [](float x) { return std::isnan(x); });
}

}  // namespace kascade::testing
