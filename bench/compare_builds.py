#!/usr/bin/env python3
"""bench/compare_builds.py — the same kernel benchmark from several builds, in one process, in turns.

How every old-vs-new figure of docs/perf.md is measured: the binaries of two (or more) builds of
kascade_bench_prefill or kascade_bench_decode run one after the other with the same options, the
whole sequence repeated --runs times (build A, build B, build A, build B, ...) so that a drift of the
GPU's clock or temperature shows up as disagreement between runs instead of as a speed-up. The
table gives every run's time per (configuration, kernel) and each build's change against the first,
from the medians over the runs.

  bench/compare_builds.py [--runs 2] [--out table.md] NAME=BINARY NAME=BINARY ... -- BENCH_ARGS...

A build may also be one binary with options of its own, given as one argument: 'NAME=BINARY --opt value'
(the options go before BENCH_ARGS), so variants of one build are compared in turns the same way, e.g.
'sep=NEW/kascade_bench_decode --pool-fusion separate' 'fused=NEW/kascade_bench_decode --pool-fusion fused'.
BENCH_ARGS go to every binary unchanged, plus --json FILE (the binaries' own result files, which
this script reads: kascade_bench_prefill's "records", kascade_bench_decode's "results"). A binary
that fails stops the comparison with its name, exit status and the end of its output.
Tested by tests/scripts/test_compare_builds.sh (stand-in binaries, no GPU).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def parse_builds(specs):
    """[(name, [binary, own options...])] from NAME=BINARY or 'NAME=BINARY --opt value ...'."""
    builds = []
    for spec in specs:
        name, sep, command = spec.partition("=")
        words = command.split()
        if not sep or not name or not words:
            raise SystemExit(f"compare_builds.py: '{spec}' is not NAME=BINARY [OPTIONS]")
        if any(name == n for n, _ in builds):
            raise SystemExit(f"compare_builds.py: the build name '{name}' is given twice")
        path = words[0]
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise SystemExit(f"compare_builds.py: {name}: {path} is not an executable file")
        builds.append((name, words))
    if len(builds) < 2:
        raise SystemExit("compare_builds.py: give at least two builds (NAME=BINARY NAME=BINARY)")
    return builds


def timings(path):
    """{(configuration, kernel): milliseconds} from one result file of either benchmark."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    if "records" in data:  # kascade_bench_prefill
        for r in data["records"]:
            config = f"{r['dtype']} {r['layout']} {r['variant']} L={r['L']}"
            out[(config, r["kernel"])] = float(r["ms"])
    elif "results" in data:  # kascade_bench_decode
        for r in data["results"]:
            config = f"{r['shape']} {r['dtype']} B={r['batch']} L={r['len']} {r['layout']}"
            out[(config, r["op"])] = float(r["median_us"]) / 1000.0
    else:
        raise SystemExit(f"compare_builds.py: {path}: neither 'records' (kascade_bench_prefill) nor 'results' "
                         "(kascade_bench_decode): not a result file of our benchmarks")
    return out


def run_all(builds, runs, bench_args, work):
    """results[name] = list over runs of {(config, kernel): ms}."""
    results = {name: [] for name, _ in builds}
    total, done, start = runs * len(builds), 0, time.time()
    for r in range(runs):
        for name, command in builds:
            out_json = os.path.join(work, f"{name}_{r + 1}.json")
            log = os.path.join(work, f"{name}_{r + 1}.log")
            with open(log, "w") as f:
                code = subprocess.call([*command, *bench_args, "--json", out_json], stdout=f, stderr=subprocess.STDOUT)
            if code != 0:
                with open(log) as f:
                    tail = "".join(f.readlines()[-10:])
                raise SystemExit(f"compare_builds.py: {name} (run {r + 1}) exited with status {code}:\n{tail}")
            results[name].append(timings(out_json))
            done += 1
            elapsed = time.time() - start
            eta = elapsed / done * (total - done)
            print(f"compare_builds: {done}/{total} runs ({name}, run {r + 1}), {elapsed:.0f} s, "
                  f"{done / elapsed * 60:.1f} runs/min, ETA {eta:.0f} s", file=sys.stderr, flush=True)
    return results


def table(builds, results):
    names = [n for n, _ in builds]
    keys = list(dict.fromkeys(k for n in names for run in results[n] for k in run))  # first-seen order
    head = ["configuration", "kernel"] + [f"{n} ms (runs)" for n in names] + [f"{n} vs {names[0]}" for n in names[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in keys:
        cells, medians = [], {}
        for n in names:
            times = [run[key] for run in results[n] if key in run]
            cells.append(", ".join(f"{t:.4g}" for t in times) if times else "—")
            medians[n] = statistics.median(times) if times else None
        base = medians[names[0]]
        for n in names[1:]:
            m = medians[n]
            cells.append(f"{(m / base - 1) * 100:+.1f} %" if m is not None and base else "—")
        lines.append("| " + " | ".join([key[0], key[1]] + cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        raise SystemExit("compare_builds.py: put the benchmark's options after '--' (see --help)")
    split = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2, help="rounds over all builds (default 2)")
    ap.add_argument("--out", default="", help="write the markdown table here too")
    ap.add_argument("builds", nargs="+",
                    help="NAME=BINARY or 'NAME=BINARY OPTIONS', two or more; the first is the baseline")
    args = ap.parse_args(argv[:split])
    if args.runs < 1:
        raise SystemExit(f"compare_builds.py: --runs is {args.runs}; expected >= 1")
    builds = parse_builds(args.builds)
    with tempfile.TemporaryDirectory() as work:
        results = run_all(builds, args.runs, argv[split + 1:], work)
    text = table(builds, results)
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
