// src/policy/index_policy.cpp — IndexPolicy: runs a PolicyProgram over a backend (see
// index_policy.h), the per-mode check of the backend ops a program calls, and make_policy.
// Tested by tests/unit/policy/test_policy.cpp, test_baselines.cpp, test_statistics.cpp and
// test_policy_support.cpp (the per-mode check against a backend that refuses one op).
#include "policy/index_policy.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "policy/attended_count.h"
#include "policy/oracle_plan.h"
#include "policy/policy_program.h"
#include "policy/streaming_rows.h"
#include "ref/prefill_rows.h"

namespace kascade {
namespace policy {
namespace {

// producer_ when no rows exist in the current call.
constexpr int32_t kNoRows = -2;

// A backend allocation that only grows, so steady-state decode allocates nothing.
class GrowBuffer {
 public:
  Status ensure(AttentionBackend& backend, size_t bytes) {
    bytes = std::max<size_t>(bytes, 64);
    if (buffer_.bytes() >= bytes) return ok_status();
    buffer_.reset();
    KC_ASSIGN_OR_RETURN(buffer_, backend.allocate(bytes));
    return ok_status();
  }
  template <typename T>
  T* as() const {
    return buffer_.as<T>();
  }

 private:
  BackendBuffer buffer_;
};

template <typename T>
Status upload(AttentionBackend& backend, const std::vector<T>& host, GrowBuffer& buffer) {
  KC_RETURN_IF_ERROR(buffer.ensure(backend, host.size() * sizeof(T)));
  return backend.copy_from_host(buffer.as<void>(), host.data(), host.size() * sizeof(T));
}

class IndexPolicy final : public AttentionPolicy {
 public:
  // mode_support: [ForwardMode] OK, or the refusal begin_forward returns for that mode.
  IndexPolicy(PolicyConfig config, std::shared_ptr<AttentionBackend> backend, PolicyProgram program,
              Status prefill_support, Status decode_support)
      : config_(std::move(config)), backend_(std::move(backend)), program_(std::move(program)) {
    mode_support_[static_cast<int>(ForwardMode::kPrefill)] = std::move(prefill_support);
    mode_support_[static_cast<int>(ForwardMode::kDecode)] = std::move(decode_support);
    for (int m = 0; m < 2; ++m) {
      stats_.per_layer[m].assign(static_cast<size_t>(config_.num_layers), AttendedCount{});
      for (const auto& step : program_.modes[m].layers) stats_.roles[m].push_back(step.role);
    }
  }

  Status upload_maps() { return upload(*backend_, program_.map_table, map_table_); }

  const PolicyConfig& config() const override { return config_; }

  Status begin_forward(const ForwardInfo& info) override {
    in_call_ = false;
    producer_ = kNoRows;
    const int mode = static_cast<int>(info.mode);
    KC_CHECK_ARG(mode == 0 || mode == 1, "policy '", config_.name, "', begin_forward: info.mode holds unknown value ",
                 mode);
    // An op of this mode the backend refused when the policy was made: refuse before touching anything.
    if (!mode_support_[mode].ok()) return mode_support_[mode];
    Status status = plan_call(info);
    if (!status.ok()) return status.with_context("policy '" + config_.name + "', begin_forward");
    in_call_ = true;
    return ok_status();
  }

  Status attention(int32_t layer, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                   const AttentionOutput& out) override {
    const std::string context = "policy '" + config_.name + "', " + forward_mode_name(mode_) + " layer " +
                                std::to_string(layer);
    KC_CHECK_ARG(in_call_, "policy '", config_.name, "': attention(layer ", layer,
                 ") called without a successful begin_forward");
    KC_CHECK_ARG(layer >= 0 && layer < config_.num_layers, "policy '", config_.name, "': layer ", layer,
                 " is outside the model's layers 0..", config_.num_layers - 1);
    Status status = check_views(q, kv);
    if (status.ok()) status = run_layer(layer, q, kv, params, out);
    if (!status.ok()) return status.with_context(context);
    return ok_status();
  }

