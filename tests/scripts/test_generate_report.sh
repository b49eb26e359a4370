#!/usr/bin/env bash
# tests/scripts/test_generate_report.sh — `kascade generate --report-json` on the bundled model (CPU): the
# report's decode block counts the steps of a greedy run (n new tokens: the first from the prefill, n − 1
# decode steps, one token each for a single prompt), says whether decode ran pipelined (the default) or step
# by step (--no-pipelined-decode), and both runs generate the same text.
#   tests/scripts/test_generate_report.sh KASCADE_BINARY
set -euo pipefail
bin=${1:?KASCADE_BINARY}
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
for mode in pipelined step; do
  flag=""
  [[ $mode == step ]] && flag=--no-pipelined-decode
  OMP_WAIT_POLICY=PASSIVE "$bin" generate -m "$here/models/kascade-tiny" --max-new-tokens 6 --ignore-eos $flag \
    --report-json "$out/$mode.json" -p "The key for blue-door is 4471902. What is the key for blue-door?" \
    >"$out/$mode.txt" 2>"$out/$mode.log" || { cat "$out/$mode.log"; fail "generate ($mode) exited non-zero"; }
done
python3 - "$out" <<'PY' || fail "report fields"
import json, sys
out = sys.argv[1]
for mode, want in (("pipelined", True), ("step", False)):
    d = json.load(open(f"{out}/{mode}.json"))["decode"]
    assert d["pipelined"] is want, (mode, d["pipelined"])
    assert d["steps"] == 5 and d["tokens"] == 5, (mode, d["steps"], d["tokens"])
PY
cmp -s "$out/pipelined.txt" "$out/step.txt" || { diff "$out/pipelined.txt" "$out/step.txt"; fail "the two decode loops generated different text"; }
echo "PASS: generate --report-json (decode steps, pipelined true / false, same text)"
