// src/runtime/report.h — what `kascade generate` prints about a run: the progress line of a long
// prefill (tokens done, rate, ETA) and the closing report (prefill and decode tokens/s, fraction of
// keys attended per layer class in each mode). Pure formatting over the numbers the runtime
// collects, so the tests check the text against hand-computed values.
// Tested by tests/unit/runtime/test_report.cpp.
#pragma once

#include <string>

#include "kascade/policy.h"
#include "kascade/runtime.h"

namespace kascade::runtime {

// Sums the policy's statistics per layer role and mode (roles without layers are left out).
AttendedSummary summarize_attended(const AttendedStatistics& statistics, int32_t num_layers);

// "prefill 2048/8192 tokens  1234 tok/s  ETA 5.0 s" (ETA omitted when done).
std::string format_progress(const PrefillProgress& progress);

// The closing report, one line per item:
//   prefill: 300 tokens in 0.120 s (2500.0 tok/s)
//   decode:  20 tokens in 0.050 s (400.0 tok/s), 20 steps
//   time, prefill: matmul 0.030 s (25%) at 41.0 GFLOP/s | attention 0.080 s (67%) | other 0.010 s (8%)
//   time, decode: ...
//   time, decode: device 0.400 s (80%) | host 0.100 s        (GPU runtime: the device's share)
//   keys attended, prefill: all layers 41.2% | dense 1 layer 100.0% | anchor 2 layers 35.0% | ...
//   keys attended, decode: ...
// Modes without calls are left out.
std::string format_report(const GenerateStats& stats);

}  // namespace kascade::runtime
