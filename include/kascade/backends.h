// kascade/backends.h — the two attention backends (kascade/backend.h) a program makes for itself:
// an engine that owns its paged KV cache runs the policies of kascade/policy.h (make_policy) or the
// ops directly over one of these, layer by layer, without the runtime of kascade/runtime.h.
//
//   std::shared_ptr<AttentionBackend> cpu = kascade::make_cpu_backend();          // host memory
//   kascade::CudaBackendOptions options;                                          // device memory
//   options.max_batch = 8;
//   options.max_seq_len = 131072;
//   Result<std::shared_ptr<AttentionBackend>> gpu = kascade::make_cuda_backend(options);
//   auto policy = kascade::make_policy(config, *gpu);   // then begin_forward / attention per layer
//
// The CUDA backend's pointers are device pointers (kascade/attention.h views); it runs every op on
// `stream` and allocates nothing after the first call of each op variant (plans sized by max_batch and
// max_seq_len). A build without the CUDA backend refuses make_cuda_backend with kUnsupported naming the
// build option (cuda_runtime_built() in kascade/runtime.h says which build this is).
// Implementation: src/policy/cpu_backend.cpp, src/cuda/backend/cuda_backend.cpp (CUDA builds),
// src/runtime/cuda_backend_absent.cpp (builds without CUDA). Tested by tests/unit/policy/ (CPU
// backend), tests/cuda/test_backend_*.cpp (CUDA backend), tests/unit/runtime/test_backends.cpp (the
// refusals) and the installed examples (tests/scripts/test_install.sh).
#pragma once

#include <cstdint>
#include <memory>

#include "kascade/backend.h"
#include "kascade/budget.h"
#include "kascade/status.h"

namespace kascade {

// ---- CPU ----

enum class CpuKernels : uint8_t {
  kFast = 0,       // blocked, GEMM-shaped tiles on OpenMP threads (src/policy/cpu_fast_*.cpp)
  kReference = 1,  // src/ref: simple loops, the tests' oracle
};

struct CpuBackendOptions {
  CpuKernels kernels = CpuKernels::kFast;
};

std::shared_ptr<AttentionBackend> make_cpu_backend(CpuBackendOptions options = {});

// ---- CUDA ----

struct CudaBackendOptions {
  int32_t device = 0;             // CUDA device ordinal the backend runs on
  void* stream = nullptr;         // a cudaStream_t (kept opaque here so this header needs no CUDA):
                                  // every op runs on it; null: the legacy default stream
  int32_t max_batch = 1;          // most sequences one call may carry
  int32_t max_seq_len = 0;        // longest kv_len any call may see; block tables must cover it
  Budget budget;                  // the policies' Top-k budget: tunes the split of sparse passes
                                  // (speed only; ops honour whatever k they are given)
  bool check_errors_every_op = false;  // wait after each op and report device error bits
  bool programmatic_launch = false;    // decode-kernel passes launch with programmatic dependent launch, so
                                       // each may start while the stream's previous kernel runs (sm_90+:
                                       // cuda/common/programmatic_launch.cuh; refused below sm_90)
};

// Checks the options (device >= 0, 1 <= max_batch <= 65535, 1 <= max_seq_len <= 2^30, a valid budget),
// selects the device and makes the backend. Errors: InvalidArgument naming the option;
// kUnsupported when no CUDA device is usable, or in a build without the CUDA backend.
Result<std::shared_ptr<AttentionBackend>> make_cuda_backend(const CudaBackendOptions& options);

}  // namespace kascade
