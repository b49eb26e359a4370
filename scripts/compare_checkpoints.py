#!/usr/bin/env python3
"""scripts/compare_checkpoints.py — the ship test of kascade-tiny (docs/model.md): compares two
`kascade eval` runs of the same samples (same tasks, lengths, split, seed and sample count; dense
policy), sample by sample, and says whether the candidate checkpoint is ahead of the shipped one by
more than the noise of those samples.

  python3 scripts/compare_checkpoints.py SHIPPED_EVAL_DIR CANDIDATE_EVAL_DIR [--margin 2.0] [--out table.md]

Each folder holds the samples.jsonl that `kascade eval -o DIR` writes. Pairs are matched on
(task, length, policy, index); a sample present in one run only, or a pair whose expected answers differ
(another split, seed or generator), is an error (not the same samples).
The verdict: the mean paired difference d (points, 0-100) with its standard error s (the sample
standard deviation of the per-sample differences over sqrt(n)); "ahead" when d - 2s > margin, "behind"
when d + 2s < -margin, else "not separable" — with 22 samples one flipped sample is 4.5 points, so
the CPU test of 2 samples per task rarely separates two checkpoints (c9-c11).
After the verdict, the issue-4 quality bar per length: the mean over tasks of the retrieval group (every
task but the aggregation tasks cwe and fwe: the needle variants, kv_retrieval, vt, multihop_qa) and of the
aggregation group, for both runs, beside the bar where it has one (retrieval >= 90 % at 4K and 8K, >= 80 % at
16K; aggregation >= 70 % at 4K), and whether the candidate meets it.
Exit status 0 in every verdict; 2 for unusable input.
"""
import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path


def load(folder):
    path = Path(folder) / "samples.jsonl"
    if not path.is_file():
        raise SystemExit(f"{path}: missing (the -o folder of a kascade eval run)")
    samples = {}
    with open(path) as f:
        for line_number, line in enumerate(f, 1):
            if not line.strip():
                continue
            s = json.loads(line)
            key = (s["task"], int(s["length"]), s["policy"], int(s["index"]))
            if key in samples:
                raise SystemExit(f"{path}:{line_number}: sample {key} appears twice")
            samples[key] = (float(s["score"]), s.get("answers"))
    if not samples:
        raise SystemExit(f"{path}: no samples")
    return samples


# The quality bar of issue 4 (docs/model.md): group -> {length in tokens: minimum accuracy %}.
AGGREGATION_TASKS = frozenset({"cwe", "fwe"})
QUALITY_BAR = {"retrieval": {4096: 90.0, 8192: 90.0, 16384: 80.0}, "aggregation": {4096: 70.0}}


def quality_bar_lines(cell_percent):
    """The bar table: per (group, length) the mean over the group's tasks of each run's cell accuracy.
    cell_percent: (task, length, policy) -> (shipped %, candidate %)."""
    groups = defaultdict(list)  # (group, length) -> [(shipped %, candidate %) per task cell]
    for (task, length, _policy), percents in cell_percent.items():
        groups[("aggregation" if task in AGGREGATION_TASKS else "retrieval", length)].append(percents)
    lines = ["", "Against the quality bar of issue 4 (mean over the group's tasks):", "",
             "| group | length | tasks | shipped % | candidate % | bar | candidate meets it |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for (group, length), cells in sorted(groups.items(), key=lambda kv: (kv[0][0] != "retrieval", kv[0][1])):
        a = sum(c[0] for c in cells) / len(cells)
        b = sum(c[1] for c in cells) / len(cells)
        bar = QUALITY_BAR[group].get(length)
        bar_text, meets = (f"{bar:g}", "yes" if b >= bar else "no") if bar is not None else ("—", "—")
        lines.append(f"| {group} | {length} | {len(cells)} | {a:.1f} | {b:.1f} | {bar_text} | {meets} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shipped")
    ap.add_argument("candidate")
    ap.add_argument("--margin", type=float, default=2.0, help="points the candidate must be ahead by (default 2)")
    ap.add_argument("--out", help="also write the table and verdict to this file")
    args = ap.parse_args()
    shipped, candidate = load(args.shipped), load(args.candidate)
    if shipped.keys() != candidate.keys():
        only = sorted(shipped.keys() ^ candidate.keys())
        print(f"compare_checkpoints: the runs hold different samples (e.g. {only[0]}); run both with the same "
              "--tasks, --lengths, --split, --seed and --samples", file=sys.stderr)
        return 2
    for key in sorted(shipped):
        if shipped[key][1] != candidate[key][1]:
            print(f"compare_checkpoints: sample {key} expects {shipped[key][1]} in one run and {candidate[key][1]} in "
                  "the other; run both with the same --split and --seed (and the same task generator)", file=sys.stderr)
            return 2
    shipped = {k: v[0] for k, v in shipped.items()}
    candidate = {k: v[0] for k, v in candidate.items()}
    keys = sorted(shipped)
    by_cell = defaultdict(list)
    for k in keys:
        by_cell[(k[0], k[1], k[2])].append(k)
    lines = ["| task | length | policy | samples | shipped % | candidate % | difference (points) |",
             "|---|---:|---|---:|---:|---:|---:|"]
    cell_percent = {cell: (100 * sum(shipped[k] for k in ks) / len(ks), 100 * sum(candidate[k] for k in ks) / len(ks))
                    for cell, ks in sorted(by_cell.items())}
    for (task, length, policy), (a, b) in cell_percent.items():
        lines.append(f"| {task} | {length} | {policy} | {len(by_cell[(task, length, policy)])} | {a:.1f} | {b:.1f} | "
                     f"{b - a:+.1f} |")
    diffs = [100 * (candidate[k] - shipped[k]) for k in keys]
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    se = sd / math.sqrt(n)
    a_all = 100 * sum(shipped.values()) / n
    b_all = 100 * sum(candidate.values()) / n
    lines.append(f"| **all** | | | {n} | **{a_all:.1f}** | **{b_all:.1f}** | **{b_all - a_all:+.1f}** |")
    if mean - 2 * se > args.margin:
        verdict = "candidate ahead"
    elif mean + 2 * se < -args.margin:
        verdict = "candidate behind"
    else:
        verdict = "not separable"
    better = sum(d > 0 for d in diffs)
    worse = sum(d < 0 for d in diffs)
    lines.append("")
    lines.append(f"Verdict: **{verdict}** — paired difference {mean:+.1f} ± {se:.1f} points (mean ± standard error "
                 f"over {n} samples; {better} better, {worse} worse, {n - better - worse} equal; margin "
                 f"{args.margin:g} points at two standard errors).")
    lines += quality_bar_lines(cell_percent)
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
