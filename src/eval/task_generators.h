// eval/task_generators.h — the generator of each task family and what they share. A generator
// draws everything random up front from the sample's DetRng, then hands fill_to_budget() a
// builder that is a pure function of the filler size. tasks.cpp dispatches by task name and
// fills the common Sample fields.
// Tested by tests/unit/eval/test_tasks.cpp (per-task independent answer checkers).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "eval/fill.h"
#include "eval/haystack.h"
#include "eval/templates.h"
#include "eval/vocab.h"
#include "kascade/status.h"
#include "kascade/tasks.h"

namespace kascade::eval {

struct TaskContext {
  std::string_view task;
  Split split = Split::kEval;
  int64_t target_length = 0;
  int64_t budget = 0;             // tokens the prompt may use
  std::optional<double> depth;    // of the queried needle
  uint64_t rng_seed = 0;
  const TokenCounter* count_tokens = nullptr;
};

struct TaskOutput {
  FilledPrompt filled;
  std::string answer_prefix;
  std::vector<std::string> answers;
  // The training completion after the answer prefix; empty: answer_list_completion(answers).
  std::string completion;
  int template_id = 0;
  std::map<std::string, int64_t> params;
};

Result<TaskOutput> generate_niah(const TaskContext& ctx);       // niah_*
Result<TaskOutput> generate_vt(const TaskContext& ctx);         // vt
Result<TaskOutput> generate_cwe(const TaskContext& ctx);        // cwe
Result<TaskOutput> generate_fwe(const TaskContext& ctx);        // fwe
Result<TaskOutput> generate_kv(const TaskContext& ctx);         // kv_retrieval
Result<TaskOutput> generate_multihop(const TaskContext& ctx);   // multihop_qa
// Train-only tasks (the copy curriculum; tasks.cpp refuses them for the dev and eval splits).
Result<TaskOutput> generate_copy_strings(const TaskContext& ctx);  // copy_strings
Result<TaskOutput> generate_hop_drill(const TaskContext& ctx);     // hop_drill
Result<TaskOutput> generate_vt_lookup(const TaskContext& ctx);     // vt_lookup

// head + "\n" + context + "\n" + tail, with the needles' offsets moved into the prompt.
BuiltPrompt assemble_prompt(std::string_view head, RenderedContext context, std::string_view tail);

// "a, b, and c" (RULER's query list); "a" for one element.
std::string join_query_list(const std::vector<std::string>& items);

// The completion of a list of answers: " a, b, c." (TaskOutput::completion's default).
std::string answer_list_completion(const std::vector<std::string>& answers);

// A random depth in [0, 1], or the requested one.
double draw_depth(DetRng& rng, const std::optional<double>& requested);

// Train split: a word drawn from `words` for a phrasing placeholder, its index recorded in
// out.params[param] (so tests and readers of the samples can tell which was drawn).
std::string_view draw_train_word(DetRng& rng, std::span<const std::string_view> words, const char* param,
                                 TaskOutput& out);

// Train split: a fact relation word (templates.h), from the curated words or, half the time, the open
// vocabulary; its index in list.words recorded in out.params[param].
std::string_view draw_relation_word(DetRng& rng, const RelationWordList& list, const char* param, TaskOutput& out);

// Invented names of a split (vocab.h random_place_or_person), each absent from the haystack's source text
// and neither containing nor contained in a name drawn before, so that a question cannot match two facts.
class DistinctNames {
 public:
  DistinctNames(Split split, const WordStream& stream) : split_(split), stream_(&stream) {}
  std::string draw(DetRng& rng, NameKind kind);

 private:
  Split split_;
  const WordStream* stream_;
  std::unordered_set<std::string> used_;
};

// Train-only tasks: the haystack of a sample, drawn — the split's natural text or its noise sentences, half
// the time each — with a sentence start in it; recorded in out.params["natural"] (0 / 1) and
// out.params["haystack_start_word"].
struct DrawnHaystack {
  const WordStream* stream;
  int64_t start;
};
DrawnHaystack draw_haystack(DetRng& rng, Split split, TaskOutput& out);

// The most filler units a budget can need when every unit costs at least one token.
inline int64_t max_units_for(int64_t budget) { return 4 * budget + 16; }

}  // namespace kascade::eval
