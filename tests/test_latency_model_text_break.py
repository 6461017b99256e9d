"""Issue 17 part 3, the status page's latency-model line where a factor was never measured: a deployment whose
engine exports no TPOT histogram (llama.cpp, or a speculative deployment whose decode is not calibrated) and one
whose GPU is not a catalog part. Unknown is said to be unknown, never shown as a number (×1.00 read as "measured:
exactly the published speed")."""

from __future__ import annotations

import dataclasses
import math

from advisor.capacity.calibration import FactorEstimate, LatencyFit, LatencyModel
from advisor.status_page import latency_model_text
from tests.factories import context
from tests.test_status_page_render import dep


def test_a_factor_no_window_measured_is_not_shown_as_a_ratio() -> None:
    """Prefill calibrated over 3 windows (×0.87), decode never (no TPOT histogram): the line said "decode ×1.00"."""
    model = dataclasses.replace(LatencyModel.prior("vllm"), prefill=FactorEstimate(math.log(0.87), 0.01, updates=3))
    fit = LatencyFit(model, tpot_error_ratio=None, ttft_error_ratio=0.04, windows=3)
    text = latency_model_text(dep("a", latency=fit))
    assert "prefill ×0.87" in text
    assert "decode ×" not in text and "decode not measured" in text
    assert "TPOT" not in text.split("last error", 1)[1]  # the TPOT error was never measured: not shown either
    # and the other way round: decode measured, prefill never
    model = dataclasses.replace(LatencyModel.prior("vllm"), decode=FactorEstimate(math.log(0.69), 0.01, updates=2))
    text = latency_model_text(dep("a", latency=LatencyFit(model, tpot_error_ratio=-0.1, windows=2)))
    assert "decode ×0.69" in text and "prefill ×" not in text and "prefill not measured" in text


def test_a_gpu_outside_the_catalog_says_why_it_is_never_calibrated() -> None:
    """No catalog part: no bandwidth or FLOP/s, so no window can calibrate (``window_observation`` returns None);
    the line said "no window with enough TPOT/TTFT observations yet", as if waiting for traffic would help."""
    d = dep("a", latency=LatencyFit(LatencyModel.prior("vllm")))
    no_part = dataclasses.replace(context(), gpu=None)
    d = dataclasses.replace(d, evaluation=dataclasses.replace(d.evaluation, ctx=no_part))
    text = latency_model_text(d)
    assert "yet" not in text and "catalog" in text


def test_a_factor_no_window_measured_is_null_in_the_evidence_as_its_series_is_absent() -> None:
    """Every proposal's evidence carried ``model_decode_efficiency_ratio: 1.0`` for a decode never measured, while
    ``advisor_model_decode_efficiency_ratio`` was (rightly) absent."""
    model = dataclasses.replace(LatencyModel.prior("vllm"), prefill=FactorEstimate(math.log(0.87), 0.01, updates=3))
    ev = LatencyFit(model, ttft_error_ratio=0.04, windows=3).evidence()
    assert ev["model_decode_efficiency_ratio"] is None and ev["model_tpot_error_ratio"] is None
    assert ev["model_prefill_efficiency_ratio"] == 0.87
    prior = LatencyFit(LatencyModel.prior("vllm")).evidence()
    assert prior["latency_model"] == "prior" and prior["model_decode_efficiency_ratio"] is None


def test_a_window_shorter_than_an_update_needs_says_so() -> None:
    """Walkthrough (2026-12-07): the demo's 5 s evaluation window never calibrates (an update needs 30 s of
    scrapes), and after 254 cycles the page still said "no window with enough TPOT/TTFT observations yet". The
    line names the window; a window long enough keeps the waiting reason."""
    from advisor.online_calibration import MIN_COVERED_SECONDS, OnlineCalibration
    from tests.factories import evaluation

    cal = OnlineCalibration()
    ev = cal.apply("a", evaluation(now=1000.0), window_seconds=5.0, interval_seconds=1.0)
    text = latency_model_text(dep("a", latency=ev.latency))
    assert "evaluation window (5s) is shorter than the 30s" in text and "yet" not in text
    assert MIN_COVERED_SECONDS == 30.0
    ev = OnlineCalibration().apply("a", evaluation(now=1000.0), window_seconds=300.0, interval_seconds=15.0)
    assert "yet" in latency_model_text(dep("a", latency=ev.latency))