  Result<LayerRole> role(int32_t layer, ForwardMode mode) const override {
    KC_CHECK_ARG(layer >= 0 && layer < config_.num_layers, "policy '", config_.name, "': layer ", layer,
                 " is outside the model's layers 0..", config_.num_layers - 1);
    return program_.mode(mode).layers[static_cast<size_t>(layer)].role;
  }

  const AttendedStatistics& statistics() const override { return stats_; }

  void reset_statistics() override {
    for (auto& layers : stats_.per_layer) std::fill(layers.begin(), layers.end(), AttendedCount{});
  }

  int64_t planned_decode_row_width() const override {
    const bool has_rows = in_call_ && mode_ == ForwardMode::kDecode && selector() != Selector::kNone;
    return has_rows ? decode_rows_.k_max : 0;
  }

  Result<IndexSnapshot> snapshot_indices() const override {
    IndexSnapshot snap;
    if (!in_call_ || producer_ == kNoRows) return snap;
    snap.valid = true;
    snap.mode = mode_;
    snap.producer_layer = producer_;
    snap.num_rows = num_rows_;
    snap.granularity = selector_granularity(selector());
    if (mode_ == ForwardMode::kDecode) {
      snap.k_max = decode_rows_.k_max;
      snap.row_lens.resize(static_cast<size_t>(batch_) * num_rows_);
      snap.indices.resize(snap.row_lens.size() * static_cast<size_t>(decode_rows_.k_max));
      KC_RETURN_IF_ERROR(backend_->copy_to_host(snap.row_lens.data(), row_lens_.as<int32_t>(),
                                                snap.row_lens.size() * sizeof(int32_t)));
      KC_RETURN_IF_ERROR(backend_->copy_to_host(snap.indices.data(), indices_.as<int32_t>(),
                                                snap.indices.size() * sizeof(int32_t)));
    } else {
      snap.tile_size = plan_.tile_size;
      snap.include_local = prefill_rows_.include_local;
      snap.tile_base = plan_.tile_base;
      snap.row_offsets = plan_.row_offsets;
      snap.tile_first = plan_.tile_first;
      snap.indices.resize(static_cast<size_t>(plan_.total_indices()));
      KC_RETURN_IF_ERROR(backend_->copy_to_host(snap.indices.data(), indices_.as<int32_t>(),
                                                snap.indices.size() * sizeof(int32_t)));
    }
    return snap;
  }

 private:
  Selector selector() const { return program_.mode(mode_).selector; }

  // ---- planning ----
  Status plan_call(const ForwardInfo& info) {
    KC_CHECK_ARG(info.batch >= 1, "batch is ", info.batch, "; expected >= 1");
    KC_CHECK_ARG(info.q_lens != nullptr && info.kv_lens != nullptr, "q_lens and kv_lens must be non-null host arrays");
    mode_ = info.mode;
    batch_ = info.batch;
    q_lens_.assign(info.q_lens, info.q_lens + info.batch);
    kv_lens_.assign(info.kv_lens, info.kv_lens + info.batch);
    total_q_ = 0;
    for (int32_t b = 0; b < batch_; ++b) {
      KC_CHECK_ARG(q_lens_[b] >= 1 && kv_lens_[b] >= q_lens_[b], "sequence ", b, " has q_len ", q_lens_[b],
                   " and kv_len ", kv_lens_[b], "; expected 1 <= q_len <= kv_len");
      KC_CHECK_ARG(mode_ == ForwardMode::kPrefill || q_lens_[b] == 1, "decode takes one new query per sequence; "
                   "sequence ", b, " has ", q_lens_[b], " (several new queries follow the prefill rules: use prefill mode)");
      total_q_ += q_lens_[b];
    }
    num_rows_ = selector_rows(selector(), config_.num_heads, config_.num_kv_heads);
    if (selector() == Selector::kNone) return ok_status();
    return mode_ == ForwardMode::kDecode ? plan_decode() : plan_prefill();
  }

