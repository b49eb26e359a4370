// eval/results.h — the results table of `kascade eval`: task x length x policy -> accuracy (mean
// score in [0, 1]), fraction of keys attended (mean in [0, 1]) and the number of samples; JSON
// and markdown output, and JSON input (to merge or re-render runs). scripts/plot_eval.py draws
// accuracy vs length per policy from the JSON.
// JSON layout ("format": "kascade-eval-results", "version": 1):
//   {"meta": {string: string}, "tasks": [..], "lengths": [..], "policies": [..],
//    "cells": [{"task", "length", "policy", "samples", "accuracy", "keys_attended"}],
//    "averages": [{"length", "policy", "tasks", "accuracy", "keys_attended"}]}
// where an average is the unweighted mean over the tasks that have a cell at that length and
// policy. Tested by tests/unit/eval/test_results.cpp (against a hand-checked golden file).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kascade/status.h"

namespace kascade::eval {

struct ResultCell {
  std::string task;
  int64_t length = 0;
  std::string policy;
  int64_t samples = 0;
  double accuracy = 0.0;       // mean score, [0, 1]
  double keys_attended = 0.0;  // mean fraction of keys attended, [0, 1]
};

class ResultsTable {
 public:
  // One scored sample: score and keys_attended in [0, 1].
  Status add_sample(std::string_view task, int64_t length, std::string_view policy, double score,
                    double keys_attended);
  // A cell aggregated elsewhere; merges with an existing cell, weighted by samples.
  Status add_cell(const ResultCell& cell);

  // Cells ordered by task (first-seen order), length (ascending), policy (first-seen order).
  std::vector<ResultCell> cells() const;
  const std::vector<std::string>& tasks() const { return tasks_; }
  const std::vector<std::string>& policies() const { return policies_; }
  std::vector<int64_t> lengths() const;
  bool empty() const { return cells_.empty(); }

  std::string to_json(const std::map<std::string, std::string>& meta = {}) const;
  std::string to_markdown() const;
  static Result<ResultsTable> from_json(std::string_view json);

 private:
  struct Accumulator {
    int64_t samples = 0;
    double score_sum = 0.0;
    double keys_sum = 0.0;
  };
  struct Key {
    std::string task;
    int64_t length;
    std::string policy;
    bool operator<(const Key& o) const {
      if (task != o.task) return task < o.task;
      if (length != o.length) return length < o.length;
      return policy < o.policy;
    }
  };
  const Accumulator* find(const std::string& task, int64_t length, const std::string& policy) const;
  void remember(std::string_view task, std::string_view policy);

  std::map<Key, Accumulator> cells_;
  std::vector<std::string> tasks_;
  std::vector<std::string> policies_;
};

// Writes `text` to `path` (replacing it); names the path on failure.
Status write_text_file(const std::string& path, std::string_view text);

}  // namespace kascade::eval
