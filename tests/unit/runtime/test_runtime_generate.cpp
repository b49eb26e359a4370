// test_runtime_generate.cpp — Runtime::generate (include/kascade/runtime.h) on the tiny Qwen3
// checkpoint of tests/data/hf/ and on dummy weights:
//   - greedy tokens are the argmax of teacher-forced logits over the generated text (the generate
//     loop feeds back what it samples, at the right positions);
//   - a varlen batch generates what each prompt generates alone; chunk sizes do not change tokens;
//   - streaming callbacks see every token in order, prefill progress reaches the total;
//   - stop tokens, max_new_tokens = 0, and the context limit (refused prompt, stop at the limit);
//   - seeded sampling reproduces, another seed differs;
//   - pipelined decode (RuntimeOptions::pipelined_decode) gives the step-by-step loop's tokens, finish
//     reasons and step / token counts, with stop tokens hit at different steps, different
//     max_new_tokens per call, the context limit and seeded sampling;
//   - dummy weights run for a config.json without safetensors, deterministically per seed;
//   - the layer observer sees every layer of every call (and its errors stop the call);
//   - set_policy accepts a policy of the model's shape only;
//   - bad inputs are refused with clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "kascade/runtime.h"
#include "policy/cpu_backend.h"
#include "testing/harness.h"
#include "unit/model/test_forward_hf_fixture.h"

namespace kascade {
namespace {

std::string qwen3_dir() { return std::string(KASCADE_TEST_DATA_DIR) + "/hf/qwen3_tiny"; }

std::unique_ptr<Runtime> make_runtime(RuntimeOptions o) {
  if (o.model_path.empty()) o.model_path = qwen3_dir();
  auto rt = Runtime::create(o);
  EXPECT_TRUE(rt.ok()) << rt.status().to_string();
  return rt.ok() ? std::move(rt).value() : nullptr;
}

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 29 + salt * 7 + 5) % 512));
  return p;
}

GenerateOptions greedy(int32_t max_new) {
  GenerateOptions g;
  g.max_new_tokens = max_new;
  g.stop_at_eos = false;
  return g;
}

TEST(RuntimeGenerate, GreedyTokensAreTheArgmaxOfTeacherForcedLogits) {
  auto rt = make_runtime({});
  ASSERT_NE(rt, nullptr);
  const auto prompt = prompt_of(45, 1);
  auto gen = rt->generate({prompt}, greedy(12));
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  const auto& tokens = gen->sequences[0].tokens;
  ASSERT_EQ(tokens.size(), 12u);
  EXPECT_EQ(gen->sequences[0].finish, FinishReason::kLength);
  TeacherForcedInput in{prompt, std::vector<int32_t>(tokens.begin(), tokens.end() - 1), 44};
  auto tf = rt->teacher_forced({in});
  ASSERT_TRUE(tf.ok()) << tf.status().to_string();
  ASSERT_EQ((*tf)[0].rows, 12);
  for (int r = 0; r < 12; ++r) {
    const float* row = (*tf)[0].logits.data() + r * 512;
    EXPECT_EQ(std::max_element(row, row + 512) - row, tokens[r]) << "step " << r;
  }
  EXPECT_EQ(gen->stats.prefill_tokens, 45);
  EXPECT_EQ(gen->stats.decode_steps, 11);
  EXPECT_EQ(gen->stats.decode_tokens, 11);
}

