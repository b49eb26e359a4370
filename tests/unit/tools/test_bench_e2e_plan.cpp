// tests/unit/tools/test_bench_e2e_plan.cpp — the host-side half of `kascade bench e2e`
// (tools/bench_e2e_plan.h): the flag grammar and its refusals, the cell matrix of the issue's
// defaults, the built-in Llama-3.1-8B config (loaded through the real config loader), the memory
// plan of a cell against sizes computed by hand from the model's shapes, and the ratios / table /
// JSON of made-up results.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "bench_e2e_plan.h"
#include "kascade/model_config.h"
#include "testing/harness.h"

namespace kascade::tools {
namespace {

TEST(BenchE2ePlan, TokenCountsTakeKAndMSuffixes) {
  EXPECT_EQ(*parse_token_count("32k"), 32768);
  EXPECT_EQ(*parse_token_count("128K"), 131072);
  EXPECT_EQ(*parse_token_count("1m"), 1048576);
  EXPECT_EQ(*parse_token_count(" 4097 "), 4097);
  for (const char* bad : {"", "k", "12x", "-5", "0", "1.5k", "2000m"})
    EXPECT_FALSE(parse_token_count(bad).ok()) << bad;
  auto lengths = parse_token_counts("32k,128k");
  ASSERT_TRUE(lengths.ok());
  EXPECT_EQ(*lengths, (std::vector<int64_t>{32768, 131072}));
  EXPECT_FALSE(parse_token_counts("32k,").ok());
}

TEST(BenchE2ePlan, BatchGroupsArePerLengthOrShared) {
  auto groups = parse_batch_groups("1,8/1,4", 2);
  ASSERT_TRUE(groups.ok()) << groups.status().to_string();
  EXPECT_EQ(*groups, (std::vector<std::vector<int32_t>>{{1, 8}, {1, 4}}));
  auto shared = parse_batch_groups("1,2", 3);
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ(*shared, (std::vector<std::vector<int32_t>>(3, {1, 2})));
  EXPECT_FALSE(parse_batch_groups("1/2/3", 2).ok());
  EXPECT_FALSE(parse_batch_groups("1,0", 1).ok());
  EXPECT_FALSE(parse_batch_groups("1,,2", 1).ok());
  EXPECT_FALSE(parse_batch_groups("a", 1).ok());
  EXPECT_EQ(split_list("dense, kascade,"), (std::vector<std::string>{"dense", "kascade"}));
}

TEST(BenchE2ePlan, DefaultMatrixIsTheIssuesCells) {
  const auto cells = bench_matrix({"dense", "kascade"}, {32768, 131072}, {{1, 8}, {1, 4}});
  ASSERT_EQ(cells.size(), 8u);
  EXPECT_EQ(cells[0].policy, "dense");
  EXPECT_EQ(cells[1].batch, 8);
  EXPECT_EQ(cells[1].prompt_tokens, 32768);
  EXPECT_EQ(cells[3].batch, 4);
  EXPECT_EQ(cells[3].prompt_tokens, 131072);
  EXPECT_EQ(cells[4].policy, "kascade");
}

ModelConfig llama8b() {
  const std::filesystem::path dir = testing::test_temp_path("llama8b");
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << llama31_8b_config_json();
  auto config = load_model_config(dir);
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  return config.ok() ? *config : ModelConfig{};
}

TEST(BenchE2ePlan, BuiltInConfigIsLlama31_8B) {
  const ModelConfig c = llama8b();
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_FALSE(c.tie_word_embeddings);
}

TEST(BenchE2ePlan, MemoryPlanOfTheLargestCellMatchesHandComputedSizes) {
  const ModelConfig c = llama8b();
  const BenchCell cell{"kascade", 131072, 4};
  auto plan = bench_memory_plan(c, DType::kBF16, cell, 64, 2048, 16, 131072 + 65);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  // KV: 32 layers x (K, V) x 4 sequences x ceil(131137 / 16) = 8197 pages x 16 x 8 heads x 128 x 2 B.
  const size_t kv = size_t{32} * 2 * 4 * 8197 * 16 * 8 * 128 * 2;
  EXPECT_EQ(plan->kv_cache, kv);
  EXPECT_NEAR(static_cast<double>(plan->kv_cache) / (1ull << 30), 64.03, 0.01);
  // Weights: 2 x 128256 x 4096 embeddings and LM head + 32 x (qkv 6144 x 4096, o 4096 x 4096,
  // gate_up 28672 x 4096, down 4096 x 14336) in bf16 = 8.03e9 parameters; norms and RoPE in fp32.
  const double params = 2.0 * 128256 * 4096 + 32.0 * (6144.0 * 4096 + 4096.0 * 4096 + 28672.0 * 4096 + 4096.0 * 14336);
  EXPECT_NEAR(static_cast<double>(plan->weights), 2 * params, 2 * params * 1e-4);
  // Activations of a 4 x 2048-token chunk: at least the fp32 residual stream and the gate/up output.
  EXPECT_GT(plan->activations, size_t{8192} * 4096 * 4 + size_t{8192} * 28672 * 2);
  EXPECT_LT(plan->activations, size_t{2} << 30);
  EXPECT_EQ(plan->sampler, 2 * size_t{4} * 128256 * 8 + 5 * 4 + 4 * 16);
  // The issue's budget: it fits an H200 (141 GB) with room to spare.
  EXPECT_LT(plan->total(), size_t{100} << 30);
  EXPECT_FALSE(bench_memory_plan(c, DType::kBF16, BenchCell{"dense", 0, 1}, 64, 2048, 16, 1000).ok());
}

TEST(BenchE2ePlan, RatiosTableAndJson) {
  std::vector<CellResult> results(3);
  results[0].cell = {"dense", 131072, 1};
  results[0].ttft_ms = 36000;
  results[0].decode_tokens_per_s = 40;
  results[1].cell = {"kascade", 131072, 1};
  results[1].ttft_ms = 18000;
  results[1].decode_tokens_per_s = 100;
  results[1].decode_gpu_ms_per_step = 7.3;
  results[2].cell = {"kascade", 32768, 8};  // no dense counterpart: no ratio
  results[2].ttft_ms = 1;
  const auto ratios = bench_ratios(results);
  ASSERT_EQ(ratios.size(), 1u);
  EXPECT_EQ(ratios[0].policy, "kascade");
  EXPECT_DOUBLE_EQ(ratios[0].ttft_speedup, 2.0);
  EXPECT_DOUBLE_EQ(ratios[0].decode_speedup, 2.5);
  const std::string table = format_bench_table(results, ratios);
  EXPECT_NE(table.find("128K"), std::string::npos) << table;
  EXPECT_NE(table.find("2.50"), std::string::npos) << table;
  EXPECT_NE(table.find("GPU ms/step"), std::string::npos) << table;
  EXPECT_NE(table.find("7.30"), std::string::npos) << table;
  const nlohmann::json j = bench_json(results, ratios);
  EXPECT_EQ(j["cells"].size(), 3u);
  EXPECT_EQ(j["cells"][1]["decode_gpu_ms_per_step"], 7.3);
  EXPECT_EQ(j["ratios_vs_dense"][0]["decode_throughput_speedup"], 2.5);
}

}  // namespace
}  // namespace kascade::tools
