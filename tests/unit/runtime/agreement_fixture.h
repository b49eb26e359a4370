// agreement_fixture.h — shared by test_anchor_agreement.cpp and test_anchor_refinement.cpp: the tiny
// random Llama of tests/data/hf/llama_tiny (4 layers, 2 KV heads, vocab 512) with a budget small
// enough that kascade differs from dense on prompts of ~100 tokens, prompts, and an independent
// recomputation of an agreement score from two runtimes' teacher-forced logits (fp64 softmax).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kascade/runtime.h"
#include "runtime/anchor_agreement.h"
#include "runtime/calibration_collector.h"

namespace kascade::runtime::testing_agreement {

constexpr int32_t kTile = 16;
constexpr int64_t kSmallKMin = 4;  // k(n) = max(4, 0.1 n): ~10 of ~100 keys

inline std::string llama_dir() { return std::string(KASCADE_TEST_DATA_DIR) + "/hf/llama_tiny"; }

// A CPU runtime of the tiny model with `attention` (its tile, budget and policy).
inline std::unique_ptr<Runtime> tiny_runtime(AttentionOptions attention) {
  RuntimeOptions o;
  o.model_path = llama_dir();
  o.chunk_size = 32;
  attention.tile_size = kTile;
  o.attention = std::move(attention);
  auto rt = Runtime::create(o);
  EXPECT_TRUE(rt.ok()) << rt.status().to_string();
  return rt.ok() ? std::move(rt).value() : nullptr;
}

inline AttentionOptions small_budget(const std::string& policy = "dense") {
  AttentionOptions a;
  a.policy = policy;
  a.k_min = kSmallKMin;
  a.topk_fraction = 0.1;
  return a;
}

inline std::vector<CalibrationPrompt> tiny_prompts() {
  std::vector<CalibrationPrompt> prompts;
  for (int salt : {1, 2, 3}) {
    std::vector<int32_t> p;
    const int n = 90 + 17 * salt;
    for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * (29 + salt) + salt * 7 + 3) % 512));
    prompts.push_back({"p" + std::to_string(salt), p});
  }
  return prompts;
}

struct Recomputed {
  int64_t matches = 0;
  int64_t steps = 0;
  double mean_kl = 0.0;
};

inline std::vector<double> softmax64(const float* row, size_t n) {
  const double top = *std::max_element(row, row + n);
  std::vector<double> p(n);
  double z = 0.0;
  for (size_t i = 0; i < n; ++i) z += p[i] = std::exp(static_cast<double>(row[i]) - top);
  for (double& v : p) v /= z;
  return p;
}

// The reference's prompts and continuations teacher-forced through `dense` and `candidate`; a row
// matches when the candidate's argmax equals the dense argmax; KL from the fp64 softmaxes.
inline Recomputed recompute(Runtime& dense, Runtime& candidate, const DenseReference& ref) {
  Recomputed r;
  double kl = 0.0;
  const size_t vocab = static_cast<size_t>(ref.vocab);
  for (const DenseReference::Prompt& p : ref.prompts) {
    TeacherForcedInput in{p.prompt, p.continuation, static_cast<int64_t>(p.prompt.size()) - 1};
    auto d = dense.teacher_forced({in});
    auto c = candidate.teacher_forced({in});
    EXPECT_TRUE(d.ok() && c.ok());
    if (!d.ok() || !c.ok()) return r;
    for (int64_t row = 0; row < (*d)[0].rows; ++row) {
      const float* dl = (*d)[0].logits.data() + static_cast<size_t>(row) * vocab;
      const float* cl = (*c)[0].logits.data() + static_cast<size_t>(row) * vocab;
      r.matches += std::max_element(dl, dl + vocab) - dl == std::max_element(cl, cl + vocab) - cl ? 1 : 0;
      const std::vector<double> pd = softmax64(dl, vocab), pc = softmax64(cl, vocab);
      for (size_t v = 0; v < vocab; ++v)
        if (pd[v] > 0) kl += pd[v] * (std::log(pd[v]) - std::log(pc[v]));
      r.steps += 1;
    }
  }
  r.mean_kl = kl / static_cast<double>(r.steps);
  return r;
}

}  // namespace kascade::runtime::testing_agreement