TEST(RuntimeGenerate, BatchAndChunkingDoNotChangeTokens) {
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(70, 2), prompt_of(9, 3), prompt_of(33, 4)};
  RuntimeOptions one_shot;
  one_shot.chunk_size = 512;
  auto rt = make_runtime(one_shot);
  ASSERT_NE(rt, nullptr);
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    auto g = rt->generate({p}, greedy(8));
    ASSERT_TRUE(g.ok());
    alone.push_back(g->sequences[0].tokens);
  }
  for (int32_t chunk : {512, 32, 7}) {
    RuntimeOptions o;
    o.chunk_size = chunk;
    auto r = make_runtime(o);
    ASSERT_NE(r, nullptr);
    std::vector<std::pair<int32_t, int32_t>> streamed;
    std::vector<PrefillProgress> progress;
    GenerateCallbacks cb;
    cb.on_token = [&](int32_t s, int32_t t) { streamed.emplace_back(s, t); };
    cb.on_prefill_progress = [&](const PrefillProgress& p) { progress.push_back(p); };
    auto g = r->generate(prompts, greedy(8), cb);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    for (size_t s = 0; s < prompts.size(); ++s) EXPECT_EQ(g->sequences[s].tokens, alone[s]) << "chunk " << chunk;
    // Streaming: every token once, in order per sequence.
    std::vector<std::vector<int32_t>> from_stream(prompts.size());
    for (auto [s, t] : streamed) from_stream[s].push_back(t);
    for (size_t s = 0; s < prompts.size(); ++s) EXPECT_EQ(from_stream[s], alone[s]);
    // Progress: one report per prefill call, monotone, ending at the total.
    ASSERT_FALSE(progress.empty());
    EXPECT_EQ(static_cast<int64_t>(progress.size()), (70 + chunk - 1) / chunk);
    for (size_t i = 1; i < progress.size(); ++i) EXPECT_GT(progress[i].done_tokens, progress[i - 1].done_tokens);
    EXPECT_EQ(progress.back().done_tokens, 112);
    EXPECT_EQ(progress.back().total_tokens, 112);
    EXPECT_EQ(g->stats.decode_steps, 7);
    EXPECT_EQ(g->stats.decode_tokens, 21);
  }
}

TEST(RuntimeGenerate, StopTokensZeroTokensAndContextLimit) {
  RuntimeOptions o;
  o.max_context = 50;
  auto rt = make_runtime(o);
  ASSERT_NE(rt, nullptr);
  const auto prompt = prompt_of(40, 5);
  auto free_run = rt->generate({prompt}, greedy(30));
  ASSERT_TRUE(free_run.ok());
  // Context: prompt 40 + generated may reach 50 tokens.
  EXPECT_EQ(free_run->sequences[0].tokens.size(), 10u);
  EXPECT_EQ(free_run->sequences[0].finish, FinishReason::kContext);
  // Stop at the third generated token (not included).
  GenerateOptions stop = greedy(30);
  stop.stop_tokens = {free_run->sequences[0].tokens[2]};
  auto stopped = rt->generate({prompt}, stop);
  ASSERT_TRUE(stopped.ok());
  const auto& first = free_run->sequences[0].tokens;
  const auto it = std::find(first.begin(), first.end(), first[2]);
  EXPECT_EQ(stopped->sequences[0].tokens, std::vector<int32_t>(first.begin(), it));
  EXPECT_EQ(stopped->sequences[0].finish, FinishReason::kStopToken);
  // No new tokens: prefill only.
  auto none = rt->generate({prompt}, greedy(0));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->sequences[0].tokens.empty());
  EXPECT_EQ(none->stats.decode_steps, 0);
  // A prompt of exactly the limit is accepted and generates nothing; one token more is refused.
  auto full = rt->generate({prompt_of(50, 6)}, greedy(5));
  ASSERT_TRUE(full.ok());
  EXPECT_TRUE(full->sequences[0].tokens.empty());
  EXPECT_EQ(full->sequences[0].finish, FinishReason::kContext);
  auto too_long = rt->generate({prompt_of(40, 7), prompt_of(51, 6)}, greedy(5));
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("prompt 1 has 51 tokens, more than the maximum context of 50"),
            std::string::npos)
      << too_long.status().message();
}

TEST(RuntimeGenerate, SeededSamplingReproduces) {
  auto rt = make_runtime({});
  ASSERT_NE(rt, nullptr);
  GenerateOptions g = greedy(16);
  g.sampler.temperature = 1.5f;
  g.sampler.top_k = 50;
  g.sampler.top_p = 0.95f;
  g.sampler.seed = 1;
  const auto prompt = prompt_of(20, 8);
  auto a = rt->generate({prompt, prompt}, g);
  auto b = rt->generate({prompt, prompt}, g);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->sequences[0].tokens, b->sequences[0].tokens);
  EXPECT_EQ(a->sequences[1].tokens, b->sequences[1].tokens);
  EXPECT_NE(a->sequences[0].tokens, a->sequences[1].tokens);  // sequences draw from their own streams
  g.sampler.seed = 2;
  auto c = rt->generate({prompt}, g);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->sequences[0].tokens, a->sequences[0].tokens);
}

