// test_eval_runner.cpp — the eval runner (src/eval/runner.h) on the tiny Llama checkpoint of
// tests/data/hf/ (random weights) with a stand-in codec (one token per word, "w<id>" per generated
// token) and stand-in tasks whose answers the random model hits sometimes ("w1" somewhere), never
// ("zzz"), or in part:
//   - the table has one cell per task × length × policy with N samples, and its accuracies are the
//     means of the test's own scoring of each prediction (substring checks written here);
//   - dense predictions equal a separate greedy run of the runtime, decoded by the test;
//   - dense attends exactly all keys; streaming's fraction equals a closed-form count of its rows
//     (4 sinks + recent keys per tile, plus local keys; k(n) per decode step);
//   - progress reports every sample; the JSON table round-trips; per-sample JSON lines parse;
//   - bad plans (kascade without anchors, duplicate policies, lengths beyond the context) are
//     refused before any sample runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "eval/runner.h"
#include "kascade/budget.h"

namespace kascade::eval {
namespace {

constexpr int32_t kMaxNew = 4;
constexpr int32_t kTile = 16;

std::string llama_dir() { return std::string(KASCADE_TEST_DATA_DIR) + "/hf/llama_tiny"; }

std::vector<std::string> words_of(std::string_view text) {
  std::vector<std::string> words;
  std::string w;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!w.empty()) words.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty()) words.push_back(w);
  return words;
}

std::string decode_words(std::span<const int32_t> ids) {
  std::string text;
  for (int32_t id : ids) {
    if (!text.empty()) text.push_back(' ');
    text.push_back('w');
    text.append(std::to_string(id));
  }
  return text;
}

// BOS (1) then one token per word, ids in [10, 510).
TextCodec standin_codec() {
  TextCodec c;
  c.count = [](std::string_view text) { return 1 + static_cast<int64_t>(words_of(text).size()); };
  c.encode = [](std::string_view text) -> Result<std::vector<int32_t>> {
    std::vector<int32_t> ids = {1};
    for (const std::string& w : words_of(text)) {
      uint32_t h = 2166136261u;
      for (char ch : w) h = (h ^ static_cast<uint8_t>(ch)) * 16777619u;
      ids.push_back(static_cast<int32_t>(10 + h % 500));
    }
    return ids;
  };
  c.decode = [](std::span<const int32_t> ids) -> Result<std::string> { return decode_words(ids); };
  return c;
}

struct StandinTask {
  std::string name;
  std::vector<std::string> answers;
  ScorerKind scorer;
};
const std::vector<StandinTask>& standin_tasks() {
  static const std::vector<StandinTask> tasks = {{"find_w1", {"w1"}, ScorerKind::kStringMatchAll},
                                                 {"never", {"zzz"}, ScorerKind::kStringMatchAll},
                                                 {"part", {"w3", "w4"}, ScorerKind::kStringMatchPart}};
  return tasks;
}

// Prompts of length - kMaxNew tokens (BOS included).
SampleSource standin_source() {
  return [](const std::string& task, int64_t length, int64_t index) -> Result<Sample> {
    const auto& tasks = standin_tasks();
    auto it = std::find_if(tasks.begin(), tasks.end(), [&](const StandinTask& t) { return t.name == task; });
    if (it == tasks.end()) return not_found("no stand-in task '", task, "'");
    Sample s;
    s.task = task;
    s.target_length = length;
    s.index = index;
    for (int64_t k = 0; k + 1 < length - kMaxNew; ++k) {
      s.prompt.push_back('x');
      s.prompt.append(std::to_string((index * 7 + k * 13) % 97));
      s.prompt.push_back(' ');
    }
    s.answers = it->answers;
    s.scorer = it->scorer;
    s.max_new_tokens = kMaxNew;
    return s;
  };
}

// The test's own scorer: case-insensitive substring containment.
double score_by_hand(const std::string& prediction, const StandinTask& task) {
  int hits = 0;
  for (const std::string& a : task.answers) hits += prediction.find(a) != std::string::npos ? 1 : 0;
  if (task.scorer == ScorerKind::kStringMatchPart) return hits > 0 ? 1.0 : 0.0;
  return static_cast<double>(hits) / static_cast<double>(task.answers.size());
}

