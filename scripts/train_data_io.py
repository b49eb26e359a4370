#!/usr/bin/env python3
"""Reading the training data of kascade-tiny (no PyTorch needed): the packed stage files of
scripts/make_train_data.py (*.npz.xz) and the shards streamed during training by
scripts/stream_train_data.py (*.npz), into one DocSet of documents; StreamedTasks keeps the newest
shards of each target length as they arrive. The file layout is documented in scripts/train_tiny.py.
Used by scripts/train_tiny.py; tested by tests/scripts/test_stream_train_data.sh.
"""
from __future__ import annotations

import io
import json
import lzma
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA_FORMAT = "kascade-tiny-train-data"
DATA_VERSION = 1


@dataclass
class DocSet:
    tokens: np.ndarray       # uint16 [T]
    offsets: np.ndarray      # int64 [D+1]
    ans_start: np.ndarray    # int32 [D]
    length: np.ndarray       # int32 [D]
    task: np.ndarray         # int16 [D]
    fmt: np.ndarray          # uint8 [D]
    metas: list              # one meta dict per file
    task_names: list         # what `task` indexes (the union over the files, sorted)


def read_npz(path: Path) -> dict:
    """The arrays of a data file: lzma-compressed (*.npz.xz, the packed stages) or plain (*.npz, the
    shards streamed by scripts/stream_train_data.py)."""
    if path.name.endswith(".xz"):
        with lzma.open(path, "rb") as f:
            raw = f.read()
    else:
        raw = path.read_bytes()
    with np.load(io.BytesIO(raw), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def checked_part(path: Path, tokenizer_sha: str | None) -> tuple[dict, dict]:
    """(arrays, meta) of one data file, its format and tokenizer checked."""
    z = read_npz(path)
    meta = json.loads(str(z["meta"]))
    if meta.get("format") != DATA_FORMAT or meta.get("version") != DATA_VERSION:
        raise ValueError(f"{path}: not {DATA_FORMAT} v{DATA_VERSION}")
    if tokenizer_sha and meta.get("tokenizer_sha256") != tokenizer_sha:
        raise ValueError(f"{path}: made with tokenizer {meta.get('tokenizer_sha256')}, "
                         f"models/kascade-tiny has {tokenizer_sha}; regenerate the data")
    return z, meta


def docset_from_parts(parts: list[dict], metas: list[dict]) -> DocSet:
    """One DocSet of several files' arrays (task ids remapped to the union of their task names)."""
    task_names = sorted(set(t for m in metas for t in m.get("tasks", [])))
    remapped = []
    for p, m in zip(parts, metas):  # per-file task ids -> ids into the union
        local = m.get("tasks", [])
        task = p["task"]
        if local:
            remap = np.array([task_names.index(t) for t in local], dtype=np.int16)
            task = np.where(task >= 0, remap[np.maximum(task, 0)], -1).astype(np.int16)
        remapped.append(task)
    offsets, base = [np.zeros(1, np.int64)], 0
    for p in parts:
        offsets.append(p["doc_offsets"][1:] + base)
        base += int(p["doc_offsets"][-1])
    return DocSet(tokens=np.concatenate([p["tokens"] for p in parts]), offsets=np.concatenate(offsets),
                  ans_start=np.concatenate([p["ans_start"] for p in parts]),
                  length=np.concatenate([p["length"] for p in parts]), task=np.concatenate(remapped),
                  fmt=np.concatenate([p["fmt"] for p in parts]), metas=list(metas), task_names=task_names)


def load_docset(folder: Path, tokenizer_sha: str | None) -> DocSet:
    files = sorted(folder.glob("*.npz.xz"))
    if not files:
        raise FileNotFoundError(f"no *.npz.xz data files in {folder}")
    parts, metas = zip(*(checked_part(f, tokenizer_sha) for f in files))
    return docset_from_parts(list(parts), list(metas))


class StreamedTasks:
    """Task shards written during training by scripts/stream_train_data.py (--generate): poll()
    reads the shards that appeared since the last call (the producer renames each complete file into
    place), docset() gives the newest `window` documents of each target length — and, apart, of each
    (length, task) of the tasks in `separate` (the --extra-tasks of scripts/train_mix.py, whose shards
    must not crowd the main mix's out of a shared length's window, nor each other)."""

    def __init__(self, folder: Path, window: int, tokenizer_sha: str, separate: frozenset[str] = frozenset()):
        self.folder, self.window, self.sha, self.separate = folder, window, tokenizer_sha, separate
        self.seen: set[str] = set()
        self.parts: dict[int, list[tuple[dict, dict]]] = {}  # length -> (arrays, meta), oldest first
        self.extra_parts: dict[tuple[int, str], list[tuple[dict, dict]]] = {}  # (length, separate task) -> the same
        self.shards = self.tokens = 0  # totals read
        self.documents_by_length: dict[int, int] = {}  # target length -> documents read

    def poll(self) -> int:
        """Reads the new shards; returns how many."""
        new = [f for f in self.folder.glob("shard-*.npz") if f.name not in self.seen]
        new.sort(key=lambda f: f.stat().st_mtime)
        for f in new:
            self.seen.add(f.name)
            z, meta = checked_part(f, self.sha)
            task = meta.get("task_selection")
            if task in self.separate:
                held = self.extra_parts.setdefault((int(meta["length"]), task), [])
            else:
                held = self.parts.setdefault(int(meta["length"]), [])
            held.append((z, meta))
            while len(held) > 1 and sum(len(p["ans_start"]) for p, _ in held[1:]) >= self.window:
                held.pop(0)
            self.shards += 1
            L = int(meta["length"])
            self.documents_by_length[L] = self.documents_by_length.get(L, 0) + len(z["ans_start"])
            self.tokens += len(z["tokens"])
        return len(new)

    @property
    def documents(self) -> int:
        """Documents read, all lengths."""
        return sum(self.documents_by_length.values())

    def lengths(self) -> set[int]:
        """The lengths of the main mix's shards read."""
        return set(self.parts)

    def extra_keys(self) -> set[tuple[int, str]]:
        """The (length, task) of the separate tasks' shards read."""
        return set(self.extra_parts)

    def docset(self) -> DocSet:
        held = [pm for L in sorted(self.parts) for pm in self.parts[L]]
        held += [pm for key in sorted(self.extra_parts) for pm in self.extra_parts[key]]
        return docset_from_parts([p for p, _ in held], [m for _, m in held])
