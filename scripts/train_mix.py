#!/usr/bin/env python3
"""The task mix of a kascade-tiny chunk trained on streamed samples (no PyTorch needed): target lengths
("512", "1k"), and --extra-tasks, tasks generated and trained at lengths of their own beside the main mix
of --length-weights / --task-weights — the copy curriculum (docs/model.md): copy_strings and hop_drill at
512 / 1k / 2k while the rest stays at 4k / 8k / 16k.

  --extra-tasks NAME@L1:L2:...=SHARE[,NAME@...=SHARE]     e.g. copy_strings@512:1k:2k=0.12,hop_drill@512:1k:2k=0.1

SHARE is the fraction of the task tokens that are NAME's, spread evenly over its lengths (the shares sum
to less than 1; the main mix takes the rest):
  - the producer (scripts/stream_train_data.py, ShardDraw) makes a shard of NAME with probability SHARE,
    at one of its lengths L drawn uniformly, holding --samples x (the main mix's mean length / L) samples —
    about the tokens of an average main shard, so that the generated tokens split as the shares say; the
    other shards are drawn as without the option (length by --lengths, then task by --tasks weight);
  - the trainer (scripts/train_tiny.py, task_buckets) draws a task micro-batch (~--micro-tokens tokens at
    any length) from NAME's samples of length L with probability SHARE / (number of NAME's lengths), one
    sample a row, every sample once per pass; the main mix's buckets (one per length, --length-weights,
    --task-weights within) share 1 - (the summed shares) as their weights say.
A task named in --extra-tasks leaves the main mix (a positive --task-weights weight for it is refused).
Without --extra-tasks every draw is the one made before the option existed: the same shards, the same
batches.
Used by scripts/stream_train_data.py and scripts/train_tiny.py; tested by tests/scripts/test_train_mix.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def parse_length(text: str) -> int:
    """'512' -> 512, '1k' / '1K' -> 1024."""
    t = text.strip().lower()
    try:
        value = int(t[:-1]) * 1024 if t.endswith("k") else int(t)
    except ValueError:
        raise ValueError(f"length '{text}' is not a number with an optional k") from None
    if value <= 0:
        raise ValueError(f"length '{text}' must be positive")
    return value


@dataclass(frozen=True)
class ExtraTask:
    task: str
    lengths: tuple[int, ...]
    share: float


def parse_extra_tasks(spec: str, known: list[str] | None = None) -> list[ExtraTask]:
    """'copy_strings@512:1k:2k=0.12,hop_drill@512:1k=0.1' -> [ExtraTask, ...]; ValueError naming the problem."""
    out: list[ExtraTask] = []
    for part in filter(None, (x.strip() for x in spec.split(","))):
        head, eq, share = part.partition("=")
        task, at, lengths = head.partition("@")
        if not eq or not at or not task or not lengths:
            raise ValueError(f"--extra-tasks entry '{part}' is not NAME@L1:L2:...=SHARE (e.g. copy_strings@512:1k=0.1)")
        if known is not None and task not in known:
            raise ValueError(f"--extra-tasks names '{task}'; known tasks: {', '.join(known)}")
        if any(e.task == task for e in out):
            raise ValueError(f"--extra-tasks names '{task}' twice")
        ls = tuple(parse_length(x) for x in lengths.split(":"))
        if len(set(ls)) != len(ls):
            raise ValueError(f"--extra-tasks entry '{part}' repeats a length")
        try:
            s = float(share)
        except ValueError:
            raise ValueError(f"--extra-tasks entry '{part}': the share '{share}' is not a number") from None
        if not 0 < s < 1:
            raise ValueError(f"--extra-tasks entry '{part}': the share must lie in (0, 1)")
        out.append(ExtraTask(task, ls, s))
    if sum(e.share for e in out) >= 1:
        raise ValueError(f"--extra-tasks shares sum to {sum(e.share for e in out):g}; the main mix needs the rest (< 1)")
    return out


def main_tasks(weights: dict[str, float], suite: list[str], train_only: list[str],
               extras: list[ExtraTask]) -> list[str]:
    """The tasks of the producer's main draw with a positive weight, in `suite + train_only` order: a suite
    task weighs 1 unless --tasks says otherwise, a train-only task 0 unless named, an extra task 0 (naming
    it in --tasks with a positive weight is an error)."""
    extra = {e.task for e in extras}
    clash = sorted(t for t in extra if weights.get(t, 0) > 0)
    if clash:
        raise ValueError(f"{', '.join(clash)}: in --extra-tasks and with a positive --tasks weight; give it one place")
    default = {t: (0.0 if t in extra else 1.0) for t in suite} | {t: 0.0 for t in train_only}
    return [t for t in suite + train_only if weights.get(t, default[t]) > 0]


class ShardDraw:
    """The producer's draw of one shard: (task, target length, samples)."""

    def __init__(self, lengths: list[int], length_p: np.ndarray, tasks: list[str], task_p: np.ndarray,
                 samples: int, extras: list[ExtraTask]):
        self.lengths, self.length_p, self.tasks, self.task_p = lengths, length_p, tasks, task_p
        self.samples, self.extras = samples, extras
        self.extra_total = sum(e.share for e in extras)
        self.extra_p = np.array([e.share for e in extras]) / self.extra_total if extras else None
        self.mean_length = float(np.dot(length_p, lengths))

    def samples_at(self, length: int) -> int:
        """Samples of an extra shard of `length`: the tokens of an average main shard."""
        return max(1, round(self.samples * self.mean_length / length))

    def draw(self, rng: np.random.Generator) -> tuple[str, int, int]:
        if self.extras and rng.random() < self.extra_total:
            e = self.extras[int(rng.choice(len(self.extras), p=self.extra_p))]
            length = int(e.lengths[int(rng.integers(len(e.lengths)))])
            return e.task, length, self.samples_at(length)
        length = int(rng.choice(self.lengths, p=self.length_p))
        return str(rng.choice(self.tasks, p=self.task_p)), length, self.samples


@dataclass(frozen=True)
class Bucket:
    length: int
    task: str | None  # None: the main mix (every task but the extra ones); else one extra task
    weight: float     # the probability that a task micro-batch comes from here

    @property
    def label(self) -> str:
        return f"tasks@{self.length}" if self.task is None else f"{self.task}@{self.length}"


def task_buckets(present: set[tuple[int, str]], length_weights: dict[int, float],
                 extras: list[ExtraTask]) -> list[Bucket]:
    """The trainer's buckets over the (length, task) pairs of its data: the main mix's lengths in ascending
    order (weight from --length-weights; a length it does not name weighs 0, or 1 when it names none),
    scaled to 1 - the extra shares, then each extra task at each of its lengths. Buckets without data are
    left out and the rest renormalised (streamed data: until a pair's first shard arrives)."""
    extra = {e.task for e in extras}
    main_lengths = sorted({L for L, t in present if t not in extra})
    main = [(L, length_weights.get(L, 1.0 if not length_weights else 0.0)) for L in main_lengths]
    main = [(L, w) for L, w in main if w > 0]
    main_total = sum(w for _, w in main)
    rest = 1.0 - sum(e.share for e in extras)
    out = [Bucket(L, None, (rest if extras else 1.0) * w / main_total) for L, w in main]
    out += [Bucket(L, e.task, e.share / len(e.lengths)) for e in extras for L in e.lengths if (L, e.task) in present]
    complete = bool(main) and len(out) == len(main) + sum(len(e.lengths) for e in extras)
    total = sum(b.weight for b in out)
    if complete or total == 0:
        return out
    return [Bucket(b.length, b.task, b.weight / total) for b in out]
