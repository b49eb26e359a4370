#!/usr/bin/env bash
# tests/scripts/test_accuracy_study.sh — runs scripts/accuracy_study.sh on the CPU with short settings
# (kascade-tiny, one needle task at 1K, one sample) and checks what it must produce: the main table
# with both policies, the anchor and Top-k sweep tables and plots, and that kascade with a saturating
# budget (Top-k fraction 1.0) scores exactly what dense scores and attends every key, and that ARCHIVE packs
# the whole output folder into one tarball.
#   tests/scripts/test_accuracy_study.sh KASCADE_BINARY
set -euo pipefail
bin=${1:?KASCADE_BINARY}
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out" "$out.tar.xz"' EXIT
ARCHIVE="$out.tar.xz" DEVICE=cpu TASKS=niah_single_1 LENGTHS=1k SAMPLES=1 POLICIES=dense,kascade ANCHOR_COUNTS="2 8" FRACTIONS="0.1 1.0" \
  OMP_WAIT_POLICY=PASSIVE bash "$here/scripts/accuracy_study.sh" "$bin" "$out" >"$out/study.log" 2>&1 ||
  { cat "$out/study.log"; echo "FAIL: accuracy_study.sh exited non-zero"; exit 1; }
fail() { echo "FAIL: $*"; cat "$out/study.log"; exit 1; }
for f in main/results.json main/results.md anchors.md anchors.png topk.md topk.png commands.txt summary.txt; do
  [[ -s "$out/$f" ]] || fail "$f missing or empty"
done
grep -q '| niah_single_1 |' "$out/anchors.md" || fail "anchors.md has no task row"
[[ $(wc -l <"$out/commands.txt") -eq 5 ]] || fail "expected 5 eval commands (main, 2 anchor points, 2 fractions)"
# topk.md row: | niah_single_1 | <0.1> | <1.0> | <dense> | ; keys attended row: | ... | <0.1> | <1.0> | <dense> |
read -r at_full dense < <(awk -F'|' '/^\| niah_single_1 \|/ {gsub(/ /,""); print $4, $5; exit}' "$out/topk.md")
[[ -n "$dense" && "$at_full" == "$dense" ]] || fail "kascade at Top-k fraction 1.0 scored '$at_full', dense '$dense'"
keys_full=$(awk -F'|' '/^\| keys attended/ {gsub(/ /,""); print $4; exit}' "$out/topk.md")
[[ "$keys_full" == "100.0" ]] || fail "kascade at Top-k fraction 1.0 attended $keys_full % of the keys, not 100"
archived=$(tar tJf "$out.tar.xz") || fail "ARCHIVE: no readable tarball at $out.tar.xz"
for f in main/results.json anchors.md topk.png summary.txt; do
  grep -qx "./$f" <<<"$archived" || fail "ARCHIVE: $f not in the tarball"
done
echo "PASS: accuracy_study.sh (saturating budget = dense: $at_full = $dense, keys $keys_full %)"
