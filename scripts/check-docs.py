#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Checks the Markdown a newcomer reads first, so that moving or renaming a file or a heading
# cannot leave it pointing at nothing. Standard library only; run from anywhere:
#   python3 scripts/check-docs.py
# Checked files: README.md, CONTRIBUTING.md (when it exists) and docs/*.md.
#   1. README.md has at most 200 lines: it is the front page; detail goes into docs/.
#   2. Every relative link ([text](path), ![alt](path), [id]: path) names a file or folder of
#      the repository, and a #fragment names a heading of the Markdown file it points into
#      (GitHub's anchors: lowercase, punctuation dropped, spaces as hyphens, -1, -2, ... for
#      repeats) or an explicit <a name>/id. Links with a scheme (https:, mailto:) are not fetched.
#   3. Every path written in an inline code span that begins with scripts/, examples/ or
#      include/inferkit/ exists. Spans with a placeholder (<topic>, *, {a,b}, $VAR, …) are
#      patterns, not paths, and are skipped; fenced code blocks are commands, not checked.
# Prints one line per problem, "file:line: what", and exits 1 if there was any.
import os
import re
import sys
import unicodedata
from urllib.parse import unquote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_MAX_LINES = 200
PATH_PREFIXES = ("scripts/", "examples/", "include/inferkit/")
PLACEHOLDER = re.compile(r"[<>*?{}$…]|\.\.\.")

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
HTML_ANCHOR = re.compile(r"""<a\s[^>]*\b(?:name|id)\s*=\s*["']([^"']+)["']|\bid\s*=\s*["']([^"']+)["']""")
# [text](target "title") and ![alt](target); the text may hold one level of brackets, the
# target one level of parentheses.
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>\n]*>|(?:[^()\s]|\([^()\s]*\))*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
REF_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
LINE_ANCHOR = re.compile(r"^L\d+(?:C\d+)?(?:-L\d+(?:C\d+)?)?$")


def rel(path):
    return os.path.relpath(path, ROOT)


def blocks_outside_fences(lines):
    """Yields (first line number, [lines]) for each run of non-blank lines outside fenced code."""
    fence = None
    block, start = [], 0
    for number, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and \
                    line.strip() == m.group(1):
                fence = None
            continue
        else:
            if line.strip():
                if not block:
                    start = number
                block.append(line)
                continue
        if block:
            yield start, block
            block = []
    if block:
        yield start, block


def code_spans(text):
    """Returns ([(offset, content)], text with every span blanked out, newlines kept)."""
    spans = []
    masked = list(text)
    i = 0
    while True:
        m = re.compile(r"(?<!\\)`+").search(text, i)
        if not m:
            break
        run = m.group(0)
        closing = re.compile(r"(?<!`)" + run + r"(?!`)").search(text, m.end())
        if not closing:
            i = m.end()
            continue
        content = text[m.end():closing.start()].replace("\n", " ")
        if content.startswith(" ") and content.endswith(" ") and content.strip():
            content = content[1:-1]
        spans.append((m.start(), content))
        for k in range(m.start(), closing.end()):
            if masked[k] != "\n":
                masked[k] = " "
        i = closing.end()
    return spans, "".join(masked)


def heading_text(raw):
    """The text GitHub renders for a heading's Markdown source (what its anchor is made from)."""
    # Code spans are kept literally; outside them, links become their text and emphasis markers,
    # HTML tags and backslash escapes go.
    parts = re.split(r"(`+)(.+?)\1", raw)
    out = []
    for k in range(0, len(parts), 3):
        p = parts[k]
        p = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", p)
        p = re.sub(r"<[^>]+>", "", p)
        p = re.sub(r"(\*{1,3})(\S(?:.*?\S)?)\1", r"\2", p)
        p = re.sub(r"(?<![A-Za-z0-9])(_{1,3})(\S(?:.*?\S)?)\1(?![A-Za-z0-9])", r"\2", p)
        p = re.sub(r"\\(.)", r"\1", p)
        out.append(p)
        if k + 2 < len(parts):
            out.append(parts[k + 2].strip())
    return "".join(out).strip()


def github_slug(text):
    """GitHub's heading anchor (github-slugger): lowercase, keep letters, digits, marks, '_',
    '-' and spaces, then every space becomes '-'."""
    kept = []
    for ch in text.lower():
        category = unicodedata.category(ch)
        if ch in " -_" or category[0] in "LNM":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


_anchor_cache = {}


