#!/usr/bin/env bash
# tests/scripts/test_compare_builds.sh — bench/compare_builds.py with stand-in benchmark binaries (no
# GPU): the builds run in turns (A B A B), each with exactly the given options plus --json; the table
# holds every run's time and each build's change against the first from the medians; the decode
# benchmark's result format is read too; variants of one binary ('NAME=BINARY OPTIONS') get their own
# options first; a result file of neither format, a failing binary, a missing
# one and bad arguments stop it with a message naming the problem.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work/log" 2>/dev/null; exit 1; }
stand_in() {  # stand_in NAME KIND MS: a benchmark that appends its name and arguments to $work/calls
  cat >"$work/$1" <<SH
#!/usr/bin/env bash
echo "$1 \$*" >> "$work/calls"
[[ -e "$work/$1.fail" ]] && { echo "boom from $1"; exit 3; }
n=\$(grep -c "^$1 " "$work/calls")
ms=\$(python3 -c "print($3 + 0.5 * (\$n - 1))")   # run 1: $3, run 2: $3 + 0.5, ...
while [[ \$# -gt 0 ]]; do
  if [[ \$1 == --json ]]; then
    if [[ $2 == other ]]; then
      echo '{"rows": []}' > "\$2"
    elif [[ $2 == prefill ]]; then
      echo "{\"records\": [{\"kernel\": \"lse\", \"variant\": \"ws_tma\", \"dtype\": \"bf16\", \"layout\": \"contiguous\", \"L\": 32768, \"ms\": \$ms}]}" > "\$2"
    else
      echo "{\"results\": [{\"shape\": \"llama\", \"dtype\": \"bf16\", \"batch\": 8, \"len\": 131072, \"layout\": \"paged\", \"op\": \"topk\", \"median_us\": \$(python3 -c "print(\$ms * 1000)")}]}" > "\$2"
    fi
  fi
  shift
done
SH
  chmod +x "$work/$1"
}
stand_in old prefill 10
stand_in new prefill 8
py() { python3 "$here/bench/compare_builds.py" "$@" >"$work/log" 2>&1; }

py --runs 2 --out "$work/t.md" old="$work/old" new="$work/new" -- --lens 32768 --reps 3 || fail "exited non-zero"
[[ $(cut -d' ' -f1 "$work/calls" | tr '\n' ' ') == "old new old new " ]] || fail "not in turns: $(cat "$work/calls")"
grep -q "^old --lens 32768 --reps 3 --json .*/old_1.json$" "$work/calls" || fail "old's arguments: $(head -1 "$work/calls")"
# old: 10, 10.5 (median 10.25); new: 8, 8.5 (median 8.25): -19.5 %
grep -qF "| bf16 contiguous ws_tma L=32768 | lse | 10, 10.5 | 8, 8.5 | -19.5 % |" "$work/t.md" || fail "table: $(cat "$work/t.md")"
grep -q "ETA" "$work/log" || fail "no progress line"

rm -f "$work/calls"
stand_in d_old decode 0.1
stand_in d_new decode 0.2
py --runs 1 a="$work/d_old" b="$work/d_new" -- --batches 8 || fail "decode format"
grep -qF "| llama bf16 B=8 L=131072 paged | topk | 0.1 | 0.2 | +100.0 % |" "$work/log" || fail "decode table"

# Variants of one binary: its own options go before the shared ones.
rm -f "$work/calls"
py --runs 1 "sep=$work/d_old --pool-fusion separate" "fused=$work/d_old --pool-fusion fused" -- --batches 8 ||
  fail "variants of one binary"
grep -q "^d_old --pool-fusion separate --batches 8 --json .*/sep_1.json$" "$work/calls" || fail "sep's arguments: $(cat "$work/calls")"
grep -q "^d_old --pool-fusion fused --batches 8 --json .*/fused_1.json$" "$work/calls" || fail "fused's arguments"

stand_in o_old other 1
stand_in o_new other 1
if py a="$work/o_old" b="$work/o_new" -- --x; then fail "a foreign result file passed"; fi
grep -q "not a result file of our benchmarks" "$work/log" || fail "foreign-format message"

touch "$work/new.fail"
if py old="$work/old" new="$work/new" -- --lens 8; then fail "a failing build passed"; fi
grep -q "new (run 1) exited with status 3" "$work/log" && grep -q "boom from new" "$work/log" || fail "failure message"
if py old="$work/old" x="$work/missing" -- --lens 8; then fail "a missing binary passed"; fi
grep -q "x: .*missing is not an executable file" "$work/log" || fail "missing-binary message"
if py old="$work/old" -- --lens 8; then fail "one build passed"; fi
grep -q "at least two builds" "$work/log" || fail "one-build message"
if py old="$work/old" new="$work/new"; then fail "no -- passed"; fi
grep -q "after '--'" "$work/log" || fail "no-separator message"
echo "compare_builds: all checks passed"
