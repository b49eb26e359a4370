#!/usr/bin/env bash
# tests/scripts/test_vt_wording_probe.sh — scripts/vt_wording_probe.py: its rewrites on a hand-made vt prompt (the
# dev filler replaced in order by the train filler, cycling; both dev statement forms rewritten, nothing else
# touched), then one sample end to end on the shipped model with the built CLI (five rows, accuracies in [0, 100]).
# Skips the end-to-end part when the CLI is not built. KASCADE_CLI overrides build/tools/kascade.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
python3 - <<'PY'
import sys
sys.path.insert(0, "scripts")
import vt_wording_probe as v
p = ("Instruction line.\nSlowly the day fades. LET ABCDE BE 12345. The road is long. LET FGHIJ BE ABCDE. "
     "On we walk. Slowly the day fades.\nQuestion: Which variables hold 12345? Answer:")
assert v.filler_sentences(p) == ["Slowly the day fades.", "The road is long.", "On we walk.", "Slowly the day fades."], \
    v.filler_sentences(p)
h = v.swap_haystack(p, ["A.", "B.", "C."])
assert h == ("Instruction line.\nA. LET ABCDE BE 12345. B. LET FGHIJ BE ABCDE. C. A.\n"
             "Question: Which variables hold 12345? Answer:"), h
s = v.swap_statements(p)
assert "PTR ABCDE = 12345." in s and "PTR FGHIJ = PTR ABCDE." in s and "LET" not in s, s
assert s.replace("PTR ABCDE = 12345.", "").replace("PTR FGHIJ = PTR ABCDE.", "") == \
    p.replace("LET ABCDE BE 12345.", "").replace("LET FGHIJ BE ABCDE.", ""), "text outside the statements changed"
assert v.score("ABCDE, XYZ", ["ABCDE", "FGHIJ"]) == 0.5
PY
cli=${KASCADE_CLI:-build/tools/kascade}
if [[ ! -x "$cli" ]]; then echo "SKIP end to end: no CLI at $cli"; echo PASS; exit 0; fi
out=$(python3 scripts/vt_wording_probe.py --model models/kascade-tiny --kascade "$cli" --samples 1 --length 1k)
echo "$out"
[[ $(grep -c '^| \(dev\|train\)' <<<"$out") -eq 5 ]] || { echo "FAIL: expected 5 rows"; exit 1; }
awk -F'|' '/^\| (dev|train)/ { if ($3 + 0 < 0 || $3 + 0 > 100) { print "FAIL: accuracy " $3; exit 1 } }' <<<"$out"
echo PASS
