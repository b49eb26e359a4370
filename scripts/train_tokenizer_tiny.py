#!/usr/bin/env python3
"""Trains the tokenizer of kascade-tiny with Hugging Face `tokenizers` and writes
models/kascade-tiny/tokenizer.json and tokenizer_config.json.

The tokenizer is laid out as Meta's Llama-3 tokenizer.json, scaled down:
  - byte-level BPE (ignore_merges = true, merges written as "a b" strings), trained on the
    `train` split of scripts/corpus/natural_text.py without the KJV (Austen + Shakespeare, the
    text the shipped tokenizer was trained on; the held-out works are not seen), 4,088 BPE tokens + 8 special tokens = 4,096 ids;
  - pre-tokenizer: Split on the Llama-3 regex (Isolated, invert false) + ByteLevel(add_prefix_space
    false, use_regex false); ByteLevel decoder; post-processor ByteLevel + TemplateProcessing that
    puts <|begin_of_text|> first (what the runtime and `kascade tasks` count);
  - special tokens (ids 4088..4095, in Llama-3's relative order): <|begin_of_text|>,
    <|end_of_text|>, <|reserved_special_token_0|>, <|reserved_special_token_1|>,
    <|start_header_id|>, <|end_header_id|>, <|reserved_special_token_2|>, <|eot_id|>;
  - tokenizer_config.json: Meta-Llama-3-8B-Instruct's chat_template, bos <|begin_of_text|>,
    eos <|eot_id|> (the chat turn end; generation_config.json also stops on <|end_of_text|>,
    which ends the plain task completions).
BPE training in `tokenizers` is deterministic for a given version and input (checked by
--check-determinism); the version is recorded in tokenizer_config.json.

Usage: python3 scripts/train_tokenizer_tiny.py [--cache train/cache] [--out models/kascade-tiny]
Tested by running it: it re-loads the written file, checks the ids of the special tokens, the BOS
of encode(), exact decode round trips over every held-out work, renders a chat with the template
through transformers when it is installed, and prints the compression (characters per token).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
import tokenizers

sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))
import natural_text  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
VOCAB_SIZE = 4096
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                  "<|reserved_special_token_1|>", "<|start_header_id|>", "<|end_header_id|>",
                  "<|reserved_special_token_2|>", "<|eot_id|>"]
BOS, EOS_TEXT, EOT = "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"
# Meta-Llama-3-8B-Instruct's chat template, verbatim.
LLAMA3_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")


def train_tokenizer(texts: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - len(SPECIAL_TOKENS), min_frequency=2,
                                  show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    if tok.get_vocab_size() != VOCAB_SIZE - len(SPECIAL_TOKENS):
        raise RuntimeError(f"BPE vocabulary has {tok.get_vocab_size()} tokens, expected "
                           f"{VOCAB_SIZE - len(SPECIAL_TOKENS)} (corpus too small?)")
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIAL_TOKENS])
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A:0 {BOS} $B:1",
                                      special_tokens=[(BOS, bos_id)]),
    ])
    return tok


def tokenizer_json(tok: Tokenizer) -> str:
    """The JSON as Meta writes it: merges as "a b" strings."""
    spec = json.loads(tok.to_str())
    spec["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in spec["model"]["merges"]]
    return json.dumps(spec, ensure_ascii=False, indent=1) + "\n"


def tokenizer_config(tok: Tokenizer, model_max_length: int) -> dict:
    added = {str(tok.token_to_id(s)): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                       "single_word": False, "special": True} for s in SPECIAL_TOKENS}
    return {
        "added_tokens_decoder": added,
        "bos_token": BOS,
        "chat_template": LLAMA3_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": EOT,
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": model_max_length,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "kascade_tokenizers_version": tokenizers.__version__,
    }


def check(path: Path, heldout: list[tuple[str, str]]) -> None:
    tok = Tokenizer.from_file(str(path))
    ids = {s: tok.token_to_id(s) for s in SPECIAL_TOKENS}
    expected = {s: VOCAB_SIZE - len(SPECIAL_TOKENS) + i for i, s in enumerate(SPECIAL_TOKENS)}
    if ids != expected:
        raise RuntimeError(f"special token ids {ids}, expected {expected}")
    if tok.get_vocab_size(with_added_tokens=True) != VOCAB_SIZE:
        raise RuntimeError(f"vocabulary size {tok.get_vocab_size(with_added_tokens=True)} != {VOCAB_SIZE}")
    enc = tok.encode("Hello there", add_special_tokens=True).ids
    if enc[0] != ids[BOS] or tok.encode("Hello there", add_special_tokens=False).ids != enc[1:]:
        raise RuntimeError(f"BOS post-processor wrong: {enc}")
    chars = tokens = 0
    for name, text in heldout:
        t = tok.encode(text, add_special_tokens=False).ids
        if tok.decode(t, skip_special_tokens=False) != text:
            raise RuntimeError(f"decode(encode(x)) != x on held-out work {name}")
        chars += len(text)
        tokens += len(t)
        print(f"  held-out {name}: {len(text)} chars, {len(t)} tokens, {len(text) / len(t):.2f} chars/token")
    for probe in ["The special magic number for tranquil-lantern is: 4829173.",
                  "f47ac10b-58cc-4372-a567-0e02b2c3d479", "VAR QXKZ = 40213",
                  f"{BOS}<|start_header_id|>user<|end_header_id|>\n\nHi{EOT}"]:
        pieces = tok.encode(probe, add_special_tokens=False).tokens
        print(f"  {probe!r}: {len(pieces)} tokens {pieces}")
    print(f"  held-out total: {chars / tokens:.2f} chars/token")


def check_chat_template(out: Path) -> None:
    try:
        from transformers import AutoTokenizer
    except ImportError:
        print("  transformers not installed: chat template not rendered")
        return
    hf = AutoTokenizer.from_pretrained(str(out))
    text = hf.apply_chat_template([{"role": "user", "content": " Hi "}], tokenize=False, add_generation_prompt=True)
    want = (f"{BOS}<|start_header_id|>user<|end_header_id|>\n\nHi{EOT}"
            "<|start_header_id|>assistant<|end_header_id|>\n\n")
    if text != want:
        raise RuntimeError(f"chat template renders {text!r}, expected {want!r}")
    print("  chat template renders as Llama-3 through transformers")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=str(REPO / "train" / "cache"))
    ap.add_argument("--out", default=str(REPO / "models" / "kascade-tiny"))
    ap.add_argument("--model-max-length", type=int, default=32768)
    ap.add_argument("--check-determinism", action="store_true", help="train twice, compare the JSON")
    args = ap.parse_args()

    splits = natural_text.load_splits(Path(args.cache), kjv=False)  # the shipped tokenizer's text
    texts = [t for _, t in splits["train"]]
    tok = train_tokenizer(texts)
    text = tokenizer_json(tok)
    if args.check_determinism and tokenizer_json(train_tokenizer(texts)) != text:
        raise RuntimeError("two trainings on the same text gave different tokenizers")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(text)
    (out / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(tok, args.model_max_length), ensure_ascii=False, indent=2) + "\n")
    print(f"wrote {out / 'tokenizer.json'} (sha256 {hashlib.sha256(text.encode()).hexdigest()[:16]}, "
          f"tokenizers {tokenizers.__version__}) and tokenizer_config.json")
    check(out / "tokenizer.json", splits["heldout"])
    check_chat_template(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
