// bench/cpu_runtime/gemm_roof.cpp — the GEMM ceiling of this machine for the CPU runtime benchmark:
// cblas_sgemm (OpenBLAS, the library the runtime links) GFLOP/s for y = x · Wᵀ at the shapes the
// forward pass runs (M tokens × K in-features → N out-features), median of repeated runs after a
// warm-up. Built and run by bench/cpu_runtime/run.sh; prints one JSON object per shape.
//   g++ -O2 -std=c++20 gemm_roof.cpp -lopenblas -o gemm_roof && ./gemm_roof M,N,K [M,N,K ...]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gemm_roof M,N,K [M,N,K ...]\n");
    return 2;
  }
  for (int a = 1; a < argc; ++a) {
    long m = 0, n = 0, k = 0;
    if (std::sscanf(argv[a], "%ld,%ld,%ld", &m, &n, &k) != 3 || m <= 0 || n <= 0 || k <= 0) {
      std::fprintf(stderr, "gemm_roof: bad shape '%s' (expected M,N,K)\n", argv[a]);
      return 2;
    }
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(m * k), w(n * k), y(m * n);
    for (auto& v : x) v = dist(rng);
    for (auto& v : w) v = dist(rng);
    const double flops = 2.0 * m * n * k;
    const int reps = std::max(5, static_cast<int>(std::min(200.0, 2e10 / flops)));
    std::vector<double> times;
    for (int r = 0; r < reps + 2; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x.data(), k, w.data(), k, 0.0f, y.data(), n);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 2) times.push_back(s);  // two warm-up runs
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    std::printf("{\"m\": %ld, \"n\": %ld, \"k\": %ld, \"reps\": %d, \"median_s\": %.6g, \"gflops\": %.2f}\n", m, n, k,
                reps, median, flops / median / 1e9);
  }
  return 0;
}
