// test_backends.cpp — the public backend factories of kascade/backends.h: make_cpu_backend keeps the
// kernel choice it is given; make_cuda_backend refuses bad options with InvalidArgument naming them,
// refuses a build without CUDA (naming the build option) and a machine without a device with
// kUnsupported, and makes a working "cuda" backend where a GPU is present.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kascade/backends.h"
#include "kascade/runtime.h"
#include "policy/cpu_backend.h"
#include "testing/harness.h"

namespace kascade {
namespace {

TEST(PublicBackends, CpuFactoryKeepsTheKernelChoice) {
  for (const CpuKernels kernels : {CpuKernels::kFast, CpuKernels::kReference}) {
    const std::shared_ptr<AttentionBackend> backend = make_cpu_backend(CpuBackendOptions{kernels});
    ASSERT_NE(backend, nullptr);
    EXPECT_STREQ(backend->name(), "cpu");
    const auto* cpu = dynamic_cast<const CpuBackend*>(backend.get());
    ASSERT_NE(cpu, nullptr);
    EXPECT_EQ(cpu->options().kernels, kernels);
  }
}

CudaBackendOptions cuda_options(int32_t max_batch, int32_t max_seq_len) {
  CudaBackendOptions options;
  options.max_batch = max_batch;
  options.max_seq_len = max_seq_len;
  return options;
}

TEST(PublicBackends, CudaFactoryRefusesWithoutCudaOrDeviceAndWorksWithOne) {
  const Result<std::shared_ptr<AttentionBackend>> made = make_cuda_backend(cuda_options(2, 64));
  if (!cuda_runtime_built()) {
    ASSERT_FALSE(made.ok());
    EXPECT_EQ(made.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(made.status().message().find("KASCADE_CUDA=ON"), std::string::npos) << made.status().message();
    return;
  }
  if (!made.ok()) {  // a CUDA build on a machine without a usable GPU
    EXPECT_EQ(made.status().code(), StatusCode::kUnsupported) << made.status().message();
    EXPECT_NE(made.status().message().find("no CUDA device"), std::string::npos) << made.status().message();
    return;
  }
  const std::shared_ptr<AttentionBackend>& backend = *made;
  EXPECT_STREQ(backend->name(), "cuda");
  // A round trip through device memory proves the backend is live.
  const std::vector<int32_t> host = {3, 1, 4, 1, 5, 9, 2, 6};
  Result<BackendBuffer> buffer = backend->allocate(host.size() * sizeof(int32_t));
  KC_ASSERT_OK(buffer.status());
  KC_ASSERT_OK(backend->copy_from_host(buffer->data(), host.data(), host.size() * sizeof(int32_t)));
  std::vector<int32_t> back(host.size(), -1);
  KC_ASSERT_OK(backend->copy_to_host(back.data(), buffer->data(), back.size() * sizeof(int32_t)));
  EXPECT_EQ(back, host);
}

TEST(PublicBackends, CudaFactoryNamesTheBadOption) {
  if (!cuda_runtime_built()) GTEST_SKIP() << "built without CUDA: every call is refused as unsupported first";
  struct Case {
    CudaBackendOptions options;
    const char* names;
  };
  std::vector<Case> cases(4, Case{cuda_options(1, 16), ""});
  cases[0].options.device = -1;
  cases[0].names = "device is -1";
  cases[1].options.max_batch = 0;
  cases[1].names = "max_batch is 0";
  cases[2].options.max_seq_len = 0;
  cases[2].names = "max_seq_len is 0";
  cases[3].options.budget.rho_ppm = 0;
  cases[3].names = "budget";
  for (const Case& c : cases) {
    const auto made = make_cuda_backend(c.options);
    ASSERT_FALSE(made.ok()) << c.names;
    EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument) << made.status().message();
    EXPECT_NE(made.status().message().find(c.names), std::string::npos) << made.status().message();
  }
}

}  // namespace
}  // namespace kascade
