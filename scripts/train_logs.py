"""scripts/train_logs.py — the CSV logs of scripts/train_tiny.py and their plot (no torch, so CI
can test it and the plot can be drawn on a machine without PyTorch).

A chunk reads its history (--log / --eval-log, by default the committed docs/model/*.csv) and writes
history + its own rows to its --out folder; the history files themselves are never modified unless
they ARE the output files. So a local smoke run of train_tiny.py cannot append rows to the committed
logs (it did twice, by default, before 2026-12-04 evening); the GPU chunks bring their logs back
through $OUT and the caller copies them over docs/model/.

Plot: `python3 scripts/train_logs.py --plot docs/model/loss.png` (--log / --eval-log default to
the committed docs/model/*.csv): loss curves, teacher-forced answers and the held-out probe against
training tokens.

Tested by tests/scripts/test_train_logs.sh.
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

import numpy as np

from compare_checkpoints import AGGREGATION_TASKS  # issue 4's aggregation group (cwe, fwe); the rest are retrieval

REPO = Path(__file__).resolve().parent.parent


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


def plot_logs(log_path: Path, eval_path: Path, png: Path) -> int:
    """Loss curve, teacher-forced answer accuracy and evaluation scores against training tokens."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with log_path.open() as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{log_path} holds no rows")
    evals = []
    if eval_path.exists():
        with eval_path.open() as f:
            evals = list(csv.DictReader(f))
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    x = np.array([int(r["tokens"]) for r in rows]) / 1e6

    def series(key):
        return np.array([float(r[key]) if r.get(key) else np.nan for r in rows])

    ax = axes[0]
    for key, label in [("loss_natural", "natural text"), ("loss_prompt", "task prompts"),
                       ("loss_answer", "answer spans")]:
        y = series(key)
        ok = ~np.isnan(y)
        ax.plot(x[ok], y[ok], label=label, lw=1)
    ppl = {}
    for e in evals:
        if e["kind"] == "perplexity" and e["task"] == "austen/persuasion":
            ppl[int(e["tokens"])] = math.log(float(e["score"]))
    if ppl:
        xs = sorted(ppl)
        ax.plot(np.array(xs) / 1e6, [ppl[t] for t in xs], "k--o", ms=3, lw=1,
                label="held-out Persuasion (ln perplexity)")
    starts = {}
    for r in rows:
        starts.setdefault(r["chunk"], (int(r["tokens"]) / 1e6, r["stage"]))
    for a in axes[:2]:
        for t, stage in starts.values():
            a.axvline(t, color="grey", lw=0.5, ls=":")
    for t, stage in starts.values():
        ax.text(t, ax.get_ylim()[1], stage, fontsize=7, va="top", rotation=90)
    ax.set_xlabel("training tokens (M)")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title("training loss")
    ax.legend()
    ax = axes[1]
    for key, label in [("answer_token_acc", "answer tokens correct"), ("answer_exact", "whole answer correct")]:
        y = series(key)
        ok = ~np.isnan(y)
        ax.plot(x[ok], y[ok], label=label, lw=1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("training tokens (M)")
    ax.set_title("teacher-forced answers (training batches)")
    ax.legend()
    ax = axes[2]
    acc = [e for e in evals if e["kind"] == "accuracy"]
    groups = {}
    for e in acc:
        group = "aggregation" if e["task"] in AGGREGATION_TASKS else "retrieval"
        groups.setdefault((group, int(e["length"])), {}).setdefault(int(e["tokens"]), []).append(float(e["score"]))
    for (group, L), pts in sorted(groups.items()):
        xs = sorted(pts)
        ax.plot(np.array(xs) / 1e6, [100 * np.mean(pts[t]) for t in xs], marker="o",
                ls="-" if group == "retrieval" else "--", label=f"{group} @ {L // 1024}K")
    ax.set_ylim(0, 100)
    ax.set_xlabel("training tokens (M)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("held-out tasks (dev split, greedy)")
    if groups:
        ax.legend(fontsize=7)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plot", required=True, help="PNG to write")
    ap.add_argument("--log", default=str(REPO / "docs" / "model" / "training_log.csv"))
    ap.add_argument("--eval-log", default=str(REPO / "docs" / "model" / "eval_log.csv"))
    args = ap.parse_args()
    return plot_logs(Path(args.log), Path(args.eval_log), Path(args.plot))


if __name__ == "__main__":
    sys.exit(main())
