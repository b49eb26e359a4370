#!/usr/bin/env bash
# tests/scripts/test_train_mix.sh — scripts/train_mix.py (the task mix of a streamed training chunk; no
# PyTorch): target lengths; --extra-tasks parsed, and refused with a message naming the problem; the main
# mix's tasks (train-only ones only when named, extra ones never); the producer's shard draw — without
# extras draw for draw the code before the option, with extras each task's share of the shards and of the
# generated tokens, spread evenly over its lengths; the trainer's buckets — without extras the old
# length weights exactly, with extras the shares, renormalised while a pair has no data.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here/scripts"
python3 - <<'PY'
import numpy as np
import train_mix as tm
from train_mix import Bucket, ExtraTask


def refused(call, fragment):
    try:
        call()
    except ValueError as e:
        assert fragment in str(e), f"'{fragment}' not in: {e}"
        return
    raise AssertionError(f"accepted, expected an error with '{fragment}'")


# lengths
assert [tm.parse_length(x) for x in ["512", "1k", "2K", " 16k "]] == [512, 1024, 2048, 16384]
for bad in ["", "k", "4kb", "-1", "0"]:
    refused(lambda: tm.parse_length(bad), "length")

# --extra-tasks
known = ["vt", "cwe", "copy_strings", "hop_drill"]
got = tm.parse_extra_tasks("copy_strings@512:1k:2k=0.12, hop_drill@512=0.1", known)
assert got == [ExtraTask("copy_strings", (512, 1024, 2048), 0.12), ExtraTask("hop_drill", (512,), 0.1)], got
assert tm.parse_extra_tasks("", known) == []
refused(lambda: tm.parse_extra_tasks("copy_strings=0.1", known), "NAME@L1:L2:...=SHARE")
refused(lambda: tm.parse_extra_tasks("copy_strings@512", known), "NAME@L1:L2:...=SHARE")
refused(lambda: tm.parse_extra_tasks("copy_strings@512=x", known), "not a number")
refused(lambda: tm.parse_extra_tasks("copy_strings@512=1.5", known), "(0, 1)")
refused(lambda: tm.parse_extra_tasks("copy_strings@512=0", known), "(0, 1)")
refused(lambda: tm.parse_extra_tasks("copy_strings@512:0.5k=0.1", known), "length")
refused(lambda: tm.parse_extra_tasks("copy_strings@512:512=0.1", known), "repeats a length")
refused(lambda: tm.parse_extra_tasks("copy_strings@512=0.1,copy_strings@1k=0.1", known), "twice")
refused(lambda: tm.parse_extra_tasks("copy_strings@512=0.6,hop_drill@512=0.4", known), "sum to 1")
refused(lambda: tm.parse_extra_tasks("copy_string@512=0.1", known), "known tasks")

# the main mix's tasks
suite, train_only = ["niah_single_1", "vt", "cwe"], ["copy_strings", "hop_drill"]
assert tm.main_tasks({}, suite, train_only, []) == suite
assert tm.main_tasks({"cwe": 0}, suite, train_only, []) == ["niah_single_1", "vt"]
assert tm.main_tasks({"copy_strings": 2}, suite, train_only, []) == suite + ["copy_strings"]
vt_extra = [ExtraTask("vt", (512,), 0.2)]
assert tm.main_tasks({}, suite, train_only, vt_extra) == ["niah_single_1", "cwe"], "an extra task leaves the main mix"
refused(lambda: tm.main_tasks({"vt": 2}, suite, train_only, vt_extra), "give it one place")

# the producer's draw, without extras: the draws of the code before --extra-tasks
lengths, length_p = [4096, 8192, 16384], np.array([0.25, 0.25, 0.5])
tasks, task_p = ["niah_single_1", "vt", "cwe"], np.array([0.25, 0.5, 0.25])
plan = tm.ShardDraw(lengths, length_p, tasks, task_p, 8, [])
old, new = np.random.default_rng([20000000, 3]), np.random.default_rng([20000000, 3])
for _ in range(500):
    L = int(old.choice(lengths, p=length_p))
    assert plan.draw(new) == (str(old.choice(tasks, p=task_p)), L, 8)

# with extras: shares of the shards and of the tokens, lengths uniform, samples scaled to a main shard's tokens
extras = [ExtraTask("copy_strings", (512, 1024, 2048), 0.12), ExtraTask("hop_drill", (512, 1024, 2048), 0.10)]
plan = tm.ShardDraw(lengths, length_p, tasks, task_p, 8, extras)
assert plan.mean_length == 11264.0
assert [plan.samples_at(L) for L in (512, 1024, 2048)] == [176, 88, 44]
rng = np.random.default_rng(1)
draws = [plan.draw(rng) for _ in range(40000)]
shards, tokens = {}, {}
for task, L, n in draws:
    shards[(task, L)] = shards.get((task, L), 0) + 1
    tokens[task] = tokens.get(task, 0) + n * L
total = sum(tokens.values())
for e in extras:
    assert abs(tokens[e.task] / total - e.share) < 0.01, (e.task, tokens[e.task] / total)
    for L in e.lengths:
        assert abs(shards[(e.task, L)] / len(draws) - e.share / 3) < 0.006, (e.task, L, shards[(e.task, L)])
assert all(L in lengths for t, L, _ in draws if t in tasks), "the main mix keeps its own lengths"

# the trainer's buckets: without extras the old weights (w / w.sum() over the lengths with data) exactly
present = {(L, t) for L in (4096, 8192, 16384) for t in tasks}
lw = {4096: 1.0, 8192: 1.0, 16384: 2.0}
w = np.array([1.0, 1.0, 2.0])
assert tm.task_buckets(present, lw, []) == [Bucket(L, None, p) for L, p in zip(lengths, (w / w.sum()).tolist())]
assert tm.task_buckets(present | {(2048, "vt")}, lw, []) == tm.task_buckets(present, lw, []), "an unweighted length"
assert [b.weight for b in tm.task_buckets(present | {(2048, "vt")}, {}, [])] == [0.25] * 4, "no weights: alike"
# with extras: the main mix takes 1 - 0.22, each extra (task, length) its share / 3
full = present | {(L, e.task) for e in extras for L in e.lengths}
got = tm.task_buckets(full, lw, extras)
expected = [Bucket(L, None, 0.78 * p) for L, p in zip(lengths, (w / w.sum()).tolist())]
expected += [Bucket(L, e.task, e.share / 3) for e in extras for L in e.lengths]
assert [(b.length, b.task) for b in got] == [(b.length, b.task) for b in expected]
assert np.allclose([b.weight for b in got], [b.weight for b in expected]) and abs(sum(b.weight for b in got) - 1) < 1e-12
assert got[3].label == "copy_strings@512" and got[0].label == "tasks@4096"
# a (length, task) without data yet (streamed: before its first shard): left out, the rest renormalised
partial = tm.task_buckets(full - {(2048, "hop_drill")}, lw, extras)
assert len(partial) == len(got) - 1 and abs(sum(b.weight for b in partial) - 1) < 1e-12
assert abs(partial[0].weight / partial[3].weight - got[0].weight / got[3].weight) < 1e-12, "ratios kept"
print("train_mix.py: lengths, --extra-tasks, the main mix, shard draws and trainer buckets as expected")
PY
