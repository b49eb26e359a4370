// tools/cmd_generate.cpp — `kascade generate`: text generation from a Hugging Face Llama / Qwen3
// checkpoint (or dummy weights for any config.json) on the CPU or a CUDA GPU (--device), with any
// attention policy.
//
//   kascade generate --model DIR "prompt text"            # streams the continuation to stdout
//   kascade generate --model DIR --chat "question"        # the model's chat template
//   kascade generate --model DIR --prompt-file FILE --attention kascade --calibration calib.json
//   kascade generate --model DIR --dummy-weights --random-prompt 4096 --max-new-tokens 32
//       --attention kascade --anchors 0,2,4 --report-json run.json   # benchmark (bench/cpu_runtime)
//   kascade generate --model DIR --device cuda --dummy-weights --random-prompt 4096 -n 32   # on the GPU
//
// stdout: the generated text (streamed for one prompt; for a batch, each sequence's text at the
// end), or token ids when the model directory has no tokenizer.json. stderr: the model line, a
// progress line during a long prefill (tokens, rate, ETA) and the closing report (prefill and
// decode tokens/s, fraction of keys attended per layer class). Exit codes: 0, 1 on an error
// (printed as "kascade generate: error: ..."), 2 on bad usage.
// The library pieces are tested in tests/unit/runtime/; this file only parses and prints.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "kascade/runtime.h"
#include "kascade/tokenizer.h"
#include "runtime/report.h"
#include "runtime_flags.h"

namespace kascade::tools {
namespace {

namespace fs = std::filesystem;

struct Args {
  RuntimeFlags runtime;
  BudgetFlags budget;
  std::vector<std::string> prompts;       // positional / --prompt, one sequence each
  std::vector<std::string> prompt_files;  // one sequence each
  std::string prompt_ids;                 // "1,2,3"
  int64_t random_prompt = 0;              // random token ids of this length
  uint64_t prompt_seed = 0;
  int32_t batch = 1;                      // repeat the prompts this many times
  bool chat = false;
  std::string system;
  std::string tokenizer;
  std::string attention = "dense";
  std::string calibration;
  int32_t num_anchors = 0;
  std::string anchors;
  int32_t page_size = 16;
  std::string kv_dtype = "f32";
  int32_t max_new_tokens = 128;
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  bool ignore_eos = false;
  bool no_progress = false;
  std::string report_json;
};

Result<std::vector<int32_t>> parse_int_list(const std::string& text, const char* what) {
  std::vector<int32_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long value = std::stol(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      out.push_back(static_cast<int32_t>(value));
    } catch (const std::exception&) {
      return invalid_argument(what, ": '", item, "' is not an integer");
    }
  }
  if (out.empty()) return invalid_argument(what, " is empty");
  return out;
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open prompt file '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Prints whole UTF-8 characters of the bytes streamed so far.
class Utf8Stream {
 public:
  void push(const std::string& bytes) {
    pending_ += bytes;
    size_t complete = 0;
    for (size_t i = 0; i < pending_.size();) {
      const unsigned char c = static_cast<unsigned char>(pending_[i]);
      const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
      if (i + len > pending_.size()) break;
      i += len;
      complete = i;
    }
    std::fwrite(pending_.data(), 1, complete, stdout);
    std::fflush(stdout);
    pending_.erase(0, complete);
  }
  void finish() {
    std::fwrite(pending_.data(), 1, pending_.size(), stdout);
    pending_.clear();
  }

 private:
  std::string pending_;
};

// Prefill progress on stderr: rewritten in place on a terminal, a line every 2 s otherwise.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled), tty_(isatty(fileno(stderr)) != 0) {}
  void update(const PrefillProgress& p) {
    if (!enabled_) return;
    const bool done = p.done_tokens >= p.total_tokens;
    const std::string line = runtime::format_progress(p);
    if (tty_) {
      std::fprintf(stderr, "\r%-70s", line.c_str());
      if (done) std::fprintf(stderr, "\n");
    } else if (done || p.elapsed_s - last_ >= 2.0) {
      std::fprintf(stderr, "%s\n", line.c_str());
      last_ = p.elapsed_s;
    }
  }

