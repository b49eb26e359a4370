// kascade/policy.h — attention policies (DESIGN.md §2.2–2.4): which keys each layer attends.
//
// The runtime calls one AttentionPolicy per model:
//   policy->begin_forward({mode, batch, q_lens, kv_lens});      // once per forward call
//   for l in 0..N-1: policy->attention(l, q, kv, params, out);  // in layer order
// A policy produces index rows (sets of key positions) and calls the backend's ops
// (kascade/backend.h); it owns the per-call index state, the backend owns the arithmetic.
// Indices live per sequence and are overwritten by the next selecting layer; nothing carries
// over between forward calls (decode reselects at every step).
//
// Modes. kDecode: every sequence has one new query at position kv_len - 1 (§2.2). kPrefill: any
// number of new queries per sequence; tiles of `tile_size` are aligned to absolute positions,
// rows hold candidates j < s_t and every query also attends its local keys s_t..i (§2.3). A call
// that holds part of a tile pools, selects and attends over that call's queries only, so chunked
// prefill equals one-shot prefill exactly when chunk boundaries are multiples of tile_size and
// the budget is rolling.
//
// Policies (names accepted by make_policy; budget k(n) of §2.1 everywhere):
//   dense            every layer dense.
//   kascade          layer 0 dense and selecting; anchors select per KV group (post-softmax
//                    scores summed over the group's heads, and over the tile's queries in
//                    prefill) and attend their own rows; reuse layer l, KV group g attends row
//                    head_map[l][g] of anchor(l) = the largest anchor <= l.
//   kascade-noremap  kascade with the identity head map.
//   kascade-pooled   one row per tile/step pooled over all H heads, read by every KV group.
//   kascade-decode   prefill dense everywhere, decode as kascade.
//   oracle           every layer but 0: per query head and query, its own top-k(i+1) of p over
//                    j <= i, no local keys. Prefill oracle needs a backend that supports it (CPU).
//   streaming        every layer: 4 sinks + the most recent candidates up to the budget, per
//                    tile (rows {0..3} ∪ [s_t - (k_t - 4), s_t)) or per step.
//   quest            decode only (prefill dense); layers 0–1 dense; the others select pages of 16
//                    per query head (see select_quest_decode in backend.h) and attend them.
//   omnikv           decode only; filter layers round(N·{2,8,18}/32) attend densely and select
//                    top-k(n) by the max over all H heads of p; later layers attend that set,
//                    except layers 0–1, the layer after each filter and layers before the first
//                    filter, which are dense.
//   lessismore       decode only; selection layers round(N·{2,13}/32) attend densely and select
//                    one row per sequence (see select_lessismore_decode in backend.h); later
//                    layers attend it; layers before the first selection layer are dense.
//
// Layer roles (for reports): kDense (dense output, no selection), kDenseAnchor (dense output and
// selects: Kascade layer 0, OmniKV filters, LessIsMore selection layers), kAnchor (selects and
// attends its own rows: Kascade anchors > 0, oracle and Quest layers), kReuse (attends rows it
// did not select: Kascade reuse layers, OmniKV/LessIsMore followers, streaming's fixed rows).
//
// Statistics: the fraction of keys attended, per layer and mode, summed over calls: attended =
// Σ over (query, head) of the keys it attends (rows ∪ local keys; dense layers attend their full
// causal range), causal = Σ over (query, head) of its causal range (position + 1).
//
// Implementation: src/policy/ (policy_program.cpp maps names to per-layer steps,
// index_policy.cpp runs them). Tested by tests/unit/policy/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kascade/attention.h"
#include "kascade/backend.h"
#include "kascade/budget.h"
#include "kascade/status.h"

