// src/calibrate/collector.cpp — StatsCollector and its recording policy (collector.h): per layer,
// the output (dense, or the paper's sparse stats forward over top-k_cal ∪ local keys) through the
// src/ref attention ops, and the pooled scores of every unit of the call, one unit at a time,
// through src/ref/scores_ref.h into the similarity accumulator.
// Tested by tests/unit/calibrate/test_collector.cpp and tests/unit/runtime/test_calibration_collector.cpp.
#include "calibrate/collector.h"

#include <algorithm>
#include <string>
#include <vector>

#include "policy/attended_count.h"
#include "ref/attention_ref.h"
#include "ref/prefill_rows.h"
#include "ref/scores_ref.h"
#include "ref/topk_ref.h"

namespace kascade::calib {
namespace {

// Unit ids: prefill tile t >= 1 is unit t; the decode step with n keys is unit -n.
int64_t decode_unit_id(int64_t kv_len) { return -kv_len; }

class RecordingPolicy final : public AttentionPolicy {
 public:
  explicit RecordingPolicy(std::shared_ptr<StatsCollector> collector) : collector_(std::move(collector)) {
    const CollectorConfig& c = collector_->config();
    config_.name = c.forward == StatsForward::kDense ? "calibration-dense" : "calibration-sparse";
    config_.num_layers = c.num_layers;
    config_.num_heads = c.num_heads;
    config_.num_kv_heads = c.num_kv_heads;
    config_.head_dim = c.head_dim;
    config_.tile_size = c.tile_size;
    // The sparse stats forward's budget: k = min(n, k_cal) (rho is negligible: 1 ppm).
    config_.budget = Budget{1, c.k_cal, 1};
    config_.rolling = true;
    const LayerRole role = sparse() ? LayerRole::kAnchor : LayerRole::kDense;
    for (int m = 0; m < 2; ++m) {
      stats_.per_layer[m].assign(static_cast<size_t>(c.num_layers), AttendedCount{});
      stats_.roles[m].assign(static_cast<size_t>(c.num_layers), role);
    }
  }

  const PolicyConfig& config() const override { return config_; }

  Status begin_forward(const ForwardInfo& info) override {
    in_call_ = false;
    produced_ = false;
    Status status = plan_call(info);
    if (!status.ok()) return status.with_context("calibration collector, begin_forward");
    in_call_ = true;
    next_layer_ = 0;
    collector_->record_call_tokens(mode_, q_len_);
    return ok_status();
  }

  Status attention(int32_t layer, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                   const AttentionOutput& out) override {
    const std::string context = detail::concat("calibration collector, ", forward_mode_name(mode_), " layer ", layer);
    KC_CHECK_ARG(in_call_, context, ": attention() without a successful begin_forward");
    KC_CHECK_ARG(layer == next_layer_, context, ": expected layer ", next_layer_,
                 " (layers run once each, in ascending order)");
    Status status = check_views(q, kv);
    if (status.ok()) status = run_layer(layer, q, kv, params, out);
    if (!status.ok()) {
      in_call_ = false;
      return status.with_context(context);
    }
    ++next_layer_;
    return ok_status();
  }

  Result<LayerRole> role(int32_t layer, ForwardMode mode) const override {
    KC_CHECK_ARG(layer >= 0 && layer < config_.num_layers, "calibration collector: layer ", layer,
                 " is outside the model's layers 0..", config_.num_layers - 1);
    return stats_.roles[static_cast<int>(mode)][static_cast<size_t>(layer)];
  }

  const AttendedStatistics& statistics() const override { return stats_; }

  void reset_statistics() override {
    for (auto& layers : stats_.per_layer) std::fill(layers.begin(), layers.end(), AttendedCount{});
  }

  // The sparse stats forward's decode rows: G rows of min(k_cal, n); the dense one has none.
  int64_t planned_decode_row_width() const override {
    return in_call_ && mode_ == ForwardMode::kDecode && sparse() ? decode_k_ : 0;
  }

  Result<IndexSnapshot> snapshot_indices() const override {
    IndexSnapshot snap;
    if (!in_call_ || !produced_) return snap;
    snap.valid = true;
    snap.mode = mode_;
    snap.producer_layer = next_layer_ - 1;
    snap.num_rows = config_.num_kv_heads;
    snap.granularity = IndexGranularity::kPerKvGroup;
    if (mode_ == ForwardMode::kDecode) {
      snap.k_max = decode_k_;
      snap.row_lens = decode_row_lens_;
      snap.indices = decode_indices_;
    } else {
      snap.tile_size = config_.tile_size;
      snap.include_local = true;
      snap.tile_base = prefill_rows_.plan.tile_base;
      snap.row_offsets = prefill_rows_.plan.row_offsets;
      snap.tile_first = prefill_rows_.plan.tile_first;
      snap.indices = prefill_rows_.indices;
    }
    return snap;
  }

