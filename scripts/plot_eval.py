#!/usr/bin/env python3
"""Plots accuracy vs context length per attention policy from a `kascade eval` results JSON.

Usage: python3 scripts/plot_eval.py RESULTS.json OUT.png [--title TITLE] [--no-per-task]

The first panel is the average over tasks (the JSON's "averages"); one small panel per task
follows unless --no-per-task. Lengths are on a log2 axis, accuracy in percent. Needs matplotlib
(pip install matplotlib); exits with status 3 and a message when it is missing, 2 on bad input.
Tested by tests/unit/eval/test_results.cpp (runs it on tests/data/eval/results_small.json).
"""
import argparse
import json
import math
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    if data.get("format") != "kascade-eval-results" or data.get("version") != 1:
        raise ValueError("%s is not a kascade-eval-results version 1 file" % path)
    for key in ("cells", "averages", "policies", "tasks", "lengths"):
        if not isinstance(data.get(key), list):
            raise ValueError("%s: \"%s\" is missing or not a list" % (path, key))
    return data


def series(rows, policy, task=None):
    pts = sorted((r["length"], 100.0 * r["accuracy"]) for r in rows
                 if r["policy"] == policy and (task is None or r["task"] == task))
    return [p[0] for p in pts], [p[1] for p in pts]


def length_label(n):
    if n % (1024 * 1024) == 0:
        return "%dM" % (n // (1024 * 1024))
    if n % 1024 == 0:
        return "%dK" % (n // 1024)
    return str(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("out")
    ap.add_argument("--title", default=None)
    ap.add_argument("--no-per-task", action="store_true")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_eval: matplotlib is not installed (pip install matplotlib); no plot written", file=sys.stderr)
        return 3
    try:
        data = load(args.results)
    except (OSError, ValueError) as e:
        print("plot_eval: %s" % e, file=sys.stderr)
        return 2

    policies, tasks, lengths = data["policies"], data["tasks"], data["lengths"]
    panels = [("average over %d task%s" % (len(tasks), "" if len(tasks) == 1 else "s"), None)]
    if not args.no_per_task:
        panels += [(t, t) for t in tasks]
    cols = min(4, len(panels))
    rows = int(math.ceil(len(panels) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "osD^vP*Xhp"
    for i, (name, task) in enumerate(panels):
        ax = axes[i // cols][i % cols]
        rows_src = data["averages"] if task is None else data["cells"]
        for j, policy in enumerate(policies):
            xs, ys = series(rows_src, policy, task)
            if xs:
                ax.plot(xs, ys, marker=markers[j % len(markers)], color=colors[j % len(colors)],
                        label=policy, linewidth=1.8 if task is None else 1.2)
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths)
        ax.set_xticklabels([length_label(n) for n in lengths])
        ax.minorticks_off()
        ax.set_ylim(-3, 103)
        ax.set_title(name, fontsize=10, fontweight="bold" if task is None else "normal")
        ax.grid(True, alpha=0.3)
        if i % cols == 0:
            ax.set_ylabel("accuracy (%)")
        if i // cols == rows - 1 or i + cols >= len(panels):
            ax.set_xlabel("context length (tokens)")
    for k in range(len(panels), rows * cols):
        axes[k // cols][k % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 6), frameon=False,
               bbox_to_anchor=(0.5, 1.0))
    title = args.title or data.get("meta", {}).get("model")
    if title:
        fig.suptitle(title, y=1.06 if rows == 1 else 1.03)
    fig.tight_layout(rect=(0, 0, 1, 0.93 if rows == 1 else 0.96))
    fig.savefig(args.out, dpi=110, bbox_inches="tight")
    print("plot_eval: wrote %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
