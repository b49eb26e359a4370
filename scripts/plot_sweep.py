#!/usr/bin/env python3
"""Tables and plots of a kascade accuracy sweep: one `kascade eval` results JSON per sweep point.

Usage: python3 scripts/plot_sweep.py --name anchors|topk --out PREFIX POINT=RESULTS.json [...]
                                     [--reference POLICY=RESULTS.json ...] [--title TITLE]

Each POINT (e.g. 2, 3, ... anchors, or 0.025, 0.05, ... Top-k fraction) names one results file of a
single-policy kascade run. Writes PREFIX.md (task x point accuracy table per length, then the
average and the fraction of keys attended) and PREFIX.png (average accuracy vs point, one line per
length; the --reference policies, e.g. dense from the main run, as dashed lines per length).
Used by scripts/accuracy_study.sh; tested by tests/unit/eval/test_results.cpp (runs it on
tests/data/eval/results_small.json). Needs matplotlib for the PNG (exit status 3 without it,
after the table is written); 2 on bad input.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    if data.get("format") != "kascade-eval-results" or data.get("version") != 1:
        raise ValueError("%s is not a kascade-eval-results version 1 file" % path)
    for key in ("cells", "averages"):
        if not isinstance(data.get(key), list):
            raise ValueError("%s: \"%s\" is missing or not a list" % (path, key))
    return data


def parse_pairs(items, what):
    out = []
    for item in items:
        if "=" not in item:
            raise ValueError("%s \"%s\" is not NAME=RESULTS.json" % (what, item))
        name, path = item.split("=", 1)
        out.append((name, load(path)))
    return out


def kascade_rows(data, table):
    """The cells (table='cells') or averages of the file's one sparse policy (not dense)."""
    rows = [r for r in data[table] if r["policy"] != "dense"]
    policies = sorted({r["policy"] for r in rows})
    if len(policies) != 1:
        raise ValueError("a sweep point must hold exactly one non-dense policy, found %s" % policies)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", required=True, help="what the points are: anchors or topk")
    ap.add_argument("--out", required=True, help="output prefix (PREFIX.md, PREFIX.png)")
    ap.add_argument("--reference", action="append", default=[], help="POLICY=RESULTS.json drawn as dashed lines")
    ap.add_argument("--title", default=None)
    ap.add_argument("points", nargs="+", help="POINT=RESULTS.json")
    args = ap.parse_args()
    try:
        points = parse_pairs(args.points, "point")
        refs = parse_pairs(args.reference, "reference")
        cells = {p: kascade_rows(d, "cells") for p, d in points}
        avgs = {p: kascade_rows(d, "averages") for p, d in points}
    except (OSError, ValueError, KeyError) as e:
        print("plot_sweep: %s" % e, file=sys.stderr)
        return 2
    names = [p for p, _ in points]
    lengths = sorted({r["length"] for rows in cells.values() for r in rows})
    tasks = []
    for rows in cells.values():
        for r in rows:
            if r["task"] not in tasks:
                tasks.append(r["task"])
    label = "anchors" if args.name == "anchors" else "Top-k fraction" if args.name == "topk" else args.name
    lines = []
    for n in lengths:
        lines.append("Accuracy (%%) at %d tokens by %s:\n" % (n, label))
        ref_names = [p for p, _ in refs]
        lines.append("| task | " + " | ".join(names) + "".join(" | %s" % r for r in ref_names) + " |")
        lines.append("|---|" + "---:|" * (len(names) + len(ref_names)))

        def cell(rows, task, policy=None):
            for r in rows:
                if r["task"] == task and r["length"] == n and (policy is None or r["policy"] == policy):
                    return "%.1f" % (100.0 * r["accuracy"])
            return "—"
        for t in tasks:
            row = [cell(cells[p], t) for p in names] + [cell(d["cells"], t, rp) for rp, d in refs]
            lines.append("| %s | " % t + " | ".join(row) + " |")
        def average(rows, key, policy=None, bold=False):
            for r in rows:
                if r["length"] == n and (policy is None or r["policy"] == policy):
                    return ("**%.1f**" if bold else "%.1f") % (100.0 * r[key])
            return "—"
        row = [average(avgs[p], "accuracy", bold=True) for p in names]
        row += [average(d["averages"], "accuracy", rp, bold=True) for rp, d in refs]
        lines.append("| **average** | " + " | ".join(row) + " |")
        row = [average(avgs[p], "keys_attended") for p in names]
        row += [average(d["averages"], "keys_attended", rp) for rp, d in refs]
        lines.append("| keys attended (%) | " + " | ".join(row) + " |")
        lines.append("")
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines))
    print("plot_sweep: wrote %s.md" % args.out)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_sweep: matplotlib is not installed (pip install matplotlib); no plot written", file=sys.stderr)
        return 3
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    xs = list(range(len(names)))
    for i, n in enumerate(lengths):
        ys = [next((100.0 * r["accuracy"] for r in avgs[p] if r["length"] == n), float("nan")) for p in names]
        line, = ax.plot(xs, ys, "o-", label="kascade @ %dK" % (n // 1024) if n % 1024 == 0 else "kascade @ %d" % n)
        for rp, d in refs:
            y = next((100.0 * r["accuracy"] for r in d["averages"] if r["length"] == n and r["policy"] == rp), None)
            if y is not None:
                ax.axhline(y, color=line.get_color(), ls="--", lw=1, label="%s @ %dK" % (rp, n // 1024))
    ax.set_xticks(xs)
    ax.set_xticklabels(names)
    ax.set_xlabel(label)
    ax.set_ylabel("average accuracy (%)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(args.title or "kascade accuracy vs %s" % label)
    fig.tight_layout()
    fig.savefig(args.out + ".png", dpi=110)
    print("plot_sweep: wrote %s.png" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
