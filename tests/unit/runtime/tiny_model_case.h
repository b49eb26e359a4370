// tests/unit/runtime/tiny_model_case.h — what the kascade-tiny runtime tests share (the CPU test
// tests/unit/runtime/test_tiny_model_margins.cpp and the GPU parity test
// tests/cuda/test_gpu_runtime_parity.cpp): the trained checkpoint models/kascade-tiny (real bf16
// weights, Llama, 12 layers, GQA 8/2, head dim 64), task-suite prompts of ~1-2K tokens encoded with
// its own tokenizer (a needle to retrieve, so trained attention is peaked and logit margins are clear),
// the runtime options of the cases, and the top-2 margin / clear-margin count of logits rows.
// Header-only so both test binaries compile it; the CPU test exercises every helper.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kascade/runtime.h"
#include "kascade/status.h"
#include "kascade/tasks.h"
#include "kascade/tokenizer.h"

namespace kascade::testing::tiny {

inline std::filesystem::path model_dir() { return std::filesystem::path(KASCADE_SOURCE_DIR) / "models" / "kascade-tiny"; }

// The prompts: eval-split task-suite samples (seed 0) filled to these lengths, encoded with BOS as
// the runtime's evaluation does (src/eval/runner.cpp tokenizer_codec). Chosen among the first
// samples as ones the shipped weights answer with clear margins on every greedy token
// (TinyModelCpu.DenseGreedyMarginsAreClear checks it and fails when new weights lose that; the c8
// weights are unsure of the first digit of the answer on samples 0-1 of both tasks, relative top-2
// margin 0.02-0.18 against the 0.199 the GPU greedy comparison needs).
struct PromptSpec {
  const char* task;
  int64_t target_length;
  int64_t index;
};
inline const std::vector<PromptSpec>& prompt_specs() {
  static const std::vector<PromptSpec> specs = {{"niah_single_1", 1536, 2}, {"niah_single_2", 1024, 2}};
  return specs;
}

// prompts[s]: token ids of prompt_specs()[s], BOS first.
inline Result<std::vector<std::vector<int32_t>>> prompts() {
  KC_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::from_file((model_dir() / "tokenizer.json").string()));
  const eval::TokenCounter count = [&tokenizer](std::string_view text) -> int64_t {
    auto ids = tokenizer.encode(text, /*add_special_tokens=*/true);
    return ids.ok() ? static_cast<int64_t>(ids->size()) : -1;
  };
  std::vector<std::vector<int32_t>> out;
  for (const PromptSpec& spec : prompt_specs()) {
    eval::SampleRequest request;
    request.task = spec.task;
    request.split = eval::Split::kEval;
    request.target_length = spec.target_length;
    request.seed = 0;
    request.index = spec.index;
    KC_ASSIGN_OR_RETURN(eval::Sample sample, eval::generate_sample(request, count));
    KC_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.encode(sample.prompt, /*add_special_tokens=*/true));
    out.push_back(std::move(ids));
  }
  return out;
}

// Runtime options: several prefill chunks per prompt (the last one partial) over 16-token pages.
inline RuntimeOptions options(Device device) {
  RuntimeOptions o;
  o.model_path = model_dir();
  o.device = device;
  o.max_context = 4096;
  o.chunk_size = 512;
  o.page_size = 16;
  o.max_batch = 4;
  return o;
}

// Kascade at 10 % with the checkpoint's calibrated anchors and head maps; k_min 64 so the budget
// (max(k_min, 0.1 · context)) is well below the context of every prompt: it selects.
inline RuntimeOptions kascade_options(Device device) {
  RuntimeOptions o = options(device);
  o.attention.policy = "kascade";
  o.attention.calibration_file = (model_dir() / "kascade_calibration.json").string();
  o.attention.topk_fraction = 0.10;
  o.attention.k_min = 64;
  return o;
}

// The checkpoint's layer count, for the tolerance rule of the parity test.
inline constexpr int32_t kLayers = 12;

// Greedy tokens per prompt in the generation cases.
inline constexpr int32_t kNewTokens = 8;

struct RowTop2 {
  int64_t best = 0;     // argmax (ties to the lower id, as greedy sampling)
  double margin = 0.0;  // logit[best] − the second largest logit
};
// row: [vocab] fp32, vocab >= 2.
inline RowTop2 top2(const float* row, int64_t vocab) {
  int64_t best = 0, second = 1;
  if (row[1] > row[0]) std::swap(best, second);
  for (int64_t v = 2; v < vocab; ++v) {
    if (row[v] > row[best]) {
      second = best;
      best = v;
    } else if (row[v] > row[second]) {
      second = v;
    }
  }
  return {best, static_cast<double>(row[best]) - static_cast<double>(row[second])};
}

// max |logit| of a [rows, vocab] block.
inline double max_abs(const std::vector<float>& logits) {
  double scale = 0;
  for (float v : logits) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  return scale;
}

// Teacher-forced logits of the positions that produced `generated` from `prompt`: row i predicts
// generated[i]. Its argmax must be generated[i] for greedy tokens.
inline TeacherForcedInput generated_positions(const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated) {
  TeacherForcedInput in;
  in.prompt = prompt;
  if (!generated.empty()) in.continuation.assign(generated.begin(), generated.end() - 1);
  in.first_logit_position = static_cast<int64_t>(prompt.size()) - 1;
  return in;
}

// Leading rows (in order) whose top-2 margin exceeds `threshold`: the tokens two runtimes must agree
// on before a near-tie can legitimately make them diverge. logits: [rows, vocab] fp32.
inline int64_t clear_prefix(const std::vector<float>& logits, int64_t rows, int64_t vocab, double threshold) {
  int64_t n = 0;
  while (n < rows && top2(logits.data() + n * vocab, vocab).margin > threshold) ++n;
  return n;
}

}  // namespace kascade::testing::tiny
