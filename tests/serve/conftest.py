# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the server tests: the `serve` binary started on a free loopback port with the
fetched SmolLM2, the official `openai` client pointed at it, and `generate --json` for reference
outputs. SERVE_BIN and GENERATE_BIN name the binaries (scripts/test.sh sets them), and
INFERKIT_MODEL the model."""

import json
import os
import socket
import subprocess
import time
import urllib.request

import pytest

SERVE_BIN = os.environ.get("SERVE_BIN", "build/dev/examples/serve")
GENERATE_BIN = os.environ.get("GENERATE_BIN", "build/dev/examples/generate")
MODEL = os.environ.get("INFERKIT_MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running `serve` process on 127.0.0.1:port."""

    def __init__(self, *extra):
        options = {"--model": MODEL, "--model-name": "smollm2", "--kv-pages": "1024",
                   "--max-num-seqs": "64"}
        options.update(zip(extra[::2], extra[1::2]))  # extra: flag, value pairs
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(f"/tmp/inferkit-serve-{self.port}.log", "w+")
        self.proc = subprocess.Popen(
            [SERVE_BIN, "--port", str(self.port), *[x for kv in options.items() for x in kv]],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120  # a loaded machine loads the model slowly
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode}: {self.output()}")
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:
                pass
            time.sleep(0.2)
        raise RuntimeError("serve did not become healthy: " + self.output())

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self, sig=2):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="session")
def server():
    s = Server()
    yield s
    assert s.stop() == 0, s.output()


@pytest.fixture(scope="session")
def client(server):
    import openai
    return openai.OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0,
                         timeout=120)


def generate_json(prompt, max_tokens, chat=False, special=False, activations="fp32"):
    """`generate --json`'s output for a greedy run of `prompt`."""
    args = [GENERATE_BIN, "--model", MODEL, "--prompt", prompt, "--max-tokens", str(max_tokens),
            "--activations", activations, "--json"]
    if chat:
        args.append("--chat")
    if special:
        args.append("--special")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)
