#!/usr/bin/env bash
# tests/scripts/test_ncu_stalls.sh — bench/ncu_stalls.py on a hand-made Nsight Compute source-page CSV:
# regions cut at the setmaxnreg lines with their sample shares, executed instructions and stall
# reasons; the instructions ranked by samples; a CSV without the sampling column refused by name.
#   tests/scripts/test_ncu_stalls.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tool="$here/bench/ncu_stalls.py"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out/report.md" 2>/dev/null; exit 1; }
S='"Warp Stall Sampling (All Samples)"'
cat >"$out/source.csv" <<EOF2
"Kernel Name","k",
"Address","Source",$S,"Instructions Executed","stall_long_sb","stall_barrier","stall_short_sb","stall_wait (Not Issued)"
"0x10","MOV R1, c[0x0][0x28]","0","5","0","0","0","0"
"0x20","USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe0","0","10","0","0","0","0"
"0x30","@!P0 BRA 0x90","60","100","50","10","0","99"
"0x40","HGMMA.64x128x16.F32.BF16 R88","15","100","0","15","0","0"
"0x50","USETMAXREG.DEALLOC.CTAPOOL 0x38","0","10","0","0","0","0"
"0x60","LDS R10, [R28]","25","300","0","0","25","0"
EOF2
python3 "$tool" "$out/source.csv" --top 2 >"$out/report.md" || fail "the tool exited non-zero"
grep -q "6 instructions, 100 warp-stall samples" "$out/report.md" || fail "the totals"
grep -q "| after USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe0 at 0x20 | 75.0 % | 210 | long_sb 67 %, barrier 33 % |" \
  "$out/report.md" || fail "the consumer region"
grep -q "| after USETMAXREG.DEALLOC.CTAPOOL 0x38 at 0x50 | 25.0 % | 310 | short_sb 100 % |" "$out/report.md" ||
  fail "the producer region"
[[ $(grep -c '^| 0x' "$out/report.md") == 2 ]] || fail "--top 2 lists two instructions"
grep -A4 "most samples" "$out/report.md" | grep -q "| 0x30 | 60.0 % |" || fail "the first instruction"
if grep -q "wait" "$out/report.md"; then fail "a Not Issued column counted as a stall reason"; fi
head -1 "$out/source.csv" >"$out/bad.csv"
echo '"Address","Source","Instructions Executed"' >>"$out/bad.csv"
if python3 "$tool" "$out/bad.csv" >"$out/bad.log" 2>&1; then fail "a CSV without samples accepted"; fi
grep -q "Warp Stall Sampling (All Samples)" "$out/bad.log" || fail "the refusal names the missing column"
echo "ncu_stalls.py: regions, ranking and refusal as expected"
