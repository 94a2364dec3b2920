#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# inferkit's HTTP server against llama.cpp's llama-server, end to end, with a load generator
# neither of them wrote: GuideLLM drives both servers (one after the other, never both at once)
# on the same GGUF with the same threads, at concurrency 1, 8 and 32, once with prompts that
# share a ~200-token system prompt and once with unrelated prompts. It writes a JSON file and
# prints a markdown table of output tokens/s, requests/s, TTFT and inter-token latency p50/p99
# for both, with the ratio of the two tokens/s.
#
# NOT run by CI: it builds llama-server (15-25 minutes on 2 cores) and installs GuideLLM
# (about 90 s, pulls torch) the first time, both OUTSIDE the checkout and cached there; a default
# run then takes about 13 minutes on a quiet 2-core machine (40 on a busy one), `--quick` about 4.
#
#   scripts/bench-serve.sh [--quick] [--rounds N] [--threads N] [--out FILE] [--no-build]
#                          [--servers inferkit,llamacpp] [--port N] [--nice N]
#                          [--activations fp32|int8]
#   scripts/bench-serve.sh --soak [SECONDS] [--threads N] [--no-build] [--nice N]
#
#   --quick        4 / 8 / 32 requests of 32 tokens per concurrency instead of 16 / 40 / 96 of 128
#   --rounds N     alternate inferkit, llama.cpp N times (default 1); the table shows medians
#   --threads N    threads of both servers (default 2)
#   --out FILE     the JSON file (default build/bench-serve/results.json)
#   --no-build     use build/release/examples/serve as it is when it exists
#   --servers LIST only these (inferkit, llamacpp), in this order
#   --activations  inferkit's products on fp32 (default, exact) or int8 activations (as
#                  llama.cpp's are; serve --activations)
#   --nice N       run the servers and the load generator at this niceness (default: unchanged);
#                  on a shared machine, as root, --nice -10 keeps others' builds off their cores
#   --soak [S]     inferkit's server alone for S seconds (default 600): 32 streaming clients, a
#                  quarter of whose requests close the connection mid-stream on purpose; reports
#                  failed requests (a non-200 answer or a broken stream that was not a deliberate
#                  cancel) and the server's VmRSS every 10 s, after warm-up against the end
#                  (build/bench-serve/soak.json); exits 1 unless 0 failures and a flat RSS (±5%)
#
# Timed runs hold flock /tmp/inferkit-bench.lock (as scripts/reference-llamacpp.sh does), so
# never two benchmarks at once. Builds run under nice -n 10. The lock does not keep builds and
# tests away: on 2 cores a busy neighbour slows a 2-thread server 10-50x in bursts (seen here),
# so the script warns when the load average is above a third of the cores, and records it. GuideLLM
# itself, on the same cores, takes about a quarter of one core at 32 streams (measured against its
# mock server at 1,600 tokens/s; proportionally less at these servers' rates).
#
# The model: $INFERKIT_MODEL, else the last line printed by scripts/fetch-model.sh.
# llama-server: $INFERKIT_LLAMA_SERVER_DIR (default .llamacpp-server beside the checkout) holds
#   the llama-cpp-python==0.3.36 sdist, its vendored llama.cpp and build/bin/llama-server, built
#   with the CMake flags of scripts/reference-llamacpp.sh (AVX-512 + VNNI + BF16 on, AMX off).
# GuideLLM: $INFERKIT_GUIDELLM_VENV (default .venv-guidellm beside the checkout), guidellm==0.8.1,
#   run with HF_HUB_OFFLINE=1 (token counts come from the servers' usage, no tokenizer download).
# Requests: /v1/completions, streamed, max_tokens = output tokens with ignore_eos (GuideLLM sends
#   it; a server that ignores it may stop early: the table's "out tok/req" shows what came),
#   temperature 0 for both servers (INFERKIT_BENCH_TEMPERATURE overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

LLAMA_CPP_PYTHON_VERSION=0.3.36
GUIDELLM_VERSION=0.8.1
LLAMA_CMAKE_ARGS=(-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_CURL=OFF
  -DCMAKE_BUILD_TYPE=Release
  # what llama-server needs and no more: no HTTPS, no web UI download, no tests or examples
  -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF)
CONCURRENCY=(1 8 32)

