// kascade/calibration.h — Kascade calibration (DESIGN.md §2.5): statistics, anchor DP, head map,
// calibration file.
//
//   SimilarityAccumulator   streams pooled scores S^l_{g,u} unit by unit and layer by layer (never
//                           S for all layers at once) and keeps sim[a][b][ga][gb] = mean over
//                           prompts of the min over units of the Top-k_cal mass ratio.
//   ImportanceAccumulator   w_l = 1 − cos(x_l, x_l + attn_l), mean over a prompt's tokens, then over
//                           prompts.
//   layer_scores / select_anchors / build_head_map / derive_anchor_sets
//                           W(a,b) = w_b · mean_gb max_ga sim[a][b][ga][gb]; the O(K·N²) DP for K
//                           anchors (layer 0 forced); map[b][gb] = argmax_ga sim[anchor(b)][b][ga][gb].
//   CalibrationFile         the JSON calibration file: writer, reader with validation, and the import
//                           of published .npy head maps (no statistics, marked "imported").
//   anchor_swap_neighbours / hill_climb_anchors / apply_refinement / carry_refinements
//                           the optional refinement (docs/spec-notes.md): a local search from the DP
//                           set by one-anchor swaps under any scorer (the model-running scorer is
//                           src/runtime/anchor_agreement.h), and refined sets in the file.
//
// A "unit" is a prefill tile t >= 1 (candidates j < s_t) or a decode step (candidates: all n keys).
// Tested by tests/unit/calibrate/ (similarity against a direct recomputation, importance against
// hand-computed cosines, DP against brute-force enumeration, head map against argmax, JSON round
// trip and every malformed-file case, .npy files written byte by byte, the refinement's search with
// synthetic scorers against brute force, refined sets in the file).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kascade/dtype.h"
#include "kascade/status.h"

namespace kascade::calib {

inline constexpr int64_t kCalibrationFileVersion = 1;
// Anchor counts written by default: 2..8 (capped at the number of layers).
inline constexpr int32_t kMinDefaultAnchors = 2;
inline constexpr int32_t kMaxDefaultAnchors = 8;
// Default anchor count recorded in a new file (the paper's Llama-3.1-8B set has 5), capped to the
// counts present.
inline constexpr int32_t kDefaultNumAnchors = 5;

// ---------------------------------------------------------------------------------------------
// Similarity statistics
// ---------------------------------------------------------------------------------------------

// Pooled scores of one unit at one layer, all KV groups.
struct UnitScores {
  // scores: [num_kv_heads, row_stride] fp32; row g, entries 0..num_candidates-1, is S_g[j].
  // Post-softmax pooled mass: finite and >= 0.
  const float* scores = nullptr;
  int64_t num_candidates = 0;  // prefill tile t: s_t (>= 1); decode step: n (all keys)
  int64_t row_stride = 0;      // elements between the rows of consecutive KV groups; 0 = num_candidates
  // local_mass: [num_kv_heads] fp32, LT_g = pooled mass on the tile's own local keys (finite, >= 0);
  // nullptr for a decode step (LT = 0).
  const float* local_mass = nullptr;
};

// Streams the similarity statistics of DESIGN.md §2.5.
//
// Per prompt: begin_prompt(name); then add(unit, layer, scores) for every unit and every layer,
// where the layers of one unit arrive in order 0..N−1 (units may interleave freely: one-shot
// prefill sends layer 0 of every tile, then layer 1, ...; decode sends layers 0..N−1 of one step,
// then the next step). The first call of a unit (layer 0) fixes its candidate count; later layers
// must match it. Unit ids are the collector's (any int64, unique within a prompt).
// Each add() computes I^b_{gb,u} = top-min(k_cal, n_u) of S^b_{gb,u} (ties: lower index), keeps it
// (k ints per group), and for every a <= b, ga, gb updates the prompt's running minimum of
//   sim_u(a→b; ga, gb) = (Σ_{j∈I^a_{ga,u}} S^b_{gb,u}[j] + LT^b_{gb,u})
//                      / (Σ_{j∈I^b_{gb,u}} S^b_{gb,u}[j] + LT^b_{gb,u}),
// sums in fp64. A unit whose denominator is 0 for (b, gb) (no pooled mass) is skipped for that
// (b, gb). end_prompt() requires every unit to have all N layers and every (b, gb) to have at least
// one usable unit (otherwise an error naming the prompt); the prompt's minimum then joins the mean
// over prompts. The index sets of a unit are freed once its last layer arrives.
// Errors leave the accumulator unchanged, except that a failed end_prompt() discards the prompt.
class SimilarityAccumulator {
 public:
  static Result<SimilarityAccumulator> create(int32_t num_layers, int32_t num_kv_heads, int64_t k_cal);