// Pipelined decode launches step t + 1 before step t's tokens are read; a sequence stopped by a stop
// token at step t has a dropped row in step t + 1. Everything the caller sees must equal the loop
// that waits for each step.
TEST(RuntimeGenerate, PipelinedDecodeEqualsStepByStep) {
  RuntimeOptions plain_options;
  plain_options.max_context = 60;
  plain_options.pipelined_decode = false;
  RuntimeOptions piped_options = plain_options;
  piped_options.pipelined_decode = true;
  auto plain = make_runtime(plain_options);
  auto piped = make_runtime(piped_options);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(piped, nullptr);
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(12, 1), prompt_of(30, 2), prompt_of(5, 3),
                                                     prompt_of(55, 4)};
  auto free_run = plain->generate(prompts, greedy(12));
  ASSERT_TRUE(free_run.ok()) << free_run.status().to_string();
  // Stop tokens that end sequences 0 and 2 at different steps (sequence 3 reaches the context limit).
  GenerateOptions stopping = greedy(12);
  stopping.stop_tokens = {free_run->sequences[0].tokens[3], free_run->sequences[2].tokens[1]};
  GenerateOptions sampled = greedy(9);
  sampled.sampler.temperature = 1.2f;
  sampled.sampler.top_k = 40;
  sampled.sampler.seed = 3;
  sampled.stop_tokens = {free_run->sequences[1].tokens[4]};
  for (const GenerateOptions& g : {greedy(12), greedy(1), stopping, sampled}) {
    SCOPED_TRACE("max_new " + std::to_string(g.max_new_tokens) + ", " + std::to_string(g.stop_tokens.size()) +
                 " stop tokens, temperature " + std::to_string(g.sampler.temperature));
    auto a = plain->generate(prompts, g);
    auto b = piped->generate(prompts, g);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    for (size_t s = 0; s < prompts.size(); ++s) {
      EXPECT_EQ(b->sequences[s].tokens, a->sequences[s].tokens) << "sequence " << s;
      EXPECT_EQ(b->sequences[s].finish, a->sequences[s].finish) << "sequence " << s;
    }
    EXPECT_EQ(b->stats.decode_steps, a->stats.decode_steps);
    EXPECT_EQ(b->stats.decode_tokens, a->stats.decode_tokens);
    EXPECT_FALSE(a->stats.pipelined_decode);
    EXPECT_TRUE(b->stats.pipelined_decode);
  }
  // The stopping case really stops sequences at different steps while others go on.
  auto stopped = plain->generate(prompts, stopping);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->sequences[0].finish, FinishReason::kStopToken);
  EXPECT_EQ(stopped->sequences[2].finish, FinishReason::kStopToken);
  EXPECT_EQ(stopped->sequences[3].finish, FinishReason::kContext);
  EXPECT_NE(stopped->sequences[0].tokens.size(), stopped->sequences[2].tokens.size());
}

TEST(RuntimeGenerate, DummyWeightsRunAnyConfigDeterministically) {
  const auto dir = testing::test_temp_path("dummy_config");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(qwen3_dir() + "/config.json", dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  RuntimeOptions o;
  o.model_path = dir;
  o.dummy_weights = true;
  o.dummy_seed = 3;
  auto a = make_runtime(o);
  auto b = make_runtime(o);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a->describe().find("dummy"), std::string::npos) << a->describe();
  auto ga = a->generate({prompt_of(30, 9)}, greedy(6));
  auto gb = b->generate({prompt_of(30, 9)}, greedy(6));
  ASSERT_TRUE(ga.ok() && gb.ok());
  EXPECT_EQ(ga->sequences[0].tokens.size(), 6u);
  EXPECT_EQ(ga->sequences[0].tokens, gb->sequences[0].tokens);
  // Without --dummy-weights the missing safetensors are an error naming the problem.
  o.dummy_weights = false;
  auto missing = Runtime::create(o);
  EXPECT_FALSE(missing.ok());
  std::filesystem::remove_all(dir);
}