  Status plan_decode() {
    const Selector sel = selector();
    k_per_seq_.resize(static_cast<size_t>(batch_));
    int64_t k_max = 1;
    for (int32_t b = 0; b < batch_; ++b) {
      const int64_t n = kv_lens_[b];
      const int64_t k = budget_k(n, config_.budget);
      k_per_seq_[b] = static_cast<int32_t>(k);
      int64_t capacity = k;
      if (sel == Selector::kQuest) capacity = std::min<int64_t>(n, k + config_.quest_page_size - 1);
      if (sel == Selector::kLessIsMore) capacity = std::min<int64_t>(n, k + config_.lessismore_sinks);
      k_max = std::max(k_max, capacity);
    }
    k_max = decode_row_width(k_max);  // bucketed: the row stride (and buffer) survive many steps
    const size_t num_row_entries = static_cast<size_t>(batch_) * num_rows_;
    KC_RETURN_IF_ERROR(indices_.ensure(*backend_, num_row_entries * static_cast<size_t>(k_max) * sizeof(int32_t)));
    KC_RETURN_IF_ERROR(row_lens_.ensure(*backend_, num_row_entries * sizeof(int32_t)));
    decode_rows_ = DecodeIndexRows{};
    decode_rows_.indices = indices_.as<int32_t>();
    decode_rows_.row_lens = row_lens_.as<int32_t>();
    decode_rows_.batch = batch_;
    decode_rows_.num_rows = num_rows_;
    decode_rows_.k_max = static_cast<int32_t>(k_max);
    decode_rows_.granularity = selector_granularity(sel);
    // Rows of score-based selectors hold exactly k; Quest / LessIsMore lengths come back after selection.
    host_row_lens_.assign(num_row_entries, 0);
    for (int32_t b = 0; b < batch_; ++b) {
      for (int32_t r = 0; r < num_rows_; ++r) host_row_lens_[static_cast<size_t>(b) * num_rows_ + r] = k_per_seq_[b];
    }
    if (sel == Selector::kStreaming) {
      std::vector<int32_t> indices(num_row_entries * static_cast<size_t>(k_max));
      std::vector<int32_t> lens(num_row_entries);
      KC_RETURN_IF_ERROR(streaming_decode_rows(kv_lens_, k_per_seq_, config_.streaming_sinks,
                                               static_cast<int32_t>(k_max), indices.data(), lens.data()));
      KC_RETURN_IF_ERROR(backend_->copy_from_host(decode_rows_.indices, indices.data(), indices.size() * sizeof(int32_t)));
      KC_RETURN_IF_ERROR(backend_->copy_from_host(decode_rows_.row_lens, lens.data(), lens.size() * sizeof(int32_t)));
      producer_ = kRowsFromBeginForward;
    }
    return ok_status();
  }

  Status plan_prefill() {
    const Selector sel = selector();
    if (sel == Selector::kOracle) {
      KC_ASSIGN_OR_RETURN(plan_, plan_oracle_prefill_rows(q_lens_.data(), kv_lens_.data(), batch_, config_.num_heads,
                                                          config_.budget));
    } else {
      KC_ASSIGN_OR_RETURN(plan_, ref::plan_prefill_rows(q_lens_.data(), kv_lens_.data(), batch_, config_.tile_size,
                                                        num_rows_, config_.budget, config_.rolling));
    }
    KC_RETURN_IF_ERROR(upload(*backend_, plan_.tile_base, tile_base_));
    KC_RETURN_IF_ERROR(upload(*backend_, plan_.row_offsets, row_offsets_));
    KC_RETURN_IF_ERROR(indices_.ensure(*backend_, static_cast<size_t>(plan_.total_indices()) * sizeof(int32_t)));
    prefill_rows_ = PrefillIndexRows{};
    prefill_rows_.indices = indices_.as<int32_t>();
    prefill_rows_.row_offsets = row_offsets_.as<int64_t>();
    prefill_rows_.tile_base = tile_base_.as<int32_t>();
    prefill_rows_.batch = batch_;
    prefill_rows_.num_rows = num_rows_;
    prefill_rows_.tile_size = plan_.tile_size;
    prefill_rows_.include_local = sel != Selector::kOracle;
    prefill_rows_.granularity = selector_granularity(sel);
    if (sel == Selector::kStreaming) {
      std::vector<int32_t> indices(static_cast<size_t>(plan_.total_indices()));
      KC_RETURN_IF_ERROR(streaming_prefill_rows(plan_, config_.streaming_sinks, indices.data()));
      KC_RETURN_IF_ERROR(backend_->copy_from_host(prefill_rows_.indices, indices.data(), indices.size() * sizeof(int32_t)));
      producer_ = kRowsFromBeginForward;
    }
    return ok_status();
  }

