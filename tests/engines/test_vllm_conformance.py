"""Real vLLM expositions (../shared/engine-metrics/vllm-*.prom) through scrape → parse → adapt.

Every capture is served byte-for-byte from a loopback HTTP server, scraped with ``scrape()``, parsed with
the adapter's ``wants`` filter and adapted. The expected values in :data:`EXPECTED` were read from the
capture files by hand (and, for the two rendered files, from SOURCES.md's ground-truth table), not
produced by the code under test. Fields a capture does not contain (excerpts) are expected ``None``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from advisor.engines.vllm import VLLMAdapter
from advisor.sources.exposition import parse_exposition
from advisor.sources.scrape import scrape

pytestmark = pytest.mark.conformance

REPO_ROOT = Path(__file__).resolve().parents[2]  # the parent of tests/
SHARED_METRICS = REPO_ROOT.parent / "shared" / "engine-metrics"


def shared_metrics_dir() -> Path:
    """``../shared/engine-metrics`` beside the repository; skips the calling test when it is absent."""
    if not SHARED_METRICS.is_dir():
        pytest.skip(f"../shared/engine-metrics absent: {SHARED_METRICS} is not a directory")
    return SHARED_METRICS


# Expected values per capture, read from the file named by the key.
# Keys: usage, running, waiting, preemptions, prompt, generation, capacity, finished (request_success_total
# summed over finished_reason), ttft (count, sum), tpot_source, tpot_is_itl, model, process_start.
EXPECTED: dict[str, dict[str, Any]] = {
    # vLLM 0.33.0 PrometheusStatLogger rendering, one engine; SOURCES.md ground truth + the file's lines:
    # kv_cache_usage_perc 0.35438349568502536, running 23.0, waiting 0.0, num_preemptions_total 0.0,
    # prompt_tokens_total 2.02607e+06, generation_tokens_total 208415.0, request_success stop 287 + length 13,
    # cache_config_info kv_cache_size_tokens="432000" (num_gpu_blocks 27000 × block_size 16),
    # TTFT _count 323.0 _sum 80.18175435066223, request_time_per_output_token_seconds present,
    # process_start_time_seconds 1.79603014452e+09.
    "vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom": {
        "usage": 0.35438349568502536,
        "running": 23,
        "waiting": 0,
        "preemptions": 0,
        "prompt": 2026070,
        "generation": 208415,
        "capacity": 432000,
        "finished": 300,
        "ttft": (323, 80.18175435066223),
        "tpot_source": "vllm:request_time_per_output_token_seconds",
        "tpot_is_itl": False,
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "process_start": 1.79603014452e09,
    },
    # vLLM 0.11.x idle capture: every counter 0.0, kv_cache_usage_perc 0.0, cache_config_info
    # num_gpu_blocks="2452" block_size="16" (no kv_cache_size_tokens label) → 2452 × 16 = 39232,
    # TTFT _count 0.0 _sum 0.0, request_time_per_output_token_seconds present,
    # process_start_time_seconds 1.76243836732e+09.
    "vllm-0.11.x-v1-idle-qwen1.5-0.5b-chat.prom": {
        "usage": 0.0,
        "running": 0,
        "waiting": 0,
        "preemptions": 0,
        "prompt": 0,
        "generation": 0,
        "capacity": 2452 * 16,
        "finished": 0,
        "ttft": (0, 0.0),
        "tpot_source": "vllm:request_time_per_output_token_seconds",
        "tpot_is_itl": False,
        "model": "Qwen/Qwen1.5-0.5B-Chat",
        "process_start": 1.76243836732e09,
    },
    # vLLM 0.10.0 excerpt: of the families read, only kv_cache_usage_perc 9.75010481363281e-06.
    "vllm-0.10.0-v1-glm4.5-prodstack617-excerpt.prom": {
        "usage": 9.75010481363281e-06,
        "model": "zai-org/GLM-4.5",
    },
    # vLLM 0.10.x DP excerpt: only vllm:request_decode_time_seconds_bucket lines for engine="1", a family the
    # adapter does not read, so nothing is known — not even the model name (it is on those unread lines).
    "vllm-0.10.x-v1-dp-engine1-pr22227-excerpt.prom": {},
    # vLLM 0.7.x excerpt: running 0.0, waiting 0.0, gpu_cache_usage_perc 0.0 (old name),
    # only the model_name label,
    # process_start_time_seconds 1.74262400557e+09.
    "vllm-0.7.x-v1-idle-qwen2.5-coder-32b-prodstack318-excerpt.prom": {
        "usage": 0.0,
        "running": 0,
        "waiting": 0,
        "model": "Qwen/Qwen2.5-Coder-32B-Instruct",
        "process_start": 1.74262400557e09,
    },
}

FIELDS = {
    "usage": "kv_cache_usage_ratio",
    "running": "requests_running",
    "waiting": "requests_waiting",
    "preemptions": "preemptions_total",
    "prompt": "prompt_tokens_total",
    "generation": "generation_tokens_total",
    "capacity": "kv_cache_capacity_tokens",
    "finished": "requests_finished_total",
    "model": "model",
    "process_start": "process_start_time_seconds",
    "tpot_source": "tpot_source",
}


class _CaptureHandler(BaseHTTPRequestHandler):
    root: Path

    def do_GET(self) -> None:
        path = self.root / self.path.lstrip("/").split("?", 1)[0]
        if path.parent != self.root or not path.is_file():
            self.send_error(404)
            return
        body = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def capture_server() -> Iterator[str]:
    """Serves every file of ../shared/engine-metrics at ``http://127.0.0.1:PORT/<file name>``."""
    root = shared_metrics_dir()
    handler = type("CaptureHandler", (_CaptureHandler,), {"root": root})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_every_vllm_capture_has_an_expectation() -> None:
    files = {p.name for p in shared_metrics_dir().glob("vllm-*.prom")}
    assert files == set(EXPECTED), "add the new capture's values to EXPECTED (or drop the stale entry)"


