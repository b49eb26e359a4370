// src/runtime/forward_session.cpp — host sampling shared by the sessions (forward_session.h).
// Tested by tests/unit/runtime/test_runtime_generate.cpp (sampled generation) and
// test_forward_session.cpp.
#include "runtime/forward_session.h"

#include "ref/ops_ref.h"
#include "runtime/sampler.h"

namespace kascade::runtime {

Status sample_host_rows(const std::vector<float>& logits, int64_t vocab, const SamplerConfig& sampler,
                        std::span<const double> uniforms, std::vector<int32_t>* tokens) {
  KC_CHECK_ARG(tokens != nullptr && vocab >= 1, "sample_host_rows: null tokens or vocab ", vocab);
  KC_RETURN_IF_ERROR(validate_sampler(sampler));
  const size_t rows = logits.size() / static_cast<size_t>(vocab);
  KC_CHECK_ARG(rows * static_cast<size_t>(vocab) == logits.size() && uniforms.size() == rows, "sample_host_rows: ",
               logits.size(), " logits of vocab ", vocab, " and ", uniforms.size(), " uniforms");
  tokens->resize(rows);
  for (size_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * static_cast<size_t>(vocab);
    if (sampler.temperature == 0.0f) {
      KC_ASSIGN_OR_RETURN((*tokens)[r], ref::argmax_ref(row, vocab));
    } else {
      KC_ASSIGN_OR_RETURN(const std::vector<Candidate> candidates, sampling_distribution(row, vocab, sampler));
      (*tokens)[r] = pick_candidate(candidates, uniforms[r]);
    }
  }
  return ok_status();
}

}  // namespace kascade::runtime