  // ---- running a layer ----
  Status check_views(const QueryBatch& q, const PagedKv& kv) const {
    KC_CHECK_ARG(q.batch == batch_ && q.total_q == total_q_, "q holds ", q.batch, " sequences and ", q.total_q,
                 " queries; begin_forward declared ", batch_, " and ", total_q_);
    KC_CHECK_ARG(q.num_heads == config_.num_heads && q.head_dim == config_.head_dim, "q has ", q.num_heads,
                 " heads of dim ", q.head_dim, "; the policy was configured for ", config_.num_heads, " of dim ",
                 config_.head_dim);
    KC_CHECK_ARG(kv.num_kv_heads == config_.num_kv_heads && kv.head_dim == config_.head_dim, "kv has ",
                 kv.num_kv_heads, " KV heads of dim ", kv.head_dim, "; the policy was configured for ",
                 config_.num_kv_heads, " of dim ", config_.head_dim);
    return ok_status();
  }

  Status run_layer(int32_t layer, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                   const AttentionOutput& out) {
    const LayerStep& step = program_.mode(mode_).layers[static_cast<size_t>(layer)];
    AttendedCount& count = stats_.per_layer[static_cast<int>(mode_)][static_cast<size_t>(layer)];
    const size_t map_at = static_cast<size_t>(step.map_row) * config_.num_kv_heads;
    const int32_t* map = step.map_row == kIdentityMap ? nullptr : map_table_.as<int32_t>() + map_at;
    const int32_t* host_map = step.map_row == kIdentityMap ? nullptr : program_.map_table.data() + map_at;
    switch (step.role) {
      case LayerRole::kDense:
        KC_RETURN_IF_ERROR(backend_->dense(q, kv, params, out));
        count += count_dense(q_lens_, kv_lens_, config_.num_heads);
        return ok_status();
      case LayerRole::kDenseAnchor:
      case LayerRole::kAnchor: {
        const AnchorOutput output = step.role == LayerRole::kDenseAnchor ? AnchorOutput::kDense : AnchorOutput::kSparse;
        producer_ = kNoRows;  // a failed selection leaves no usable rows
        KC_RETURN_IF_ERROR(select_and_attend(q, kv, params, output, map, out));
        producer_ = layer;
        count += output == AnchorOutput::kDense ? count_dense(q_lens_, kv_lens_, config_.num_heads)
                                                : count_sparse(host_map);
        return ok_status();
      }
      case LayerRole::kReuse:
        if (producer_ != step.source) {
          if (step.source == kRowsFromBeginForward) return internal_error("the rows made at begin_forward are gone");
          return invalid_argument("this layer reads the rows selected by layer ", step.source,
                                  ", which has not run in this forward call (layers run in ascending order)");
        }
        KC_RETURN_IF_ERROR(attend_rows(q, kv, params, map, out));
        count += count_sparse(host_map);
        return ok_status();
    }
    return internal_error("unknown layer role");
  }

  Status attend_rows(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params, const int32_t* map,
                     const AttentionOutput& out) {
    if (mode_ == ForwardMode::kDecode) return backend_->sparse_decode(q, kv, params, decode_rows_, map, out);
    return backend_->sparse_prefill(q, kv, params, prefill_rows_, map, out);
  }

  Status attend(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params, AnchorOutput output,
                const int32_t* map, const AttentionOutput& out) {
    if (output == AnchorOutput::kDense) return backend_->dense(q, kv, params, out);
    return attend_rows(q, kv, params, map, out);
  }

