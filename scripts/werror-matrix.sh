#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Compiles every example and test translation unit of the dev build with warnings as errors at
# -O3, once per target in the list below, so that a warning g++ emits only for one host's -march
# (the Intel host's -march=native found two that the AMD host never shows) fails CI on whatever
# host CI runs. Needs build/dev/compile_commands.json (scripts/test.sh configures the dev preset
# first). Objects go to /dev/null: only the diagnostics matter.
#
#   scripts/werror-matrix.sh [--jobs N] [--units REGEX] [TARGET…]
#     TARGET: a -march value, or "none"; REGEX picks units by path (default: every example and
#     test unit; about 1,100 CPU-seconds a target on this 2-core machine, so CI runs a subset).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=2
units_regex='.'
targets=()
while (($#)); do
  case "$1" in
    --jobs) jobs=$2; shift 2 ;;
    --units) units_regex=$2; shift 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
# Both host kinds seen so far (Zen 4, Sapphire Rapids), the common AVX2 level, and no -march at
# all (a user's plain build).
((${#targets[@]})) || targets=(x86-64-v3 znver4 sapphirerapids none)
db=build/dev/compile_commands.json
[ -f "$db" ] || { echo "werror-matrix: $db missing (configure the dev preset first)"; exit 2; }

# One line per unit: "<file>\t<command without -o/-c/-march/-O>".
commands=$(python3 - "$db" <<'EOF'
import json, shlex, sys, os
root = os.getcwd()
for entry in json.load(open(sys.argv[1])):
    f = os.path.relpath(entry["file"], root)
    if not (f.startswith("examples/") or f.startswith("tests/")) or "/header_check/" in f:
        continue
    args = shlex.split(entry["command"])
    keep, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a.startswith("-march=") or a.startswith("-O") or a in ("-c", "-MD", "-MMD", "-g"):
            continue
        keep.append(a)
    print(f + "\t" + shlex.join(keep))
EOF
)
commands=$(printf '%s\n' "$commands" | grep -E "^[^	]*($units_regex)" || true)
units=$(printf '%s\n' "$commands" | grep -c . || true)
echo "werror-matrix: $units units x ${#targets[@]} targets (${targets[*]}), -O3 -Werror, $jobs jobs"

failed=0
for target in "${targets[@]}"; do
  flag="-march=$target"
  [ "$target" = none ] && flag=""
  start=$(date +%s)
  log=$(mktemp)
  # Each unit: its dev command, at -O3, with the target's flag; the first failure's output kept.
  if ! printf '%s\n' "$commands" | cut -f2 |
    xargs -d '\n' -P "$jobs" -I{} sh -c "{} -O3 $flag -Werror -c -o /dev/null || exit 255" >"$log" 2>&1; then
    echo "werror-matrix: -march=$target: FAILED"
    grep -E 'error|warning' "$log" | head -40 || true # head closing early is not the failure
    failed=$((failed + 1))
  else
    echo "werror-matrix: -march=$target: ok ($(($(date +%s) - start)) s)"
  fi
  rm -f "$log"
done
exit $((failed > 0))
