#!/usr/bin/env bash
# tests/scripts/test_ncu_kernel_summary.sh — bench/ncu_kernel_summary.py on a hand-made Nsight Compute
# CSV (ncu's preamble lines, two launches of one kernel with the same grid, one of another grid, a row
# of another metric, durations in ns and us): the per-kernel totals, counts, per-launch times and the
# order (largest first); an unknown unit and a missing argument stop it with a message.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work/out" 2>/dev/null; exit 1; }
cat >"$work/ncu.csv" <<'CSV'
==PROF== Connected to process 1
==PROF== Profiling "k": 0%....50%....100% - 1 pass
"ID","Kernel Name","Grid Size","Metric Name","Metric Unit","Metric Value"
"0","void rmsnorm_kernel<bf16>(const float *, int)","(4, 1, 1)","gpu__time_duration.sum","ns","4,400"
"1","decode_kernel<1, 0, 1>(Params)","(8, 8, 4)","gpu__time_duration.sum","us","68.5"
"2","void rmsnorm_kernel<bf16>(const float *, int)","(4, 1, 1)","gpu__time_duration.sum","ns","4,600"
"3","decode_kernel<1, 0, 1>(Params)","(8, 8, 2)","gpu__time_duration.sum","us","30"
"3","decode_kernel<1, 0, 1>(Params)","(8, 8, 2)","dram__bytes.sum","byte","1000"
CSV
python3 "$here/bench/ncu_kernel_summary.py" "$work/ncu.csv" >"$work/out" 2>&1 || fail "exited non-zero"
[[ $(sed -n 1p "$work/out") == "kernels 4, total 107.5 us" ]] || fail "header: $(sed -n 1p "$work/out")"
sed -n 2p "$work/out" | grep -q "68.5 us .* 1 x .*68.50 us  decode_kernel<1, 0, 1>  grid (8, 8, 4)" || fail "first line"
sed -n 3p "$work/out" | grep -q "30.0 us .* 1 x .*30.00 us  decode_kernel<1, 0, 1>  grid (8, 8, 2)" || fail "second line"
sed -n 4p "$work/out" | grep -q " 9.0 us .* 2 x .* 4.50 us  void rmsnorm_kernel<bf16>  grid (4, 1, 1)" || fail "third line"
[[ $(wc -l <"$work/out") -eq 4 ]] || fail "line count"
sed -i 's/"us","30"/"s","30"/' "$work/ncu.csv"
if python3 "$here/bench/ncu_kernel_summary.py" "$work/ncu.csv" >"$work/out" 2>&1; then fail "accepted unit s"; fi
grep -q "unknown duration unit 's'" "$work/out" || fail "unit message"
if python3 "$here/bench/ncu_kernel_summary.py" >"$work/out" 2>&1; then fail "accepted no argument"; fi
grep -q "usage" "$work/out" || fail "usage message"
echo "PASS"
