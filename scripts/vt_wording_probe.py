#!/usr/bin/env python3
"""scripts/vt_wording_probe.py — where kascade-tiny's variable tracking (vt) loses its dev-split score: the dev
prompts as they are, with the train split's haystack sentences swapped in, with the dev statements (`LET X BE N.`,
`LET X BE Y.`) rewritten in a train statement style (`PTR X = N.`, `PTR X = PTR Y.`), with both, and the train
prompts; greedy dense generation on the CPU through `kascade generate`, scored as vt is (string_match_all: the
share of the answer's variables named in the output). docs/model.md ("What vt's answers are") has its figures.

  python3 scripts/vt_wording_probe.py --model models/kascade-tiny --kascade build/tools/kascade \
      [--length 1k] [--samples 8] [--seed 0]

Prints one row per variant: accuracy (%) and the first three outputs. Exits 2 with a message when the dev samples
hold no statement or filler sentence to rewrite (the task's templates changed). Tested by
tests/scripts/test_vt_wording_probe.sh (the rewrites on a hand-made prompt; one sample end to end).
"""
import argparse
import itertools
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

DEV_FILLER = ["Slowly the day fades.", "The road is long.", "The night is calm.", "The river runs deep.", "On we walk."]
VARIABLE = re.compile(r"\b[A-Z]{5}\b")


def filler_sentences(prompt: str) -> list[str]:
    """The haystack sentences of a vt prompt's body (between the instruction line and the question), in order."""
    body = prompt.split("\n", 1)[1].rsplit("\n", 1)[0]
    return [s for s in re.split(r"(?<=\.)\s+", body) if s.endswith(".") and not VARIABLE.search(s)]


def swap_haystack(prompt: str, train_filler: list[str]) -> str:
    """Every dev filler sentence replaced by the next train filler sentence (cycling)."""
    count = itertools.count()
    pattern = "|".join(re.escape(s) for s in DEV_FILLER)
    return re.sub(pattern, lambda _: train_filler[next(count) % len(train_filler)], prompt)


def swap_statements(prompt: str) -> str:
    """The dev statement style rewritten in the train style `PTR X = N.` / `PTR X = PTR Y.`."""
    prompt = re.sub(r"LET ([A-Z]{5}) BE (\d+)\.", r"PTR \1 = \2.", prompt)
    return re.sub(r"LET ([A-Z]{5}) BE ([A-Z]{5})\.", r"PTR \1 = PTR \2.", prompt)


def score(output: str, answers: list[str]) -> float:
    return sum(a in output for a in answers) / len(answers)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--kascade", required=True, help="a built kascade CLI")
    ap.add_argument("--length", default="1k")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vt-probe-"))

    def samples(split: str) -> list[dict]:
        out = work / f"{split}.jsonl"
        subprocess.run([a.kascade, "tasks", "--split", split, "--tasks", "vt", "--lengths", a.length, "--samples",
                        str(a.samples), "--seed", str(a.seed), "--tokenizer", a.model, "--out", str(out)],
                       check=True, capture_output=True)
        return [json.loads(line) for line in open(out)]

    def generate(prompt: str) -> str:
        (work / "prompt.txt").write_text(prompt)
        return subprocess.run([a.kascade, "generate", "-m", a.model, "--device", "cpu", "-f", str(work / "prompt.txt"),
                               "-n", "30", "--no-progress"], capture_output=True, text=True, check=True).stdout

    dev, train = samples("dev"), samples("train")
    train_filler = filler_sentences(train[0]["prompt"])
    if not any("LET " in r["prompt"] for r in dev) or not any(s in dev[0]["prompt"] for s in DEV_FILLER):
        print("vt_wording_probe.py: the dev vt prompts hold no `LET X BE` statement or dev filler sentence; "
              "the task's templates changed, update DEV_FILLER and swap_statements", file=sys.stderr)
        return 2
    variants = {
        "dev": lambda p: p,
        "dev + train haystack": lambda p: swap_haystack(p, train_filler),
        "dev + train statements": swap_statements,
        "dev + both": lambda p: swap_statements(swap_haystack(p, train_filler)),
    }
    rows = [(name, dev, f) for name, f in variants.items()] + [("train", train, lambda p: p)]
    print(f"| variant | accuracy % ({a.samples} samples, {a.length}) | first outputs |\n|---|---:|---|")
    for name, data, rewrite in rows:
        outputs = [generate(rewrite(r["prompt"])) for r in data]
        accuracy = 100 * sum(score(o, r["answers"]) for o, r in zip(outputs, data)) / len(data)
        shown = "; ".join(repr(o.strip()[:40]) for o in outputs[:3])
        print(f"| {name} | {accuracy:.1f} | {shown} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
