#!/usr/bin/env python3
"""Regenerates the compiled-in resources of the task suite (src/eval/corpus/*.inc).

Sources (both fetched with the ordinary package clients, by name):
  * Natural-text haystacks: Jane Austen's novels (public domain; Austen died in 1817, the texts
    are Project Gutenberg transcriptions) as packaged by the Debian package `r-cran-janeaustenr`
    (packaging and R code: MIT, Julia Silge). We read the R lazy-load database of the .deb
    directly (no R needed): data/Rdata.rdx (gzip, R serialization) gives the offsets of each
    novel in data/Rdata.rdb (4-byte big-endian length + zlib stream of an R serialized
    character vector, one element per line of the book).
    Split assignment (disjoint books): train = Sense and Sensibility, dev = Northanger Abbey,
    eval = Persuasion; the first ~TARGET_BYTES bytes of whole paragraphs of each.
  * Word lists: the PyPI package `wonderwords` (MIT, Maxim Rebguns) -- the same lists RULER
    draws its needle keys from. Lower-case alphabetic words of 3..12 letters, minus the
    package's own profanity list, are partitioned between the splits by SHA-256 of the word
    (first byte mod 5: 0,1 -> eval; 2 -> dev; 3,4 -> train), so the key vocabularies of the
    splits are disjoint.

Usage: python3 src/eval/corpus/make_resources.py [--deb r-cran-janeaustenr_*.deb] [--wheel wonderwords-*.whl]
Without arguments it runs `apt-get download r-cran-janeaustenr` and
`pip download --no-deps wonderwords` into a temporary directory.
"""
import argparse
import glob
import gzip
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile
import unicodedata
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_BYTES = 160_000
BOOKS = {"train": "sensesensibility", "dev": "northangerabbey", "eval": "persuasion"}
BOOK_TITLES = {"sensesensibility": "Sense and Sensibility (1811)",
               "northangerabbey": "Northanger Abbey (1817)",
               "persuasion": "Persuasion (1817)"}


# --- a minimal reader of R's XDR serialization (enough for character vectors and lists) -------
class RReader:
    def __init__(self, data):
        self.d = data
        self.p = 0
        self.refs = []

    def int(self):
        (v,) = struct.unpack(">i", self.d[self.p:self.p + 4])
        self.p += 4
        return v

    def header(self):
        if self.d[:2] != b"X\n":
            raise ValueError("not an XDR R serialization")
        self.p = 2
        version = self.int()
        self.int()
        self.int()
        if version == 3:
            n = self.int()
            self.p += n

    def item(self):
        flags = self.int()
        t = flags & 0xFF
        has_attr = bool(flags & (1 << 9))
        has_tag = bool(flags & (1 << 10))
        if t == 254:  # NILVALUE
            return None
        if t == 255:  # REFSXP
            idx = flags >> 8
            if idx == 0:
                idx = self.int()
            return self.refs[idx - 1]
        if t == 1:  # SYMSXP
            name = self.item()
            self.refs.append(name)
            return name
        if t == 9:  # CHARSXP
            n = self.int()
            if n == -1:
                return None
            s = self.d[self.p:self.p + n].decode("utf-8", errors="replace")
            self.p += n
            return s
        if t in (2, 6):  # LISTSXP / LANGSXP: pairlist
            out = []
            while True:
                attr = self.item() if has_attr else None
                tag = self.item() if has_tag else None
                car = self.item()
                out.append((tag, car))
                nflags = self.int()
                nt = nflags & 0xFF
                if nt == 254:
                    break
                if nt not in (2, 6):
                    self.p -= 4
                    out.append((None, self.item()))
                    break
                has_attr = bool(nflags & (1 << 9))
                has_tag = bool(nflags & (1 << 10))
            del attr
            return out
        if t in (13, 10):  # INTSXP, LGLSXP
            n = self.int()
            v = list(struct.unpack(">%di" % n, self.d[self.p:self.p + 4 * n]))
            self.p += 4 * n
            val = v
        elif t == 14:  # REALSXP
            n = self.int()
            v = list(struct.unpack(">%dd" % n, self.d[self.p:self.p + 8 * n]))
            self.p += 8 * n
            val = v
        elif t in (16, 19, 20):  # STRSXP, VECSXP, EXPRSXP
            n = self.int()
            val = [self.item() for _ in range(n)]
        else:
            raise ValueError("unsupported R type %d" % t)
        if has_attr:
            attrs = self.item()
            names = [c for tag, c in attrs if tag == "names"]
            if names and isinstance(val, list):
                return dict(zip(names[0], val))
        return val


def read_r(data):
    r = RReader(data)
    r.header()
    return r.item()


