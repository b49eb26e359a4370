#!/usr/bin/env bash
# tests/scripts/test_compare_checkpoints.sh — scripts/compare_checkpoints.py (the kascade-tiny ship
# test) on hand-made samples.jsonl pairs: equal runs are not separable, a candidate right on every
# sample the shipped one missed is ahead (and the reverse behind), one flipped sample of 22 is not
# separable, per-cell and overall percentages come from the scores, and runs of different samples
# are refused with exit status 2 (other keys, or the same keys expecting other answers); the quality-bar
# table groups cwe / fwe as aggregation and the rest as retrieval, with issue 4's bar where it has one.
#   tests/scripts/test_compare_checkpoints.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tool="$here/scripts/compare_checkpoints.py"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out/report.md" 2>/dev/null; exit 1; }
# write DIR TASKS SAMPLES SCORE_FN: one line per (task, index); SCORE_FN is a python expression in t, i
write() {
  mkdir -p "$1"
  python3 - "$1/samples.jsonl" "$2" "$3" "$4" <<'PY'
import json, sys
path, tasks, n, fn = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
with open(path, "w") as f:
    for ti, t in enumerate(tasks):
        for i in range(n):
            f.write(json.dumps({"task": t, "length": 16384, "policy": "dense", "index": i,
                                "score": float(eval(fn, {"t": ti, "i": i}))}) + "\n")
PY
}
tasks=a,b,c,d,e,f,g,h,i,j,k
write "$out/ship" "$tasks" 2 "1.0 if t < 7 else 0.0"            # 14 of 22 right: 63.6 %
write "$out/same" "$tasks" 2 "1.0 if t < 7 else 0.0"
write "$out/better" "$tasks" 2 "1.0"                              # 100 %
write "$out/one_flip" "$tasks" 2 "1.0 if t < 7 or (t == 7 and i == 0) else 0.0"
python3 "$tool" "$out/ship" "$out/same" >"$out/report.md" || fail "equal runs: non-zero exit"
grep -q "Verdict: \*\*not separable\*\* — paired difference +0.0 ± 0.0" "$out/report.md" || fail "equal runs"
grep -q "| \*\*all\*\* | | | 22 | \*\*63.6\*\* | \*\*63.6\*\* | \*\*+0.0\*\* |" "$out/report.md" || fail "the overall row"
python3 "$tool" "$out/ship" "$out/better" --out "$out/written.md" >"$out/report.md" || fail "better: non-zero exit"
grep -q "Verdict: \*\*candidate ahead\*\*" "$out/report.md" || fail "a candidate right on 8 more samples"
grep -q "| h | 16384 | dense | 2 | 0.0 | 100.0 | +100.0 |" "$out/report.md" || fail "a cell's percentages"
cmp -s "$out/report.md" "$out/written.md" || fail "--out does not hold the printed report"
grep -q "| retrieval | 16384 | 11 | 63.6 | 100.0 | 80 | yes |" "$out/report.md" || fail "the quality-bar row (retrieval at 16K)"
# The bar's groups: cwe / fwe are aggregation (bar 70 % at 4K), the rest retrieval (90 % at 4K); a length
# without a bar shows none.
for which in ship cand; do
  mkdir -p "$out/bar_$which"
  python3 - "$out/bar_$which/samples.jsonl" "$which" <<'PY'
import json, sys
score = {"ship": {"cwe": 0.5, "niah_single_1": 1.0}, "cand": {"cwe": 0.75, "niah_single_1": 0.5}}[sys.argv[2]]
with open(sys.argv[1], "w") as f:
    for length in (4096, 32768):
        for task, s in score.items():
            f.write(json.dumps({"task": task, "length": length, "policy": "dense", "index": 0, "score": s}) + "\n")
PY
done
python3 "$tool" "$out/bar_ship" "$out/bar_cand" >"$out/report.md" || fail "bar: non-zero exit"
grep -q "| retrieval | 4096 | 1 | 100.0 | 50.0 | 90 | no |" "$out/report.md" || fail "the retrieval bar at 4K"
grep -q "| aggregation | 4096 | 1 | 50.0 | 75.0 | 70 | yes |" "$out/report.md" || fail "the aggregation bar at 4K"
grep -q "| aggregation | 32768 | 1 | 50.0 | 75.0 | — | — |" "$out/report.md" || fail "a length without a bar"
python3 "$tool" "$out/better" "$out/ship" >"$out/report.md" || fail "worse: non-zero exit"
grep -q "Verdict: \*\*candidate behind\*\*" "$out/report.md" || fail "the reverse comparison"
python3 "$tool" "$out/ship" "$out/one_flip" >"$out/report.md" || fail "one flip: non-zero exit"
grep -q "Verdict: \*\*not separable\*\* — paired difference +4.5 ± 4.5" "$out/report.md" || fail "one flipped sample"
write "$out/fewer" "$tasks" 1 "1.0"
if python3 "$tool" "$out/ship" "$out/fewer" >"$out/report.md" 2>"$out/err.log"; then fail "different samples accepted"; fi
grep -q "different samples" "$out/err.log" || fail "the refusal names the problem"
# The same keys with other expected answers (another seed or split): refused too.
for which in ship other; do
  mkdir -p "$out/ans_$which"
  python3 -c "import json,sys; print(json.dumps({'task': 'a', 'length': 16384, 'policy': 'dense', 'index': 0, 'score': 1.0, 'answers': [sys.argv[1]]}))" \
    "$which" >"$out/ans_$which/samples.jsonl"
done
if python3 "$tool" "$out/ans_ship" "$out/ans_other" >"$out/report.md" 2>"$out/err.log"; then fail "other answers accepted"; fi
grep -q "expects \['ship'\] in one run and \['other'\]" "$out/err.log" || { cat "$out/err.log"; fail "the answers refusal"; }
echo "compare_checkpoints.py: verdicts, tables and refusal as expected"