  Status begin_prompt(std::string_view prompt_name);
  Status add(int64_t unit, int32_t layer, const UnitScores& scores);
  Status end_prompt();
  // Drops the prompt in progress (if any): nothing of it reaches the mean.
  void discard_prompt();

  bool in_prompt() const { return in_prompt_; }
  int64_t num_prompts() const { return num_prompts_; }
  int32_t num_layers() const { return num_layers_; }
  int32_t num_kv_heads() const { return num_kv_heads_; }
  int64_t k_cal() const { return k_cal_; }

  // sim: [num_layers, num_layers, num_kv_heads, num_kv_heads] = [a][b][ga][gb], mean over the
  // finished prompts; entries with a > b are 0. Fails when no prompt has finished.
  Result<std::vector<double>> mean_similarity() const;

 private:
  struct Unit {
    int64_t num_candidates = 0;
    int64_t k = 0;               // min(k_cal, num_candidates)
    int32_t next_layer = 0;      // layers received so far
    std::vector<int32_t> topk;   // [num_layers, num_kv_heads, k] I^l_{g,u}, ascending; freed when complete
  };
  SimilarityAccumulator(int32_t num_layers, int32_t num_kv_heads, int64_t k_cal);
  size_t sim_index(int32_t a, int32_t b, int32_t ga, int32_t gb) const;
  void reset_prompt();

  int32_t num_layers_ = 0;
  int32_t num_kv_heads_ = 0;
  int64_t k_cal_ = 0;
  bool in_prompt_ = false;
  std::string prompt_name_;
  std::unordered_map<int64_t, Unit> units_;
  std::vector<double> prompt_min_;     // [N, N, G, G] running min of the prompt (+inf: no unit yet)
  std::vector<int64_t> usable_units_;  // [N, G] units with a nonzero denominator per (b, gb)
  std::vector<double> sum_over_prompts_;  // [N, N, G, G]
  int64_t num_prompts_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Importance statistics
// ---------------------------------------------------------------------------------------------

// Streams w_l = 1 − cos(x_l, x_l + attn_l) (fp64), the mean over a prompt's tokens, then the mean
// over prompts. The collector gives the rows themselves (not cosines): x_l is the residual stream
// entering layer l (before its norm), attn_l the attention block output after o_proj. Tokens of one
// layer may arrive in several calls (prefill chunks, then one call per decode step) and layers in
// any order; end_prompt() requires every layer to have received the same number (>= 1) of tokens.
// A token whose x or x + attn has zero norm, or a non-finite element, is an error naming the
// prompt, layer and token. Errors leave the accumulator unchanged, except that a failed
// end_prompt() discards the prompt.
class ImportanceAccumulator {
 public:
  static Result<ImportanceAccumulator> create(int32_t num_layers, int64_t hidden_size);

  Status begin_prompt(std::string_view prompt_name);
  // x, attn: [num_tokens, hidden_size] of `dtype`, row-major, contiguous.
  Status add(int32_t layer, const void* x, const void* attn, int64_t num_tokens, DType dtype);
  Status end_prompt();
  void discard_prompt();

  bool in_prompt() const { return in_prompt_; }
  int64_t num_prompts() const { return num_prompts_; }
  int32_t num_layers() const { return num_layers_; }
  int64_t hidden_size() const { return hidden_size_; }

