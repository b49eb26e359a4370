// eval/results.cpp — the eval results table: aggregation, JSON in/out, markdown (see results.h).
// Tested by tests/unit/eval/test_results.cpp.
#include "eval/results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

namespace kascade::eval {
namespace {

Status check_cell_values(std::string_view task, int64_t length, std::string_view policy) {
  KC_CHECK_ARG(!task.empty(), "result cell: empty task name");
  KC_CHECK_ARG(!policy.empty(), "result cell: empty policy name");
  KC_CHECK_ARG(length > 0, "result cell ", task, "/", policy, ": length is ", length, "; it must be positive");
  return ok_status();
}

bool is_fraction(double v) { return std::isfinite(v) && v >= 0.0 && v <= 1.0; }

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", 100.0 * fraction);
  return buf;
}

}  // namespace

void ResultsTable::remember(std::string_view task, std::string_view policy) {
  if (std::find(tasks_.begin(), tasks_.end(), task) == tasks_.end()) tasks_.emplace_back(task);
  if (std::find(policies_.begin(), policies_.end(), policy) == policies_.end()) policies_.emplace_back(policy);
}

Status ResultsTable::add_sample(std::string_view task, int64_t length, std::string_view policy, double score,
                                double keys_attended) {
  KC_RETURN_IF_ERROR(check_cell_values(task, length, policy));
  KC_CHECK_ARG(is_fraction(score), "result ", task, "/", length, "/", policy, ": score ", score, " is not in [0, 1]");
  KC_CHECK_ARG(is_fraction(keys_attended), "result ", task, "/", length, "/", policy, ": keys attended ",
               keys_attended, " is not in [0, 1]");
  remember(task, policy);
  Accumulator& a = cells_[Key{std::string(task), length, std::string(policy)}];
  a.samples += 1;
  a.score_sum += score;
  a.keys_sum += keys_attended;
  return ok_status();
}

Status ResultsTable::add_cell(const ResultCell& cell) {
  KC_RETURN_IF_ERROR(check_cell_values(cell.task, cell.length, cell.policy));
  KC_CHECK_ARG(cell.samples > 0, "result cell ", cell.task, "/", cell.length, "/", cell.policy, ": samples is ",
               cell.samples, "; it must be positive");
  KC_CHECK_ARG(is_fraction(cell.accuracy), "result cell ", cell.task, "/", cell.length, "/", cell.policy,
               ": accuracy ", cell.accuracy, " is not in [0, 1]");
  KC_CHECK_ARG(is_fraction(cell.keys_attended), "result cell ", cell.task, "/", cell.length, "/", cell.policy,
               ": keys attended ", cell.keys_attended, " is not in [0, 1]");
  remember(cell.task, cell.policy);
  Accumulator& a = cells_[Key{cell.task, cell.length, cell.policy}];
  a.samples += cell.samples;
  a.score_sum += cell.accuracy * static_cast<double>(cell.samples);
  a.keys_sum += cell.keys_attended * static_cast<double>(cell.samples);
  return ok_status();
}

const ResultsTable::Accumulator* ResultsTable::find(const std::string& task, int64_t length,
                                                     const std::string& policy) const {
  auto it = cells_.find(Key{task, length, policy});
  return it == cells_.end() ? nullptr : &it->second;
}

std::vector<int64_t> ResultsTable::lengths() const {
  std::set<int64_t> s;
  for (const auto& [k, a] : cells_) s.insert(k.length);
  return {s.begin(), s.end()};
}

std::vector<ResultCell> ResultsTable::cells() const {
  std::vector<ResultCell> out;
  const std::vector<int64_t> lens = lengths();
  for (const auto& t : tasks_) {
    for (const int64_t len : lens) {
      for (const auto& p : policies_) {
        const Accumulator* a = find(t, len, p);
        if (a == nullptr) continue;
        const double n = static_cast<double>(a->samples);
        out.push_back(ResultCell{t, len, p, a->samples, a->score_sum / n, a->keys_sum / n});
      }
    }
  }
  return out;
}

std::string ResultsTable::to_json(const std::map<std::string, std::string>& meta) const {
  nlohmann::ordered_json j;
  j["format"] = "kascade-eval-results";
  j["version"] = 1;
  j["meta"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : meta) j["meta"][k] = v;
  j["tasks"] = tasks_;
  j["lengths"] = lengths();
  j["policies"] = policies_;
  j["cells"] = nlohmann::ordered_json::array();
  for (const auto& c : cells()) {
    j["cells"].push_back({{"task", c.task},
                          {"length", c.length},
                          {"policy", c.policy},
                          {"samples", c.samples},
                          {"accuracy", c.accuracy},
                          {"keys_attended", c.keys_attended}});
  }
  j["averages"] = nlohmann::ordered_json::array();
  for (const int64_t len : lengths()) {
    for (const auto& p : policies_) {
      double acc = 0.0, keys = 0.0;
      int64_t n = 0;
      for (const auto& t : tasks_) {
        const Accumulator* a = find(t, len, p);
        if (a == nullptr) continue;
        acc += a->score_sum / static_cast<double>(a->samples);
        keys += a->keys_sum / static_cast<double>(a->samples);
        ++n;
      }
      if (n == 0) continue;
      j["averages"].push_back({{"length", len},
                               {"policy", p},
                               {"tasks", n},
                               {"accuracy", acc / static_cast<double>(n)},
                               {"keys_attended", keys / static_cast<double>(n)}});
    }
  }
  return j.dump(2) + "\n";
}