TEST(RuntimeGenerate, LayerObserverSeesEveryLayerOfEveryCall) {
  auto rt = make_runtime({});
  ASSERT_NE(rt, nullptr);
  std::vector<int64_t> tokens_per_layer(3, 0);
  bool finite = true;
  rt->set_layer_observer([&](int32_t layer, const float* x, const float* attn, int64_t tokens) {
    tokens_per_layer[layer] += tokens;
    for (int64_t i = 0; i < tokens * 128; ++i) finite = finite && std::isfinite(x[i]) && std::isfinite(attn[i]);
    return ok_status();
  });
  auto g = rt->generate({prompt_of(21, 10), prompt_of(5, 11)}, greedy(4));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  // Prefill feeds 26 tokens, decode 3 steps × 2 sequences.
  EXPECT_EQ(tokens_per_layer, (std::vector<int64_t>{32, 32, 32}));
  EXPECT_TRUE(finite);
  // An observer error stops the call and names the layer.
  rt->set_layer_observer([](int32_t layer, const float*, const float*, int64_t) {
    return layer == 2 ? invalid_argument("observer refuses") : ok_status();
  });
  auto failed = rt->generate({prompt_of(4, 12)}, greedy(1));
  EXPECT_NE(failed.status().message().find("layer 2"), std::string::npos) << failed.status().message();
  rt->set_layer_observer(nullptr);
  EXPECT_TRUE(rt->generate({prompt_of(4, 12)}, greedy(1)).ok());
}

TEST(RuntimeGenerate, SetPolicyChecksTheModelShape) {
  auto rt = make_runtime({});
  ASSERT_NE(rt, nullptr);
  PolicyConfig c = rt->policy().config();
  c.name = "streaming";
  auto streaming = make_policy(c, make_cpu_backend());
  ASSERT_TRUE(streaming.ok()) << streaming.status().to_string();
  ASSERT_TRUE(rt->set_policy(std::move(streaming).value()).ok());
  EXPECT_EQ(rt->policy().config().name, "streaming");
  c.num_layers = 5;
  auto wrong = make_policy(c, make_cpu_backend());
  ASSERT_TRUE(wrong.ok());
  EXPECT_FALSE(rt->set_policy(std::move(wrong).value()).ok());
  EXPECT_FALSE(rt->set_policy(nullptr).ok());
}

TEST(RuntimeGenerate, RefusesBadInput) {
  auto rt = make_runtime({});
  ASSERT_NE(rt, nullptr);
  EXPECT_FALSE(rt->generate({}, greedy(1)).ok());
  EXPECT_FALSE(rt->generate({{}}, greedy(1)).ok());
  auto bad_id = rt->generate({{1, 2, 512}}, greedy(1));
  EXPECT_NE(bad_id.status().message().find("token id 512"), std::string::npos) << bad_id.status().message();
  GenerateOptions bad_sampler = greedy(1);
  bad_sampler.sampler.top_p = 0.0f;
  EXPECT_FALSE(rt->generate({{1}}, bad_sampler).ok());
  EXPECT_FALSE(rt->teacher_forced({TeacherForcedInput{{1, 2}, {3}, 3}}).ok());
  RuntimeOptions o;
  o.model_path = "/nonexistent/model";
  EXPECT_EQ(Runtime::create(o).status().code(), StatusCode::kNotFound);
  RuntimeOptions chunk;
  chunk.model_path = qwen3_dir();
  chunk.chunk_size = 0;
  EXPECT_FALSE(Runtime::create(chunk).ok());
  RuntimeOptions kascade;
  kascade.model_path = qwen3_dir();
  kascade.attention.policy = "kascade";
  auto no_anchors = Runtime::create(kascade);
  EXPECT_NE(no_anchors.status().message().find("--anchors"), std::string::npos);
}

}  // namespace
}  // namespace kascade
