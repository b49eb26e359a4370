"""scripts/train_logs.py — the CSV logs of scripts/train_tiny.py (no torch, so CI can test it).

A chunk reads its history (--log / --eval-log, by default the committed docs/model/*.csv) and writes
history + its own rows to its --out folder; the history files themselves are never modified unless
they ARE the output files. So a local smoke run of train_tiny.py cannot append rows to the committed
logs (it did twice, by default, before 2026-12-04 evening); the GPU chunks bring their logs back
through $OUT and the caller copies them over docs/model/.

Tested by tests/scripts/test_train_logs.sh.
"""
from __future__ import annotations

import csv
from pathlib import Path


def read_log_tail(path: Path) -> tuple[int, int]:
    """(last step, last token count) of a training log, (0, 0) when there is none."""
    if not path.exists():
        return 0, 0
    with path.open() as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return 0, 0
    return int(rows[-1]["step"]), int(rows[-1]["tokens"])


def write_log(history: Path, out_file: Path, fields: list[str], rows: list[dict]) -> None:
    """Writes out_file = the history's rows (when it exists) + `rows`, with one header.

    The history must have the same columns as `fields`; a mismatch raises ValueError (rows of two
    layouts in one CSV would be unreadable). When history and out_file are the same file, the rows
    are appended to it."""
    previous: list[dict] = []
    if history.exists() and history.stat().st_size > 0:
        with history.open(newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames != fields:
                raise ValueError(f"{history}: columns {reader.fieldnames} differ from {fields}")
            previous = list(reader)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_file.with_name(out_file.name + ".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in previous + rows:
            w.writerow(r)
    tmp.replace(out_file)
