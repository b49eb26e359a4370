#!/usr/bin/env bash
# tests/scripts/test_ship_test.sh — scripts/ship_test.sh end to end on the CPU with the shipped
# kascade-tiny as both checkpoints (one task, 1K, one sample): both evals run on the same samples,
# compare.md holds the table, and the verdict of a checkpoint against itself is "not separable".
#   tests/scripts/test_ship_test.sh KASCADE_BINARY
set -euo pipefail
bin=${1:?KASCADE_BINARY}
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out/log" 2>/dev/null | tail -20; exit 1; }
OMP_WAIT_POLICY=PASSIVE TASKS=niah_single_1 LENGTHS=1k SAMPLES=1 "$here/scripts/ship_test.sh" "$bin" \
  "$here/models/kascade-tiny" "$here/models/kascade-tiny" "$out/run" --no-progress >"$out/log" 2>&1 ||
  fail "ship_test.sh exited non-zero"
for which in shipped candidate; do
  [[ -s "$out/run/$which/samples.jsonl" ]] || fail "no samples.jsonl for the $which checkpoint"
done
grep -q "| niah_single_1 | 1024 | dense | 1 |" "$out/run/compare.md" || fail "the table row"
grep -q "Verdict: \*\*not separable\*\* — paired difference +0.0 ± 0.0" "$out/run/compare.md" ||
  fail "a checkpoint against itself"
echo "ship_test.sh: both evals and the comparison as expected"