 private:
  bool enabled_;
  bool tty_;
  double last_ = 0.0;
};

nlohmann::json attended_json(const std::vector<RoleAttended>& roles, const AttendedCount& total) {
  nlohmann::json j;
  j["all"] = {{"attended", total.attended}, {"causal", total.causal}, {"fraction", total.fraction()}};
  for (const RoleAttended& r : roles)
    j[layer_role_name(r.role)] = {{"layers", r.num_layers},
                                  {"attended", r.count.attended},
                                  {"causal", r.count.causal},
                                  {"fraction", r.count.fraction()}};
  return j;
}

Status write_report_json(const std::string& path, const Runtime& rt, const Args& a, const GenerateResult& result,
                         const std::vector<std::vector<int32_t>>& prompts) {
  const GenerateStats& s = result.stats;
  nlohmann::json j;
  j["model"] = rt.describe();
  j["attention"] = a.attention;
  j["batch"] = prompts.size();
  j["prompt_tokens"] = prompts.front().size();
  j["chunk"] = a.runtime.chunk;
  j["device"] = a.runtime.device;
  j["prefill"] = {{"tokens", s.prefill_tokens}, {"seconds", s.prefill_s}, {"tokens_per_s", s.prefill_tokens_per_s()}};
  j["decode"] = {{"tokens", s.decode_tokens},
                 {"steps", s.decode_steps},
                 {"pipelined", s.pipelined_decode},
                 {"seconds", s.decode_s},
                 {"tokens_per_s", s.decode_tokens_per_s()}};
  const auto timings = [](const PhaseTimings& t) {
    return nlohmann::json{{"matmul_s", t.matmul_s},
                          {"matmul_gflops", t.matmul_gflops()},
                          {"attention_s", t.attention_s},
                          {"other_s", t.other_s}};
  };
  j["prefill"]["timings"] = timings(s.prefill_timings);
  j["decode"]["timings"] = timings(s.decode_timings);
  j["decode"]["path"] = format_cuda_graph_line(s.cuda_graph);
  j["decode"]["cuda_graph"] = {{"enabled", s.cuda_graph.enabled},
                               {"eager_reason", s.cuda_graph.eager_reason},
                               {"eager_steps", s.cuda_graph.eager_steps},
                               {"captures", s.cuda_graph.captures},
                               {"replays", s.cuda_graph.replays},
                               {"trace_mismatches", s.cuda_graph.trace_mismatches}};
  if (s.attended.prefill_total.causal > 0)
    j["attended_prefill"] = attended_json(s.attended.prefill, s.attended.prefill_total);
  if (s.attended.decode_total.causal > 0)
    j["attended_decode"] = attended_json(s.attended.decode, s.attended.decode_total);
  std::ofstream out(path);
  if (!out) return io_error("cannot write report file '", path, "'");
  out << j.dump(2) << "\n";
  if (!out) return io_error("writing report file '", path, "' failed");
  return ok_status();
}

Status run(const Args& a) {
  KC_ASSIGN_OR_RETURN(RuntimeOptions o, to_runtime_options(a.runtime, &a.budget));
  o.attention.policy = a.attention;
  o.attention.calibration_file = a.calibration;
  o.attention.num_anchors = a.num_anchors;
  if (!a.anchors.empty()) {
    KC_ASSIGN_OR_RETURN(o.attention.anchors, parse_int_list(a.anchors, "--anchors"));
  }
  runtime::use_default_calibration_file(o.attention, a.runtime.model);
  o.page_size = a.page_size;
  KC_ASSIGN_OR_RETURN(o.kv_dtype, parse_dtype(a.kv_dtype));

  // Tokenizer: needed for text prompts and text output; optional for token-id prompts.
  const std::string& model = a.runtime.model;
  const fs::path model_dir = fs::is_directory(model) ? fs::path(model) : fs::path(model).parent_path();
  const std::string tokenizer_path = a.tokenizer.empty() ? (model_dir / "tokenizer.json").string() : a.tokenizer;
  const bool text_prompts = !a.prompts.empty() || !a.prompt_files.empty();
  std::optional<Tokenizer> tokenizer;
  if (text_prompts || fs::exists(tokenizer_path)) {
    auto t = Tokenizer::from_file(tokenizer_path);
    if (!t.ok()) {
      Status s = t.status();
      return text_prompts ? s.with_context("a text prompt needs the model's tokenizer") : s;
    }
    tokenizer.emplace(std::move(t).value());
  }

  auto rt = Runtime::create(o);
  if (!rt.ok()) return rt.status();
  Runtime& runtime = **rt;
  std::fprintf(stderr, "%s\n", runtime.describe().c_str());

  // Prompts.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> stop_tokens;
  std::vector<std::string> texts = a.prompts;
  for (const std::string& f : a.prompt_files) {
    KC_ASSIGN_OR_RETURN(std::string text, read_text_file(f));
    texts.push_back(std::move(text));
  }
  if (!texts.empty()) {
    std::optional<ChatTemplate> chat;
    if (a.chat) {
      KC_ASSIGN_OR_RETURN(chat, ChatTemplate::from_file((model_dir / "tokenizer_config.json").string()));
      if (auto eos = tokenizer->token_to_id(chat->eos_token())) stop_tokens.push_back(*eos);
    }
    for (const std::string& text : texts) {
      std::string rendered = text;
      if (chat) {
        std::vector<ChatMessage> messages;
        if (!a.system.empty()) messages.push_back({"system", a.system});
        messages.push_back({"user", text});
        KC_ASSIGN_OR_RETURN(rendered, chat->render(messages, ChatOptions{}));
      }
      KC_ASSIGN_OR_RETURN(auto ids, tokenizer->encode(rendered, /*add_special_tokens=*/!chat.has_value()));
      KC_CHECK_ARG(!ids.empty(), "the prompt encodes to no tokens");
      prompts.push_back(std::move(ids));
    }
  } else if (!a.prompt_ids.empty()) {
    KC_ASSIGN_OR_RETURN(auto ids, parse_int_list(a.prompt_ids, "--prompt-ids"));
    prompts.push_back(std::move(ids));
  } else {
    std::mt19937_64 rng(a.prompt_seed);
    std::vector<int32_t> ids(static_cast<size_t>(a.random_prompt));
    for (auto& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(runtime.config().vocab_size));
    prompts.push_back(std::move(ids));
  }
  const size_t distinct = prompts.size();
  for (int32_t r = 1; r < a.batch; ++r)
    for (size_t i = 0; i < distinct; ++i) prompts.push_back(prompts[i]);

  GenerateOptions g;
  g.max_new_tokens = a.max_new_tokens;
  g.sampler = SamplerConfig{a.temperature, a.top_k, a.top_p, a.seed};
  g.stop_at_eos = !a.ignore_eos;
  g.stop_tokens = stop_tokens;

  const bool stream = prompts.size() == 1;
  Utf8Stream utf8;
  ProgressLine progress(!a.no_progress);
  int64_t total_prompt = 0;
  for (const auto& p : prompts) total_prompt += static_cast<int64_t>(p.size());
  const bool long_prefill = total_prompt > 2LL * a.runtime.chunk;
  GenerateCallbacks cb;
  if (stream) {
    cb.on_token = [&](int32_t, int32_t token) {
      if (tokenizer) {
        auto bytes = tokenizer->token_bytes(token);
        utf8.push(bytes.ok() ? *bytes : std::string("\xEF\xBF\xBD"));
      } else {
        std::printf("%d ", token);
        std::fflush(stdout);
      }
    };
  }
  if (long_prefill) cb.on_prefill_progress = [&](const PrefillProgress& p) { progress.update(p); };
  KC_ASSIGN_OR_RETURN(GenerateResult result, runtime.generate(prompts, g, cb));
  if (stream) {
    utf8.finish();
    std::printf("\n");
  } else {
    for (size_t s = 0; s < result.sequences.size(); ++s) {
      std::printf("=== sequence %zu (%s) ===\n", s, finish_reason_name(result.sequences[s].finish));
      if (tokenizer) {
        KC_ASSIGN_OR_RETURN(std::string text, tokenizer->decode(result.sequences[s].tokens, false));
        std::printf("%s\n", text.c_str());
      } else {
        for (int32_t t : result.sequences[s].tokens) std::printf("%d ", t);
        std::printf("\n");
      }
    }
  }
  std::fflush(stdout);
  std::fprintf(stderr, "%s", runtime::format_report(result.stats).c_str());
  if (o.device == Device::kCuda) std::fprintf(stderr, "%s\n", format_cuda_graph_line(result.stats.cuda_graph).c_str());
  if (!a.report_json.empty()) KC_RETURN_IF_ERROR(write_report_json(a.report_json, runtime, a, result, prompts));
  return ok_status();
}

}  // namespace