def austen_books(deb):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
        ddir = os.path.join(tmp, "usr/lib/R/site-library/janeaustenr/data")
        index = read_r(gzip.open(os.path.join(ddir, "Rdata.rdx")).read())
        blob = open(os.path.join(ddir, "Rdata.rdb"), "rb").read()
        books = {}
        for name, (offset, length) in index["variables"].items():
            chunk = blob[offset:offset + length]
            raw = zlib.decompress(chunk[4:])
            books[name] = read_r(raw)
        return books


HEADING = re.compile(r"^(CHAPTER|Chapter|VOLUME|Volume)\b|^[IVXLC]+\.?$|^[A-Z0-9 .,'()-]+$")


def clean_paragraphs(lines):
    """Joins the book's lines into paragraphs; drops headings, italics underscores, non-ASCII."""
    paras, cur = [], []
    for line in lines + [""]:
        line = (line or "").strip()
        if not line:
            if cur:
                paras.append(" ".join(cur))
                cur = []
            continue
        cur.append(line)
    out = []
    for p in paras:
        if HEADING.match(p) or p.startswith("by Jane Austen") or len(p.split()) < 4:
            continue
        p = p.replace("_", "")
        p = unicodedata.normalize("NFKD", p).encode("ascii", "ignore").decode("ascii")
        p = re.sub(r"\s+", " ", p).strip()
        if ")KC\"" in p:
            raise ValueError("raw-string delimiter inside the text")
        out.append(p)
    return out


def write_corpus(books):
    for split, name in BOOKS.items():
        paras = clean_paragraphs(books[name])
        chosen, size = [], 0
        for p in paras:
            if size >= TARGET_BYTES:
                break
            chosen.append(p)
            size += len(p) + 1
        path = os.path.join(HERE, "austen_%s.inc" % split)
        with open(path, "w") as f:
            f.write("// %s, Jane Austen (public domain), first %d paragraphs.\n" % (BOOK_TITLES[name], len(chosen)))
            f.write("// Generated by src/eval/corpus/make_resources.py from the Debian package r-cran-janeaustenr;\n")
            f.write("// do not edit. Paragraphs are separated by newlines.\n")
            f.write('R"KC(' + "\n".join(chosen) + ')KC"\n')
        print("%s: %d paragraphs, %d bytes, %d words" % (path, len(chosen), size, sum(len(p.split()) for p in chosen)))


def split_of(word):
    b = hashlib.sha256(word.encode()).digest()[0] % 5
    return "eval" if b in (0, 1) else ("dev" if b == 2 else "train")


def write_words(wheel):
    with zipfile.ZipFile(wheel) as z:
        def lst(name):
            return z.read("wonderwords/assets/%s" % name).decode().split()
        profane = set(w.lower() for w in lst("profanitylist.txt"))
        lists = {"adjectives": lst("adjectivelist.txt"), "nouns": lst("nounlist.txt"), "verbs": lst("verblist.txt")}
    seen = set()
    table = {s: {k: [] for k in lists} for s in BOOKS}
    for kind, words in lists.items():
        for w in words:
            if not re.fullmatch(r"[a-z]{3,12}", w) or w in profane or w in seen:
                continue
            seen.add(w)
            table[split_of(w)][kind].append(w)
    path = os.path.join(HERE, "word_lists.inc")
    with open(path, "w") as f:
        f.write("// Word lists of the PyPI package wonderwords 3.0.1 (MIT, Maxim Rebguns), partitioned between\n")
        f.write("// the splits by SHA-256 of the word. Generated by src/eval/corpus/make_resources.py; do not edit.\n")
        f.write("// Each entry: {split, kind, space-separated words}.\n")
        for s in ("train", "dev", "eval"):
            for kind in lists:
                ws = sorted(table[s][kind])
                f.write('{"%s", "%s",\n' % (s, kind))
                for i in range(0, len(ws), 12):
                    f.write('  "%s "\n' % " ".join(ws[i:i + 12]))
                f.write("},\n")
                print("%s %s: %d words" % (s, kind, len(ws)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deb")
    ap.add_argument("--wheel")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        deb = args.deb
        if not deb:
            subprocess.run(["apt-get", "download", "r-cran-janeaustenr"], cwd=tmp, check=True)
            deb = glob.glob(os.path.join(tmp, "r-cran-janeaustenr_*.deb"))[0]
        wheel = args.wheel
        if not wheel:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", tmp, "wonderwords==3.0.1"], check=True)
            wheel = glob.glob(os.path.join(tmp, "wonderwords-*.whl"))[0]
        write_corpus(austen_books(deb))
        write_words(wheel)


if __name__ == "__main__":
    main()
