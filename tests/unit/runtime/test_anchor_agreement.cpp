// test_anchor_agreement.cpp — the refinement's scorer (src/runtime/anchor_agreement.h) on the tiny
// random Llama of tests/data/hf/llama_tiny:
//   - compare_row against hand-computed softmaxes (match, KL, ties to the lower id);
//   - the dense reference: its targets are the dense runtime's own greedy tokens, its rows are
//     normalised log-probabilities; with a stop token (the model's config rewritten so that a token
//     of its greedy continuation is its eos) the continuation stops there and that row is the last;
//   - a candidate's score equals a recomputation from two independently made runtimes (dense, and
//     kascade with the same schedule and budget) in fp64, and differs from dense at a small budget;
//     at a saturating budget kascade scores 1 with KL ~ 0;
//   - refusals (no prompts, tokens < 1, a bad schedule, another vocabulary).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "kascade/backends.h"
#include "runtime/anchor_agreement.h"
#include "testing/harness.h"
#include "unit/runtime/agreement_fixture.h"

namespace kascade::runtime {
namespace {

using namespace testing_agreement;

std::vector<float> log_probs_of(const std::vector<double>& logits) {
  double z = 0.0;
  for (double v : logits) z += std::exp(v);
  std::vector<float> out;
  for (double v : logits) out.push_back(static_cast<float>(v - std::log(z)));
  return out;
}

TEST(AnchorAgreement, CompareRowMatchesHandComputedValues) {
  const std::vector<float> dense = log_probs_of({3.0, 2.0, 1.0});
  const std::vector<float> other = {1.0f, 2.0f, 3.0f};
  // p = softmax(3,2,1), q = softmax(1,2,3): KL(p||q) = sum p (log p - log q) = (p0 - p2) * 2.
  const double z = std::exp(3.0) + std::exp(2.0) + std::exp(1.0);
  const double p0 = std::exp(3.0) / z, p2 = std::exp(1.0) / z;
  const RowComparison c = compare_row(dense, 0, other);
  EXPECT_FALSE(c.match);
  EXPECT_NEAR(c.kl, 2.0 * (p0 - p2), 1e-6);
  const RowComparison same = compare_row(dense, 0, std::vector<float>{3.0f, 2.0f, 1.0f});
  EXPECT_TRUE(same.match);
  EXPECT_NEAR(same.kl, 0.0, 1e-6);
  EXPECT_GE(same.kl, 0.0);
  const std::vector<float> tie = {2.0f, 2.0f, 1.0f};
  EXPECT_TRUE(compare_row(dense, 0, tie).match) << "ties go to the lower id";
  EXPECT_FALSE(compare_row(dense, 1, tie).match);
}

TEST(AnchorAgreement, ReferenceTargetsAreTheDenseGreedyTokens) {
  auto rt = tiny_runtime(small_budget());
  ASSERT_NE(rt, nullptr);
  const auto prompts = tiny_prompts();
  int calls = 0;
  auto ref = build_dense_reference(*rt, prompts, {6, /*stop_at_eos=*/false}, [&] { ++calls; });
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  EXPECT_EQ(calls, 3);
  ASSERT_EQ(ref->prompts.size(), prompts.size());
  EXPECT_EQ(ref->steps(), 18);
  auto dense = tiny_runtime(small_budget());
  ASSERT_NE(dense, nullptr);
  GenerateOptions g;
  g.max_new_tokens = 6;
  g.stop_at_eos = false;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const DenseReference::Prompt& p = ref->prompts[i];
    EXPECT_EQ(p.prompt, prompts[i].tokens);
    auto gen = dense->generate({prompts[i].tokens}, g);
    ASSERT_TRUE(gen.ok());
    EXPECT_EQ(p.targets, gen->sequences[0].tokens) << "prompt " << i;
    EXPECT_EQ(p.continuation, std::vector<int32_t>(p.targets.begin(), p.targets.end() - 1));
    ASSERT_EQ(p.log_probs.size(), 6u * 512u);
    for (size_t r = 0; r < 6; ++r) {
      double sum = 0.0;
      for (size_t v = 0; v < 512; ++v) sum += std::exp(static_cast<double>(p.log_probs[r * 512 + v]));
      EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
    }
  }
  // One token: the prompt's last row only, no generation.
  auto one = build_dense_reference(*rt, prompts, {1, false});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->steps(), 3);
  EXPECT_TRUE(one->prompts[0].continuation.empty());
  EXPECT_EQ(one->prompts[0].targets[0], ref->prompts[0].targets[0]);
}

// The tiny model with another end-of-sequence id: config.json rewritten, the weights linked.
std::string model_with_eos(int32_t eos) {
  namespace fs = std::filesystem;
  const fs::path dir = ::kascade::testing::test_temp_path("eos_model");
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(llama_dir())) {
    if (entry.path().filename() == "config.json") continue;
    const fs::path link = dir / entry.path().filename();
    if (!fs::exists(link)) fs::create_symlink(fs::absolute(entry.path()), link);
  }
  std::ifstream in(fs::path(llama_dir()) / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["eos_token_id"] = eos;
  std::ofstream(dir / "config.json") << config.dump(2);
  return dir.string();
}