  // w: [num_layers], mean over the finished prompts. Fails when no prompt has finished.
  Result<std::vector<double>> mean_importance() const;

 private:
  ImportanceAccumulator(int32_t num_layers, int64_t hidden_size);
  void reset_prompt();

  int32_t num_layers_ = 0;
  int64_t hidden_size_ = 0;
  bool in_prompt_ = false;
  std::string prompt_name_;
  std::vector<double> prompt_sum_;       // [N] Σ over the prompt's tokens of 1 − cos
  std::vector<int64_t> prompt_tokens_;   // [N]
  std::vector<double> sum_over_prompts_;  // [N] Σ over prompts of the per-prompt mean
  int64_t num_prompts_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Statistics, anchors and head maps
// ---------------------------------------------------------------------------------------------

struct CalibrationStats {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int64_t num_prompts = 0;
  // similarity: [num_layers, num_layers, num_kv_heads, num_kv_heads] = sim[a][b][ga][gb]
  // (a = anchor layer, b = reuse layer, ga = anchor KV head, gb = reuse KV head); only a <= b is
  // meaningful, entries with a > b are 0.
  std::vector<double> similarity;
  std::vector<double> importance;  // [num_layers] w_l

  double sim(int32_t a, int32_t b, int32_t ga, int32_t gb) const {
    return similarity[((static_cast<size_t>(a) * num_layers + b) * num_kv_heads + ga) * num_kv_heads + gb];
  }
  bool operator==(const CalibrationStats&) const = default;
};

// Shapes, num_prompts >= 1, every value finite, sim >= 0 and 0 where a > b.
Status validate_stats(const CalibrationStats& stats);
// Combines the two accumulators (same layer count and number of finished prompts).
Result<CalibrationStats> make_calibration_stats(const SimilarityAccumulator& similarity,
                                                const ImportanceAccumulator& importance);

// W: [num_layers, num_layers], W[a * N + b] = w_b · mean_gb max_ga sim[a][b][ga][gb] for a <= b;
// entries with a > b are 0 (never read).
Result<std::vector<double>> layer_scores(const CalibrationStats& stats);

// Checks a layer score matrix: [num_layers, num_layers], entries with a <= b finite.
Status validate_layer_scores(std::span<const double> layer_scores, int32_t num_layers);

// Checks an anchor list: non-empty, strictly ascending, first 0, all < num_layers.
Status validate_anchors(std::span<const int32_t> anchors, int32_t num_layers);

// Σ_m Σ_{j=a_m}^{a_{m+1}−1} W(a_m, j) with a_{K+1} = N, summed in that order.
// layer_scores: [num_layers, num_layers] as returned by layer_scores().
Result<double> anchor_objective(std::span<const double> layer_scores, int32_t num_layers,
                                std::span<const int32_t> anchors);

struct AnchorChoice {
  std::vector<int32_t> anchors;  // [num_anchors] ascending, anchors[0] == 0
  double objective = 0.0;        // anchor_objective() of `anchors`
};
// The DP: layer 0 plus num_anchors − 1 other layers maximising anchor_objective(), O(K·N²).
// Ties go to the lowest layer index: among optimal sets the lexicographically smallest one (as far
// as fp64 sums of the DP distinguish values). 1 <= num_anchors <= num_layers.
Result<AnchorChoice> select_anchors(std::span<const double> layer_scores, int32_t num_layers,
                                    int32_t num_anchors);
// Enumerates every set in lexicographic order and keeps the first maximum (for tests; refuses more
// than 10^7 sets).
Result<AnchorChoice> select_anchors_brute_force(std::span<const double> layer_scores, int32_t num_layers,
                                                int32_t num_anchors);

// head map: [num_layers, num_kv_heads] int32; map[b][gb] = argmax_ga sim[anchor(b)][b][ga][gb]
// (ties: lowest ga), anchor(b) = the largest anchor <= b; identity on anchor rows.
Result<std::vector<int32_t>> build_head_map(const CalibrationStats& stats, std::span<const int32_t> anchors);
// Checks a head map: [num_layers, num_kv_heads] entries in [0, num_kv_heads), identity on anchors.
Status validate_head_map(std::span<const int32_t> head_map, int32_t num_layers, int32_t num_kv_heads,
                         std::span<const int32_t> anchors);

// ---------------------------------------------------------------------------------------------
// Anchor refinement by agreement with dense attention (an optional extension, docs/spec-notes.md;
// `kascade calibrate --refine agreement`). The DP above is unchanged; the refinement starts from
// its set and climbs over sets of the same size (layer 0 always an anchor), scored by how often
// the model with the kascade policy of a set predicts the dense model's next token.
// ---------------------------------------------------------------------------------------------

// The score of one anchor set: over `steps` teacher-forced positions of the dev prompts (the dense
// model's greedy continuation fed back), `matches` of them have the same argmax as dense attention;
// mean_kl is the mean over those positions of KL(dense || kascade) of the next-token distributions
// (nats, >= 0).
struct AgreementScore {
  int64_t matches = 0;
  int64_t steps = 0;
  double mean_kl = 0.0;
  double agreement() const { return steps > 0 ? static_cast<double>(matches) / static_cast<double>(steps) : 0.0; }
  bool operator==(const AgreementScore&) const = default;
};
// a is better than b: higher agreement (compared exactly, as fractions), then lower mean KL.
bool better_agreement(const AgreementScore& a, const AgreementScore& b);

// "0,2,5": an anchor set (or any list of layers or counts), comma-separated, for messages and tables.
std::string format_anchors(std::span<const int32_t> anchors);

// Every set made from `anchors` by replacing one anchor other than layer 0 by one layer that is not an
// anchor: (K − 1)·(N − K) sets, each ascending, in lexicographic order. `anchors` must be valid
// (validate_anchors).
Result<std::vector<std::vector<int32_t>>> anchor_swap_neighbours(std::span<const int32_t> anchors,
                                                                 int32_t num_layers);

struct ScoredAnchors {
  std::vector<int32_t> anchors;
  AgreementScore score;
};
// One scan of the neighbourhood of `from`: every neighbour with its score, in lexicographic order,
// and the index of the best (the first best in that order); `moved` when it beats `from`.
struct ClimbRound {
  std::vector<int32_t> from;
  std::vector<ScoredAnchors> candidates;
  size_t best = 0;
  bool moved = false;
};
struct HillClimbResult {
  ScoredAnchors start;             // the start set (the DP set) and its score
  ScoredAnchors best;              // where the climb stopped
  std::vector<ClimbRound> rounds;  // the scans made, in order (none for an empty neighbourhood)
  bool local_optimum = false;      // it stopped because no neighbour of `best` is better (false: the
                                   // round limit stopped it after a move)
  int64_t sets_scored = 0;         // distinct sets the scorer was called for (start included)
};
struct HillClimbProgress {
  int32_t round = 0;               // 1-based round being scanned
  int32_t max_rounds = 0;
  int64_t scored_in_round = 0;     // sets of this round scored so far (not scored before)
  int64_t to_score_in_round = 0;   // sets of this round not scored in earlier rounds
  int64_t sets_scored = 0;         // over the whole climb
};
using AnchorScorer = std::function<Result<AgreementScore>(std::span<const int32_t> anchors)>;
using HillClimbProgressFn = std::function<void(const HillClimbProgress&)>;
// Best-improvement hill climb: score `start`; then up to `max_rounds` times, score every neighbour of
// the current set (anchor_swap_neighbours; a set is scored once however often it recurs) and move to
// the best one if it is better_agreement than the current set, else stop (a local optimum).
// `progress` (may be empty) is called at the start of each round and after each set it scores.
// A scorer error is returned as is, with the set named.
Result<HillClimbResult> hill_climb_anchors(std::span<const int32_t> start, int32_t num_layers, int32_t max_rounds,
                                           const AnchorScorer& scorer, const HillClimbProgressFn& progress = {});

enum class RefineMethod : uint8_t { kNone = 0, kAgreement = 1 };
const char* refine_method_name(RefineMethod method);  // "none" | "agreement"
Result<RefineMethod> parse_refine_method(std::string_view name);

// What a refined anchor set records beside its anchors (which are the refined set): the DP's set,
// both sets' scores and the settings of the refinement.
struct AnchorRefinement {
  std::vector<int32_t> dp_anchors;  // the DP's set for this count (where the climb started)
  double dp_objective = 0.0;        // its DP objective (anchor_objective)
  double agreement = 0.0;           // AgreementScore::agreement() of the refined set
  double kl = 0.0;                  // its mean KL(dense || kascade), nats
  double dp_agreement = 0.0;        // the same for the DP set
  double dp_kl = 0.0;
  int64_t tokens = 0;               // --refine-tokens: scored positions per prompt (at most)
  int64_t prompts = 0;              // dev prompts scored (the first ones of the dev set)
  int64_t steps = 0;                // scored positions over all prompts (the denominator of agreement)
  int32_t max_rounds = 0;           // --refine-rounds
  int32_t rounds = 0;               // neighbourhood scans made (<= max_rounds)
  bool local_optimum = false;       // the climb ended at a set no neighbour beats
  int64_t sets_scored = 0;          // distinct sets scored (the DP set included)
  bool operator==(const AnchorRefinement&) const = default;
};

struct AnchorSet {
  std::vector<int32_t> anchors;     // [K] ascending, anchors[0] == 0 (the refined set when refinement is set)
  std::vector<int32_t> head_map;    // [num_layers, num_kv_heads] anchor KV head read by (layer, KV head)
  std::optional<double> objective;  // the DP objective of `anchors`; absent for imported maps
  std::optional<AnchorRefinement> refinement;  // present when `anchors` came from the refinement
  bool operator==(const AnchorSet&) const = default;
};

// 2..min(8, num_layers); {1} for a one-layer model.
std::vector<int32_t> default_anchor_counts(int32_t num_layers);
// For every K in anchor_counts (distinct, each in [1, num_layers]): DP anchors, head map and
// objective, in the order given. Needs no model run (`kascade calibrate --from-stats`).
Result<std::vector<AnchorSet>> derive_anchor_sets(const CalibrationStats& stats,
                                                  std::span<const int32_t> anchor_counts);

// ---------------------------------------------------------------------------------------------
// Calibration file
// ---------------------------------------------------------------------------------------------

enum class CalibrationSource : uint8_t { kCollected = 0, kImported = 1 };
enum class StatsForward : uint8_t { kDense = 0, kSparse = 1 };

const char* calibration_source_name(CalibrationSource source);  // "collected" | "imported"
Result<CalibrationSource> parse_calibration_source(std::string_view name);
const char* stats_forward_name(StatsForward forward);  // "dense" | "sparse"
Result<StatsForward> parse_stats_forward(std::string_view name);

struct ModelIdentity {
  std::string name;  // e.g. "meta-llama/Llama-3.1-8B-Instruct"
  std::string path;  // checkpoint directory used (may be empty)
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t num_heads = 0;  // a multiple of num_kv_heads
  int32_t head_dim = 0;
  bool operator==(const ModelIdentity&) const = default;
};

struct DevSetInfo {
  std::string description;              // e.g. "musique answerable validation, seed 0, 1000 prompts"
  int64_t decode_steps_per_prompt = 32;  // greedy tokens generated after each prompt (>= 0)
  bool operator==(const DevSetInfo&) const = default;
};

struct CollectionSettings {
  int64_t rho_ppm = 100000;
  int64_t k_min = 128;
  int64_t tile_size = 32;
  int64_t k_cal = 32;
  StatsForward forward = StatsForward::kDense;  // the attention used while collecting
  bool operator==(const CollectionSettings&) const = default;
};

struct CalibrationFile {
  CalibrationSource source = CalibrationSource::kCollected;
  ModelIdentity model;
  // Collected files have all three; imported files have none of them.
  std::optional<DevSetInfo> dev_set;
  std::optional<CollectionSettings> collection;
  std::optional<CalibrationStats> stats;
  std::string imported_from;          // imported: where the head map came from; collected: empty
  std::vector<AnchorSet> anchor_sets;  // distinct anchor counts, ascending
  int32_t default_num_anchors = 0;     // the anchor count of one of anchor_sets

