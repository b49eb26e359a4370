// tests/unit/tools/test_runtime_flags.cpp — the runtime flags of `kascade generate`, `eval` and
// `calibrate` (tools/runtime_flags.h): parsed by CLI11 as the commands register them and turned into
// RuntimeOptions — the defaults, the CUDA switches (--no-cuda-graph, --no-pipelined-decode,
// --small-m-linear, --cuda-dtype), the budget flags, and a bad device or dtype named in the error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime_flags.h"

namespace kascade::tools {
namespace {

// Parses `args` (after the program name) with the runtime and budget flags registered.
Result<RuntimeOptions> parse(std::vector<std::string> args) {
  CLI::App app;
  RuntimeFlags flags;
  BudgetFlags budget;
  add_runtime_flags(app, flags);
  add_budget_flags(app, budget);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
  app.parse(reversed);
  return to_runtime_options(flags, &budget);
}

TEST(RuntimeFlags, DefaultsMatchRuntimeOptions) {
  auto o = parse({"-m", "models/kascade-tiny"});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  const RuntimeOptions defaults;
  EXPECT_EQ(o->model_path, "models/kascade-tiny");
  EXPECT_EQ(o->device, Device::kCpu);
  EXPECT_EQ(o->cuda_graph, defaults.cuda_graph);
  EXPECT_EQ(o->pipelined_decode, defaults.pipelined_decode);
  EXPECT_EQ(o->small_m_linear, defaults.small_m_linear);
  EXPECT_FALSE(o->small_m_linear) << "opt-in: slower than cuBLAS in the runtime (docs/perf.md)";
  EXPECT_EQ(o->programmatic_launch, defaults.programmatic_launch);
  EXPECT_FALSE(o->programmatic_launch) << "opt-in: no gain with cuBLAS's GEMMs (docs/perf.md)";
  EXPECT_EQ(o->cuda_dtype, DType::kBF16);
}

TEST(RuntimeFlags, CudaSwitchesAndBudget) {
  auto o = parse({"-m", "m", "--device", "cuda", "--cuda-dtype", "f16", "--no-cuda-graph", "--no-pipelined-decode",
                  "--small-m-linear", "--pdl", "--topk-fraction", "0.05", "--k-min", "64", "--tile", "16"});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->device, Device::kCuda);
  EXPECT_EQ(o->cuda_dtype, DType::kF16);
  EXPECT_FALSE(o->cuda_graph);
  EXPECT_FALSE(o->pipelined_decode);
  EXPECT_TRUE(o->small_m_linear);
  EXPECT_TRUE(o->programmatic_launch);
  EXPECT_DOUBLE_EQ(o->attention.topk_fraction, 0.05);
  EXPECT_EQ(o->attention.k_min, 64);
  EXPECT_EQ(o->attention.tile_size, 16);
}

TEST(RuntimeFlags, BadDeviceAndDtypeAreNamed) {
  auto device = parse({"-m", "m", "--device", "tpu"});
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.status().message().find("tpu"), std::string::npos) << device.status().message();
  auto dtype = parse({"-m", "m", "--cuda-dtype", "int8"});
  ASSERT_FALSE(dtype.ok());
  EXPECT_NE(dtype.status().message().find("int8"), std::string::npos) << dtype.status().message();
}

}  // namespace
}  // namespace kascade::tools