std::unique_ptr<Runtime> make_runtime() {
  RuntimeOptions o;
  o.model_path = llama_dir();
  auto rt = Runtime::create(o);
  EXPECT_TRUE(rt.ok()) << rt.status().to_string();
  return rt.ok() ? std::move(rt).value() : nullptr;
}

EvalPolicy policy(const std::string& name, std::vector<int32_t> anchors = {}) {
  EvalPolicy p;
  p.name = name;
  p.attention.policy = name;
  p.attention.anchors = std::move(anchors);
  p.attention.topk_fraction = 0.1;
  p.attention.k_min = 8;
  p.attention.tile_size = kTile;
  return p;
}

// Streaming's attended / causal for one sample, in closed form (the same for every layer and head).
double streaming_fraction(const SampleOutcome& o) {
  const Budget budget{100000, 8, 1};
  double attended = 0.0, causal = 0.0;
  for (int64_t p = 0; p < o.prompt_tokens; ++p) {
    const int64_t s = p / kTile * kTile;
    attended += static_cast<double>(std::min(s, budget_k(s, budget)) + (p - s + 1));
    causal += static_cast<double>(p + 1);
  }
  // Every accepted token is fed back, except the last one when the length limit ended the sequence.
  const int64_t steps = o.generated_tokens - (o.finish == "length" ? 1 : 0);
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t n = o.prompt_tokens + step + 1;
    attended += static_cast<double>(budget_k(n, budget));
    causal += static_cast<double>(n);
  }
  return attended / causal;
}

