#!/usr/bin/env python3
"""Writes tests/model/data/pretokenizer_cases.json: strings split by the original regexes of
llama.cpp's BPE pre-tokenizers, evaluated by Python's `regex` module (Debian python3-regex
or PyPI regex): an implementation independent of tpnode's hand-written splitters
(model/pretokenizer.cc), which tests/model/pretokenizer_test.cc checks against this file.

  python3 tools/gen_pretokenizer_cases.py [--count 250] [--seed 1]

"default", "falcon" and "starcoder" are llama.cpp's chains of regexes: each splits the pieces
of the previous one into matches and the gaps between them. Only characters assigned since Unicode 6 are drawn,
so the category tables of ICU and of the regex module agree on them.
"""
import argparse
import json
import os
import random

import regex

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
CHAINS = {
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
    "starcoder": [r"\p{N}", GPT2],
}

HARD = [
    "", " ", "Hello world", "  leading", "trailing  ", "a  b   c", "I'm you're they'LL 'S",
    "x\r\ny\n\n z", " \n \n  ", "Zürich 2024: 3.14 ≠ π!", "数字123456789", "Привет, мир!",
    "😀😀 emoji", "e\u0301 combining", "nbsp\u00a0x", "tab\tx\t\ty", "code: if(x){return a+b;}",
    "1234567 12 1", "''s'''t", "\u2028line sep", "١٢٣٤ arabic digits", "Ⅻ roman", "½ frac",
    "'", "\n", "?!.", " ?!", "..\r\n", "x \u3000 y", "$100 + 20% = <tag>^~|", "a\u200bb",
    "नमस्ते दुनिया", "👩\u200d💻 dev", "¿Qué? ¡Sí!", "C++ -> foo::bar()", "   \t\n",
]
POOL = (list("aZé ü1 9\t\n\r'.,!?-_ sStTrReEvVlLmMdD$+<=>^~|`\"#%&()*;@[]{}\\/")
        + ["π", "≠", "数", "字", "😀", "\u0301", "\u00a0", "\u2003", "٣", "½", "Ⅻ", "ª", "\u3000",
           "\u200b", "€", "¿", "—", "の", "ß", "Ж", "म", "\u094d", "\u2028", "\u0085", "²"])


def finditer_split(pattern, pieces):
    out = []
    for s in pieces:
        pos = 0
        for m in regex.finditer(pattern, s):
            if m.start() > pos:
                out.append(s[pos:m.start()])
            out.append(m.group(0))
            pos = m.end()
        if pos < len(s):
            out.append(s[pos:])
    return out


def split(pre, text):
    if pre in CHAINS:
        pieces = [text] if text else []
        for pattern in CHAINS[pre]:
            pieces = finditer_split(pattern, pieces)
        return pieces
    pattern = {"gpt-2": GPT2, "llama3": LLAMA3, "qwen2": QWEN2}[pre]
    return [m.group(0) for m in regex.finditer(pattern, text)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=250)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    texts = HARD + ["".join(rng.choice(POOL) for _ in range(rng.randint(1, 24)))
                    for _ in range(args.count)]
    cases = [{"pre": pre, "text": t, "words": split(pre, t)}
             for pre in ("gpt-2", "llama3", "qwen2", "default", "falcon", "starcoder")
             for t in texts]
    for c in cases:
        assert "".join(c["words"]) == c["text"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "tests", "model", "data", "pretokenizer_cases.json")
    with open(path, "w", encoding="ascii") as f:
        json.dump({"generator": "tools/gen_pretokenizer_cases.py", "seed": args.seed,
                   "cases": cases}, f, indent=0)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
