#!/usr/bin/env bash
# tests/scripts/test_ship_test.sh — scripts/ship_test.sh end to end on the CPU with the shipped
# kascade-tiny as both checkpoints (one task, 1K, one sample): both evals run on the same samples,
# compare.md holds the table, and the verdict of a checkpoint against itself is "not separable"; then the
# shipped side from those saved results (not evaluated again), with their own tasks / lengths / samples when none
# are given, and saved results of other samples refused.
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
# The shipped side from the saved results of that run: no second eval of it, the same verdict.
OMP_WAIT_POLICY=PASSIVE TASKS=niah_single_1 LENGTHS=1k SAMPLES=1 "$here/scripts/ship_test.sh" "$bin" \
  "$out/run/shipped" "$here/models/kascade-tiny" "$out/saved" --no-progress >"$out/log" 2>&1 ||
  fail "ship_test.sh with saved shipped results exited non-zero"
grep -q "shipped = the saved results in $out/run/shipped" "$out/log" || fail "the saved results were not used"
[[ ! -e "$out/saved/shipped" ]] || fail "the shipped checkpoint was evaluated again"
grep -q "Verdict: \*\*not separable\*\* — paired difference +0.0 ± 0.0" "$out/saved/compare.md" ||
  fail "a checkpoint against its own saved results"
# Without TASKS / LENGTHS / SAMPLES the saved results' own are used (one task at 1K, one sample), not the defaults.
OMP_WAIT_POLICY=PASSIVE "$here/scripts/ship_test.sh" "$bin" "$out/run/shipped" "$here/models/kascade-tiny" "$out/own" \
  --no-progress >"$out/log" 2>&1 || fail "ship_test.sh on the saved results' own samples exited non-zero"
grep -q "| niah_single_1 | 1024 | dense | 1 |" "$out/own/compare.md" || fail "the saved results' tasks, lengths, samples"
[[ $(wc -l <"$out/own/candidate/samples.jsonl") -eq 1 ]] || fail "the candidate was not evaluated on the saved samples alone"
# Saved results of other samples (another seed) are refused.
OMP_WAIT_POLICY=PASSIVE TASKS=niah_single_1 LENGTHS=1k SAMPLES=1 "$here/scripts/ship_test.sh" "$bin" \
  "$out/run/shipped" "$here/models/kascade-tiny" "$out/seeded" --no-progress --seed 5 >"$out/log" 2>&1 &&
  fail "saved results of other samples were accepted"
grep -q "expects" "$out/log" || fail "the refusal of other samples does not say why"
echo "ship_test.sh: both evals, the comparison and saved shipped results as expected"
