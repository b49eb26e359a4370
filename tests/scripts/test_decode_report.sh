#!/usr/bin/env bash
# tests/scripts/test_decode_report.sh — bench/decode_report.py on hand-made JSON: the ratios to cuDNN,
# the per-layer Kascade average (1 layer-0 anchor + 4 anchors + 27 reuse layers) and its speedup are
# computed from the inputs, misses of the issue-5 targets are flagged with their values, the L2 flush
# mode and the anchors' pooling mode (--pool-fusion) of the run are printed, and runs made with different
# flushes are refused (no ratios across them).
#   tests/scripts/test_decode_report.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
report="$here/bench/decode_report.py"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out/table.md" 2>/dev/null; exit 1; }
op() {  # op NAME MEDIAN_US: one result of llama bf16 B=8 L=131072 contiguous
  echo "{\"shape\": \"llama\", \"dtype\": \"bf16\", \"layout\": \"contiguous\", \"op\": \"$1\", \"batch\": 8,
         \"len\": 131072, \"median_us\": $2, \"min_us\": $2, \"bytes\": 1e9, \"gbps\": 4000.0,
         \"roof_fraction\": 0.9, \"splits\": 4}"
}
ours() {  # ours FLUSH
  echo "{\"device\": \"H\", \"flush\": \"$1\", \"pool_fusion\": \"fused\", \"read_roof_gbps\": [4400.0, 4400.0], \"results\": [
    $(op dense 1000.0), $(op anchor0 1100.0), $(op anchor 800.0), $(op reuse 100.0)]}"
}
cudnn() {  # cudnn FLUSH: cuDNN 1000 us
  echo "{\"device\": \"H\", \"torch\": \"t\", \"cudnn\": 1, \"flush\": \"$1\", \"read_roof_gbps\": 4400.0, \"results\": [
    {\"shape\": \"llama\", \"dtype\": \"bf16\", \"batch\": 8, \"len\": 131072, \"median_us\": 1000.0, \"min_us\": 1000.0,
     \"bytes\": 1e9, \"gbps\": 4000.0, \"roof_fraction\": 0.9}]}"
}
ours read >"$out/ours.json"
cudnn read >"$out/cudnn.json"
python3 "$report" "$out/ours.json" "$out/cudnn.json" >"$out/table.md" || fail "the report exited non-zero"
# avg = (1100 + 4 * 800 + 27 * 100) / 32 = 218.75 us; speedup = 1000 / 218.75 = 4.571
grep -q "| llama | bf16 | 8 | 128K | contiguous | 1000.0 " "$out/table.md" || fail "the row"
grep -q "| 218.8 | 4.57× |" "$out/table.md" || fail "the per-layer average and speedup"
! grep -q "1100.0 (1.100) ✗" "$out/table.md" || fail "layer-0 anchor 1.100 meets 1.15 but was flagged"
grep -q "800.0 (0.800) ✗" "$out/table.md" || fail "the anchor's miss (0.800 vs 0.70) is flagged"
grep -q "anchor 0.800 vs target 0.7" "$out/table.md" || fail "the miss is listed with its value"
grep -q "100.0 (0.100; 4000, 91 %) |" "$out/table.md" || fail "reuse 0.100 meets 0.11 unflagged, with GB/s and % roof"
! grep -q "): per-layer speedup" "$out/table.md" || fail "4.57x >= 4.5 was flagged"
grep -q "L2 flush before each timed replay: read" "$out/table.md" || fail "the flush mode is printed"
grep -q "Anchors' pooling and Top-k: fused" "$out/table.md" || fail "the pooling mode is printed"
cudnn write >"$out/cudnn_write.json"
if python3 "$report" "$out/ours.json" "$out/cudnn_write.json" >"$out/mixed.md" 2>"$out/mixed.err"; then
  fail "runs with different flushes were joined"
fi
grep -q "ours ran with --flush read, cuDNN with --flush write" "$out/mixed.err" || fail "the refusal names both flushes"
echo "decode_report.py: ratios, per-layer average, misses, flush mode and refusal as expected"
