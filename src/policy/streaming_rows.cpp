// src/policy/streaming_rows.cpp — closed-form StreamingLLM rows (see streaming_rows.h).
// Tested by tests/unit/policy/test_baselines.cpp.
#include "policy/streaming_rows.h"

#include <algorithm>

namespace kascade::policy {
namespace {

// {0..s-1} ∪ [end - (k - s), end) into out[0..k).
void write_sinks_and_recent(int64_t end, int64_t k, int64_t sinks, int32_t* out) {
  const int64_t s = std::min(sinks, k);
  int64_t at = 0;
  for (int64_t j = 0; j < s; ++j) out[at++] = static_cast<int32_t>(j);
  for (int64_t j = end - (k - s); j < end; ++j) out[at++] = static_cast<int32_t>(j);
}

}  // namespace

Status streaming_decode_rows(const std::vector<int32_t>& kv_lens, const std::vector<int32_t>& k_per_seq,
                             int32_t sinks, int32_t k_max, int32_t* indices, int32_t* row_lens) {
  KC_CHECK_ARG(kv_lens.size() == k_per_seq.size(), "streaming_decode_rows: ", kv_lens.size(), " lengths but ",
               k_per_seq.size(), " budgets");
  KC_CHECK_ARG(sinks >= 0, "streaming_decode_rows: sinks is ", sinks, "; expected >= 0");
  for (size_t b = 0; b < kv_lens.size(); ++b) {
    const int64_t n = kv_lens[b];
    const int64_t k = k_per_seq[b];
    KC_CHECK_ARG(k >= 0 && k <= n && k <= k_max, "streaming_decode_rows: sequence ", b, " asks for ", k,
                 " keys out of ", n, " (k_max ", k_max, ")");
    int32_t* out = indices + static_cast<int64_t>(b) * k_max;
    write_sinks_and_recent(n, k, sinks, out);
    std::fill(out + k, out + k_max, -1);
    row_lens[b] = static_cast<int32_t>(k);
  }
  return ok_status();
}

Status streaming_prefill_rows(const ref::PrefillRowPlan& plan, int32_t sinks, int32_t* indices) {
  KC_CHECK_ARG(plan.num_rows == 1, "streaming_prefill_rows: plan has ", plan.num_rows, " rows per tile; expected 1");
  KC_CHECK_ARG(sinks >= 0, "streaming_prefill_rows: sinks is ", sinks, "; expected >= 0");
  const int64_t batch = static_cast<int64_t>(plan.tile_first.size());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t slot = plan.tile_base[b]; slot < plan.tile_base[b + 1]; ++slot) {
      const int64_t s_t = (plan.tile_first[b] + (slot - plan.tile_base[b])) * plan.tile_size;
      const int64_t len = plan.row_offsets[slot + 1] - plan.row_offsets[slot];
      KC_CHECK_ARG(len <= s_t, "streaming_prefill_rows: tile at ", s_t, " plans ", len, " keys, more than its ",
                   s_t, " candidates");
      write_sinks_and_recent(s_t, len, sinks, indices + plan.row_offsets[slot]);
    }
  }
  return ok_status();
}

}  // namespace kascade::policy
