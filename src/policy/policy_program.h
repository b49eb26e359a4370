// src/policy/policy_program.h — every policy of kascade/policy.h as data: per forward mode, what
// it selects (a Selector) and, per layer, a step (role, the layer whose rows it reads, the head
// map its sparse output uses). IndexPolicy (index_policy.h) runs these steps; the names and
// layer sets of DESIGN.md §2.4 live only here.
// Tested by tests/unit/policy/test_policy_config.cpp (PolicyRoles: every policy's roles against
// tables written from DESIGN.md §2.4) and by the behaviour tests in test_policy.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kascade/attention.h"
#include "kascade/backend.h"
#include "kascade/policy.h"

namespace kascade::policy {

// What a policy selects in one mode.
enum class Selector : uint8_t {
  kNone = 0,     // nothing (dense everywhere)
  kGroupPooled,  // Kascade: one row per KV group, p summed over the group's heads (and tile queries)
  kAllPooled,    // kascade-pooled: one row, p summed over all H heads
  kOracle,       // one row per query head, its own top-k (decode: select_decode R = H;
                 // prefill: select_prefill_oracle, one tile per query)
  kOmniKv,       // one row, max over all H heads of p (decode)
  kQuest,        // one row per query head, whole pages (decode)
  kLessIsMore,   // one row per sequence, rank-by-rank merge + sinks + recent (decode)
  kStreaming,    // one row, sinks + most recent candidates, made at begin_forward
};
const char* selector_name(Selector selector);
// Rows per sequence (decode) or per tile (prefill): G, 1 or H.
int32_t selector_rows(Selector selector, int32_t num_heads, int32_t num_kv_heads);
IndexGranularity selector_granularity(Selector selector);
// The backend pooling of the selectors that select through select_decode / select_prefill.
ScorePooling selector_pooling(Selector selector, int32_t num_heads, int32_t num_kv_heads);

// LayerStep::source of layers that read rows made at begin_forward (streaming).
inline constexpr int32_t kRowsFromBeginForward = -1;
// LayerStep::map_row of a sparse output with the identity map (or per-query-head rows).
inline constexpr int32_t kIdentityMap = -1;

struct LayerStep {
  LayerRole role = LayerRole::kDense;
  int32_t source = 0;              // kAnchor / kDenseAnchor: the layer itself; kReuse: whose rows it reads
  int32_t map_row = kIdentityMap;  // row of PolicyProgram::map_table its sparse output reads, or identity
};

struct ModeProgram {
  Selector selector = Selector::kNone;
  std::vector<LayerStep> layers;  // [num_layers]
};

struct PolicyProgram {
  ModeProgram modes[2];  // [ForwardMode]
  // [num_layers + 1, G]: row l (< num_layers) is the schedule's map of layer l (identity without a
  // schedule); row num_layers is all zeros (every KV group reads row 0 of a one-row selection).
  std::vector<int32_t> map_table;
  const ModeProgram& mode(ForwardMode m) const { return modes[static_cast<int>(m)]; }
};

// kascade, kascade-noremap, kascade-pooled, kascade-decode.
bool policy_uses_schedule(const std::string& name);
// Those of them whose reuse layers read the schedule's head map (kascade, kascade-decode).
bool policy_reads_head_map(const std::string& name);

// The program of a config that passed validate_policy_config.
Result<PolicyProgram> build_program(const PolicyConfig& config);

}  // namespace kascade::policy