std::string ResultsTable::to_markdown() const {
  const std::vector<int64_t> lens = lengths();
  std::string md;
  auto table = [&](const char* title, bool accuracy) {
    md += "### ";
    md += title;
    md += "\n\n| task | length | samples |";
    for (const auto& p : policies_) md.append(" ").append(p).append(" |");
    md += "\n|---|---:|---:|";
    for (size_t i = 0; i < policies_.size(); ++i) md += "---:|";
    md += "\n";
    for (const auto& t : tasks_) {
      for (const int64_t len : lens) {
        std::set<int64_t> counts;
        for (const auto& p : policies_) {
          if (const Accumulator* a = find(t, len, p)) counts.insert(a->samples);
        }
        if (counts.empty()) continue;
        std::string samples;
        for (const int64_t c : counts) samples.append(samples.empty() ? "" : "/").append(std::to_string(c));
        md.append("| ").append(t).append(" | ").append(std::to_string(len)).append(" | ").append(samples).append(" |");
        for (const auto& p : policies_) {
          const Accumulator* a = find(t, len, p);
          if (a == nullptr) {
            md += " - |";
            continue;
          }
          const double v = (accuracy ? a->score_sum : a->keys_sum) / static_cast<double>(a->samples);
          md.append(" ").append(percent(v)).append(" |");
        }
        md += "\n";
      }
    }
    for (const int64_t len : lens) {
      md.append("| **average** | ").append(std::to_string(len)).append(" | |");
      for (const auto& p : policies_) {
        double sum = 0.0;
        int64_t n = 0;
        for (const auto& t : tasks_) {
          if (const Accumulator* a = find(t, len, p)) {
            sum += (accuracy ? a->score_sum : a->keys_sum) / static_cast<double>(a->samples);
            ++n;
          }
        }
        if (n == 0) {
          md.append(" - |");
        } else {
          md.append(" **").append(percent(sum / static_cast<double>(n))).append("** |");
        }
      }
      md += "\n";
    }
    md += "\n";
  };
  table("Accuracy (%)", true);
  table("Keys attended (%)", false);
  return md;
}

Result<ResultsTable> ResultsTable::from_json(std::string_view json) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    return data_loss("eval results: not valid JSON: ", e.what());
  }
  if (!j.is_object() || j.value("format", "") != "kascade-eval-results") {
    return data_loss("eval results: missing \"format\": \"kascade-eval-results\"");
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != 1) {
    return unsupported("eval results: only version 1 is supported");
  }
  if (!j.contains("cells") || !j["cells"].is_array()) return data_loss("eval results: \"cells\" is not an array");
  ResultsTable table;
  // Keep the file's task and policy order.
  for (const char* list : {"tasks", "policies"}) {
    if (!j.contains(list) || !j[list].is_array()) continue;
    auto& names = std::string_view(list) == "tasks" ? table.tasks_ : table.policies_;
    for (const auto& n : j[list]) {
      if (n.is_string() && std::find(names.begin(), names.end(), n.get<std::string>()) == names.end()) {
        names.push_back(n.get<std::string>());
      }
    }
  }
  size_t i = 0;
  for (const auto& c : j["cells"]) {
    const bool well_formed = c.is_object() && c.contains("task") && c["task"].is_string() && c.contains("length") &&
                             c["length"].is_number_integer() && c.contains("policy") && c["policy"].is_string() &&
                             c.contains("samples") && c["samples"].is_number_integer() && c.contains("accuracy") &&
                             c["accuracy"].is_number() && c.contains("keys_attended") &&
                             c["keys_attended"].is_number();
    if (!well_formed) return data_loss("eval results: cell ", i, " lacks a field or has a wrong type");
    ResultCell cell{c["task"].get<std::string>(), c["length"].get<int64_t>(), c["policy"].get<std::string>(),
                    c["samples"].get<int64_t>(), c["accuracy"].get<double>(), c["keys_attended"].get<double>()};
    Status s = table.add_cell(cell);
    if (!s.ok()) return s.with_context("eval results: cell " + std::to_string(i));
    ++i;
  }
  return table;
}

Status write_text_file(const std::string& path, std::string_view text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return io_error("cannot open '", path, "' for writing");
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.close();
  if (!f) return io_error("writing '", path, "' failed");
  return ok_status();
}

}  // namespace kascade::eval
