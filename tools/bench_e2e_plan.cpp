// tools/bench_e2e_plan.cpp — flags, matrix, memory plan and result formatting of `kascade bench
// e2e` (bench_e2e_plan.h). Tested by tests/unit/tools/test_bench_e2e_plan.cpp.
#include "bench_e2e_plan.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>
#include <sstream>

namespace kascade::tools {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split_on(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(trim(part));
  if (!text.empty() && text.back() == separator) parts.emplace_back();
  return parts;
}

double gib(size_t bytes) { return static_cast<double>(bytes) / static_cast<double>(size_t{1} << 30); }

std::string human_tokens(int64_t n) {
  if (n % (int64_t{1} << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n % 1024 == 0) return std::to_string(n / 1024) + "K";
  return std::to_string(n);
}

}  // namespace

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  for (std::string& part : split_on(text, ','))
    if (!part.empty()) out.push_back(std::move(part));
  return out;
}

Result<int64_t> parse_token_count(const std::string& raw) {
  const std::string text = trim(raw);
  KC_CHECK_ARG(!text.empty(), "token count: empty");
  int64_t scale = 1;
  std::string digits = text;
  const char last = static_cast<char>(std::tolower(static_cast<unsigned char>(text.back())));
  if (last == 'k' || last == 'm') {
    scale = last == 'k' ? 1024 : int64_t{1} << 20;
    digits = text.substr(0, text.size() - 1);
  }
  KC_CHECK_ARG(!digits.empty() && digits.size() <= 12 &&
                   std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }),
               "token count '", text, "': expected digits with an optional k (x1024) or m (x1024^2) suffix");
  const int64_t value = std::stoll(digits) * scale;
  KC_CHECK_ARG(value >= 1 && value <= (int64_t{1} << 30), "token count '", text, "' is ", value,
               "; expected 1 .. 2^30");
  return value;
}

Result<std::vector<int64_t>> parse_token_counts(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& part : split_on(text, ',')) {
    KC_ASSIGN_OR_RETURN(const int64_t n, parse_token_count(part));
    out.push_back(n);
  }
  KC_CHECK_ARG(!out.empty(), "--lengths: no prompt length given");
  return out;
}

Result<std::vector<std::vector<int32_t>>> parse_batch_groups(const std::string& text, size_t num_lengths) {
  std::vector<std::vector<int32_t>> groups;
  for (const std::string& group : split_on(text, '/')) {
    std::vector<int32_t> batches;
    for (const std::string& part : split_on(group, ',')) {
      KC_CHECK_ARG(!part.empty() && part.size() <= 6 &&
                       std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }),
                   "--batches '", text, "': '", part, "' is not a batch size");
      const int32_t b = std::stoi(part);
      KC_CHECK_ARG(b >= 1, "--batches '", text, "': batch ", b, " must be >= 1");
      batches.push_back(b);
    }
    groups.push_back(std::move(batches));
  }
  KC_CHECK_ARG(groups.size() == 1 || groups.size() == num_lengths, "--batches '", text, "' has ", groups.size(),
               " '/'-separated lists for ", num_lengths, " prompt lengths; give one list, or one per length");
  if (groups.size() == 1) groups.resize(num_lengths, groups.front());
  return groups;
}

std::string llama31_8b_config_json() {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
  "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
  "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072, "rope_theta": 500000.0,
  "rms_norm_eps": 1e-05, "initializer_range": 0.02, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192}}
)";
}

std::vector<BenchCell> bench_matrix(const std::vector<std::string>& policies, const std::vector<int64_t>& lengths,
                                    const std::vector<std::vector<int32_t>>& batches) {
  std::vector<BenchCell> cells;
  for (const std::string& policy : policies)
    for (size_t i = 0; i < lengths.size() && i < batches.size(); ++i)
      for (int32_t b : batches[i]) cells.push_back({policy, lengths[i], b});
  return cells;
}

Result<runtime::GpuMemoryPlan> bench_memory_plan(const ModelConfig& config, DType act, const BenchCell& cell,
                                                 int64_t decode_steps, int32_t chunk, int32_t page_size,
                                                 int64_t max_context) {
  KC_CHECK_ARG(cell.batch >= 1 && cell.prompt_tokens >= 1 && decode_steps >= 0 && chunk >= 1 && page_size >= 1,
               "bench memory plan: batch ", cell.batch, ", prompt ", cell.prompt_tokens, ", decode steps ",
               decode_steps, ", chunk ", chunk, ", page size ", page_size);
  const int64_t tokens = std::min(cell.prompt_tokens + decode_steps + 1, max_context);
  const int64_t pages_per_seq = (tokens + page_size - 1) / page_size;
  runtime::SessionLimits limits;
  limits.num_sequences = cell.batch;
  limits.max_call_tokens = static_cast<int64_t>(cell.batch) * std::min<int64_t>(tokens, chunk);
  limits.max_logit_rows = cell.batch;
  limits.max_pages_per_seq = static_cast<int32_t>((max_context + page_size - 1) / page_size);
  KC_ASSIGN_OR_RETURN(const runtime::ActivationLayout layout, runtime::device_activation_layout(config, act, limits));
  runtime::GpuMemoryPlan plan;
  plan.weights = runtime::device_weight_bytes(config, act);
  plan.kv_cache = runtime::device_kv_bytes(config, act, pages_per_seq * cell.batch, page_size);
  plan.activations = layout.total;
  // The device sampler's sort keys in and out (uint64 per logit) and its row offsets / statistics.
  plan.sampler = 2 * static_cast<size_t>(cell.batch) * static_cast<size_t>(config.vocab_size) * sizeof(uint64_t) +
                 static_cast<size_t>(cell.batch + 1) * sizeof(int32_t) + static_cast<size_t>(cell.batch) * 2 * sizeof(double);
  return plan;
}