quick=0 rounds=1 threads=2 no_build=0 soak=0 port=18470 niceness="" activations=fp32
servers=inferkit,llamacpp
out=build/bench-serve/results.json
temperature=${INFERKIT_BENCH_TEMPERATURE:-0}
usage() { sed -n '/^#   scripts/,/^#   --soak/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --rounds) rounds=${2:?}; shift ;;
    --threads) threads=${2:?}; shift ;;
    --out) out=${2:?}; shift ;;
    --no-build) no_build=1 ;;
    --servers) servers=${2:?}; shift ;;
    --port) port=${2:?}; shift ;;
    --nice) niceness=${2:?}; shift ;;
    --activations) activations=${2:?}; shift ;;
    --soak)
      soak=600
      if [[ ${2:-} =~ ^[0-9]+$ ]]; then soak=$2; shift; fi
      ;;
    -h | --help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
  shift
done

outside_checkout() {
  case "$1/" in
    "$root"/*) echo "$2 must live outside the checkout: $1" >&2; exit 2 ;;
  esac
}
llama_dir=${INFERKIT_LLAMA_SERVER_DIR:-$(dirname "$root")/.llamacpp-server}
venv=${INFERKIT_GUIDELLM_VENV:-$(dirname "$root")/.venv-guidellm}
outside_checkout "$llama_dir" INFERKIT_LLAMA_SERVER_DIR
outside_checkout "$venv" INFERKIT_GUIDELLM_VENV
work=build/bench-serve
mkdir -p "$work"

# ---- what it runs on ----------------------------------------------------------------------------

model=${INFERKIT_MODEL:-}
if [ -z "$model" ]; then model=$(scripts/fetch-model.sh | tail -n 1); fi
[ -f "$model" ] || { echo "no model file: $model" >&2; exit 2; }
model_name=smollm2  # the id both servers answer to

serve=build/release/examples/serve
build_serve() {
  if [ "$no_build" = 1 ] && [ -x "$serve" ]; then
    echo "== using $serve as it is (--no-build)"
  else
    echo "== building inferkit's serve (release preset)"
    nice -n 10 cmake --preset release >/dev/null
    nice -n 10 cmake --build --preset release --target serve
  fi
  [ -x "$serve" ] || { echo "no $serve after the build" >&2; exit 1; }
}

llama_server=$llama_dir/build/bin/llama-server
build_llama_server() {
  [ -x "$llama_server" ] && return 0
  echo "== building llama-server from llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION's llama.cpp" \
    "into $llama_dir (about 15 minutes on 2 cores)"
  mkdir -p "$llama_dir/src"
  local sdist=$llama_dir/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz
  [ -f "$sdist" ] || python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --no-binary :all: "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$llama_dir/src"
  local src=$llama_dir/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp
  [ -f "$src/CMakeLists.txt" ] || tar -xzf "$sdist" -C "$llama_dir"
  local log=$llama_dir/build.log start
  start=$(date +%s)
  { nice -n 10 cmake -S "$src" -B "$llama_dir/build" -G Ninja "${LLAMA_CMAKE_ARGS[@]}" &&
    nice -n 10 cmake --build "$llama_dir/build" --target llama-server; } >"$log" 2>&1 ||
    { tail -30 "$log" >&2; echo "llama-server build failed, see $log" >&2; exit 1; }
  echo "== built in $(($(date +%s) - start)) s (log: $log)"
}

guidellm=$venv/bin/guidellm
install_guidellm() {
  local have
  have=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("guidellm"))' \
    2>/dev/null || true)
  [ -x "$guidellm" ] && [ "$have" = "$GUIDELLM_VERSION" ] && return 0
  echo "== installing guidellm==$GUIDELLM_VERSION into $venv (about 90 s, pulls torch)"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  nice -n 10 "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "guidellm==$GUIDELLM_VERSION"
}

# ---- servers ------------------------------------------------------------------------------------

prio=()  # the timed processes' niceness
[ -n "$niceness" ] && prio=(nice -n "$niceness")

server_pid=""
stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# start_server NAME PORT: starts it in the background (fd 9, the bench lock, stays with us) and
# waits until /health answers 200.
start_server() {
  local name=$1 p=$2 log=$work/$1.log
  if curl -s -o /dev/null "http://127.0.0.1:$p/health"; then
    echo "something already answers on port $p; pick another with --port" >&2; exit 1
  fi
  case "$name" in
    inferkit)
      "${prio[@]}" "$serve" --model "$model" --model-name "$model_name" --host 127.0.0.1 --port "$p" \
        --threads "$threads" --activations "$activations" >"$log" 2>&1 9>&- &
      ;;
    llamacpp)
      # 32 slots with continuous batching; the context is shared among them (1024 tokens
      # each), enough for the longest prompt plus 128 tokens.
      "${prio[@]}" "$llama_server" -m "$model" --alias "$model_name" --host 127.0.0.1 --port "$p" \
        -t "$threads" -tb "$threads" -c 32768 --parallel 32 -cb --no-webui >"$log" 2>&1 9>&- &
      ;;
  esac
  server_pid=$!
  for _ in $(seq 1 600); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      tail -20 "$log" >&2; echo "$name exited during start-up (log: $log)" >&2; exit 1
    fi
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$p/health")" = 200 ]; then
      return 0
    fi
    sleep 0.2
  done
  tail -20 "$log" >&2; echo "$name did not get ready in 120 s (log: $log)" >&2; exit 1
}

take_bench_lock() {
  echo "== waiting for /tmp/inferkit-bench.lock"
  exec 9>/tmp/inferkit-bench.lock
  flock 9
  echo "uptime before: $(uptime)${niceness:+ (timed processes at nice $niceness)}"
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  if awk -v l="$load" -v n="$(nproc)" 'BEGIN { exit !(l > n / 3) }'; then
    echo "WARNING: load average $load on $(nproc) cores: other work is running, the figures" \
      "will be noisy (see: ps -eo pcpu,args --sort=-pcpu | head)" >&2
  fi
}

helper=(python3 scripts/bench_serve_report.py)

# ---- soak ---------------------------------------------------------------------------------------

if [ "$soak" -gt 0 ]; then
  build_serve
  take_bench_lock
  echo "== soak: inferkit's serve, $threads threads, 32 clients for $soak s, random cancels"
  start_server inferkit "$port"
  "${helper[@]}" warmup --url "http://127.0.0.1:$port" --model "$model_name"
  status=0
  "${prio[@]}" "${helper[@]}" soak --url "http://127.0.0.1:$port" --model "$model_name" --pid "$server_pid" \
    --seconds "$soak" --warmup-seconds $((soak >= 300 ? 60 : soak / 5)) \
    --out "$work/soak.json" || status=$?
  stop_server
  echo "uptime after: $(uptime)"
  exit "$status"
fi

# ---- benchmark ----------------------------------------------------------------------------------

IFS=, read -r -a server_list <<<"$servers"
for s in "${server_list[@]}"; do
  case "$s" in inferkit | llamacpp) ;; *) echo "unknown server: $s" >&2; exit 2 ;; esac
done
if [[ ,$servers, == *,inferkit,* ]]; then build_serve; fi
if [[ ,$servers, == *,llamacpp,* ]]; then build_llama_server; fi
install_guidellm

if [ "$quick" = 1 ]; then counts=(4 8 32) out_tokens=32; else counts=(16 40 96) out_tokens=128; fi
runs=$work/runs
rm -rf "$runs" "$work/prompts"
mkdir -p "$runs"
"${helper[@]}" prompts --out-dir "$work/prompts" --output-tokens "$out_tokens" \
  --concurrency "$(IFS=,; echo "${CONCURRENCY[*]}")" --counts "$(IFS=,; echo "${counts[*]}")"

llamacpp_version=""
if [ -x "$llama_server" ]; then
  llamacpp_version=$("$llama_server" --version 2>&1 | grep -m1 version || true)
fi
# Offline: token counts come from the servers' usage. One worker process: GuideLLM's default of
# up to 10 spawned workers costs 2.5x the CPU (measured) on a machine whose cores the servers need.
export HF_HUB_OFFLINE=1 GUIDELLM__MAX_WORKER_PROCESSES=1
take_bench_lock
loadavg_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
for round in $(seq 1 "$rounds"); do
  for s in "${server_list[@]}"; do
    p=$port
    [ "$s" = llamacpp ] && p=$((port + 1))
    echo "== round $round: $s on port $p"
    start_server "$s" "$p"
    "${helper[@]}" warmup --url "http://127.0.0.1:$p" --model "$model_name"
    for dataset in shared unrelated; do
      for i in "${!CONCURRENCY[@]}"; do
        c=${CONCURRENCY[$i]} n=${counts[$i]}
        name=$s-$dataset-c$c-r$round
        backend=$(printf '{"kind": "openai_http", "target": "http://127.0.0.1:%s", "model": "%s",
          "request_format": "/v1/completions", "extras": {"body": {"temperature": %s}}}' \
          "$p" "$model_name" "$temperature")
        t0=$(date +%s)
        "${prio[@]}" "$guidellm" run --backend "$backend" --profile "kind=concurrent,streams=$c" \
          --constraint "kind=max_requests,count=$n" \
          --data "kind=json_file,path=$work/prompts/$dataset-c$c.jsonl" \
          --output "kind=json,path=$runs/$name.json" --disable-console-interactive \
          >"$runs/$name.log" 2>&1 ||
          { tail -30 "$runs/$name.log" >&2; echo "guidellm failed: $runs/$name.log" >&2; exit 1; }
        echo "   $dataset, concurrency $c: $n requests in $(($(date +%s) - t0)) s"
      done
    done
    stop_server
  done
done
echo "uptime after: $(uptime)"

wall_s=$(($(date +%s) - start))
BENCH_CPU_LOAD_BEFORE=$loadavg_before BENCH_MODEL=$model BENCH_SERVERS=$servers \
  BENCH_ACTIVATIONS=$activations \
  BENCH_CONCURRENCY="${CONCURRENCY[*]}" BENCH_COUNTS="${counts[*]}" BENCH_OUT_TOKENS=$out_tokens \
  BENCH_TEMPERATURE=$temperature BENCH_ROUNDS=$rounds BENCH_THREADS=$threads BENCH_QUICK=$quick \
  BENCH_WALL_S=$wall_s BENCH_GUIDELLM=$GUIDELLM_VERSION BENCH_LLAMACPP=$llamacpp_version BENCH_NICE=$niceness \
  python3 - "$work/meta.json" <<'EOF'
import json, os, subprocess, sys
e = os.environ
flags, cpu = set(), "unknown"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name") and cpu == "unknown":
        cpu = line.split(":", 1)[1].strip()
    if line.startswith("flags"):
        flags = set(line.split(":", 1)[1].split())
commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                        text=True).stdout.strip()
t = e["BENCH_THREADS"]
meta = {
    "command": "scripts/bench-serve.sh" + (" --quick" if e["BENCH_QUICK"] == "1" else "")
               + f" --rounds {e['BENCH_ROUNDS']} --threads {t} --servers {e['BENCH_SERVERS']}"
               + (f" --nice {e['BENCH_NICE']}" if e["BENCH_NICE"] else "")
               + f" --activations {e['BENCH_ACTIVATIONS']}",
    "host": {"cpu": cpu, "avx512f": "avx512f" in flags,
             "amx": "amx_tile" in flags and "amx_int8" in flags, "cpus": os.cpu_count(),
             "loadavg_before": e["BENCH_CPU_LOAD_BEFORE"],
             "loadavg_after": " ".join(open("/proc/loadavg").read().split()[:3])},
    "threads": int(t), "model_file": os.path.basename(e["BENCH_MODEL"]),
    "servers": e["BENCH_SERVERS"].split(","),
    "concurrency": [int(x) for x in e["BENCH_CONCURRENCY"].split()],
    "requests": [int(x) for x in e["BENCH_COUNTS"].split()],
    "output_tokens": int(e["BENCH_OUT_TOKENS"]), "temperature": float(e["BENCH_TEMPERATURE"]),
    "rounds": int(e["BENCH_ROUNDS"]), "wall_s": int(e["BENCH_WALL_S"]),
    "guidellm_version": e["BENCH_GUIDELLM"],
    "llamacpp_version": e["BENCH_LLAMACPP"].replace("version: ", "") or "not run",
    "llamacpp_server_flags": f"-c 32768 --parallel 32 -cb -t {t} -tb {t}",
    "inferkit_serve_flags": f"--threads {t} --activations {e['BENCH_ACTIVATIONS']}"
                            " (defaults otherwise)",
    "inferkit_commit": commit,
}
json.dump(meta, open(sys.argv[1], "w"), indent=2)
EOF
mkdir -p "$(dirname "$out")"
"${helper[@]}" report --runs "$runs" --meta "$work/meta.json" --out "$out"
