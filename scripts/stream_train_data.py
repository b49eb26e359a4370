#!/usr/bin/env python3
"""Generates fresh training samples of kascade-tiny while it trains (on the GPU machine's idle CPU
cores), so that no task sample is seen twice: the packed stage files of scripts/make_train_data.py
are a few hundred samples per task and length, and a 9-minute chunk went over them ~3 times — the
training answers were learned by heart (answer_exact 0.3 -> 1.0 within chunk c12) while held-out
accuracy stayed where it was (docs/model.md).

Worker processes loop until --max-seconds have passed, the --stop-file exists, or the calling
process (train_tiny.py) is gone: each picks a target length by --lengths weight and a task by
--tasks weight, runs `kascade tasks --split train --tasks TASK --lengths L --samples N --seed S`
(S = --seed-base + k · workers + worker: every call its own samples), encodes the samples as
make_train_data.py does (same documents, answer spans, chat share), and writes one shard
OUT/shard-<L>-<S>.npz (uncompressed, the data format of scripts/train_tiny.py, written to a
temporary name and renamed, so a reader never sees a partial file). train_tiny.py --generate
starts this script and reads the shards as they arrive (--stream-window, --stream-refresh).
--tasks draws from the evaluation suite's tasks (every one weighs 1 unless given); a train-only
task (`kascade tasks --list`, splits "train": copy_strings, hop_drill, vt_lookup) only when named with a weight.

--extra-tasks NAME@L1:L2:...=SHARE[,...] adds tasks at lengths of their own (the copy curriculum:
short contexts for copy_strings and hop_drill while --lengths stays long): with probability SHARE a
shard is NAME's, at one of its lengths L (uniform), with --samples x (mean --lengths length / L)
samples, so that SHARE is its share of the generated tokens; scripts/train_mix.py has the rules.
Without it, the draws are those made before the option existed.

  scripts/stream_train_data.py --out DIR --kascade build/tools/kascade --lengths 4k=1,8k=1,16k=2 \
      --tasks vt=4,multihop_qa=4 --samples 8 --workers 14 --seed-base 20000000 --max-seconds 500 \
      [--extra-tasks copy_strings@512:1k:2k=0.12,hop_drill@512:1k:2k=0.1]

Tested by tests/scripts/test_stream_train_data.sh (shards written, read back, disjoint samples, the
extra tasks at their own lengths, the stop file honoured).
"""
from __future__ import annotations

import argparse
import io
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_train_data as mtd  # noqa: E402
import train_mix  # noqa: E402


def parse_weights(spec: str, known: list[str] | None = None, what: str = "") -> dict[str, float]:
    """'a=1,b=2' -> {a: 1, b: 2}; names checked against `known` when given."""
    out = {}
    for part in filter(None, (x.strip() for x in spec.split(","))):
        name, sep, w = part.partition("=")
        if not sep:
            raise SystemExit(f"stream_train_data.py: '{part}' in {what} is not NAME=WEIGHT")
        if known is not None and name not in known:
            raise SystemExit(f"stream_train_data.py: {what} names '{name}'; known: {', '.join(known)}")
        out[name] = float(w)
        if out[name] < 0:
            raise SystemExit(f"stream_train_data.py: {what} weight of '{name}' is negative")
    return out


def list_tasks(kascade: Path) -> tuple[list[str], list[str]]:
    """(the evaluation suite's tasks, the train-only tasks) from `kascade tasks --list`: its columns task,
    category, scorer, max_new, splits (all | train), description."""
    text = subprocess.run([str(kascade), "tasks", "--list"], check=True, capture_output=True, text=True).stdout
    rows = [line.split() for line in text.splitlines()[1:] if line.strip()]
    return [r[0] for r in rows if r[4] != "train"], [r[0] for r in rows if r[4] == "train"]


def write_shard(path: Path, arrays: dict, meta: dict) -> None:
    buf = io.BytesIO()
    np.savez(buf, meta=np.array(json.dumps(meta)), **arrays)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(buf.getvalue())
    os.replace(tmp, path)