std::vector<CellRatio> bench_ratios(const std::vector<CellResult>& results) {
  std::vector<CellRatio> ratios;
  for (const CellResult& r : results) {
    if (r.cell.policy == "dense") continue;
    for (const CellResult& d : results) {
      if (d.cell.policy != "dense" || d.cell.prompt_tokens != r.cell.prompt_tokens || d.cell.batch != r.cell.batch)
        continue;
      CellRatio ratio;
      ratio.policy = r.cell.policy;
      ratio.prompt_tokens = r.cell.prompt_tokens;
      ratio.batch = r.cell.batch;
      ratio.ttft_speedup = r.ttft_ms > 0 ? d.ttft_ms / r.ttft_ms : 0.0;
      ratio.decode_speedup = d.decode_tokens_per_s > 0 ? r.decode_tokens_per_s / d.decode_tokens_per_s : 0.0;
      ratios.push_back(ratio);
      break;
    }
  }
  return ratios;
}

std::string format_bench_table(const std::vector<CellResult>& results, const std::vector<CellRatio>& ratios) {
  std::ostringstream os;
  char line[360];
  std::snprintf(line, sizeof(line), "%-16s %6s %8s %12s %14s %12s %12s %11s %13s  %s\n", "policy", "batch", "prompt",
                "TTFT (ms)", "decode tok/s", "ms / step", "GPU ms/step", "plan GiB", "measured GiB", "decode path");
  os << line;
  for (const CellResult& r : results) {
    std::snprintf(line, sizeof(line), "%-16s %6d %8s %12.1f %14.1f %12.2f %12.2f %11.2f %13.2f  %s\n",
                  r.cell.policy.c_str(), r.cell.batch, human_tokens(r.cell.prompt_tokens).c_str(), r.ttft_ms,
                  r.decode_tokens_per_s, r.decode_ms_per_step, r.decode_gpu_ms_per_step, gib(r.planned_bytes),
                  gib(r.measured_peak_bytes), r.decode_path.c_str());
    os << line;
  }
  if (!ratios.empty()) {
    os << "\n";
    std::snprintf(line, sizeof(line), "%-16s %6s %8s %22s %26s\n", "policy / dense", "batch", "prompt",
                  "TTFT speedup (x)", "decode throughput (x)");
    os << line;
    for (const CellRatio& r : ratios) {
      std::snprintf(line, sizeof(line), "%-16s %6d %8s %22.2f %26.2f\n", r.policy.c_str(), r.batch,
                    human_tokens(r.prompt_tokens).c_str(), r.ttft_speedup, r.decode_speedup);
      os << line;
    }
  }
  return os.str();
}

nlohmann::json bench_json(const std::vector<CellResult>& results, const std::vector<CellRatio>& ratios) {
  nlohmann::json j;
  j["cells"] = nlohmann::json::array();
  for (const CellResult& r : results) {
    j["cells"].push_back({{"policy", r.cell.policy},
                          {"batch", r.cell.batch},
                          {"prompt_tokens", r.cell.prompt_tokens},
                          {"ttft_ms", r.ttft_ms},
                          {"decode_tokens_per_s", r.decode_tokens_per_s},
                          {"decode_ms_per_step", r.decode_ms_per_step},
                          {"decode_gpu_ms_per_step", r.decode_gpu_ms_per_step},
                          {"decode_steps", r.decode_steps},
                          {"planned_gpu_bytes", r.planned_bytes},
                          {"measured_peak_gpu_bytes", r.measured_peak_bytes},
                          {"decode_path", r.decode_path}});
  }
  j["ratios_vs_dense"] = nlohmann::json::array();
  for (const CellRatio& r : ratios) {
    j["ratios_vs_dense"].push_back({{"policy", r.policy},
                                    {"batch", r.batch},
                                    {"prompt_tokens", r.prompt_tokens},
                                    {"ttft_speedup", r.ttft_speedup},
                                    {"decode_throughput_speedup", r.decode_speedup}});
  }
  return j;
}

}  // namespace kascade::tools