int run_generate(int argc, char** argv) {
  CLI::App app{"Generate text from a Hugging Face Llama / Qwen3 checkpoint on the CPU or a CUDA GPU with any attention "
               "policy"};
  app.name("kascade generate");
  Args a;
  add_runtime_flags(app, a.runtime);
  add_budget_flags(app, a.budget);
  app.add_option("prompt", a.prompts, "prompt text (several: a batch)");
  app.add_option("-p,--prompt", a.prompts, "prompt text (repeatable: a batch)");
  app.add_option("-f,--prompt-file", a.prompt_files, "file holding a prompt (repeatable: a batch)");
  app.add_option("--prompt-ids", a.prompt_ids, "the prompt as comma-separated token ids");
  app.add_option("--random-prompt", a.random_prompt, "a prompt of this many random token ids (benchmarks)")
      ->check(CLI::PositiveNumber);
  app.add_option("--prompt-seed", a.prompt_seed, "seed of --random-prompt");
  app.add_option("--batch", a.batch, "repeat the prompts this many times in one batch")->check(CLI::PositiveNumber);
  app.add_flag("--chat", a.chat, "format the prompt with the model's chat template (tokenizer_config.json)");
  app.add_option("--system", a.system, "system message for --chat");
  app.add_option("--tokenizer", a.tokenizer, "tokenizer.json (default: the model directory's)");
  app.add_option("--attention", a.attention,
                 "dense | kascade | kascade-pooled | kascade-noremap | kascade-decode | oracle | streaming | quest | "
                 "omnikv | lessismore");
  app.add_option("--calibration", a.calibration, "calibration file (kascade calibrate) for the kascade policies (default: <model dir>/kascade_calibration.json)");
  app.add_option("--num-anchors", a.num_anchors, "anchor count to use from the calibration file (default: its own)");
  app.add_option("--anchors", a.anchors, "anchor layers, e.g. 0,2,8, with an identity head map (no calibration)");
  app.add_option("--page-size", a.page_size, "KV cache page size (power of two)")->check(CLI::PositiveNumber);
  app.add_option("--kv-dtype", a.kv_dtype, "KV cache dtype on the CPU: f32, f16, bf16 (the GPU uses --cuda-dtype)");
  app.add_option("-n,--max-new-tokens", a.max_new_tokens, "tokens to generate per sequence")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--temperature", a.temperature, "sampling temperature (0: greedy)");
  app.add_option("--top-k", a.top_k, "keep the k most likely tokens (0: off)");
  app.add_option("--top-p", a.top_p, "nucleus sampling mass (1: off)");
  app.add_option("--seed", a.seed, "sampling seed");
  app.add_flag("--ignore-eos", a.ignore_eos, "do not stop at the model's end-of-sequence tokens");
  app.add_flag("--no-progress", a.no_progress, "no prefill progress line");
  app.add_option("--report-json", a.report_json, "write the closing report as JSON to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const int sources = (!a.prompts.empty() || !a.prompt_files.empty()) + !a.prompt_ids.empty() + (a.random_prompt > 0);
  if (sources != 1) {
    std::fprintf(stderr,
                 "kascade generate: error: give exactly one prompt source: text (positional or --prompt), "
                 "--prompt-file, --prompt-ids or --random-prompt\n");
    return 2;
  }
  const Status s = run(a);
  if (!s.ok()) {
    std::fprintf(stderr, "kascade generate: error: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kascade::tools
