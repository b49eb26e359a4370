#!/usr/bin/env bash
# tests/scripts/test_train_logs.sh — scripts/train_logs.py (the logs of train_tiny.py): a chunk writes
# history + its rows to its output file and leaves the history file byte-identical; the step / token
# tail continues from the history; no history gives a header and the rows; history == output appends;
# a history with other columns is refused with a message naming the file.
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
