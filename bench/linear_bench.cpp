// bench/linear_bench.cpp — kascade_bench_linear: the linear layers of a decode step (issue 7) through
// cuBLAS (CublasContext::linear, what the runtime uses by default) and through small_m_linear
// (RuntimeOptions::small_m_linear), side by side in one run, against the read roof of the same run.
// Llama-3.1-8B shapes (weights [n, k]): qkv (6144, 4096), o_proj (4096, 4096; fp32 out, accumulated
// into the residual as in the runtime), gate_up (28672, 4096), down (14336 → 4096; fp32, accumulated),
// lm_head (128256, 4096; fp32 out), for m = --rows rows (the decode batch). Each op is captured in a
// CUDA graph and its replays timed after an L2 flush (bench_timer.h; default read: a decode step's
// linear layers follow other weight streams, which leave clean lines). Both outputs are compared
// (max |Δ| / max |y|), so a wrong kernel cannot report a good time unnoticed.
//   kascade_bench_linear [--rows 1,2,4,8] [--dtype bf16|f16] [--reps 20] [--flush write|read|none]
// Prints a table: op, m, weight MB, cuBLAS µs (GB/s, % of the roof), small-m µs (GB/s, % of the roof),
// small-m / cuBLAS time, the outputs' deviation.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "bench_check.h"
#include "bench_device.h"
#include "bench_timer.h"
#include "cuda/ops/gemm.h"
#include "cuda/ops/small_m_linear.h"
#include "kascade/dtype.h"

namespace kascade::bench {
namespace {

struct Options {
  std::vector<int64_t> rows = {1, 2, 4, 8};
  DType dtype = DType::kBF16;
  int reps = 20;
  std::string flush = "read";
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--rows") {
      o.rows.clear();
      std::stringstream ss(value);
      std::string item;
      while (std::getline(ss, item, ',')) o.rows.push_back(std::stoll(item));
    } else if (key == "--dtype") {
      if (value != "bf16" && value != "f16") {
        std::fprintf(stderr, "--dtype is '%s'; expected bf16 or f16\n", value.c_str());
        std::exit(2);
      }
      o.dtype = value == "bf16" ? DType::kBF16 : DType::kF16;
    } else if (key == "--reps") {
      o.reps = std::stoi(value);
    } else if (key == "--flush") {
      if (value != "write" && value != "read" && value != "none") {
        std::fprintf(stderr, "--flush is '%s'; expected write, read or none\n", value.c_str());
        std::exit(2);
      }
      o.flush = value;
    } else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      std::exit(2);
    }
  }
  for (int64_t m : o.rows) {
    if (m < 1 || m > cuda::kSmallMLinearMaxRows) {
      std::fprintf(stderr, "--rows holds %lld; small_m_linear takes 1..%lld\n", static_cast<long long>(m),
                   static_cast<long long>(cuda::kSmallMLinearMaxRows));
      std::exit(2);
    }
  }
  return o;
}

struct LinearOp {
  const char* name;
  int64_t n, k;
  bool fp32_accumulate;  // fp32 output added into y (the residual), else the activation dtype
  bool fp32_out;         // fp32 output without accumulation (the logits)
};

// max |a − b| / max |b| over two device vectors of `count` values of `dtype`.
double deviation(const void* a_d, const void* b_d, size_t count, DType dtype) {
  const size_t bytes = count * static_cast<size_t>(dtype_size(dtype));
  std::vector<uint8_t> a(bytes), b(bytes);
  BENCH_CHECK(cudaMemcpy(a.data(), a_d, bytes, cudaMemcpyDeviceToHost));
  BENCH_CHECK(cudaMemcpy(b.data(), b_d, bytes, cudaMemcpyDeviceToHost));
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < count; ++i) {
    const double va = load_as_float(a.data(), dtype, static_cast<int64_t>(i));
    const double vb = load_as_float(b.data(), dtype, static_cast<int64_t>(i));
    worst = std::max(worst, std::fabs(va - vb));
    scale = std::max(scale, std::fabs(vb));
  }
  return scale > 0.0 ? worst / scale : worst;
}

