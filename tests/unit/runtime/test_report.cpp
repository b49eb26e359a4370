// test_report.cpp — the progress line and closing report (src/runtime/report.h) on hand-computed
// numbers, and summarize_attended() on hand-made statistics.
#include <gtest/gtest.h>

#include "runtime/report.h"

namespace kascade::runtime {
namespace {

TEST(Report, ProgressLineWithRateAndEta) {
  // 2048 of 8192 tokens in 2 s: 1024 tok/s, 6144 left → 6.0 s.
  EXPECT_EQ(format_progress(PrefillProgress{2048, 8192, 2.0}), "prefill 2048/8192 tokens  1024 tok/s  ETA 6.0 s");
  EXPECT_EQ(format_progress(PrefillProgress{8192, 8192, 4.0}), "prefill 8192/8192 tokens  2048 tok/s");
}

AttendedStatistics hand_statistics() {
  // 4 layers; prefill roles: dense-anchor, anchor, reuse, reuse; decode: the same.
  AttendedStatistics s;
  for (int m = 0; m < 2; ++m) {
    s.roles[m] = {LayerRole::kDenseAnchor, LayerRole::kAnchor, LayerRole::kReuse, LayerRole::kReuse};
    s.per_layer[m] = {{100, 100}, {30, 100}, {10, 100}, {20, 100}};
  }
  return s;
}

TEST(Report, SummaryGroupsLayersByRole) {
  const AttendedSummary a = summarize_attended(hand_statistics(), 4);
  ASSERT_EQ(a.prefill.size(), 3u);
  EXPECT_EQ(a.prefill[0].role, LayerRole::kDenseAnchor);
  EXPECT_EQ(a.prefill[0].num_layers, 1);
  EXPECT_EQ(a.prefill[1].role, LayerRole::kAnchor);
  EXPECT_EQ(a.prefill[2].role, LayerRole::kReuse);
  EXPECT_EQ(a.prefill[2].num_layers, 2);
  EXPECT_EQ(a.prefill[2].count.attended, 30);
  EXPECT_EQ(a.prefill[2].count.causal, 200);
  EXPECT_EQ(a.prefill_total.attended, 160);
  EXPECT_EQ(a.decode_total.causal, 400);
}

TEST(Report, ClosingReport) {
  GenerateStats s;
  s.prefill_tokens = 300;
  s.prefill_s = 0.12;
  s.decode_tokens = 20;
  s.decode_steps = 20;
  s.decode_s = 0.05;
  s.attended = summarize_attended(hand_statistics(), 4);
  s.prefill_timings = PhaseTimings{0.03, 1.23e9, 0.08, 0.01};  // 1.23 GFLOP in 0.03 s = 41 GFLOP/s
  EXPECT_EQ(format_report(s),
            "prefill: 300 tokens in 0.120 s (2500.0 tok/s)\n"
            "decode:  20 tokens in 0.050 s (400.0 tok/s), 20 steps\n"
            "time, prefill: matmul 0.030 s (25%) at 41.0 GFLOP/s | attention 0.080 s (67%) | other 0.010 s (8%)\n"
            "keys attended, prefill: all layers 40.0% | dense-anchor 1 layer 100.0% | anchor 1 layer 30.0% | "
            "reuse 2 layers 15.0%\n"
            "keys attended, decode: all layers 40.0% | dense-anchor 1 layer 100.0% | anchor 1 layer 30.0% | "
            "reuse 2 layers 15.0%\n");
  GenerateStats prefill_only;
  prefill_only.prefill_tokens = 10;
  prefill_only.prefill_s = 1.0;
  EXPECT_EQ(format_report(prefill_only), "prefill: 10 tokens in 1.000 s (10.0 tok/s)\n");
}

TEST(Report, GpuRunSplitsWallTimeIntoDeviceAndHost) {
  GenerateStats s;
  s.decode_tokens = 40;
  s.decode_steps = 10;
  s.decode_s = 0.5;
  s.decode_timings.device_s = 0.4;
  s.prefill_tokens = 8;
  s.prefill_s = 0.2;
  s.prefill_timings.device_s = 0.25;  // events can exceed the wall clock by rounding: host clamps to 0
  EXPECT_EQ(format_report(s),
            "prefill: 8 tokens in 0.200 s (40.0 tok/s)\n"
            "decode:  40 tokens in 0.500 s (80.0 tok/s), 10 steps\n"
            "time, prefill: device 0.250 s (125%) | host 0.000 s\n"
            "time, decode: device 0.400 s (80%) | host 0.100 s\n");
}

}  // namespace
}  // namespace kascade::runtime
