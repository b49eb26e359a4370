#!/usr/bin/env python3
"""bench/ncu_kernel_summary.py — per-kernel totals of an Nsight Compute CSV (one metric,
gpu__time_duration.sum), e.g. the kernels of one decode step of `kascade bench e2e`:

    KASCADE_PROFILE_DECODE_STEP=8 ncu --profile-from-start off --graph-profiling node \
        --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
        kascade bench e2e --lengths 128k --batches 4 --policies kascade --decode-steps 10 --no-warmup > step.csv
    python3 bench/ncu_kernel_summary.py step.csv

Prints the number of kernels and their summed duration, then one line per kernel (name up to its
argument list, plus its grid) with the total µs, the launch count and the µs per launch, largest
first. Used for docs/perf.md ("GPU runtime round 7"). Tested by tests/scripts/test_ncu_kernel_summary.sh.
"""
import collections
import csv
import re
import sys


def to_us(value: float, unit: str) -> float:
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    if unit not in scale:
        raise SystemExit(f"ncu_kernel_summary.py: unknown duration unit '{unit}'")
    return value * scale[unit]


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: ncu_kernel_summary.py NCU_CSV")
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.DictReader(line for line in f if line.startswith('"')))
    totals = collections.defaultdict(lambda: [0, 0.0])
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = re.sub(r"\(.*", "", r["Kernel Name"])[:110]
        key = f"{name}  grid {r.get('Grid Size', '')}"
        totals[key][0] += 1
        totals[key][1] += to_us(float(r["Metric Value"].replace(",", "")), r["Metric Unit"])
    launches = sum(n for n, _ in totals.values())
    print(f"kernels {launches}, total {sum(us for _, us in totals.values()):.1f} us")
    for key, (n, us) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"{us:10.1f} us  {n:5d} x  {us / n:8.2f} us  {key}")


if __name__ == "__main__":
    main()
