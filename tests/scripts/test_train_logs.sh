#!/usr/bin/env bash
# tests/scripts/test_train_logs.sh — scripts/train_logs.py (the logs of train_tiny.py): a chunk writes
# history + its rows to its output file and leaves the history file byte-identical; the step / token
# tail continues from the history; no history gives a header and the rows; history == output appends;
# a history with other columns is refused with a message naming the file; `train_logs.py --plot`
# draws a PNG from a small pair of logs (without PyTorch) and refuses an empty log.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'step,tokens,loss\n25,100,3.5\n50,200,3.1\n' >"$work/history.csv"
cp "$work/history.csv" "$work/history.orig"
cd "$here/scripts"
python3 - "$work" <<'PY'
import sys
from pathlib import Path
from train_logs import read_log_tail, write_log

w = Path(sys.argv[1])
fields = ["step", "tokens", "loss"]
assert read_log_tail(w / "history.csv") == (50, 200), read_log_tail(w / "history.csv")
assert read_log_tail(w / "none.csv") == (0, 0)
write_log(w / "history.csv", w / "out" / "training_log.csv", fields, [{"step": 75, "tokens": 300, "loss": 2.9}])
got = (w / "out" / "training_log.csv").read_text().splitlines()
assert got == ["step,tokens,loss", "25,100,3.5", "50,200,3.1", "75,300,2.9"], got
assert read_log_tail(w / "out" / "training_log.csv") == (75, 300)
assert (w / "history.csv").read_bytes() == (w / "history.orig").read_bytes(), "history modified"
write_log(w / "none.csv", w / "fresh.csv", fields, [{"step": 1, "tokens": 2, "loss": 3}])
assert (w / "fresh.csv").read_text().splitlines() == ["step,tokens,loss", "1,2,3"]
write_log(w / "fresh.csv", w / "fresh.csv", fields, [{"step": 2, "tokens": 4, "loss": 1}])
assert (w / "fresh.csv").read_text().splitlines() == ["step,tokens,loss", "1,2,3", "2,4,1"]
try:
    write_log(w / "history.csv", w / "bad.csv", ["step", "tokens"], [])
    raise AssertionError("a history with other columns was accepted")
except ValueError as e:
    assert "history.csv" in str(e), e
assert not (w / "bad.csv").exists()
print("PASS")
PY
printf 'chunk,stage,step,tokens,loss_natural,loss_prompt,loss_answer,answer_token_acc,answer_exact\n' >"$work/train.csv"
printf 'c1,s1,10,1000000,3.0,1.0,0.5,0.8,0.4\nc1,s1,20,2000000,2.8,,0.4,0.85,0.5\nc2,s2,30,3000000,2.6,0.8,0.3,0.9,0.6\n' >>"$work/train.csv"
printf 'chunk,stage,step,tokens,task,length,samples,score,kind\n' >"$work/eval.csv"
printf 'c1,s1,20,2000000,austen/persuasion,2048,1,130.0,perplexity\nc1,s1,20,2000000,vt,4096,2,0.5,accuracy\nc2,s2,30,3000000,cwe,4096,2,0.25,accuracy\n' >>"$work/eval.csv"
python3 "$here/scripts/train_logs.py" --plot "$work/plot/loss.png" --log "$work/train.csv" --eval-log "$work/eval.csv" >"$work/plot.log"
[[ "$(head -c 8 "$work/plot/loss.png" | od -An -tx1 | tr -d ' ')" == "89504e470d0a1a0a" ]] || { echo "FAIL: no PNG written"; exit 1; }
(( $(stat -c %s "$work/plot/loss.png") > 10000 )) || { echo "FAIL: the PNG is too small to hold the three panels"; exit 1; }
head -1 "$work/train.csv" >"$work/empty.csv"
if python3 "$here/scripts/train_logs.py" --plot "$work/empty.png" --log "$work/empty.csv" --eval-log "$work/eval.csv" 2>"$work/empty.err"; then
  echo "FAIL: an empty log was plotted"; exit 1
fi
grep -q "holds no rows" "$work/empty.err" || { echo "FAIL: the empty log's message: $(cat "$work/empty.err")"; exit 1; }
echo "PASS (plot)"