  Status fetch_row_lens() {
    return backend_->copy_to_host(host_row_lens_.data(), decode_rows_.row_lens, host_row_lens_.size() * sizeof(int32_t));
  }

  Status select_and_attend(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params, AnchorOutput output,
                           const int32_t* map, const AttentionOutput& out) {
    const Selector sel = selector();
    const ScorePooling pooling = selector_pooling(sel, config_.num_heads, config_.num_kv_heads);
    if (mode_ == ForwardMode::kDecode) {
      switch (sel) {
        case Selector::kGroupPooled:
        case Selector::kAllPooled:
        case Selector::kOracle:
        case Selector::kOmniKv:
          return backend_->anchor_decode(q, kv, params, pooling, k_per_seq_.data(), decode_rows_, output, map, out);
        case Selector::kQuest:
          KC_RETURN_IF_ERROR(
              backend_->select_quest_decode(q, kv, config_.quest_page_size, k_per_seq_.data(), decode_rows_));
          KC_RETURN_IF_ERROR(fetch_row_lens());
          return attend(q, kv, params, output, map, out);
        case Selector::kLessIsMore:
          KC_RETURN_IF_ERROR(backend_->select_lessismore_decode(q, kv, params, k_per_seq_.data(),
                                                                config_.lessismore_sinks, decode_rows_));
          KC_RETURN_IF_ERROR(fetch_row_lens());
          return attend(q, kv, params, output, map, out);
        case Selector::kNone:
        case Selector::kStreaming:
          break;
      }
    } else {
      switch (sel) {
        case Selector::kGroupPooled:
        case Selector::kAllPooled:
          return backend_->anchor_prefill(q, kv, params, pooling, prefill_rows_, output, map, out);
        case Selector::kOracle:
          KC_RETURN_IF_ERROR(backend_->select_prefill_oracle(q, kv, params, prefill_rows_));
          return attend(q, kv, params, output, map, out);
        default:
          break;
      }
    }
    return internal_error("selector ", selector_name(sel), " cannot select in ", forward_mode_name(mode_));
  }

  AttendedCount count_sparse(const int32_t* host_map) const {
    const IndexGranularity granularity = selector_granularity(selector());
    if (mode_ == ForwardMode::kDecode) {
      return count_sparse_decode(kv_lens_, host_row_lens_, num_rows_, granularity, host_map, config_.num_heads,
                                 config_.num_kv_heads);
    }
    return count_sparse_prefill(q_lens_, kv_lens_, plan_, prefill_rows_.include_local, granularity, host_map,
                                config_.num_heads, config_.num_kv_heads);
  }

  PolicyConfig config_;
  std::shared_ptr<AttentionBackend> backend_;
  PolicyProgram program_;
  Status mode_support_[2];  // [ForwardMode]
  GrowBuffer map_table_;  // program_.map_table in backend memory
  AttendedStatistics stats_;