 private:
  bool sparse() const { return collector_->config().forward == StatsForward::kSparse; }

  Status plan_call(const ForwardInfo& info) {
    KC_CHECK_ARG(collector_->in_prompt(), "forward call outside a calibration prompt (begin_prompt first)");
    KC_CHECK_ARG(info.batch == 1,
                 "the collector runs one sequence per forward call (the statistics are per "
                 "prompt); this call has ",
                 info.batch);
    KC_CHECK_ARG(info.q_lens != nullptr && info.kv_lens != nullptr, "q_lens and kv_lens must be non-null host arrays");
    mode_ = info.mode;
    q_len_ = info.q_lens[0];
    kv_len_ = info.kv_lens[0];
    KC_CHECK_ARG(q_len_ >= 1 && kv_len_ >= q_len_, "q_len ", q_len_, " and kv_len ", kv_len_,
                 "; expected 1 <= q_len <= kv_len");
    const int32_t T = config_.tile_size;
    const int32_t G = config_.num_kv_heads;
    if (mode_ == ForwardMode::kDecode) {
      KC_CHECK_ARG(q_len_ == 1, "a decode call has one query per sequence; this one has ", q_len_);
      if (sparse()) {
        decode_k_ = static_cast<int32_t>(std::min<int64_t>(collector_->config().k_cal, kv_len_));
        decode_indices_.assign(static_cast<size_t>(G) * decode_k_, -1);
        decode_row_lens_.assign(static_cast<size_t>(G), decode_k_);
      }
      return ok_status();
    }
    const int64_t start = static_cast<int64_t>(kv_len_) - q_len_;
    KC_CHECK_ARG(start % T == 0, "a prefill call starts at position ", start, ", inside a tile of ", T,
                 ": calibration needs prefill chunks that are multiples of the tile size, so that every "
                 "tile is one unit seen whole in one call");
    if (sparse()) {
      KC_ASSIGN_OR_RETURN(prefill_rows_.plan,
                          ref::plan_prefill_rows(&q_len_, &kv_len_, 1, T, G, config_.budget, config_.rolling));
      prefill_rows_.indices.clear();
      rows_view_ = prefill_rows_.view(/*include_local=*/true, IndexGranularity::kPerKvGroup);
    }
    return ok_status();
  }

  Status check_views(const QueryBatch& q, const PagedKv& kv) const {
    KC_CHECK_ARG(q.batch == 1 && q.total_q == q_len_, "the queries hold ", q.batch, " sequences and ", q.total_q,
                 " rows; begin_forward announced 1 sequence of ", q_len_);
    KC_CHECK_ARG(q.num_heads == config_.num_heads && q.head_dim == config_.head_dim, "queries of ", q.num_heads,
                 " heads of dim ", q.head_dim, "; the model has ", config_.num_heads, " of dim ", config_.head_dim);
    KC_CHECK_ARG(kv.num_kv_heads == config_.num_kv_heads, "the KV cache has ", kv.num_kv_heads,
                 " KV heads; the model has ", config_.num_kv_heads);
    KC_CHECK_ARG(kv.kv_lens != nullptr && kv.kv_lens[0] == kv_len_, "the KV cache holds ",
                 kv.kv_lens ? kv.kv_lens[0] : -1, " keys; begin_forward announced ", kv_len_);
    return ok_status();
  }