namespace kascade {

// ---- anchor / reuse schedule ----

// Anchors and head maps, from a calibration file or an identity map over given anchors.
struct Schedule {
  std::vector<int32_t> anchors;   // ascending; anchors[0] == 0; all < num_layers
  std::vector<int32_t> head_map;  // [num_layers, G] row-major; entries in [0, G); anchors' rows identity
  bool empty() const { return anchors.empty() && head_map.empty(); }
};

// Checks: at least one anchor, layer 0 an anchor, anchors strictly ascending and < num_layers,
// head_map of num_layers·G entries in [0, G), identity rows on anchors.
Status validate_schedule(const Schedule& schedule, int32_t num_layers, int32_t num_kv_heads);
// The schedule with the given anchors and the identity head map (for `--anchors`).
Result<Schedule> identity_schedule(const std::vector<int32_t>& anchors, int32_t num_layers, int32_t num_kv_heads);
// The largest anchor <= layer, for a valid schedule and 0 <= layer < num_layers.
Result<int32_t> schedule_anchor(const Schedule& schedule, int32_t layer);

// ---- configuration ----

struct PolicyConfig {
  std::string name = "dense";  // one of policy_names()
  int32_t num_layers = 0;      // N
  int32_t num_heads = 0;       // H
  int32_t num_kv_heads = 0;    // G (H % G == 0)
  int32_t head_dim = 0;        // d
  Budget budget;               // k(n), DESIGN.md §2.1
  int32_t tile_size = 32;      // T, prefill tiles
  bool rolling = true;         // prefill budget k(s_t) (true) or min(s_t, k(n_call)) (false)
  Schedule schedule;           // kascade variants: anchors and head maps
  int32_t quest_page_size = 16;
  int32_t streaming_sinks = 4;
  int32_t lessismore_sinks = 4;
};

// The accepted policy names, in a stable order.
const std::vector<std::string>& policy_names();
// Checks the config: known name, positive sizes, H % G == 0, valid budget, tile size, page size,
// sinks, and for the kascade variants a valid schedule. The message names the problem.
Status validate_policy_config(const PolicyConfig& config);
// Filter / selection layers at relative depths `of_32` (of 32 layers): round(N·x/32), rounded half
// up, duplicates dropped, ascending. omnikv uses {2, 8, 18}, lessismore {2, 13}.
std::vector<int32_t> relative_depth_layers(int32_t num_layers, const std::vector<int32_t>& of_32);

// ---- forward calls ----

enum class ForwardMode : uint8_t { kPrefill = 0, kDecode = 1 };
const char* forward_mode_name(ForwardMode mode);

struct ForwardInfo {
  ForwardMode mode = ForwardMode::kPrefill;
  int32_t batch = 0;
  const int32_t* q_lens = nullptr;   // [batch] host; new queries per sequence (1 in decode)
  const int32_t* kv_lens = nullptr;  // [batch] host; keys per sequence including this call's
};

enum class LayerRole : uint8_t { kDense = 0, kDenseAnchor = 1, kAnchor = 2, kReuse = 3 };
const char* layer_role_name(LayerRole role);

// Counts of (query, head, key) triples: attended ones and the full causal range.
struct AttendedCount {
  int64_t attended = 0;
  int64_t causal = 0;
  // attended / causal; NaN when nothing was recorded.
  double fraction() const;
  AttendedCount& operator+=(const AttendedCount& other) {
    attended += other.attended;
    causal += other.causal;
    return *this;
  }
};

// Per mode and layer, summed over forward calls since the last reset.
struct AttendedStatistics {
  std::vector<AttendedCount> per_layer[2];  // [mode][num_layers]
  std::vector<LayerRole> roles[2];          // [mode][num_layers]
  AttendedCount layer(ForwardMode mode, int32_t layer) const;
  // Summed over the layers whose role in `mode` is `role`.
  AttendedCount by_role(ForwardMode mode, LayerRole role) const;
  // Summed over all layers of `mode`.
  AttendedCount total(ForwardMode mode) const;
};

// A host copy of the policy's current index rows (for tests, debugging and reports).
struct IndexSnapshot {
  bool valid = false;                // false when no rows exist in this call yet
  ForwardMode mode = ForwardMode::kPrefill;
  int32_t producer_layer = -1;       // layer that selected them; -1 = made at begin_forward
  int32_t num_rows = 0;
  IndexGranularity granularity = IndexGranularity::kPerKvGroup;
  // decode
  int32_t k_max = 0;
  std::vector<int32_t> row_lens;     // [batch, num_rows]
  // prefill
  int32_t tile_size = 0;
  bool include_local = true;
  std::vector<int32_t> tile_base;    // [batch + 1]
  std::vector<int64_t> row_offsets;  // [num_slots * num_rows + 1]
  std::vector<int64_t> tile_first;   // [batch]
  // both: decode [batch, num_rows, k_max] (-1 padded); prefill CSR [row_offsets.back()]
  std::vector<int32_t> indices;
};

class AttentionPolicy {
 public:
  virtual ~AttentionPolicy() = default;
  virtual const PolicyConfig& config() const = 0;

  // Starts a forward call: validates the lengths (decode: q_len 1; 1 <= q_len <= kv_len), plans
  // and sizes this call's index state and drops the previous call's.
  virtual Status begin_forward(const ForwardInfo& info) = 0;
  // Attention of one layer of the current call. q, kv, out: views in the backend's memory for
  // this call's sequences (q.batch == info.batch, q.total_q == Σ q_lens). Layers run in
  // ascending order; a layer that reads an anchor's rows needs that anchor to have run in this
  // call.
  virtual Status attention(int32_t layer, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                           const AttentionOutput& out) = 0;

  // The role of `layer` in `mode`; refuses a layer outside [0, num_layers).
  virtual Result<LayerRole> role(int32_t layer, ForwardMode mode) const = 0;
  virtual const AttendedStatistics& statistics() const = 0;
  virtual void reset_statistics() = 0;
  // Host copy of the current rows (copies from the backend).
  virtual Result<IndexSnapshot> snapshot_indices() const = 0;
  // Width (entries per row, the k_max of DecodeIndexRows) of the decode index rows the last successful
  // begin_forward planned; 0 when that call has none (dense, prefill, no call yet). A captured decode
  // graph bakes this row stride in, so the CUDA runtime keys its graphs on it.
  virtual int64_t planned_decode_row_width() const = 0;
};

// Makes the policy `config.name` over `backend` (shared with the caller; make_cpu_backend /
// make_cuda_backend of kascade/backends.h, or a backend of your own). Refuses unknown names,
// invalid configs, and a policy neither of whose modes (prefill, decode) the backend can run, with a
// message naming the problem. When only one mode is unsupported (e.g. the oracle's prefill on CUDA)
// the policy is made and begin_forward of that mode returns the refusal, naming the op and backend;
// policy::check_mode_support (src/policy/index_policy.h) asks the same question up front.
Result<std::unique_ptr<AttentionPolicy>> make_policy(const PolicyConfig& config,
                                                     std::shared_ptr<AttentionBackend> backend);

}  // namespace kascade