  // The current forward call.
  bool in_call_ = false;
  ForwardMode mode_ = ForwardMode::kPrefill;
  int32_t batch_ = 0;
  int64_t total_q_ = 0;
  std::vector<int32_t> q_lens_, kv_lens_;  // [batch]
  int32_t num_rows_ = 0;                   // rows per sequence (decode) or per tile (prefill)
  int32_t producer_ = kNoRows;             // layer whose rows the buffers hold
  std::vector<int32_t> k_per_seq_;         // [batch] decode budget k(n)
  std::vector<int32_t> host_row_lens_;     // [batch, num_rows] decode row lengths (host copy)
  DecodeIndexRows decode_rows_;
  ref::PrefillRowPlan plan_;
  PrefillIndexRows prefill_rows_;
  GrowBuffer indices_, row_lens_, tile_base_, row_offsets_;
};

// The backend ops `program` calls in mode m (see policy_backend_ops).
std::vector<BackendOp> program_ops(const PolicyProgram& program, ForwardMode m) {
  std::vector<BackendOp> ops;
  auto need = [&ops](BackendOp op) {
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  };
  const ModeProgram& mode = program.mode(m);
  const bool decode = m == ForwardMode::kDecode;
  for (const auto& step : mode.layers) {
    if (step.role == LayerRole::kDense || step.role == LayerRole::kDenseAnchor) need(BackendOp::kDense);
    if (step.role != LayerRole::kDenseAnchor && step.role != LayerRole::kAnchor) {
      if (step.role == LayerRole::kReuse) need(decode ? BackendOp::kSparseDecode : BackendOp::kSparsePrefill);
      continue;
    }
    // Selecting layers: the selection, then the sparse output of kAnchor (IndexPolicy::select_and_attend).
    switch (mode.selector) {
      case Selector::kQuest: need(BackendOp::kSelectQuestDecode); break;
      case Selector::kLessIsMore: need(BackendOp::kSelectLessIsMoreDecode); break;
      case Selector::kOracle:
        need(decode ? BackendOp::kSelectDecode : BackendOp::kSelectPrefillOracle);
        break;
      case Selector::kGroupPooled:
      case Selector::kAllPooled:
      case Selector::kOmniKv:
        need(decode ? BackendOp::kSelectDecode : BackendOp::kSelectPrefill);
        break;
      case Selector::kNone:
      case Selector::kStreaming:
        break;
    }
    if (step.role == LayerRole::kAnchor) need(decode ? BackendOp::kSparseDecode : BackendOp::kSparsePrefill);
  }
  return ops;
}

// OK when the backend supports every op `program` calls in `mode`; otherwise the first refusal,
// naming the policy, the op, the backend and the mode.
Status mode_support(const PolicyConfig& config, const PolicyProgram& program, const AttentionBackend& backend,
                    ForwardMode mode) {
  AttentionShape shape;
  shape.num_heads = config.num_heads;
  shape.num_kv_heads = config.num_kv_heads;
  shape.head_dim = config.head_dim;
  for (BackendOp op : program_ops(program, mode)) {
    Status status = backend.supports(op, shape);
    if (!status.ok()) {
      return status.with_context("policy '" + config.name + "' needs " + backend_op_name(op) + " on the " +
                                 backend.name() + " backend for " + forward_mode_name(mode));
    }
  }
  return ok_status();
}

}  // namespace

Result<std::vector<BackendOp>> policy_backend_ops(const PolicyConfig& config, ForwardMode mode) {
  KC_ASSIGN_OR_RETURN(const PolicyProgram program, build_program(config));
  return program_ops(program, mode);
}

Status check_mode_support(const PolicyConfig& config, const AttentionBackend& backend, ForwardMode mode) {
  KC_ASSIGN_OR_RETURN(const PolicyProgram program, build_program(config));
  return mode_support(config, program, backend, mode);
}

Result<std::unique_ptr<AttentionPolicy>> make_index_policy(const PolicyConfig& config,
                                                           std::shared_ptr<AttentionBackend> backend) {
  KC_CHECK_ARG(backend != nullptr, "make_policy: backend is null");
  KC_ASSIGN_OR_RETURN(PolicyProgram program, build_program(config));
  Status prefill = mode_support(config, program, *backend, ForwardMode::kPrefill);
  Status decode = mode_support(config, program, *backend, ForwardMode::kDecode);
  if (!prefill.ok() && !decode.ok()) {
    return Status(prefill.code(), "policy '" + config.name + "' can run in no forward mode on the " +
                                      backend->name() + " backend: " + prefill.message() + "; " + decode.message());
  }
  auto policy = std::make_unique<IndexPolicy>(config, std::move(backend), std::move(program), std::move(prefill),
                                              std::move(decode));
  KC_RETURN_IF_ERROR(policy->upload_maps());
  return std::unique_ptr<AttentionPolicy>(std::move(policy));
}

}  // namespace policy

Result<std::unique_ptr<AttentionPolicy>> make_policy(const PolicyConfig& config,
                                                     std::shared_ptr<AttentionBackend> backend) {
  return policy::make_index_policy(config, std::move(backend));
}

}  // namespace kascade
