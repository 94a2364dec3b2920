#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the API reference from the `///` comments (docs/Doxyfile; HTML in build/docs/html) and
# fails on any Doxygen warning, such as a public name without a comment. It also checks that the
# code blocks of docs/serving_step.md are the program they quote. scripts/test.sh runs this as a
# phase.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/docs
log=build/docs/doxygen.log
rc=0
doxygen docs/Doxyfile >"$log" 2>&1 || rc=$?
# "path:line: error: text" -> "path: text", paths relative to the repository.
found=$(sed -E "s|^$PWD/||; s|^([^:]+):[0-9]+: (error\|warning): |\1: |" "$log" | sort -u)
# An optional docs/doxygen_pending.txt (none today) tolerates warnings that another change is to
# fix, one "path: text" per line as printed below. A listed warning that no longer occurs fails
# too, so the list can only shrink; delete the file once it is empty.
pending=""
if [ -f docs/doxygen_pending.txt ]; then
  pending=$(grep -v '^#' docs/doxygen_pending.txt | grep -v '^$' | sort -u || true)
fi
new=$(comm -23 <(printf '%s\n' "$found" | grep -v '^$' || true) <(printf '%s\n' "$pending" | grep -v '^$' || true))
stale=$(comm -13 <(printf '%s\n' "$found" | grep -v '^$' || true) <(printf '%s\n' "$pending" | grep -v '^$' || true))
status=0
if [ -n "$new" ]; then
  echo "doxygen: warnings (document these names, or fix the comment):"
  sed 's/^/  /' <<<"$new"
  status=1
fi
if [ -n "$stale" ]; then
  echo "doxygen: fixed, remove them from docs/doxygen_pending.txt:"
  sed 's/^/  /' <<<"$stale"
  status=1
fi
if [ "$rc" -ne 0 ] && [ -z "$found" ]; then
  echo "doxygen failed without a warning (exit $rc):"
  cat "$log"
  status=1
fi
# docs/serving_step.md shows examples/serving_step.cpp between its "// [serving-step: name]"
# markers: every marked region, dedented, must be one of the guide's ```cpp blocks.
snippets=$(mktemp -d)
awk -v dir="$snippets" '
  /\/\/ \[serving-step: [a-z]+\]/ {
    if (name == "") { match($0, /serving-step: [a-z]+/); name = substr($0, RSTART + 14, RLENGTH - 14) }
    else { close(dir "/src_" name); name = "" }
    next
  }
  name != "" { print > (dir "/src_" name) }' examples/serving_step.cpp
awk -v dir="$snippets" '
  /^```cpp$/ { n++; inside = 1; next }
  /^```$/ { if (inside) close(dir "/guide_" n); inside = 0; next }
  inside { print > (dir "/guide_" n) }' docs/serving_step.md
for src in "$snippets"/src_*; do
  [ -e "$src" ] || continue
  indent=$(awk 'NF { match($0, /^ */); if (min == "" || RLENGTH < min) min = RLENGTH } END { print min + 0 }' "$src")
  sed -E "s/^ {0,$indent}//" "$src" >"$src.dedented"
  found_block=0
  for block in "$snippets"/guide_*; do
    [ -e "$block" ] && cmp -s "$src.dedented" "$block" && found_block=1 && break
  done
  if [ "$found_block" -eq 0 ]; then
    echo "docs/serving_step.md: no code block matches [serving-step: ${src##*/src_}] of examples/serving_step.cpp"
    status=1
  fi
done
if ! ls "$snippets"/src_* >/dev/null 2>&1; then
  echo "examples/serving_step.cpp: no [serving-step: ...] markers found"
  status=1
fi
rm -rf "$snippets"

if [ "$status" -eq 0 ]; then
  if [ -n "$pending" ]; then
    echo "API reference: build/docs/html/index.html ($(grep -c . <<<"$pending") pending warnings listed in docs/doxygen_pending.txt)"
  else
    echo "API reference: build/docs/html/index.html (no Doxygen warnings)"
  fi
fi
exit "$status"
