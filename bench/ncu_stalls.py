#!/usr/bin/env python3
"""bench/ncu_stalls.py — reads the per-instruction SASS page of an Nsight Compute report
(`ncu -i REPORT --page source --csv --print-source sass > source.csv`) and prints where a
warp-specialised kernel's warps spend their time: the stall reasons of each code region and the
instructions with the most warp-stall samples.

Regions: the SASS is cut at each instruction matching --split (default: `USETMAXREG`, the setmaxnreg
of the warp-specialised kernels — before the first one is the common prologue, then the code of the
warpgroup that claims registers, then the one that releases them, in the order ptxas laid them out).
Per region: its share of all samples, the warp instructions it executed and its top stall reasons.
That is how docs/perf.md ("Prefill round 5") found the sparse kernel's producer warps executing more
instructions than its consumers.

  python3 bench/ncu_stalls.py source.csv [--top 20] [--split REGEX]
"""
import argparse
import csv
import re
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read_rows(path):
    """The instruction rows and the stall-reason columns of an ncu source-page CSV."""
    with open(path, newline="") as f:
        lines = [line for line in csv.reader(f)]
    header_at = next((i for i, row in enumerate(lines) if "Address" in row and "Source" in row), None)
    if header_at is None:
        raise SystemExit(f"{path}: no 'Address' / 'Source' header: not an ncu --page source CSV")
    header = lines[header_at]
    if SAMPLES not in header:
        raise SystemExit(f"{path}: no '{SAMPLES}' column: profile with --set full (source counters)")
    rows = [dict(zip(header, row)) for row in lines[header_at + 1:] if len(row) == len(header)]
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    return rows, reasons


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source_csv")
    ap.add_argument("--top", type=int, default=20, help="instructions to list (most samples first)")
    ap.add_argument("--split", default="USETMAXREG", help="regex of the SASS lines that start a new region")
    args = ap.parse_args()
    rows, reasons = read_rows(args.source_csv)
    total = sum(number(r[SAMPLES]) for r in rows)
    if total == 0:
        raise SystemExit(f"{args.source_csv}: no warp-stall samples")
    split = re.compile(args.split)
    regions, current = [], {"name": "prologue", "rows": []}
    for r in rows:
        if split.search(r["Source"]):
            regions.append(current)
            current = {"name": f"after {r['Source'].strip()} at {r['Address']}", "rows": []}
        current["rows"].append(r)
    regions.append(current)

    print(f"{len(rows)} instructions, {total:.0f} warp-stall samples\n")
    print("| region | samples | instructions executed | top stall reasons (share of the region's samples) |")
    print("|---|---|---|---|")
    for region in regions:
        samples = sum(number(r[SAMPLES]) for r in region["rows"])
        if samples == 0:
            continue
        executed = sum(number(r.get("Instructions Executed", "0")) for r in region["rows"])
        by_reason = sorted(((sum(number(r[k]) for r in region["rows"]), k) for k in reasons), reverse=True)
        top = ", ".join(f"{k[len('stall_'):]} {100 * v / samples:.0f} %" for v, k in by_reason[:4] if v > 0)
        print(f"| {region['name']} | {100 * samples / total:.1f} % | {executed:,.0f} | {top} |")
    print(f"\nThe {args.top} instructions with the most samples:\n")
    print("| address | share | instruction | top stall reasons (samples) |")
    print("|---|---|---|---|")
    for r in sorted(rows, key=lambda r: -number(r[SAMPLES]))[: args.top]:
        by_reason = sorted(((number(r[k]), k) for k in reasons), reverse=True)
        top = ", ".join(f"{k[len('stall_'):]} {v:.0f}" for v, k in by_reason[:3] if v > 0)
        source = r["Source"].strip().replace("|", "\\|")
        print(f"| {r['Address']} | {100 * number(r[SAMPLES]) / total:.1f} % | `{source}` | {top} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