def worker(w: int, args: argparse.Namespace, plan: train_mix.ShardDraw, tok_sha: str, parent: int,
           t_end: float) -> None:
    rng = np.random.default_rng([args.seed_base, w])
    enc = mtd.Encoder(Path(args.model))
    out, stop_file = Path(args.out), Path(args.stop_file) if args.stop_file else None
    k = 0
    while time.time() < t_end and os.getppid() == parent and not (stop_file and stop_file.exists()):
        task, L, n = plan.draw(rng)
        seed = args.seed_base + k * args.workers + w
        k += 1
        samples = mtd.run_tasks(Path(args.kascade), "train", L, n, seed, Path(args.model), task, quiet=True)
        arrays, task_names, _ = mtd.task_documents(enc, samples, L, rng, args.chat_fraction)
        meta = {"format": mtd.DATA_FORMAT, "version": mtd.DATA_VERSION, "kind": "tasks", "stage": args.stage,
                "split": "train", "seed": seed, "task_selection": task, "length": L, "tokenizer_sha256": tok_sha,
                "tasks": task_names, "chat_fraction": args.chat_fraction, "generator": "kascade tasks (streamed)"}
        write_shard(out / f"shard-{L}-{seed}.npz", arrays, meta)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder of the shards (created)")
    ap.add_argument("--kascade", required=True, help="a built `kascade` CLI")
    ap.add_argument("--model", default=str(mtd.REPO / "models" / "kascade-tiny"), help="folder with tokenizer.json")
    ap.add_argument("--lengths", required=True, help="target lengths with weights, e.g. 4k=1,8k=1,16k=2")
    ap.add_argument("--tasks", default="", help="task weights, e.g. vt=4,cwe=2 (unlisted tasks of the evaluation "
                    "suite: 1; 0 leaves one out; a train-only task only when given a weight)")
    ap.add_argument("--extra-tasks", default="", help="tasks at lengths of their own, NAME@L1:L2:...=SHARE of the "
                    "tokens, e.g. copy_strings@512:1k:2k=0.12,hop_drill@512:1k:2k=0.1 (scripts/train_mix.py)")
    ap.add_argument("--samples", type=int, default=8, help="samples per shard (one task, one length)")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--seed-base", type=int, required=True, help="first user seed; a chunk's own range, >= 10^6")
    ap.add_argument("--chat-fraction", type=float, default=0.1)
    ap.add_argument("--max-seconds", type=float, default=600.0)
    ap.add_argument("--stop-file", help="stop when this file exists")
    ap.add_argument("--stage", default="stream", help="stage name written in the shards' meta")
    args = ap.parse_args()
    if args.samples < 1 or args.workers < 1:
        ap.error("--samples and --workers must be >= 1")
    if not (10**6 <= args.seed_base and args.seed_base + 10**7 < 2**40):
        ap.error("--seed-base must lie in [10^6, 2^40 - 10^7) (below 10^6 are the stages' seeds)")
    try:
        lw = {train_mix.parse_length(k): v for k, v in parse_weights(args.lengths, what="--lengths").items()}
    except ValueError as e:
        ap.error(f"--lengths: {e}")
    lengths = [L for L, v in lw.items() if v > 0]
    if not lengths:
        ap.error("--lengths gives no length a positive weight")
    length_p = np.array([lw[L] for L in lengths]) / sum(lw[L] for L in lengths)
    suite, train_only = list_tasks(Path(args.kascade))
    tw = parse_weights(args.tasks, suite + train_only, "--tasks")
    try:
        extras = train_mix.parse_extra_tasks(args.extra_tasks, suite + train_only)
        tasks = train_mix.main_tasks(tw, suite, train_only, extras)
    except ValueError as e:
        ap.error(str(e))
    if not tasks:
        ap.error("--tasks leaves no task in the main mix")
    task_p = np.array([tw.get(t, 1.0) for t in tasks]) / sum(tw.get(t, 1.0) for t in tasks)
    plan = train_mix.ShardDraw(lengths, length_p, tasks, task_p, args.samples, extras)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    tok_sha = mtd.sha256(Path(args.model) / "tokenizer.json")
    t_end = time.time() + args.max_seconds
    procs = [mp.Process(target=worker, args=(w, args, plan, tok_sha, os.getpid(), t_end), daemon=True)
             for w in range(args.workers)]
    for p in procs:
        p.start()
    extra_note = "".join(f", {e.task} at {list(e.lengths)} ({e.share:.0%} of the tokens, "
                         f"{'/'.join(str(plan.samples_at(L)) for L in e.lengths)} samples a shard)" for e in extras)
    print(f"stream_train_data.py: {args.workers} workers -> {args.out} (lengths {lengths}, "
          f"{len(tasks)} tasks, {args.samples} samples a shard{extra_note}, seeds from {args.seed_base})", flush=True)
    caller = os.getppid()  # train_tiny.py: when it is gone, so are we
    orphaned = False
    while any(p.is_alive() for p in procs):
        if os.getppid() != caller and not orphaned:
            orphaned = True
            for p in procs:
                p.terminate()
            print("stream_train_data.py: the caller is gone; stopping", flush=True)
        for p in procs:
            p.join(timeout=0.5)
    failed = sum(p.exitcode not in (0, None, -15) for p in procs)
    n = len(list(Path(args.out).glob("shard-*.npz")))
    print(f"stream_train_data.py: stopped; {n} shards in {args.out}; {failed} workers failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