int run(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  Timer timer;
  timer.flush_mode = opt.flush;
  auto blas = cuda::CublasContext::create(timer.stream);
  BENCH_OK(blas.status());
  const double roof = measure_read_roof(timer, 10);
  std::printf("Device: %s. Read roof: %.0f GB/s. L2 flush before each timed replay: %s. %s, median of %d.\n\n",
              prop.name, roof, opt.flush.c_str(), dtype_name(opt.dtype), opt.reps);
  std::printf("| op | m | weights MB | cuBLAS µs (GB/s, %% roof) | small-m µs (GB/s, %% roof) | small-m / cuBLAS | "
              "max |Δ| / max |y| |\n|---|---|---|---|---|---|---|\n");
  const LinearOp ops[] = {{"qkv", 6144, 4096, false, false},
                          {"o_proj", 4096, 4096, true, false},
                          {"gate_up", 28672, 4096, false, false},
                          {"down", 4096, 14336, true, false},
                          {"lm_head", 128256, 4096, false, true}};
  const bool bf16 = opt.dtype == DType::kBF16;
  for (const LinearOp& op : ops) {
    const size_t weight_bytes = static_cast<size_t>(op.n * op.k) * 2;
    Device w(weight_bytes);
    BENCH_CHECK(fill_random_16bit(w.p, static_cast<size_t>(op.n * op.k), bf16, 11, 0.05f, timer.stream));
    for (int64_t m : opt.rows) {
      Device x(static_cast<size_t>(m * op.k) * 2);
      BENCH_CHECK(fill_random_16bit(x.p, static_cast<size_t>(m * op.k), bf16, 12 + m, 1.0f, timer.stream));
      const DType out = op.fp32_accumulate || op.fp32_out ? DType::kF32 : opt.dtype;
      const size_t y_count = static_cast<size_t>(m * op.n);
      Device y_blas(y_count * 4), y_small(y_count * 4);
      const auto blas_call = [&](cudaStream_t) {
        return (*blas)->linear(x.p, w.p, y_blas.p, m, op.n, op.k, opt.dtype, out, op.fp32_accumulate);
      };
      const auto small_call = [&](cudaStream_t st) {
        return cuda::small_m_linear(x.p, w.p, y_small.p, m, op.n, op.k, opt.dtype, out, op.fp32_accumulate, st);
      };
      // The outputs compared after one call each from zero (accumulation then adds to 0).
      BENCH_CHECK(cudaMemsetAsync(y_blas.p, 0, y_count * 4, timer.stream));
      BENCH_CHECK(cudaMemsetAsync(y_small.p, 0, y_count * 4, timer.stream));
      BENCH_OK(blas_call(timer.stream));
      BENCH_OK(small_call(timer.stream));
      BENCH_CHECK(cudaStreamSynchronize(timer.stream));
      const double dev = deviation(y_small.p, y_blas.p, y_count, out);
      cudaGraphExec_t blas_exec = timer.capture(blas_call);
      cudaGraphExec_t small_exec = timer.capture(small_call);
      const double blas_us = timer.time_graph(blas_exec, opt.reps).first;
      const double small_us = timer.time_graph(small_exec, opt.reps).first;
      BENCH_CHECK(cudaGraphExecDestroy(blas_exec));
      BENCH_CHECK(cudaGraphExecDestroy(small_exec));
      const auto rate = [&](double us) { return static_cast<double>(weight_bytes) / (us * 1e-6) / 1e9; };
      std::printf("| %s | %lld | %.1f | %.2f (%.0f, %.0f %%) | %.2f (%.0f, %.0f %%) | %.3f | %.1e |\n", op.name,
                  static_cast<long long>(m), weight_bytes / 1e6, blas_us, rate(blas_us), 100.0 * rate(blas_us) / roof,
                  small_us, rate(small_us), 100.0 * rate(small_us) / roof, small_us / blas_us, dev);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace kascade::bench

int main(int argc, char** argv) { return kascade::bench::run(argc, argv); }