TEST(AnchorAgreement, StopAtEndOfSequenceScoresTheStopTokenLast) {
  auto rt = tiny_runtime(small_budget());
  ASSERT_NE(rt, nullptr);
  const CalibrationPrompt prompt = tiny_prompts()[0];
  GenerateOptions g;
  g.max_new_tokens = 24;
  g.stop_at_eos = false;
  auto gen = rt->generate({prompt.tokens}, g);
  ASSERT_TRUE(gen.ok());
  const std::vector<int32_t>& t = gen->sequences[0].tokens;
  // The first token from position 2 on that did not occur before it becomes the stop token.
  size_t stop = 2;
  while (stop < t.size() && std::find(t.begin(), t.begin() + static_cast<ptrdiff_t>(stop), t[stop]) !=
                                t.begin() + static_cast<ptrdiff_t>(stop))
    ++stop;
  ASSERT_LT(stop, t.size()) << "no fresh token in the greedy continuation";
  RuntimeOptions o = rt->options();
  o.model_path = model_with_eos(t[stop]);
  auto stopping = Runtime::create(o);
  ASSERT_TRUE(stopping.ok()) << stopping.status().to_string();
  auto ref = build_dense_reference(**stopping, {prompt}, {24, /*stop_at_eos=*/true});
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  const DenseReference::Prompt& p = ref->prompts[0];
  EXPECT_EQ(p.continuation, std::vector<int32_t>(t.begin(), t.begin() + static_cast<ptrdiff_t>(stop)));
  ASSERT_EQ(p.targets.size(), stop + 1) << "the row that predicts the stop token is the last one";
  EXPECT_EQ(p.targets.back(), t[stop]);
  auto through = build_dense_reference(**stopping, {prompt}, {24, /*stop_at_eos=*/false});
  ASSERT_TRUE(through.ok());
  EXPECT_EQ(through->prompts[0].targets, t);
}

TEST(AnchorAgreement, ScoreEqualsAnIndependentRecomputation) {
  auto rt = tiny_runtime(small_budget());
  ASSERT_NE(rt, nullptr);
  auto ref = build_dense_reference(*rt, tiny_prompts(), {8, false});
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  const Schedule schedule{{0, 2}, {0, 1, 1, 0, 0, 1, 1, 1}};  // layer 1 reads group 1 for group 0, ...
  int runs = 0;
  auto score = score_agreement(*rt, *ref, schedule, [&] { ++runs; });
  ASSERT_TRUE(score.ok()) << score.status().to_string();
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(rt->policy().config().name, "kascade");
  EXPECT_EQ(rt->policy().config().schedule.head_map, schedule.head_map);
  EXPECT_EQ(rt->policy().config().budget.k_min, kSmallKMin);

  auto dense = tiny_runtime(small_budget());
  AttentionOptions with_anchors = small_budget("kascade");
  with_anchors.anchors = schedule.anchors;
  auto kascade = tiny_runtime(with_anchors);
  ASSERT_NE(dense, nullptr);
  ASSERT_NE(kascade, nullptr);
  // The head map is not the identity: install it through the policy's own config.
  PolicyConfig config = kascade->policy().config();
  config.schedule = schedule;
  auto policy = make_policy(config, make_cpu_backend());
  ASSERT_TRUE(policy.ok());
  ASSERT_TRUE(kascade->set_policy(std::move(policy).value()).ok());
  const Recomputed want = recompute(*dense, *kascade, *ref);
  EXPECT_EQ(score->steps, want.steps);
  EXPECT_EQ(score->steps, 24);
  EXPECT_EQ(score->matches, want.matches);
  EXPECT_NEAR(score->mean_kl, want.mean_kl, 1e-6 + 1e-4 * want.mean_kl);
  EXPECT_GT(want.mean_kl, 1e-4) << "at this budget kascade should differ from dense";
  EXPECT_DOUBLE_EQ(score->agreement(), static_cast<double>(want.matches) / 24.0);
}

TEST(AnchorAgreement, SaturatingBudgetScoresLikeDense) {
  AttentionOptions wide = small_budget();
  wide.k_min = 4096;  // every key selected
  auto rt = tiny_runtime(wide);
  ASSERT_NE(rt, nullptr);
  auto ref = build_dense_reference(*rt, tiny_prompts(), {8, false});
  ASSERT_TRUE(ref.ok());
  auto s = identity_schedule({0, 1}, 4, 2);
  ASSERT_TRUE(s.ok());
  auto score = score_agreement(*rt, *ref, *s);
  ASSERT_TRUE(score.ok()) << score.status().to_string();
  EXPECT_EQ(score->matches, score->steps);
  EXPECT_LT(score->mean_kl, 1e-5);
}

TEST(AnchorAgreement, Refusals) {
  auto rt = tiny_runtime(small_budget());
  ASSERT_NE(rt, nullptr);
  EXPECT_FALSE(build_dense_reference(*rt, {}, {8, false}).ok());
  EXPECT_FALSE(build_dense_reference(*rt, tiny_prompts(), {0, false}).ok());
  auto ref = build_dense_reference(*rt, {tiny_prompts()[0]}, {2, false});
  ASSERT_TRUE(ref.ok());
  const Schedule no_zero{{1, 2}, std::vector<int32_t>(8, 0)};
  EXPECT_FALSE(score_agreement(*rt, *ref, no_zero).ok());
  DenseReference other = *ref;
  other.vocab = 1000;
  auto s = identity_schedule({0, 2}, 4, 2);
  ASSERT_TRUE(s.ok());
  auto refused = score_agreement(*rt, other, *s);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("vocabulary"), std::string::npos) << refused.status().message();
  EXPECT_FALSE(score_agreement(*rt, DenseReference{}, *s).ok());
}

}  // namespace
}  // namespace kascade::runtime
