// src/runtime/session.cpp — a batch of sequences and its forward calls (src/runtime/session.h).
// Tested through tests/unit/runtime/.
#include "runtime/session.h"

#include <limits>

#include "runtime/cache_attention.h"

namespace kascade::runtime {

Result<std::unique_ptr<Session>> Session::create(const Model& model, AttentionPolicy& policy,
                                                 const std::vector<int64_t>& max_tokens, int32_t page_size,
                                                 DType kv_dtype, ForwardObserver* observer) {
  KC_CHECK_ARG(!max_tokens.empty(), "session: no sequences");
  KC_CHECK_ARG(page_size > 0, "session: page size ", page_size);
  const ModelConfig& c = model.config();
  int64_t pages = 0;
  for (size_t s = 0; s < max_tokens.size(); ++s) {
    KC_CHECK_ARG(max_tokens[s] >= 1, "session: sequence ", s, " may hold ", max_tokens[s], " tokens");
    pages += (max_tokens[s] + page_size - 1) / page_size;
  }
  KC_CHECK_ARG(pages <= std::numeric_limits<int32_t>::max(), "session: ", pages, " KV pages exceed the int32 range");
  KvCacheConfig kv;
  kv.num_layers = static_cast<int32_t>(c.num_hidden_layers);
  kv.num_kv_heads = static_cast<int32_t>(c.num_key_value_heads);
  kv.head_dim = static_cast<int32_t>(c.head_dim);
  kv.page_size = page_size;
  kv.num_pages = static_cast<int32_t>(pages);
  kv.dtype = kv_dtype;
  std::unique_ptr<Session> session(new Session(model, policy, observer));
  KC_ASSIGN_OR_RETURN(session->cache_, PagedKvCache::create(kv));
  for (size_t s = 0; s < max_tokens.size(); ++s) session->cache_ids_.push_back(session->cache_->add_sequence());
  session->lengths_.assign(max_tokens.size(), 0);
  session->max_tokens_ = max_tokens;
  return session;
}

Status Session::step(ForwardMode mode, const std::vector<CallItem>& items, std::vector<float>* logits) {
  KC_CHECK_ARG(!items.empty(), "session: a forward call without sequences");
  KC_CHECK_ARG(logits != nullptr, "session: logits is null");
  std::vector<bool> seen(lengths_.size(), false);
  std::vector<int32_t> cache_seqs, q_lens, kv_lens, tokens, cu_q_lens = {0}, logit_rows;
  std::vector<int64_t> starts, positions;
  for (const CallItem& item : items) {
    KC_RETURN_IF_ERROR(check_call_item(mode, item, seen, lengths_, max_tokens_, "session"));
    const int64_t n = static_cast<int64_t>(item.tokens.size());
    const int64_t start = lengths_[item.sequence];
    KC_RETURN_IF_ERROR(cache_->reserve(cache_ids_[item.sequence], start + n));
    for (int64_t i = 0; i < n; ++i) {
      if (i >= item.logits_from) logit_rows.push_back(static_cast<int32_t>(tokens.size()));
      tokens.push_back(item.tokens[i]);
      positions.push_back(start + i);
    }
    cu_q_lens.push_back(static_cast<int32_t>(tokens.size()));
    cache_seqs.push_back(cache_ids_[item.sequence]);
    starts.push_back(start);
    q_lens.push_back(static_cast<int32_t>(n));
    kv_lens.push_back(static_cast<int32_t>(start + n));
  }
  ForwardInfo info;
  info.mode = mode;
  info.batch = static_cast<int32_t>(items.size());
  info.q_lens = q_lens.data();
  info.kv_lens = kv_lens.data();
  KC_RETURN_IF_ERROR(policy_->begin_forward(info));
  KC_ASSIGN_OR_RETURN(CacheAttention attention, CacheAttention::create(*cache_, *policy_, cache_seqs, starts, q_lens));
  logits->resize(logit_rows.size() * static_cast<size_t>(model_->config().vocab_size));
  const ForwardInput input{tokens, cu_q_lens, positions, logit_rows};
  KC_RETURN_IF_ERROR(forward(*model_, input, attention, workspace_, logits->data(), observer_));
  for (size_t b = 0; b < items.size(); ++b) {
    const int32_t s = items[b].sequence;
    lengths_[s] += q_lens[b];
    KC_RETURN_IF_ERROR(cache_->commit_length(cache_ids_[s], lengths_[s]));
  }
  return ok_status();
}

Status Session::step_sample(ForwardMode mode, const std::vector<CallItem>& items, const SamplerConfig& sampler,
                            std::span<const double> uniforms, std::vector<int32_t>* tokens) {
  KC_RETURN_IF_ERROR(count_sampled_rows(items, uniforms.size()).status());
  std::vector<float> logits;
  KC_RETURN_IF_ERROR(step(mode, items, &logits));
  return sample_host_rows(logits, model_->config().vocab_size, sampler, uniforms, tokens);
}

}  // namespace kascade::runtime
