#!/usr/bin/env bash
# tests/scripts/test_eval_split.sh — `kascade eval --split`: the train and dev splits of the task suite
# run through eval (results.json records the split; the samples differ from the eval split's for the
# same seed, since every split has its own seeds and wordings), and an unknown split is refused by name.
#   tests/scripts/test_eval_split.sh KASCADE_BINARY
set -euo pipefail
bin=${1:?KASCADE_BINARY}
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
for split in train dev eval; do
  OMP_WAIT_POLICY=PASSIVE "$bin" eval -m "$here/models/kascade-tiny" --tasks niah_single_1 --lengths 1k --policies dense \
    --samples 1 --split "$split" --no-progress --no-plot -o "$out/$split" >"$out/$split.log" 2>&1 ||
    { cat "$out/$split.log"; fail "eval --split $split exited non-zero"; }
  got=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['meta']['split'])" "$out/$split/results.json")
  [[ "$got" == "$split" ]] || fail "results.json of --split $split records split '$got'"
  grep -q "($split split, seed 0)" "$out/$split.log" || fail "the plan line does not name the $split split"
done
answers() { python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['answers'])" "$1/samples.jsonl"; }
[[ "$(answers "$out/train")" != "$(answers "$out/eval")" ]] || fail "train and eval splits drew the same needle"
[[ "$(answers "$out/dev")" != "$(answers "$out/eval")" ]] || fail "dev and eval splits drew the same needle"
if "$bin" eval -m "$here/models/kascade-tiny" --tasks niah_single_1 --lengths 1k --split test -o "$out/x" >"$out/bad.log" 2>&1; then
  fail "eval --split test was accepted"
fi
grep -q "test" "$out/bad.log" || { cat "$out/bad.log"; fail "the refusal does not name the value 'test'"; }
echo "PASS: kascade eval --split (train, dev, eval recorded; samples differ; 'test' refused)"
