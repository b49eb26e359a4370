// src/runtime/calibration_collector.cpp — the dev-set loop of `kascade calibrate`
// (calibration_collector.h): install the recording policy and the importance observer, then per
// prompt begin_prompt → generate (prefill + greedy decode) → end_prompt.
// Tested by tests/unit/runtime/test_calibration_collector.cpp.
#include "runtime/calibration_collector.h"

#include <chrono>

namespace kascade::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// Clears the runtime's layer observer when the run ends, whatever the outcome.
class ObserverGuard {
 public:
  explicit ObserverGuard(Runtime& runtime) : runtime_(&runtime) {}
  ~ObserverGuard() { runtime_->set_layer_observer({}); }
  ObserverGuard(const ObserverGuard&) = delete;
  ObserverGuard& operator=(const ObserverGuard&) = delete;

 private:
  Runtime* runtime_;
};

}  // namespace

Result<calib::CollectorConfig> collector_config_for(const Runtime& runtime, const CalibrationRunOptions& options) {
  const ModelConfig& m = runtime.config();
  calib::CollectorConfig c;
  c.num_layers = static_cast<int32_t>(m.num_hidden_layers);
  c.num_heads = static_cast<int32_t>(m.num_attention_heads);
  c.num_kv_heads = static_cast<int32_t>(m.num_key_value_heads);
  c.head_dim = static_cast<int32_t>(m.head_dim);
  c.hidden_size = m.hidden_size;
  c.k_cal = options.k_cal;
  c.tile_size = runtime.options().attention.tile_size;
  c.forward = options.forward;
  KC_RETURN_IF_ERROR(calib::validate_collector_config(c));
  return c;
}

Result<CalibrationRunResult> collect_calibration_stats(Runtime& runtime, const std::vector<CalibrationPrompt>& prompts,
                                                       const CalibrationRunOptions& options,
                                                       const CalibrationProgressFn& progress) {
  KC_CHECK_ARG(!prompts.empty(), "calibration: no prompts");
  KC_CHECK_ARG(options.decode_tokens >= 0, "calibration: decode_tokens is ", options.decode_tokens, "; expected >= 0");
  KC_ASSIGN_OR_RETURN(const calib::CollectorConfig config, collector_config_for(runtime, options));
  const int32_t chunk = runtime.options().chunk_size;
  KC_CHECK_ARG(chunk % config.tile_size == 0, "calibration: the prefill chunk (", chunk,
               ") must be a multiple of the tile size (", config.tile_size,
               ") so that every tile is seen whole in one call");
  for (const CalibrationPrompt& p : prompts) {
    KC_CHECK_ARG(!p.tokens.empty(), "calibration: prompt '", p.name, "' is empty");
    KC_CHECK_ARG(static_cast<int64_t>(p.tokens.size()) <= runtime.max_context(), "calibration: prompt '", p.name,
                 "' has ", p.tokens.size(), " tokens, more than the maximum context of ", runtime.max_context());
  }

  KC_ASSIGN_OR_RETURN(std::shared_ptr<calib::StatsCollector> collector, calib::StatsCollector::create(config));
  std::unique_ptr<AttentionPolicy> policy = collector->make_policy();
  if (options.taps.wrap_policy) policy = options.taps.wrap_policy(std::move(policy));
  KC_RETURN_IF_ERROR(runtime.set_policy(std::move(policy)));
  ObserverGuard guard(runtime);
  runtime.set_layer_observer(
      [collector, tap = options.taps.observe](int32_t layer, const float* x, const float* attn, int64_t tokens) {
        if (tap) KC_RETURN_IF_ERROR(tap(layer, x, attn, tokens));
        return collector->observe(layer, x, attn, tokens);
      });

  GenerateOptions generate;
  generate.max_new_tokens = options.decode_tokens;
  generate.stop_at_eos = options.stop_at_eos;  // greedy: the default sampler (temperature 0)

  CalibrationRunResult result;
  CalibrationProgress state;
  state.prompts_total = static_cast<int64_t>(prompts.size());
  for (const CalibrationPrompt& p : prompts)
    state.tokens_planned += static_cast<int64_t>(p.tokens.size()) + options.decode_tokens;
  const auto start = Clock::now();
  for (const CalibrationPrompt& p : prompts) {
    KC_RETURN_IF_ERROR(collector->begin_prompt(p.name));
    Result<GenerateResult> generated = runtime.generate({p.tokens}, generate);
    if (!generated.ok()) {
      collector->discard_prompt();
      Status s = generated.status();
      return s.with_context("calibration prompt '" + p.name + "'");
    }
    Result<calib::PromptUnits> units = collector->end_prompt();
    if (!units.ok()) {
      Status s = units.status();
      return s.with_context(detail::concat("calibration prompt '", p.name, "' (", p.tokens.size(),
                                           " tokens, tile size ", config.tile_size, ")"));
    }
    result.prefill_units += units->prefill_tiles;
    result.decode_units += units->decode_steps;
    result.prompt_tokens += static_cast<int64_t>(p.tokens.size());
    result.generated_tokens += static_cast<int64_t>(generated->sequences[0].tokens.size());
    result.generated.push_back(generated->sequences[0].tokens);
    state.prompts_done += 1;
    state.tokens_done += units->prefill_tokens + units->decode_tokens;
    state.tokens_planned -= options.decode_tokens - units->decode_tokens;  // stopped early: fewer to come
    state.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
    if (progress) progress(state);
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  KC_ASSIGN_OR_RETURN(result.stats, collector->stats());
  return result;
}

}  // namespace kascade::runtime