TEST(EvalRunner, TableCountsAccuraciesAndFractions) {
  auto rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  EvalPlan plan;
  plan.tasks = {"find_w1", "never", "part"};
  plan.lengths = {64, 100};
  plan.samples = 3;
  plan.policies = {policy("dense"), policy("streaming"), policy("kascade", {0, 2})};
  std::vector<int64_t> progress_done;
  auto result = run_eval(*rt, plan, standin_codec(), standin_source(), [&](const EvalProgress& p) {
    EXPECT_EQ(p.total, 54);
    ASSERT_NE(p.last, nullptr);
    progress_done.push_back(p.done);
  });
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  ASSERT_EQ(result->samples.size(), 54u);
  ASSERT_EQ(progress_done.size(), 54u);
  for (size_t i = 0; i < progress_done.size(); ++i) EXPECT_EQ(progress_done[i], static_cast<int64_t>(i + 1));

  // Per-sample: the test's own scoring, dense fraction 1, streaming in closed form, kascade sparse.
  auto dense_rt = make_runtime();
  ASSERT_NE(dense_rt, nullptr);
  const TextCodec codec = standin_codec();
  for (const SampleOutcome& o : result->samples) {
    const auto& task = *std::find_if(standin_tasks().begin(), standin_tasks().end(),
                                     [&](const StandinTask& t) { return t.name == o.task; });
    EXPECT_DOUBLE_EQ(o.score, score_by_hand(o.prediction, task)) << o.prediction;
    EXPECT_EQ(o.prompt_tokens, o.length - kMaxNew);
    EXPECT_LE(o.generated_tokens, kMaxNew);
    if (o.policy == "dense") {
      EXPECT_EQ(o.keys_attended, 1.0);
      // The prediction is what a separate greedy run generates.
      auto sample = standin_source()(o.task, o.length, o.index);
      ASSERT_TRUE(sample.ok());
      GenerateOptions g;
      g.max_new_tokens = kMaxNew;
      auto gen = dense_rt->generate({*codec.encode(sample->prompt)}, g);
      ASSERT_TRUE(gen.ok());
      EXPECT_EQ(o.prediction, decode_words(gen->sequences[0].tokens));
    } else if (o.policy == "streaming") {
      EXPECT_NEAR(o.keys_attended, streaming_fraction(o), 1e-12) << o.task << " " << o.length << " " << o.index;
      EXPECT_LT(o.keys_attended, 1.0);
    } else {
      EXPECT_GT(o.keys_attended, 0.0);
      EXPECT_LT(o.keys_attended, 1.0);
    }
  }
  // Some predictions hit "w1" and some miss, so the accuracies below are not all 0 or all 1.
  int hits = 0, misses = 0;
  for (const SampleOutcome& o : result->samples)
    if (o.task == "find_w1") ++(o.score > 0 ? hits : misses);
  EXPECT_GT(hits, 0);
  EXPECT_GT(misses, 0);

  // Cells: one per task × length × policy, N samples each, means of the samples.
  const auto cells = result->table.cells();
  ASSERT_EQ(cells.size(), 18u);
  for (const ResultCell& c : cells) {
    EXPECT_EQ(c.samples, 3);
    double score = 0.0, keys = 0.0;
    int n = 0;
    for (const SampleOutcome& o : result->samples) {
      if (o.task != c.task || o.length != c.length || o.policy != c.policy) continue;
      score += o.score;
      keys += o.keys_attended;
      ++n;
    }
    ASSERT_EQ(n, 3);
    EXPECT_NEAR(c.accuracy, score / 3, 1e-12);
    EXPECT_NEAR(c.keys_attended, keys / 3, 1e-12);
    if (c.task == "never") {
      EXPECT_EQ(c.accuracy, 0.0);
    }
    if (c.policy == "dense") {
      EXPECT_EQ(c.keys_attended, 1.0);
    }
  }
  EXPECT_EQ(result->table.policies(), (std::vector<std::string>{"dense", "streaming", "kascade"}));

  // JSON: the table round-trips; sample lines parse.
  auto back = ResultsTable::from_json(result->table.to_json({{"model", "llama_tiny"}}));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->cells().size(), 18u);
  for (size_t i = 0; i < cells.size(); ++i) {
    EXPECT_EQ(back->cells()[i].samples, cells[i].samples);
    EXPECT_NEAR(back->cells()[i].accuracy, cells[i].accuracy, 1e-12);
    EXPECT_NEAR(back->cells()[i].keys_attended, cells[i].keys_attended, 1e-12);
  }
  const auto line = nlohmann::json::parse(sample_outcome_json(result->samples.front()));
  EXPECT_EQ(line["task"], "find_w1");
  EXPECT_EQ(line["policy"], "dense");
  EXPECT_EQ(line["prediction"], result->samples.front().prediction);
}

TEST(EvalRunner, RefusesBadPlansBeforeRunning) {
  auto rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  EvalPlan plan;
  plan.tasks = {"find_w1"};
  plan.lengths = {64};
  plan.samples = 1;
  int calls = 0;
  const SampleSource counting = [&](const std::string& t, int64_t l, int64_t i) {
    ++calls;
    return standin_source()(t, l, i);
  };
  plan.policies = {policy("dense"), policy("kascade")};  // kascade without anchors
  auto r = run_eval(*rt, plan, standin_codec(), counting);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("policy 'kascade'"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("calibration"), std::string::npos) << r.status().to_string();
  plan.policies = {policy("dense"), policy("dense")};
  EXPECT_FALSE(run_eval(*rt, plan, standin_codec(), counting).ok());
  plan.policies = {policy("dense")};
  plan.lengths = {4096};  // the tiny model's context is 2048
  EXPECT_FALSE(run_eval(*rt, plan, standin_codec(), counting).ok());
  plan.lengths = {64};
  plan.samples = 0;
  EXPECT_FALSE(run_eval(*rt, plan, standin_codec(), counting).ok());
  plan.samples = 1;
  plan.tasks = {"no_such_task"};
  auto missing = run_eval(*rt, plan, standin_codec(), counting);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no_such_task"), std::string::npos);
  EXPECT_EQ(calls, 1);  // only the last plan got as far as asking for a sample
}

}  // namespace
}  // namespace kascade::eval
