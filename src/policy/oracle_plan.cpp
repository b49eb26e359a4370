// src/policy/oracle_plan.cpp — the prefill oracle's row layout (see oracle_plan.h).
// Tested by tests/unit/policy/test_policy.cpp.
#include "policy/oracle_plan.h"

namespace kascade::policy {

Result<ref::PrefillRowPlan> plan_oracle_prefill_rows(const int32_t* q_lens, const int32_t* kv_lens, int32_t batch,
                                                     int32_t num_heads, const Budget& budget) {
  KC_CHECK_ARG(q_lens != nullptr && kv_lens != nullptr, "plan_oracle_prefill_rows: null length arrays");
  KC_CHECK_ARG(batch >= 1, "plan_oracle_prefill_rows: batch is ", batch, "; expected >= 1");
  KC_CHECK_ARG(num_heads >= 1, "plan_oracle_prefill_rows: num_heads is ", num_heads, "; expected >= 1");
  KC_RETURN_IF_ERROR(validate_budget(budget));
  ref::PrefillRowPlan plan;
  plan.num_rows = num_heads;
  plan.tile_size = 1;
  plan.tile_base.assign(1, 0);
  plan.tile_first.resize(static_cast<size_t>(batch));
  plan.row_offsets.assign(1, 0);
  for (int32_t b = 0; b < batch; ++b) {
    KC_CHECK_ARG(q_lens[b] >= 1 && kv_lens[b] >= q_lens[b], "plan_oracle_prefill_rows: sequence ", b, " has q_len ",
                 q_lens[b], " and kv_len ", kv_lens[b], "; expected 1 <= q_len <= kv_len");
    const int64_t first = static_cast<int64_t>(kv_lens[b]) - q_lens[b];
    plan.tile_first[static_cast<size_t>(b)] = first;
    plan.tile_base.push_back(plan.tile_base.back() + q_lens[b]);
    for (int64_t p = first; p < kv_lens[b]; ++p) {
      const int64_t k = budget_k(p + 1, budget);
      for (int32_t h = 0; h < num_heads; ++h) plan.row_offsets.push_back(plan.row_offsets.back() + k);
    }
  }
  return plan;
}

}  // namespace kascade::policy
