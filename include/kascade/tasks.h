// kascade/tasks.h — the long-context task suite (RULER-style, research/peers.md §5.1) and its scorers.
//
// A sample is a prompt filled to a target length in tokens of the model's tokenizer, with the
// question at the end followed by an answer prefix, and the strings a correct answer contains.
// Generation is deterministic per (split, task, target length, seed, index): the same request
// gives the same sample on every platform (own PRNG, no std:: distributions).
//
// Tasks (name: what it tests; scorer; default haystack):
//   niah_single_1    one needle, word key -> 7-digit number; all; noise sentences
//   niah_single_2    one needle, word key -> number; all; natural text
//   niah_single_3    one needle, word key -> UUID; all; natural text
//   niah_multikey_1  one queried needle + 3 distractor needles (other keys); all; natural text
//   niah_multikey_2  the haystack is made of distractor needles, key -> number; all
//   niah_multikey_3  the haystack is made of distractor needles, UUID key -> UUID; all
//   niah_multivalue  one key with 4 values, all asked for; all; natural text
//   niah_multiquery  4 needles, all 4 keys asked for; all; natural text
//   vt               variable tracking: `num_chains` chains (default 2) of `num_hops` (4) hops,
//                    "VAR X1 = 12345 ... VAR X2 = VAR X1"; answer: every variable of the queried
//                    chain; all; noise sentences
//   cwe              common-words extraction: numbered word list, 10 words appear freq_cw times
//                    (30 from 4K on), the rest freq_ucw (3); answer: the 10 common words; all
//   fwe              frequent-words extraction: coded words with Zipf(alpha = 2) counts, the top
//                    rank is the noise "...."; answer: the next 3 ranks; all
//   kv_retrieval     a JSON object of UUID -> UUID pairs; answer: the value of one key; all
//   multihop_qa      2-hop questions over synthetic facts ("The capital of Zorvia is Melkat."
//                    "The mayor of Melkat is Tirona Vask." -> "Who is the mayor of the capital of
//                    Zorvia?"), 4 fact chains (3 distractors) in natural text; part
// Train-only tasks (the copy curriculum of docs/model.md; generated for the train split only, a clear
// error for dev and eval: they have no held-out wordings and are not part of the evaluation suite, so
// neither task_catalog(), "all" nor any group names them):
//   copy_strings     1–4 labelled random strings (UUID, 20–36 digits or hex digits, 2–3 invented names,
//                    4–6 variable names) in a short haystack; the question names some of the labels and
//                    the answer is their strings in the order asked; all
//   hop_drill        a two-hop lookup over invented persons ("the x of A is B", "the y of B is C", with
//                    distractor chains and one-hop lures) in a short haystack; answer C; all
//   vt_lookup        vt's statements with 3–8 chains of 0 or 1 hops: the variable assigned the asked value
//                    (and the one assigned from it); all
// Scorer assignment follows RULER: string_match_all for the niah, vt, cwe and fwe families (and
// kv retrieval), string_match_part for the QA task (multihop_qa), as RULER does for qa_1/qa_2.
//
// Length: the prompt (instruction + context + question + answer prefix) is filled so that its
// token count is <= the token budget = target_length - generation reserve (by default the task's
// max_new_tokens, as RULER fills to max_seq_length - tokens_to_generate), and as close to it as
// one filler unit allows (a word of haystack, a list item, a distractor needle or a JSON pair).
// Needles go at sentence boundaries at depths drawn uniformly in [0, 1] (or at a fixed depth).
//
// Splits are disjoint three ways (tests/unit/eval/test_splits.cpp asserts each):
//   - seeds: the user seed S (0 <= S < 2^40) maps to the effective seed split_base + S with
//     bases eval 0, dev 2^40, train 2^41, so the effective seed ranges never meet;
//   - templates: each split has its own instruction / needle / question / answer-prefix
//     phrasings, noise sentences, variable-assignment syntax and fact relations (eval uses
//     RULER's own phrasings; train has several variants per task, dev one);
//   - vocabularies: keys come from wonderwords word lists partitioned by hash between the
//     splits; variable names are partitioned by the sum of their letters mod 3, coded words
//     (fwe) by a hash mod 3, synthetic names (multihop) by split-specific first syllables;
//     the natural-text haystacks are different books (train: Sense and Sensibility, dev:
//     Northanger Abbey, eval: Persuasion; src/eval/corpus/ records source and licence).
// Tested by tests/unit/eval/ (determinism, length targeting, needle placement, answers derivable
// from the prompt by independent checkers, split disjointness, scorers).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kascade/status.h"