def anchors_of(path):
    """Every anchor a Markdown file has on GitHub: its headings' slugs and explicit HTML ids."""
    if path in _anchor_cache:
        return _anchor_cache[path]
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    anchors, seen = set(), {}
    for _, block in blocks_outside_fences(lines):
        for k, line in enumerate(block):
            raw = None
            m = ATX.match(line)
            if m:
                raw = m.group(2) or ""
            elif k + 1 < len(block) and SETEXT.match(block[k + 1]) and not SETEXT.match(line) \
                    and not re.match(r"^ {0,3}([-*+>|]|\d+[.)]|\[[^\]]+\]:)", line):
                raw = line.strip()
            if raw is not None:
                slug = github_slug(heading_text(raw))
                if slug in seen:
                    seen[slug] += 1
                    slug = f"{slug}-{seen[slug]}"
                else:
                    seen[slug] = 0
                anchors.add(slug)
            for a, b in HTML_ANCHOR.findall(line):
                anchors.add(a or b)
    _anchor_cache[path] = anchors
    return anchors


def check_link(source, number, target, problems):
    target = target.strip()
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if not target or SCHEME.match(target) or target.startswith("//"):
        return
    path_part, _, fragment = target.partition("#")
    path_part = unquote(path_part.split("?", 1)[0])
    fragment = unquote(fragment)
    where = f"{rel(source)}:{number}"
    if path_part:
        base = ROOT if path_part.startswith("/") else os.path.dirname(source)
        resolved = os.path.normpath(os.path.join(base, path_part.lstrip("/")))
        if not (resolved + os.sep).startswith(ROOT + os.sep):
            problems.append(f"{where}: link {target!r} points outside the repository")
            return
        if not os.path.exists(resolved):
            problems.append(f"{where}: link {target!r}: no such file or folder {rel(resolved)}")
            return
    else:
        resolved = source
    if not fragment:
        return
    if os.path.isdir(resolved):
        readme = os.path.join(resolved, "README.md")
        if not os.path.isfile(readme):
            problems.append(f"{where}: link {target!r}: a #fragment on a folder without README.md")
            return
        resolved = readme
    if not resolved.lower().endswith((".md", ".markdown")):
        if not LINE_ANCHOR.match(fragment):
            problems.append(f"{where}: link {target!r}: #{fragment} is not a line anchor (#L10, "
                            f"#L10-L20), and {rel(resolved)} is not Markdown")
        return
    anchors = anchors_of(resolved)
    if fragment in anchors:
        return
    hint = ""
    near = [a for a in anchors if a.lower() == fragment.lower()]
    if near:
        hint = f" (GitHub's anchor is #{near[0]})"
    elif anchors:
        hint = " (its headings: " + ", ".join("#" + a for a in sorted(anchors)) + ")"
    problems.append(f"{where}: link {target!r}: no heading #{fragment} in {rel(resolved)}{hint}")


def check_code_path(source, number, content, problems):
    for token in content.split():
        token = token.strip("\"'()[],;:.")
        if token.startswith("./"):
            token = token[2:]
        if not token.startswith(PATH_PREFIXES) or PLACEHOLDER.search(token):
            continue
        path = re.sub(r"(?::\d+)+$", "", token)  # file:line
        if not os.path.exists(os.path.join(ROOT, path)):
            problems.append(f"{rel(source)}:{number}: `{content}`: no such file or folder {path}")


def check_file(source, problems, counts):
    with open(source, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for start, block in blocks_outside_fences(lines):
        text = "\n".join(block)
        spans, masked = code_spans(text)
        for offset, content in spans:
            counts["spans"] += 1
            check_code_path(source, start + text.count("\n", 0, offset), content, problems)
        for m in INLINE_LINK.finditer(masked):
            counts["links"] += 1
            number = start + masked.count("\n", 0, m.start())
            check_link(source, number, text[m.start(1):m.end(1)], problems)
        for k, line in enumerate(masked.split("\n")):
            m = REF_DEFINITION.match(line)
            if m:
                counts["links"] += 1
                check_link(source, start + k, block[k][m.start(1):m.end(1)], problems)
    return len(lines)


def main():
    names = ["README.md", "CONTRIBUTING.md"]
    docs = os.path.join(ROOT, "docs")
    if os.path.isdir(docs):
        names += sorted("docs/" + n for n in os.listdir(docs) if n.endswith(".md"))
    problems = []
    counts = {"links": 0, "spans": 0}
    checked = 0
    for name in names:
        path = os.path.join(ROOT, name)
        if not os.path.isfile(path):
            if name == "README.md":
                problems.append("README.md: missing")
            continue
        checked += 1
        num_lines = check_file(path, problems, counts)
        if name == "README.md" and num_lines > README_MAX_LINES:
            problems.append(f"README.md: {num_lines} lines, at most {README_MAX_LINES}: move "
                            f"detail into docs/ and link to it")
    def place(problem):  # "file:line: ..." in file, then line order
        name, _, rest = problem.partition(":")
        line = rest.split(":", 1)[0]
        return (name, int(line) if line.isdigit() else 0)

    for problem in sorted(problems, key=place):
        print(problem)
    if problems:
        print(f"check-docs: {len(problems)} problem(s) in {checked} files")
        return 1
    print(f"check-docs: {checked} files, {counts['links']} links, {counts['spans']} code spans: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