@pytest.mark.parametrize("capture", sorted(EXPECTED))
def test_capture_scrapes_and_adapts_to_the_values_in_the_file(capture: str, capture_server: str) -> None:
    expected = EXPECTED[capture]
    adapter = VLLMAdapter()
    with requests.Session() as session:
        result = scrape(f"{capture_server}/{capture}", session)
    assert result.ok, result.error_message
    assert result.text is not None
    assert result.text.encode() == (shared_metrics_dir() / capture).read_bytes()

    snap = adapter.snapshot(parse_exposition(result.text, keep=adapter.wants))

    for key, field in FIELDS.items():
        value = getattr(snap, field)
        want = expected.get(key)
        if want is None:
            assert value is None, f"{field}: expected unknown, got {value!r}"
        elif isinstance(want, float) and not math.isclose(want, 0.0):
            assert value == pytest.approx(want, rel=1e-12), field
        else:
            assert value == want, field
    assert snap.tpot_is_itl is expected.get("tpot_is_itl", False)
    if "ttft" in expected:
        count, total = expected["ttft"]
        assert snap.ttft is not None
        assert snap.ttft.count == count
        assert snap.ttft.sum == pytest.approx(total, rel=1e-12)
        assert snap.ttft.buckets[-1] == (math.inf, count)
        assert snap.ttft_source == "vllm:time_to_first_token_seconds"
    else:
        assert snap.ttft is None and "vllm:time_to_first_token_seconds" in snap.missing
    assert snap.ranks == ()  # every capture has a single engine rank


def test_ttft_buckets_of_the_0_33_capture_are_read_from_the_scrape(capture_server: str) -> None:
    """Bounds and cumulative counts as written in vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom."""
    capture = "vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom"
    adapter = VLLMAdapter()
    with requests.Session() as session:
        result = scrape(f"{capture_server}/{capture}", session)
    assert result.text is not None
    snap = adapter.snapshot(parse_exposition(result.text, keep=adapter.wants))
    assert snap.ttft is not None
    assert snap.ttft.bounds() == (
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, math.inf,
    )  # fmt: skip
    counts = dict(snap.ttft.buckets)
    assert (counts[0.1], counts[0.25], counts[0.5], counts[0.75], counts[1.0]) == (0, 232, 311, 319, 323)
    assert snap.engine_config["num_gpu_blocks"] == "27000"
    assert snap.engine_config["block_size"] == "16"
    assert snap.missing == ()
