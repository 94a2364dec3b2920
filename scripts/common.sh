# SPDX-License-Identifier: Apache-2.0
# Shared by scripts/*.sh: install what a fresh Debian machine lacks (only what is missing), and
# locate nvcc. Sourced, not run.

inferkit_install_missing() {
  # The examples' command lines, JSON, HTTP and metrics come from the last four; the library
  # needs none of them.
  local packages=(cmake ninja-build g++ catch2 libeigen3-dev libbenchmark-dev clang-format clang-tidy
    pkg-config doxygen libcli11-dev nlohmann-json3-dev libcpp-httplib-dev prometheus-cpp-dev "$@")
  local missing=()
  for pkg in "${packages[@]}"; do
    grep -q "install ok installed" <<<"$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" ||
      missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    echo "== installing: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
}

# Puts nvcc on PATH when the toolkit sits in its standard location; returns 1 when there is none.
inferkit_find_nvcc() {
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  command -v nvcc >/dev/null 2>&1
}

# Puts cuobjdump on PATH: the toolkit's, or NVIDIA's PyPI package (this toolkit ships without
# it), installed when missing. Returns 1 when there is none to be had.
inferkit_find_cuobjdump() {
  command -v cuobjdump >/dev/null 2>&1 && return 0
  [ -x /usr/local/cuda/bin/cuobjdump ] && export PATH="/usr/local/cuda/bin:$PATH" && return 0
  local site
  site=$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null) || return 1
  if [ ! -x "$site/nvidia/cu13/bin/cuobjdump" ]; then
    python3 -m pip install -q nvidia-cuda-cuobjdump >/dev/null 2>&1 || return 1
  fi
  [ -x "$site/nvidia/cu13/bin/cuobjdump" ] && export PATH="$site/nvidia/cu13/bin:$PATH"
}

# inferkit_serve_pytest [pytest args…]: the server's pytest suite (tests/serve) against the dev
# build's examples serve and generate, with pytest and the official openai client from PyPI in a
# venv of the build tree (build/serve-venv, created once).
inferkit_serve_pytest() {
  local venv=build/serve-venv
  if [ ! -x "$venv/bin/pytest" ] || ! "$venv/bin/python" -c "import openai" 2>/dev/null; then
    python3 -m venv "$venv" && "$venv/bin/pip" install -q pytest openai || return
  fi
  SERVE_BIN=build/dev/examples/serve GENERATE_BIN=build/dev/examples/generate \
    "$venv/bin/pytest" -q -p no:cacheprovider "$@" tests/serve
}