  Status run_layer(int32_t layer, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                   const AttentionOutput& out) {
    const std::vector<int32_t> q_lens = {q_len_};
    const std::vector<int32_t> kv_lens = {kv_len_};
    AttendedCount count;
    if (mode_ == ForwardMode::kDecode) {
      KC_RETURN_IF_ERROR(record_decode(layer, q, kv, params));
      if (sparse()) {
        DecodeIndexRows rows;
        rows.indices = decode_indices_.data();
        rows.row_lens = decode_row_lens_.data();
        rows.batch = 1;
        rows.num_rows = config_.num_kv_heads;
        rows.k_max = decode_k_;
        KC_RETURN_IF_ERROR(ref::sparse_decode_ref(q, kv, params, rows, nullptr, out));
        count =
            policy::count_sparse_decode(kv_lens, decode_row_lens_, config_.num_kv_heads, IndexGranularity::kPerKvGroup,
                                        nullptr, config_.num_heads, config_.num_kv_heads);
      }
    } else {
      KC_RETURN_IF_ERROR(record_prefill(layer, q, kv, params));
      if (sparse()) {
        KC_RETURN_IF_ERROR(ref::sparse_prefill_ref(q, kv, params, rows_view_, nullptr, out));
        count = policy::count_sparse_prefill(q_lens, kv_lens, prefill_rows_.plan, true, IndexGranularity::kPerKvGroup,
                                             nullptr, config_.num_heads, config_.num_kv_heads);
      }
    }
    if (!sparse()) {
      KC_RETURN_IF_ERROR(ref::dense_attention_ref(q, kv, params, out));
      count = policy::count_dense(q_lens, kv_lens, config_.num_heads);
    }
    produced_ = sparse();
    stats_.per_layer[static_cast<int>(mode_)][static_cast<size_t>(layer)] += count;
    return ok_status();
  }

  // Units of the prefill tiles t >= 1 of this call, one tile at a time; with the sparse forward
  // each tile's Top-k_cal also goes into the call's rows.
  Status record_prefill(int32_t layer, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params) {
    const int32_t T = config_.tile_size;
    const int32_t G = config_.num_kv_heads;
    const int64_t first = (static_cast<int64_t>(kv_len_) - q_len_) / T;
    const int64_t last = (static_cast<int64_t>(kv_len_) - 1) / T;
    const ref::PoolingSpec pooling{G, ref::PoolReduce::kSum};
    for (int64_t t = std::max<int64_t>(first, 1); t <= last; ++t) {
      const int64_t s_t = t * T;
      scores_.resize(static_cast<size_t>(G) * static_cast<size_t>(s_t));  // [G, s_t]
      local_.resize(static_cast<size_t>(G));                              // [G]
      KC_RETURN_IF_ERROR(
          ref::pooled_scores_prefill_tile_ref(q, kv, params, pooling, 0, t, T, scores_.data(), local_.data()));
      KC_RETURN_IF_ERROR(collector_->record_unit(t, layer, UnitScores{scores_.data(), s_t, s_t, local_.data()},
                                                 /*decode=*/false));
      if (!sparse()) continue;
      const int64_t slot = t - first;
      for (int32_t g = 0; g < G; ++g) {
        const size_t row = static_cast<size_t>(slot) * G + static_cast<size_t>(g);
        const int64_t begin = prefill_rows_.plan.row_offsets[row];
        const int64_t length = prefill_rows_.plan.row_offsets[row + 1] - begin;
        KC_RETURN_IF_ERROR(ref::topk_select_ref(scores_.data() + static_cast<size_t>(g) * s_t, s_t, length,
                                                prefill_rows_.indices.data() + begin));
      }
    }
    return ok_status();
  }

  // The unit of this decode step: S over all n keys; with the sparse forward, its Top-k_cal rows.
  Status record_decode(int32_t layer, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params) {
    const int32_t G = config_.num_kv_heads;
    const int64_t n = kv_len_;
    scores_.resize(static_cast<size_t>(G) * static_cast<size_t>(n));  // [G, n]
    KC_RETURN_IF_ERROR(
        ref::pooled_scores_decode_ref(q, kv, params, ref::PoolingSpec{G, ref::PoolReduce::kSum}, scores_.data(), n));
    KC_RETURN_IF_ERROR(
        collector_->record_unit(decode_unit_id(n), layer, UnitScores{scores_.data(), n, n, nullptr}, /*decode=*/true));
    if (!sparse()) return ok_status();
    for (int32_t g = 0; g < G; ++g) {
      KC_RETURN_IF_ERROR(ref::topk_select_ref(scores_.data() + static_cast<size_t>(g) * n, n, decode_k_,
                                              decode_indices_.data() + static_cast<size_t>(g) * decode_k_));
    }
    return ok_status();
  }

