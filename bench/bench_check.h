// bench/bench_check.h — the benchmarks' error exits: BENCH_CHECK(cuda call) and BENCH_OK(Status
// expression) print the failing expression with its file, line and error text, then exit(1). A
// benchmark has no caller to return an error to, and a number measured after a failed call would be
// meaningless. Used by kascade_bench_decode and kascade_bench_prefill (exercised by every run).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include "kascade/status.h"

#define BENCH_CHECK(expr)                                                                        \
  do {                                                                                           \
    const cudaError_t e_ = (expr);                                                               \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

#define BENCH_OK(expr)                                                                            \
  do {                                                                                            \
    const ::kascade::Status s_ = (expr);                                                          \
    if (!s_.ok()) {                                                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, s_.to_string().c_str()); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)
