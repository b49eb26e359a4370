#!/usr/bin/env bash
# tests/scripts/test_calibrate_refine.sh — `kascade calibrate --refine` end to end on the CPU with a tiny
# random model (4 layers, dummy weights, the bundled tokenizer) and a JSONL dev set of three prompts:
#   - no --refine and --refine none write the same bytes, with no refinement in them;
#   - --refine agreement --refine-anchors 2,3: each refined set scores at least its DP set, the file's set is
#     the refined one, its dp_anchors / dp_objective are the unrefined file's set, and undoing the refinement
#     (DP anchors, head map and objective back) gives the unrefined file exactly; the table is printed;
#   - --from-stats carries the refinements over (same file) with a note, and drops one whose count is gone;
#   - bad flags are refused naming the problem.
#   tests/scripts/test_calibrate_refine.sh KASCADE_BINARY
set -euo pipefail
bin=${1:?KASCADE_BINARY}
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMP_WAIT_POLICY=PASSIVE

mkdir "$out/model"
cp "$here/models/kascade-tiny/tokenizer.json" "$out/model/"
python3 - "$here/models/kascade-tiny/config.json" "$out/model/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(num_hidden_layers=4, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
         head_dim=16, max_position_embeddings=4096)
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
python3 - "$out/dev.jsonl" <<'PY'
import json, sys
words = "the quick brown fox jumps over a lazy dog while seven bright stars fall into quiet rivers".split()
with open(sys.argv[1], "w") as f:
    for i in range(3):
        text = " ".join(words[(j * (i + 3)) % len(words)] for j in range(120 + 30 * i))
        f.write(json.dumps({"prompt": text}) + "\n")
PY
common=(calibrate -m "$out/model" --dummy-weights --dev-set "$out/dev.jsonl" --anchors 2..3 --tile 16 --k-min 8
        --decode-steps 4 --ignore-eos --k-cal 8 --no-progress)

"$bin" "${common[@]}" -o "$out/plain.json" >"$out/plain.log" 2>&1 || { cat "$out/plain.log"; fail "calibrate exited non-zero"; }
"$bin" "${common[@]}" --refine none -o "$out/none.json" >"$out/none.log" 2>&1 || { cat "$out/none.log"; fail "--refine none"; }
cmp -s "$out/plain.json" "$out/none.json" || fail "--refine none changed the file"
grep -q refinement "$out/none.json" && fail "--refine none wrote a refinement"

"$bin" "${common[@]}" --refine agreement --refine-anchors 2,3 --refine-tokens 6 --refine-rounds 2 -o "$out/ref.json" \
  >"$out/ref.log" 2>&1 || { cat "$out/ref.log"; fail "--refine agreement exited non-zero"; }
grep -q "refinement of the 2-anchor set" "$out/ref.log" || { cat "$out/ref.log"; fail "no table for 2 anchors"; }
grep -q "refinement of the 3-anchor set" "$out/ref.log" || fail "no table for 3 anchors"
grep -q "result: " "$out/ref.log" || fail "no result line"
python3 - "$out/none.json" "$out/ref.json" <<'PY' || fail "refined file"
import json, sys
none, ref = (json.load(open(p)) for p in sys.argv[1:3])
by_k = {s["num_anchors"]: s for s in none["anchor_sets"]}
refined = [s for s in ref["anchor_sets"] if "refinement" in s]
assert sorted(s["num_anchors"] for s in refined) == [2, 3], refined
for s in refined:
    r, dp = s["refinement"], by_k[s["num_anchors"]]
    assert r["agreement"] >= r["dp_agreement"], r
    assert r["agreement"] > r["dp_agreement"] or r["kl"] <= r["dp_kl"], r
    assert r["dp_anchors"] == dp["anchors"] and r["dp_objective"] == dp["objective"], (r, dp)
    assert r["prompts"] == 3 and r["tokens"] == 6 and r["max_rounds"] == 2, r
    assert r["steps"] == 18, r  # 6 positions of each prompt (--ignore-eos)
    # Undo the refinement: the unrefined file's set.
    s.update(anchors=dp["anchors"], head_map=dp["head_map"], objective=dp["objective"])
    del s["refinement"]
assert ref == none, "apart from the refined sets the files differ"
PY

"$bin" calibrate --from-stats "$out/ref.json" --anchors 2..3 -o "$out/fs.json" >"$out/fs.log" 2>&1 ||
  { cat "$out/fs.log"; fail "--from-stats exited non-zero"; }
grep -q "carried over as saved" "$out/fs.log" || { cat "$out/fs.log"; fail "--from-stats did not say it kept the refinements"; }
python3 -c "import json,sys; assert json.load(open(sys.argv[1])) == json.load(open(sys.argv[2]))" "$out/fs.json" "$out/ref.json" ||
  fail "--from-stats changed the refined file"
"$bin" calibrate --from-stats "$out/ref.json" --anchors 3 -o "$out/fs3.json" >"$out/fs3.log" 2>&1 || fail "--from-stats --anchors 3"
grep -q "2-anchor set .* is dropped" "$out/fs3.log" || { cat "$out/fs3.log"; fail "the dropped refinement is not reported"; }

refused() {  # refused EXIT_CODE NEEDLE ARGS...
  local code=$1 needle=$2
  shift 2
  set +e
  "$bin" "$@" -o "$out/bad.json" >"$out/bad.log" 2>&1
  local rc=$?
  set -e
  [[ $rc == "$code" ]] || { cat "$out/bad.log"; fail "exit $rc (want $code) for: $*"; }
  grep -q -- "$needle" "$out/bad.log" || { cat "$out/bad.log"; fail "no '$needle' for: $*"; }
}
refused 1 "--refine-anchors: 5 is not among the anchor counts derived" "${common[@]}" --refine agreement --refine-anchors 5
refused 1 "--refine-prompts is 9 but the dev set has 3" "${common[@]}" --refine agreement --refine-prompts 9
refused 2 "apply to --refine agreement only" "${common[@]}" --refine-tokens 4
refused 2 "does not apply to --from-stats" calibrate --from-stats "$out/ref.json" --refine agreement
refused 2 "--refine" "${common[@]}" --refine accuracy
echo "PASS: calibrate --refine (none unchanged; agreement >= DP, file holds the refined sets; --from-stats carries them; refusals)"