namespace kascade::eval {

// Counts the tokens the model sees for `text` (including a BOS if the runtime prepends one).
// Must be deterministic; a negative return is treated as an error. The runtime passes the
// model's tokenizer; tests pass a whitespace stand-in.
using TokenCounter = std::function<int64_t(std::string_view)>;

enum class Split { kTrain, kDev, kEval };
const char* split_name(Split split);
Result<Split> parse_split(std::string_view name);

// Effective seeds of a split: [begin, end). The user seed must be < kMaxUserSeed.
inline constexpr uint64_t kMaxUserSeed = uint64_t{1} << 40;
struct SeedRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};
SeedRange split_seed_range(Split split);
Result<uint64_t> effective_seed(Split split, uint64_t user_seed);

enum class ScorerKind { kStringMatchAll, kStringMatchPart };
const char* scorer_name(ScorerKind kind);

struct TaskInfo {
  std::string_view name;
  std::string_view category;     // "retrieval", "multi-hop" or "aggregation"
  ScorerKind scorer;
  int max_new_tokens;            // generation budget (RULER's tokens_to_generate where it has one)
  std::string_view description;
  bool train_only = false;       // the train split only (the copy curriculum); not in the evaluation suite
};

// The evaluation suite: the 13 tasks of the list above, in its order (no train-only task).
const std::vector<TaskInfo>& task_catalog();
// The train-only tasks (copy_strings, hop_drill, vt_lookup).
const std::vector<TaskInfo>& train_only_task_catalog();
// Any task, of the suite or train-only.
Result<TaskInfo> find_task(std::string_view name);

// "niah_single_1,vt" -> names; also accepts "all", "retrieval", "multi-hop", "aggregation" (tasks of
// the evaluation suite only; a train-only task is named on its own). Rejects unknown names and duplicates.
Result<std::vector<std::string>> parse_task_list(std::string_view list);

// "2k,4k,4096,1m" -> {2048, 4096, 4096... (k = 1024, m = 1048576)}; duplicates rejected.
Result<std::vector<int64_t>> parse_lengths(std::string_view list);

struct SampleRequest {
  std::string task;
  Split split = Split::kEval;
  int64_t target_length = 4096;  // tokens
  uint64_t seed = 0;             // user seed, < kMaxUserSeed
  int64_t index = 0;             // sample index, >= 0
  // Depth in [0, 1] of the queried needle (tasks with needles); unset: uniform at random.
  std::optional<double> depth;
  // Tokens kept free for the answer: the prompt is filled to target_length - reserve.
  // Unset: the task's max_new_tokens.
  std::optional<int64_t> generation_reserve;
};

// A needle as placed in the prompt.
struct NeedlePlacement {
  std::string text;          // the inserted sentence, exactly as it appears in the prompt
  double requested_depth;    // where it was asked to go, in [0, 1]
  double depth;              // haystack units before it / haystack units, after snapping to a boundary
  int64_t char_offset;       // byte offset of `text` in the prompt
  bool queried;              // the question is about this needle (false: distractor)
};

struct Sample {
  std::string task;
  Split split = Split::kEval;
  int64_t target_length = 0;
  uint64_t seed = 0;               // the user seed of the request
  int64_t index = 0;
  uint64_t rng_seed = 0;           // the derived 64-bit seed of this sample
  int template_id = 0;             // index into the split's phrasings of this task
  std::string prompt;              // everything the model reads, ending with the answer prefix
  std::string answer_prefix;       // the tail of `prompt` that starts the answer
  std::vector<std::string> answers;  // expected strings (scored case-insensitively)
  std::string completion;          // a canonical answer text that follows the prefix (training)
  ScorerKind scorer = ScorerKind::kStringMatchAll;
  int max_new_tokens = 0;
  int64_t token_budget = 0;        // target_length - generation reserve
  int64_t prompt_tokens = 0;       // counted with the TokenCounter; <= token_budget
  int64_t haystack_units = 0;      // filler units the length search chose
  std::vector<NeedlePlacement> needles;
  std::map<std::string, int64_t> params;  // task parameters (num_chains, freq_cw, ...)
};

// Generates one sample. Fails with a Status naming the problem: unknown task, a train-only task asked
// for the dev or eval split, bad length or seed, a budget too small for the task's fixed text, a token
// counter that fails.
Result<Sample> generate_sample(const SampleRequest& request, const TokenCounter& count_tokens);

// RULER's scorers for one prediction: the fraction of `answers` contained in `prediction`
// (string_match_all) or 1 if any is (string_match_part); case-insensitive (ASCII), substring
// containment. `answers` must not be empty, nor hold an empty string.
Result<double> string_match_all(std::string_view prediction, std::span<const std::string> answers);
Result<double> string_match_part(std::string_view prediction, std::span<const std::string> answers);
Result<double> score_prediction(ScorerKind kind, std::string_view prediction,
                                std::span<const std::string> answers);

// A whitespace token counter (maximal runs of non-space bytes); the tests' stand-in tokenizer
// and the fallback of `kascade tasks --tokenizer whitespace`.
int64_t count_whitespace_tokens(std::string_view text);

}  // namespace kascade::eval
