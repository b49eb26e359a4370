#!/usr/bin/env bash
# tests/scripts/test_prefill_report.sh — bench/prefill/prefill_report.py on hand-made JSON: a row with
# every kernel is judged against the issue-6 targets with ratios computed from the inputs (misses named
# with their values), a row without the dense kernel still gets its reuse / anchor ratios but is listed
# as not fully judged, and a report that judged nothing never says the targets were met.
#   tests/scripts/test_prefill_report.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
report="$here/bench/prefill/prefill_report.py"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out/table.md" 2>/dev/null; exit 1; }
# cuDNN: 100 ms at 128K (flops chosen so that TFLOP/s = 500).
cat >"$out/cudnn.json" <<'J'
{"records": [{"dtype": "bf16", "L": 131072, "ms": 100.0, "flops": 5.0e13}], "cudnn": 91900, "torch": "t"}
J
rec() {  # rec KERNEL LAYOUT MS [FLOPS]
  echo "{\"kernel\": \"$1\", \"dtype\": \"bf16\", \"layout\": \"$2\", \"variant\": \"ws_tma\", \"L\": 131072, \"ms\": $3,
         \"flops\": ${4:-1.0e13}, \"selection_scratch_bytes\": 1.0e9, \"index_bytes\": 1.0e8}"
}
# contiguous: every kernel; dense at 0.9x cuDNN TFLOP/s, reuse 0.12x, anchor 1.5x (a miss), anchor0 1.7x;
# average (170 + 4·150 + 27·12) / 32 = 34.19 ms -> 2.93x. paged: no dense, reuse 0.2x (a miss).
cat >"$out/ours.json" <<J
{"gpu": "test", "records": [$(rec dense contiguous 111.111111 5.0e13), $(rec reuse contiguous 12), $(rec anchor contiguous 150),
 $(rec anchor0 contiguous 170), $(rec reuse paged 20), $(rec anchor paged 120), $(rec anchor0 paged 160)]}
J
python3 "$report" "$out/ours.json" "$out/cudnn.json" >"$out/table.md" || fail "the report exited non-zero"
grep -q "| bf16 | contiguous | ws_tma | 131072 | 100.00 (500) | 111.11 (450, 0.90) | 0.120 | 1.50 | 1.70 | 2.93 | 1.10 |" \
  "$out/table.md" || fail "the contiguous row's ratios"
grep -q "| bf16 | paged | ws_tma | 131072 | 100.00 (500) | — | 0.200 | 1.20 | 1.60 |" "$out/table.md" || fail "the paged row"
grep -q "contiguous ws_tma L=131072: anchor <= 1.3x missed (1.50x)" "$out/table.md" || fail "the anchor miss"
grep -q "paged ws_tma L=131072: reuse <= 0.14x missed (0.200x)" "$out/table.md" || fail "the reuse miss"
grep -q "paged ws_tma L=131072: not measured: dense" "$out/table.md" || fail "the unjudged dense kernel"
if grep -q "contiguous ws_tma L=131072: reuse" "$out/table.md"; then fail "a met target reported as missed"; fi
if grep -q "targets judged were met" "$out/table.md"; then fail "'met' printed despite misses"; fi
# Nothing judged: no cuDNN baseline at the measured length.
sed 's/131072/65536/' "$out/cudnn.json" >"$out/cudnn_other.json"
python3 "$report" "$out/ours.json" "$out/cudnn_other.json" >"$out/table.md" || fail "the report exited non-zero"
grep -q "No target judged" "$out/table.md" || fail "a report that judged nothing must say so"
if grep -qiE "were met|targets met" "$out/table.md"; then fail "a report that judged nothing claims targets met"; fi
echo "prefill_report.py: rows, misses and unjudged rows as expected"