  // The set with `num_anchors` anchors, or nullptr.
  const AnchorSet* find_anchor_set(int32_t num_anchors) const;
  bool operator==(const CalibrationFile&) const = default;
};

// Everything the reader checks, naming the field ("anchor_sets[1].anchors: ...").
Status validate_calibration(const CalibrationFile& file);

// A collected file: derive_anchor_sets(stats, anchor_counts) (sorted ascending);
// default_num_anchors <= 0 picks the count nearest to kDefaultNumAnchors (the lower on a tie).
Result<CalibrationFile> build_calibration_file(const ModelIdentity& model, const DevSetInfo& dev_set,
                                               const CollectionSettings& collection,
                                               const CalibrationStats& stats,
                                               std::span<const int32_t> anchor_counts,
                                               int32_t default_num_anchors);

// The settings a refinement records (AnchorRefinement::tokens, prompts, max_rounds).
struct RefineSettings {
  int64_t tokens = 32;
  int64_t prompts = 0;
  int32_t max_rounds = 3;
};
// Replaces the anchor set of a collected `file` with as many anchors as climb.start (whose anchors must
// be that set's, the DP set) by climb.best: its anchors, head map (build_head_map over the file's
// statistics), objective (anchor_objective), and an AnchorRefinement recording the DP set, its
// objective, both scores and the settings. The file is validated afterwards.
Status apply_refinement(CalibrationFile& file, const HillClimbResult& climb, const RefineSettings& settings);
// `kascade calibrate --from-stats`: `derived` was re-derived (DP) from `saved`'s statistics, which no
// model run changed. Each refined set of `saved` whose count `derived` has and whose dp_anchors equal the
// re-derived DP set is carried over as saved (the scores are the saved run's; nothing is re-scored); the
// others are dropped (the DP set stays). Returns one line per refined set of `saved` saying which.
Result<std::vector<std::string>> carry_refinements(const CalibrationFile& saved, CalibrationFile& derived);

// JSON text (validated first; non-finite numbers are refused).
Result<std::string> calibration_to_json(const CalibrationFile& file);
// Parses and validates; every error names the field (JSON syntax errors name the field at which
// parsing stopped).
Result<CalibrationFile> parse_calibration_json(std::string_view text);
Status write_calibration_file(const CalibrationFile& file, const std::string& path);
Result<CalibrationFile> read_calibration_file(const std::string& path);

// ---------------------------------------------------------------------------------------------
// Published head maps (.npy)
// ---------------------------------------------------------------------------------------------

struct NpyIntMatrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<int64_t> values;  // [rows, cols]
};

// A minimal .npy reader: format versions 1.0, 2.0 and 3.0; dtype '<i4' or '<i8'; C order; exactly
// two dimensions. Anything else (floats, big-endian, Fortran order, other ranks, truncated or
// trailing data) is refused with a message saying what was found.
Result<NpyIntMatrix> parse_npy_int_matrix(std::span<const uint8_t> bytes);
Result<NpyIntMatrix> read_npy_int_matrix(const std::string& path);

// A calibration file marked "imported" (no statistics, dev set or collection settings) holding one
// anchor set: `anchors` with the head map [num_layers, num_kv_heads] from `map`, which must match
// the model's shape, hold entries in [0, num_kv_heads) and be the identity on anchor rows.
Result<CalibrationFile> import_head_map(const NpyIntMatrix& map, std::span<const int32_t> anchors,
                                        const ModelIdentity& model, std::string_view imported_from);
Result<CalibrationFile> import_head_map_file(const std::string& npy_path, std::span<const int32_t> anchors,
                                             const ModelIdentity& model);

}  // namespace kascade::calib