  std::shared_ptr<StatsCollector> collector_;
  PolicyConfig config_;
  AttendedStatistics stats_;
  bool in_call_ = false;
  bool produced_ = false;  // the current call has rows (sparse forward, after its first layer)
  ForwardMode mode_ = ForwardMode::kPrefill;
  int32_t q_len_ = 0;
  int32_t kv_len_ = 0;
  int32_t next_layer_ = 0;
  std::vector<float> scores_;  // one unit's pooled scores [G, candidates]
  std::vector<float> local_;   // [G]
  // Sparse stats forward rows.
  ref::PrefillIndexSet prefill_rows_;
  PrefillIndexRows rows_view_;
  int32_t decode_k_ = 0;
  std::vector<int32_t> decode_indices_;   // [G, decode_k_]
  std::vector<int32_t> decode_row_lens_;  // [G]
};

}  // namespace

Status validate_collector_config(const CollectorConfig& c) {
  KC_CHECK_ARG(c.num_layers >= 1, "collector: num_layers is ", c.num_layers, "; expected >= 1");
  KC_CHECK_ARG(c.num_heads >= 1 && c.num_kv_heads >= 1 && c.num_heads % c.num_kv_heads == 0, "collector: ", c.num_heads,
               " heads and ", c.num_kv_heads, " KV heads; expected H >= 1, G >= 1, H % G == 0");
  KC_CHECK_ARG(c.head_dim >= 1, "collector: head_dim is ", c.head_dim, "; expected >= 1");
  KC_CHECK_ARG(c.hidden_size >= 1, "collector: hidden_size is ", c.hidden_size, "; expected >= 1");
  KC_CHECK_ARG(c.k_cal >= 1, "collector: k_cal is ", c.k_cal, "; expected >= 1");
  KC_CHECK_ARG(c.tile_size >= 1, "collector: tile_size is ", c.tile_size, "; expected >= 1");
  KC_CHECK_ARG(c.forward == StatsForward::kDense || c.forward == StatsForward::kSparse,
               "collector: unknown stats forward ", static_cast<int>(c.forward));
  return ok_status();
}

Result<std::shared_ptr<StatsCollector>> StatsCollector::create(const CollectorConfig& config) {
  KC_RETURN_IF_ERROR(validate_collector_config(config));
  KC_ASSIGN_OR_RETURN(SimilarityAccumulator similarity,
                      SimilarityAccumulator::create(config.num_layers, config.num_kv_heads, config.k_cal));
  KC_ASSIGN_OR_RETURN(ImportanceAccumulator importance,
                      ImportanceAccumulator::create(config.num_layers, config.hidden_size));
  return std::shared_ptr<StatsCollector>(new StatsCollector(config, std::move(similarity), std::move(importance)));
}

std::unique_ptr<AttentionPolicy> StatsCollector::make_policy() {
  return std::make_unique<RecordingPolicy>(shared_from_this());
}

Status StatsCollector::observe(int32_t layer, const float* x, const float* attn, int64_t tokens) {
  return importance_.add(layer, x, attn, tokens, DType::kF32);
}

Status StatsCollector::begin_prompt(std::string_view name) {
  KC_RETURN_IF_ERROR(similarity_.begin_prompt(name));
  Status s = importance_.begin_prompt(name);
  if (!s.ok()) {
    similarity_.discard_prompt();
    return s;
  }
  units_ = PromptUnits{};
  return ok_status();
}

Result<PromptUnits> StatsCollector::end_prompt() {
  // Both accumulators must take the prompt or neither: importance is ended on a copy first.
  ImportanceAccumulator importance = importance_;
  Status s = importance.end_prompt();
  if (!s.ok()) {
    discard_prompt();
    return s;
  }
  s = similarity_.end_prompt();
  if (!s.ok()) {
    discard_prompt();
    return s;
  }
  importance_ = std::move(importance);
  const PromptUnits units = units_;
  units_ = PromptUnits{};
  return units;
}

void StatsCollector::discard_prompt() {
  similarity_.discard_prompt();
  importance_.discard_prompt();
  units_ = PromptUnits{};
}

Result<CalibrationStats> StatsCollector::stats() const { return make_calibration_stats(similarity_, importance_); }

Status StatsCollector::record_unit(int64_t unit, int32_t layer, const UnitScores& scores, bool decode) {
  KC_RETURN_IF_ERROR(similarity_.add(unit, layer, scores));
  if (layer == 0) ++(decode ? units_.decode_steps : units_.prefill_tiles);
  return ok_status();
}

void StatsCollector::record_call_tokens(ForwardMode mode, int64_t tokens) {
  (mode == ForwardMode::kDecode ? units_.decode_tokens : units_.prefill_tokens) += tokens;
}

}  // namespace kascade::calib
