#!/usr/bin/env python3
"""Writes the tokenizer test fixtures of kascade (tests/data/tokenizer/) and the generated Unicode
tables of src/tokenizer/ (onig_unicode_tables.cpp, nfc_tables.cpp).

What it makes, all from a fixed seed (the script is deterministic for one `tokenizers` version,
which it records in every fixture file):
  - Two small byte-level BPE tokenizers trained with Hugging Face `tokenizers` on a corpus this
    script generates itself (no downloaded text): "llama3" with exactly the Llama-3 pre-tokenizer
    (Split on the Llama-3 regex, Isolated, invert false + ByteLevel(add_prefix_space=false,
    use_regex=false)), ByteLevel decoder, the BOS TemplateProcessing post-processor, merges written in
    the "a b" string form and ignore_merges=true as in Meta's file; and "qwen2" with Qwen2's regex,
    NFC normalizer, ChatML special tokens, no BOS, merges in the [a, b] list form and the non-special
    added tokens <think> / </think> of Qwen3.
  - >= 1,000 varied test strings per tokenizer with the ids `tokenizers` produces (with and without
    special tokens) and the decoded texts (with and without skip_special_tokens), plus random id
    sequences and their decoded texts (invalid UTF-8 byte sequences included).
  - Variants of the qwen2 tokenizer (added-token flags lstrip/rstrip/single_word/normalized, GPT-2
    style ByteLevel(use_regex=true, add_prefix_space=true), Split with a String pattern), each with
    its own expected ids.
  - Oniguruma's (the regex engine inside `tokenizers`) sets for \\p{L}, \\p{N} and \\s over every
    code point, as ranges, and `tokenizers`' NFC of every code point (NFD form and composed form).
  - The C++ tables of src/tokenizer/: onig_unicode_tables.cpp (those Oniguruma classes) and
    nfc_tables.cpp (NFC data probed from `tokenizers`, whose Unicode tables are older than Python's).
  - Chat templates (tokenizer_config.json files authored here in the Llama-3, Llama-3.1, ChatML,
    Qwen2 and Qwen3 layouts, one Qwen3 variant refusing conversations without a user query) and conversations rendered with jinja2 the way transformers'
    apply_chat_template does (sandboxed environment, trim_blocks, lstrip_blocks).

Usage: python3 scripts/make_tokenizer_fixtures.py [--out tests/data/tokenizer]
Needs: pip install tokenizers jinja2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import unicodedata
from pathlib import Path

import jinja2
import tokenizers
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                  "<|reserved_special_token_1|>", "<|start_header_id|>", "<|end_header_id|>",
                  "<|reserved_special_token_2|>", "<|eot_id|>"]
QWEN2_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN3_NON_SPECIAL = ["<think>", "</think>"]
VOCAB_SIZE = 2500
SEED = 20240611

# ----------------------------------------------------------------------------------------------
# Word lists for the generated corpus and the test strings (written for this script).
# ----------------------------------------------------------------------------------------------
ENGLISH = """the of and to in is was for that on with as by at from his her they we you it this
be are have has had not but what all were when there can an which their said if do will each about
how up out them then she many some so these would other into more time two way could see than
first water been call who its now find long down day did get come made may part over new sound take
only little work know place year live me back give most very after thing our just name good sentence
man think say great where help through much before line right too mean old any same tell boy follow
came want show also around form three small set put end does another well large must big even such
because turn here why ask went men read need land different home us move try kind hand picture again
change off play spell air away animal house point page letter mother answer found study still learn
should world high every near add food between own below country plant last school father keep tree
never start city earth eye light thought head under story saw left few while along might close
something seem next hard open example begin life always those both paper together got group often run
important until children side feet car mile night walk white sea began grow took river four carry
state once book hear stop without second later miss idea enough eat face watch far really almost let
above girl sometimes mountain cut young talk soon list song being leave family kernel attention
token model layer memory index budget sparse dense anchor reuse query key value cache prefill decode
tensor matrix vector compute parallel thread block warp shared global buffer stream event device host
""".split()
FRENCH = "été déjà où garçon français hôpital forêt crème brûlée naïve cœur œuvre très après ça être".split()
GERMAN = "Straße Mädchen Größe über schön Fußball Bäume grün Übung Äpfel Öl heißen müssen".split()
SPANISH = "niño año mañana corazón canción señor árbol está información también pingüino".split()
VIETNAMESE = "Tiếng Việt người những được không nước Hà Nội thành phố cảm ơn".split()
RUSSIAN = ("привет мир книга человек время работа слово жизнь рука город земля вопрос дом сторона "
           "страна голова ребёнок сила конец вид система часть").split()
GREEK = "καλημέρα κόσμος αλφάβητο θάλασσα ήλιος φίλος γλώσσα πόλη νερό ψυχή".split()
ARABIC = "مرحبا العالم كتاب مدرسة السلام عليكم شكرا جميل بيت قلم لغة العربية مدينة".split()
HEBREW = "שלום עולם ספר בית ילד מים אור ארץ".split()
HINDI = "नमस्ते दुनिया भारत हिन्दी किताब पानी घर विद्यालय धन्यवाद प्रेम मित्र संस्कृत".split()
BENGALI = "আমি বাংলা ভাষা ভালোবাসি".split()
TAMIL = "வணக்கம் தமிழ் மொழி".split()
THAI = "สวัสดี ประเทศไทย ภาษาไทย ขอบคุณ".split()
CHINESE = ("你好 世界 中国 北京 上海 学习 语言 模型 注意力 稀疏 计算 我们 他们 今天 明天 时间 问题 "
           "大家 朋友 工作 电脑 数据 汉字 繁體 龍").split()
JAPANESE = "こんにちは 世界 日本語 カタカナ ひらがな 東京 ありがとう ラーメン コンピューター".split()
KOREAN = "안녕하세요 세계 한국어 서울 감사합니다 사랑 학교 컴퓨터".split()
EMOJI = ["😀", "😂", "🥲", "❤️", "👍", "👍🏽", "🎉", "🔥", "🤗", "🚀", "🌍", "✨", "☕", "⚡",
         "👨‍👩‍👧‍👦", "👩🏾‍💻", "🏳️‍🌈", "🧑‍🤝‍🧑", "❤️‍🔥", "🇺🇸", "🇯🇵", "🇫🇷", "🇮🇳",
         "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "1️⃣", "#️⃣", "©️", "™", "🫠", "🫶🏻"]
CODE = [
    "def {n}(x, y=3):\n    return x * y + {d}\n",
    "for (int i = 0; i < {d}; ++i) {{\n\tsum += a[i] * b[i];\n}}\n",
    "if (err != nullptr) {{ return Status::{n}(\"bad\"); }}",
    "{{\"{n}\": [{d}, {d}, null], \"ok\": true}}",
    "<div class=\"{n}\"><p>{n}</p></div>",
    "SELECT {n}, COUNT(*) FROM t WHERE id >= {d} GROUP BY {n};",
    "const {n} = async () => {{ await fetch('/api/{n}?q={d}'); }};",
    "#include <vector>\nstd::vector<float> {n}({d}, 0.0f);",
    "x = np.zeros(({d}, {d}), dtype=np.float32)  # {n}",
    "$ git commit -m \"{n}: fix {d} issues\" && make -j{d}",
    "    let {n}: Vec<u32> = (0..{d}).collect();\r\n",
    "a[{d}] += b->{n}[i] << 2 | (c & 0xff) ^ ~d;",
]
# Letters and digits Unicode 15 and 16 added (PCRE2 builds of an older Unicode miss them).
NEW_UNICODE = ["\U00031350\U00031351", "\U0002EBF0", "\U00011F04\U00011F05", "\u1C89\u1C8A",
               "\U0001E4D0\U0001E4D1", "\U0001D2C0", "\U000105C0\U000105C1", "\U00011F50"]
WHITESPACE = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\u00a0", "\u3000",
              "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\u2003", "\u202f", "\u1680", "\u205f",
              "\x1c", "\x1f", "\u200b", "\ufeff", "\u180e"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D",
                "'Ll", "'rE", "’s", "'ſ", "''", "'x", "'"]
ODD = ["\ufffd", "\u0301", "\u0301\u0301", "\x00", "\x01", "\x7f", "\x1b[31m", "\\x80", "\\u00e9",
       "\uffff", "\ufffe", "\ue000", "\U0010ffff", "\U000e0001", "\u200d", "\u200c", "\u200e", "\u202e",
       "\u2066", "Ǆǅǆ", "ﬁ", "ß", "ẞ", "İ", "ı", "K", "Å", "Ω", "½", "²", "Ⅻ", "١٢٣", "१२३", "１２３", "𝟘𝟙",
       "\u0e3f", "\u00ad", "\u034f", "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇", "e\u0301", "\u1100\u1161\u11a8",
       "A\u030a", "\u212b", "\u0958", "\u1e9b\u0323", "\u0d4a", "\U0001d15e"]


def corpus_lines(rng: random.Random, n_lines: int) -> list[str]:
    """Generated training text: sentences in many scripts, code, numbers and emoji."""
    pools = [ENGLISH] * 6 + [FRENCH, GERMAN, SPANISH, VIETNAMESE, RUSSIAN, GREEK, ARABIC, HEBREW,
                             HINDI, BENGALI, TAMIL, THAI, KOREAN]
    lines = []
    for _ in range(n_lines):
        kind = rng.random()
        if kind < 0.55:
            pool = rng.choice(pools)
            words = [rng.choice(pool) for _ in range(rng.randint(3, 14))]
            if rng.random() < 0.5:
                words[0] = words[0].capitalize()
            for i in range(len(words)):
                r = rng.random()
                if r < 0.08:
                    words[i] += rng.choice(["'s", "'ll", "'re", "'t", "'ve", "'d", "'m"])
                elif r < 0.16:
                    words[i] += rng.choice([",", ";", ":", "!", "?", "..."])
                elif r < 0.2:
                    words[i] = str(rng.randint(0, 10 ** rng.randint(1, 6)))
            lines.append(" ".join(words) + rng.choice([".", "!", "?", "", "\n"]))
        elif kind < 0.7:
            pool = rng.choice([CHINESE, JAPANESE])
            lines.append("".join(rng.choice(pool) for _ in range(rng.randint(3, 12))) + rng.choice(["。", "！", "，", ""]))
        elif kind < 0.85:
            lines.append(rng.choice(CODE).format(n=rng.choice(ENGLISH), d=rng.randint(0, 4096)))
        elif kind < 0.93:
            lines.append(" ".join(str(rng.randint(0, 10 ** rng.randint(1, 12))) for _ in range(rng.randint(2, 8))))
        else:
            lines.append(" ".join(rng.choice(EMOJI + ENGLISH) for _ in range(rng.randint(2, 8))))
    return lines


def random_word(rng: random.Random) -> str:
    pool = rng.choice([ENGLISH, ENGLISH, FRENCH, GERMAN, SPANISH, VIETNAMESE, RUSSIAN, GREEK, ARABIC,
                       HEBREW, HINDI, BENGALI, TAMIL, THAI, CHINESE, JAPANESE, KOREAN])
    word = rng.choice(pool)
    r = rng.random()
    if r < 0.1:
        return word.upper()
    if r < 0.2:
        return word.capitalize()
    return word


def random_number(rng: random.Random) -> str:
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 40)))
    r = rng.random()
    if r < 0.2:
        return "-" + digits
    if r < 0.4:
        return digits + "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 6)))
    if r < 0.5:
        return f"{rng.randint(0, 10**9):,}"
    if r < 0.6:
        return f"{rng.random():.3e}"
    return digits


def random_codepoints(rng: random.Random, n: int) -> str:
    out = []
    while len(out) < n:
        r = rng.random()
        if r < 0.5:
            c = rng.randint(0x20, 0x2FF)
        elif r < 0.8:
            c = rng.randint(0x300, 0xFFFF)
        else:
            c = rng.randint(0x10000, 0x10FFFF)
        if 0xD800 <= c <= 0xDFFF:
            continue
        out.append(chr(c))
    return "".join(out)


def test_strings(rng: random.Random, specials: list[str], n: int) -> list[str]:
    """Varied strings: every category below appears many times; a few fixed edge cases first."""
    fixed = ["", " ", "  ", "\n", "\r\n", "\t", "a", "I", "'s", "'S", "it's", "IT'S", "don't", "We'LL",
             "hello world", "Hello World!", "  leading", "trailing  ", "a  b", "a   b\n", "x\n\n\ny",
             "line1\r\nline2\r\n", "tab\tseparated\tvalues", "1", "12", "123", "1234", "12345678901234567890",
             "3.14159", "1,000,000", "你好，世界", "こんにちは世界", "안녕하세요", "مرحبا بالعالم", "नमस्ते दुनिया",
             "👨‍👩‍👧‍👦", "🇺🇸🇯🇵", "e\u0301", "\u00e9", "Å", "\u212b", "\ufffd", "\x00", "a\x85b", "a\u00a0b",
             "a\u3000b", "  \n  ", " \u2028 ", "\x0b\x0c", "'ſ", "'\u017f", "x'ſ", "’s"]
    fixed += specials + ["".join(specials), specials[0] + "a", "a" + specials[0], " " + specials[-1] + " ",
                         specials[-1] + specials[-1], "<|", "|>", specials[0][:-1], specials[0][1:],
                         "<" + specials[0] + ">", specials[0].upper(), "x" + specials[0] + "\n" + specials[-1] + "y"]
    fixed += NEW_UNICODE + ["a" + s + "b" for s in NEW_UNICODE] + ODD + WHITESPACE
    out = list(fixed)

    def piece() -> str:
        r = rng.random()
        if r < 0.30:
            return random_word(rng)
        if r < 0.40:
            return rng.choice(WHITESPACE)
        if r < 0.50:
            return random_number(rng)
        if r < 0.58:
            return rng.choice(CONTRACTIONS)
        if r < 0.66:
            return rng.choice(EMOJI)
        if r < 0.72:
            return rng.choice(CODE).format(n=rng.choice(ENGLISH), d=rng.randint(0, 99999))
        if r < 0.78:
            return rng.choice(specials)
        if r < 0.84:
            return rng.choice(ODD)
        if r < 0.88:
            return rng.choice(NEW_UNICODE)
        if r < 0.94:
            return rng.choice(".,;:!?-_()[]{}<>\"'`~@#$%^&*+=/\\|") * rng.randint(1, 4)
        return random_codepoints(rng, rng.randint(1, 6))

    while len(out) < n:
        r = rng.random()
        if r < 0.75:
            parts = [piece() for _ in range(rng.randint(1, 12))]
            joiner = rng.choice(["", " ", " ", " ", "\n"])
            out.append(joiner.join(parts))
        elif r < 0.85:
            out.append(random_codepoints(rng, rng.randint(1, 40)))
        elif r < 0.93:
            out.append(" ".join(random_word(rng) for _ in range(rng.randint(5, 30))))
        else:
            # long-ish text: a paragraph with everything mixed in
            out.append("".join(piece() + rng.choice(["", " ", "\n", "  "]) for _ in range(rng.randint(12, 40))))
    return out


# ----------------------------------------------------------------------------------------------
# Tokenizers
# ----------------------------------------------------------------------------------------------
def train(name: str, pattern: str, rng: random.Random) -> Tokenizer:
    tok = Tokenizer(models.BPE(ignore_merges=(name == "llama3")))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=name == "llama3", use_regex=False),
    ])
    if name == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus_lines(rng, 30000), trainer=trainer)
    if name == "llama3":
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in LLAMA3_SPECIAL])
        bos_id = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                          pair="<|begin_of_text|> $A:0 <|begin_of_text|> $B:1",
                                          special_tokens=[("<|begin_of_text|>", bos_id)]),
        ])
    else:
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in QWEN2_SPECIAL])
        tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in QWEN3_NON_SPECIAL])
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def finalize_json(name: str, tok: Tokenizer) -> str:
    """Shapes the saved JSON like the real files: Llama-3 writes merges as "a b" strings, Qwen2 writes
    empty strings for the unused subword prefix/suffix."""
    spec = json.loads(tok.to_str())
    if name == "llama3":
        spec["model"]["merges"] = [" ".join(m) for m in spec["model"]["merges"]]
    else:
        spec["model"]["continuing_subword_prefix"] = ""
        spec["model"]["end_of_word_suffix"] = ""
    return json.dumps(spec, ensure_ascii=False, indent=1)


def encode_cases(tok: Tokenizer, texts: list[str]) -> list[dict]:
    """To keep the files small, fields that repeat others are left out or written as a difference:
    encode with special tokens is "ids" itself when no "ids_special" is given, or "special_prefix" +
    "ids" + "special_suffix" when those are given; "decoded" (decode(ids) keeping special tokens) is
    "text" when not given; "decoded_skip" (skip_special_tokens=True) is "decoded"
    when not given."""
    cases = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False).ids
        ids_special = tok.encode(text, add_special_tokens=True).ids
        decoded = tok.decode(ids, skip_special_tokens=False)
        decoded_skip = tok.decode(ids, skip_special_tokens=True)
        case = {"text": text, "ids": ids}
        if ids_special != ids:
            k = next((k for k in range(len(ids_special) - len(ids) + 1) if ids_special[k:k + len(ids)] == ids), None)
            if k is None:
                case["ids_special"] = ids_special
            else:
                case["special_prefix"] = ids_special[:k]
                case["special_suffix"] = ids_special[k + len(ids):]
        if decoded != text:
            case["decoded"] = decoded
        if decoded_skip != decoded:
            case["decoded_skip"] = decoded_skip
        cases.append(case)
    return cases


def decode_cases(tok: Tokenizer, rng: random.Random, n: int) -> list[dict]:
    """Random id sequences: byte tokens that do not form valid UTF-8, special tokens in between."""
    size = tok.get_vocab_size(with_added_tokens=True)
    model_size = tok.get_vocab_size(with_added_tokens=False)
    out = []
    for _ in range(n):
        ids = []
        for _ in range(rng.randint(0, 12)):
            r = rng.random()
            if r < 0.55:
                ids.append(rng.randrange(0, 256))  # single-byte tokens of the trained alphabet
            elif r < 0.85:
                ids.append(rng.randrange(0, model_size))
            else:
                ids.append(rng.randrange(model_size, size))
        out.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                    "text_skip": tok.decode(ids, skip_special_tokens=True)})
    return out


def dump_cases(path: Path, header: dict, key_lists: dict[str, list]) -> None:
    """One case per line, so diffs stay readable."""
    with path.open("w", encoding="utf-8") as f:
        f.write("{\n")
        for k, v in header.items():
            f.write(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n")
        items = list(key_lists.items())
        for i, (k, rows) in enumerate(items):
            f.write(f"{json.dumps(k)}: [\n")
            f.write(",\n".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in rows))
            f.write("\n]" + ("," if i + 1 < len(items) else "") + "\n")
        f.write("}\n")


def variant_specs(base_text: str) -> list[tuple[str, dict]]:
    """Top-level field overrides applied to the qwen2 tokenizer.json."""
    flagged = Tokenizer.from_str(base_text)
    flagged.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True, normalized=False, special=True),
                                AddedToken("<R>", rstrip=True, normalized=False, special=True),
                                AddedToken("the", normalized=True, special=True)])
    flagged.add_tokens([AddedToken("word", single_word=True, normalized=False, special=False),
                        AddedToken("<L>", lstrip=True, normalized=False, special=False),
                        AddedToken("é x", normalized=False, special=False),
                        AddedToken("Å", normalized=True, special=False),
                        AddedToken("ab", single_word=True, lstrip=True, rstrip=True, normalized=True, special=False)])
    added = json.loads(flagged.to_str())["added_tokens"]
    gpt2 = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    split_string = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    return [("added_flags", {"added_tokens": added}),
            ("gpt2_byte_level", {"pre_tokenizer": gpt2, "normalizer": None}),
            ("split_string", {"pre_tokenizer": split_string})]


def variant_strings(rng: random.Random, n: int) -> list[str]:
    words = ["<mask>", "word", "<L>", "<R>", "é x", "Å", "A\u030a", "the", "The", "ab", "abc", " ", "  ",
             "\t", "\n", "\u2000", "x", "swords", "word,", "(word)", "wordy", "_word", "ⓐ", "Ǆ", "\u0301",
             "<|im_start|>", "<think>", "1", "hello", "'s", "日本", "🤗"]
    out = ["", " ", "<mask>", " <mask> ", "word", " word ", "wordword", "a<L>b", "a <L> b", "<R>  x",
           "é x", "é  x", "Å", "A\u030a", "the", "bathe", "ab", " ab ", "cab", "\u2000<mask>\u2000",
           "<mask>\t<mask>", "x<mask>word<R>ab"]
    while len(out) < n:
        out.append("".join(rng.choice(words) + rng.choice(["", "", " ", "  "]) for _ in range(rng.randint(1, 10))))
    return out


# ----------------------------------------------------------------------------------------------
# Unicode tables (Oniguruma classes, NFC)
# ----------------------------------------------------------------------------------------------
ALL_CODEPOINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def onig_class(pattern: str) -> list[list[int]]:
    """Code point ranges [lo, hi] that Oniguruma (inside `tokenizers`) matches with `pattern`."""
    text = "".join(chr(c) for c in ALL_CODEPOINTS)
    removed = pre_tokenizers.Split(Regex(pattern), behavior="removed")
    member = [True] * len(ALL_CODEPOINTS)
    for _, (a, b) in removed.pre_tokenize_str(text):
        for i in range(a, b):
            member[i] = False
    ranges: list[list[int]] = []
    for i, c in enumerate(ALL_CODEPOINTS):
        if member[i]:
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1][1] = c
            else:
                ranges.append([c, c])
    return ranges


def write_unicode_tables(out: Path, src: Path) -> None:
    classes = {"L": onig_class(r"\p{L}"), "N": onig_class(r"\p{N}"), "White_Space": onig_class(r"\s")}
    with (out / "onig_classes.json").open("w", encoding="utf-8") as f:
        json.dump({"tokenizers_version": tokenizers.__version__, "classes": classes}, f, separators=(",", ":"))
        f.write("\n")
    lines = [
        "// onig_unicode_tables.cpp — GENERATED by scripts/make_tokenizer_fixtures.py; do not edit.",
        f"// The code point sets Oniguruma (the regex engine of Hugging Face tokenizers {tokenizers.__version__})",
        "// matches with \\p{L}, \\p{N} and \\s. The pre-tokenizer regex translation (regex_translate.cpp)",
        "// adds whatever the linked PCRE2's own Unicode tables lack; tests/unit/tokenizer checks every",
        "// code point against tests/data/tokenizer/onig_classes.json.",
        '#include "tokenizer/onig_unicode_tables.h"',
        "",
        "namespace kascade::tokenizer_detail {",
        "",
    ]
    for name, ident in [("L", "kOnigLetter"), ("N", "kOnigNumber"), ("White_Space", "kOnigWhiteSpace")]:
        ranges = classes[name]
        lines.append(f"static const CodepointRange {ident}Ranges[] = {{")
        row = []
        for lo, hi in ranges:
            row.append(f"{{0x{lo:X}, 0x{hi:X}}},")
            if len(row) == 6:
                lines.append("    " + " ".join(row))
                row = []
        if row:
            lines.append("    " + " ".join(row))
        lines.append("};")
        lines.append(f"const std::span<const CodepointRange> {ident}({ident}Ranges);")
        lines.append("")
    lines.append("}  // namespace kascade::tokenizer_detail")
    (src / "onig_unicode_tables.cpp").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_nfc_tables(src: Path) -> None:
    """NFC data exactly as `tokenizers` applies it (its normalization tables are older than Python's
    or any system library's: marks added to Unicode later are starters to it). Probed from
    tokenizers itself: combining classes (a mark counts when tokenizers reorders it; the value is
    Unicode's, which never changes once assigned), full canonical decompositions (its NFD), and the
    canonical compositions it performs (primary composites that its NFC leaves composed)."""
    nfd, nfc = normalizers.NFD(), normalizers.NFC()
    ccc = {}
    decompositions = {}
    for c in ALL_CODEPOINTS:
        ch = chr(c)
        base = nfd.normalize_str(ch)
        k = unicodedata.combining(ch)
        if k:
            probe = nfd.normalize_str(ch + "\u0334") != base + "\u0334" if k > 1 else \
                nfd.normalize_str("\u0301" + ch) != "\u0301" + base
            if probe:
                ccc[c] = k
        if base != ch and not 0xAC00 <= c <= 0xD7A3:  # Hangul syllables are algorithmic
            decompositions[c] = [ord(x) for x in base]
    compositions = []
    for c in sorted(decompositions):
        one = unicodedata.decomposition(chr(c))
        if nfc.normalize_str(chr(c)) == chr(c) and one and not one.startswith("<"):
            parts = [int(x, 16) for x in one.split()]
            if len(parts) == 2:
                compositions.append((parts[0], parts[1], c))
    compositions.sort()
    ranges = []
    for c in sorted(ccc):
        if ranges and ranges[-1][1] == c - 1 and ranges[-1][2] == ccc[c]:
            ranges[-1][1] = c
        else:
            ranges.append([c, c, ccc[c]])
    lines = [
        "// nfc_tables.cpp — GENERATED by scripts/make_tokenizer_fixtures.py; do not edit.",
        f"// NFC data as Hugging Face tokenizers {tokenizers.__version__} applies it, probed from tokenizers itself",
        "// (see write_nfc_tables there). Used by nfc() in unicode_text.cpp; tests/unit/tokenizer checks",
        "// the result against tokenizers' NFC (tests/data/tokenizer/nfc.json).",
        '#include "tokenizer/nfc_tables.h"',
        "",
        "namespace kascade::tokenizer_detail {",
        "",
        "static const CombiningClassRange kCombiningClassRanges[] = {",
    ]
    row = []
    for lo, hi, k in ranges:
        row.append(f"{{0x{lo:X}, 0x{hi:X}, {k}}},")
        if len(row) == 5:
            lines.append("    " + " ".join(row))
            row = []
    if row:
        lines.append("    " + " ".join(row))
    lines += ["};", "const std::span<const CombiningClassRange> kNfcCombiningClasses(kCombiningClassRanges);", "",
              "static const Decomposition kDecompositionTable[] = {"]
    row = []
    for c in sorted(decompositions):
        parts = decompositions[c] + [0] * (4 - len(decompositions[c]))
        row.append(f"{{0x{c:X}, {len(decompositions[c])}, {{" + ", ".join(f"0x{p:X}" for p in parts) + "}},")
        if len(row) == 3:
            lines.append("    " + " ".join(row))
            row = []
    if row:
        lines.append("    " + " ".join(row))
    lines += ["};", "const std::span<const Decomposition> kNfcDecompositions(kDecompositionTable);", "",
              "static const Composition kCompositionTable[] = {"]
    row = []
    for a, b, c in compositions:
        row.append(f"{{0x{a:X}, 0x{b:X}, 0x{c:X}}},")
        if len(row) == 5:
            lines.append("    " + " ".join(row))
            row = []
    if row:
        lines.append("    " + " ".join(row))
    lines += ["};", "const std::span<const Composition> kNfcCompositions(kCompositionTable);", "",
              "}  // namespace kascade::tokenizer_detail"]
    (src / "nfc_tables.cpp").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_nfc_table(out: Path) -> None:
    """`tokenizers`' NFC of every code point that has a canonical decomposition or a combining class,
    fed both composed and decomposed (each item separated by '|' so nothing composes across items)."""
    items = []
    for c in ALL_CODEPOINTS:
        ch = chr(c)
        if unicodedata.decomposition(ch) and not unicodedata.decomposition(ch).startswith("<"):
            items.append(ch)
            items.append(unicodedata.normalize("NFD", ch))
        elif unicodedata.combining(ch):
            items.append("a" + ch + "\u0301")
    for c in range(0xAC00, 0xD7A4, 37):  # Hangul syllables, composed and as jamo, and LV + T
        items += [chr(c), unicodedata.normalize("NFD", chr(c)), chr(c - (c - 0xAC00) % 28) + "\u11a8"]
    nfc = normalizers.NFC()
    chunks = []
    for i in range(0, len(items), 400):
        text = "|".join(items[i:i + 400])
        chunks.append({"input": text, "nfc": nfc.normalize_str(text)})
    with (out / "nfc.json").open("w", encoding="utf-8") as f:
        json.dump({"tokenizers_version": tokenizers.__version__, "chunks": chunks}, f, ensure_ascii=False,
                  separators=(",", ":"))
        f.write("\n")


# ----------------------------------------------------------------------------------------------
# Chat templates (authored for these fixtures in the layouts of the model families)
# ----------------------------------------------------------------------------------------------
LLAMA3_TEMPLATE = (
    "{% for message in messages %}"
    "{% set turn = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.first %}{% set turn = bos_token + turn %}{% endif %}"
    "{{ turn }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")

LLAMA31_TEMPLATE = """{{- bos_token }}
{%- if date_string is not defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] | trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

QWEN2_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

QWEN3_TEMPLATE = """{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if '</think>' in content %}
            {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""

# Later Qwen templates refuse a conversation without a user query.
QWEN3_STRICT_TEMPLATE = QWEN3_TEMPLATE.replace(
    "{%- endfor %}\n{%- if messages[0].role == 'system' %}",
    "{%- endfor %}\n{%- if ns.multi_step_tool %}\n    {{- raise_exception('No user query found in messages.') }}\n{%- endif %}\n"
    "{%- if messages[0].role == 'system' %}", 1)
assert QWEN3_STRICT_TEMPLATE != QWEN3_TEMPLATE

CHAT_FAMILIES = {
    "llama3": (LLAMA3_TEMPLATE, "<|begin_of_text|>", "<|eot_id|>"),
    "llama31": (LLAMA31_TEMPLATE, "<|begin_of_text|>", "<|eot_id|>"),
    "chatml": (CHATML_TEMPLATE, None, "<|im_end|>"),
    "qwen2": (QWEN2_TEMPLATE, None, "<|im_end|>"),
    "qwen3": (QWEN3_TEMPLATE, None, "<|im_end|>"),
    "qwen3_strict": (QWEN3_STRICT_TEMPLATE, None, "<|im_end|>"),
}
UNRECOGNISED_TEMPLATE = ("{% for message in messages %}{{ '### ' + message['role'] + ': ' + message['content'] + '\\n' }}"
                         "{% endfor %}{% if add_generation_prompt %}{{ '### assistant: ' }}{% endif %}")


def jinja_env() -> ImmutableSandboxedEnvironment:
    """The environment transformers' apply_chat_template compiles templates in (minus strftime_now,
    so that dates come from the template's own fallback and the fixtures stay deterministic)."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None: json.dumps(x, ensure_ascii=ensure_ascii, indent=indent)
    env.globals["raise_exception"] = raise_exception
    return env


def chat_content(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.5:
        text = " ".join(random_word(rng) for _ in range(rng.randint(1, 6)))
    elif r < 0.6:
        text = rng.choice(CODE).format(n=rng.choice(ENGLISH), d=rng.randint(0, 999))
    elif r < 0.7:
        text = "<think>\n" + " ".join(random_word(rng) for _ in range(rng.randint(0, 5))) + "\n</think>\n\n" + random_word(rng)
    elif r < 0.75:
        text = "</think>" + random_word(rng)
    elif r < 0.8:
        text = ""
    else:
        text = random_word(rng) + rng.choice(["<|eot_id|>", "<|im_end|>", "\n\n", "'s", "😀", " 42"]) + random_word(rng)
    pad = ["", "", " ", "\n", "  \n", "\t", "\u00a0", "\u3000", "\x1c", "\u200b", "\x85"]
    return rng.choice(pad) + text + rng.choice(pad)


def chat_conversations(rng: random.Random, n: int) -> list[list[dict]]:
    convs = [[{"role": "user", "content": "Hello!"}],
             [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
             [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}],
             [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>\nhm\n</think>\n\nA"}],
             [{"role": "system", "content": "  padded system  "}],
             [{"role": "assistant", "content": "only assistant"}]]
    while len(convs) < n:
        conv = []
        if rng.random() < 0.5:
            conv.append({"role": "system", "content": chat_content(rng)})
        for turn in range(rng.randint(1, 3)):
            conv.append({"role": "user", "content": chat_content(rng)})
            if rng.random() < 0.75 or turn == 0:
                conv.append({"role": "assistant", "content": chat_content(rng)})
        if rng.random() < 0.4:
            conv.pop()  # often end on a user turn, sometimes on an assistant turn
        if rng.random() < 0.1:
            conv.insert(rng.randint(1, len(conv)), {"role": "system", "content": chat_content(rng)})
        convs.append(conv)
    return convs


def write_chat_fixtures(out: Path, rng: random.Random) -> None:
    env = jinja_env()
    chat_dir = out / "chat"
    chat_dir.mkdir(exist_ok=True)
    convs = chat_conversations(rng, 24)
    cases = []
    for family, (template, bos, eos) in CHAT_FAMILIES.items():
        config = {"chat_template": template, "eos_token": eos}
        if bos is not None:
            config["bos_token"] = bos
        (chat_dir / f"{family}.tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=2) + "\n",
                                                                   encoding="utf-8")
        compiled = env.from_string(template)
        option_sets = [{"add_generation_prompt": True}, {"add_generation_prompt": False}]
        if family.startswith("qwen3"):
            option_sets += [{"add_generation_prompt": True, "enable_thinking": False},
                            {"add_generation_prompt": True, "enable_thinking": True}]
        if family == "llama31":
            option_sets += [{"add_generation_prompt": True, "date_string": "01 Jan 2025"}]
        for conv in convs:
            for options in option_sets:
                kwargs = dict(options)
                try:
                    rendered = compiled.render(messages=conv, bos_token=bos or "", eos_token=eos, **kwargs)
                    cases.append({"family": family, "messages": conv, "options": options, "rendered": rendered})
                except jinja2.exceptions.TemplateError as e:
                    cases.append({"family": family, "messages": conv, "options": options, "error": str(e)})
    (chat_dir / "unrecognised.tokenizer_config.json").write_text(
        json.dumps({"chat_template": UNRECOGNISED_TEMPLATE, "eos_token": "</s>"}, indent=2) + "\n", encoding="utf-8")
    dump_cases(chat_dir / "chat_cases.json", {"jinja2_version": jinja2.__version__}, {"cases": cases})


# ----------------------------------------------------------------------------------------------
def main() -> None:
    root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=root / "tests" / "data" / "tokenizer")
    parser.add_argument("--src", type=Path, default=root / "src" / "tokenizer")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"

    header_common = {"tokenizers_version": tokenizers.__version__, "seed": SEED,
                     "corpus": "generated by scripts/make_tokenizer_fixtures.py (corpus_lines), no external text"}
    for name, pattern, specials in [("llama3", LLAMA3_PATTERN, LLAMA3_SPECIAL),
                                    ("qwen2", QWEN2_PATTERN, QWEN2_SPECIAL + QWEN3_NON_SPECIAL)]:
        rng = random.Random(f"{SEED}-{name}")
        trained = train(name, pattern, rng)
        text = finalize_json(name, trained)
        (args.out / f"{name}.tokenizer.json").write_text(text + "\n", encoding="utf-8")
        tok = Tokenizer.from_str(text)  # the expectations come from the file exactly as written
        texts = test_strings(rng, specials, 1050)
        header = dict(header_common, tokenizer=f"{name}.tokenizer.json",
                      vocab_size=tok.get_vocab_size(with_added_tokens=True),
                      model_vocab_size=tok.get_vocab_size(with_added_tokens=False))
        dump_cases(args.out / f"{name}.cases.json", header,
                   {"cases": encode_cases(tok, texts), "decode_cases": decode_cases(tok, rng, 200)})
        if name == "qwen2":
            base = json.loads(text)
            variants = []
            for vname, override in variant_specs(text):
                spec = dict(base, **override)
                vtok = Tokenizer.from_str(json.dumps(spec))
                vrng = random.Random(f"{SEED}-{vname}")
                variants.append({"name": vname, "override": override,
                                 "cases": encode_cases(vtok, variant_strings(vrng, 150) + test_strings(vrng, specials, 150))})
            dump_cases(args.out / "variants.json", dict(header_common, base="qwen2.tokenizer.json"), {"variants": variants})

    write_unicode_tables(args.out, args.src)
    write_nfc_tables(args.src)
    write_nfc_table(args.out)
    write_chat_fixtures(args.out, random.Random(f"{SEED}-chat"))


if __name__ == "__main__":
    main()
