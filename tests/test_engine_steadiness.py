"""The calibration tests' judge of a real engine's steadiness (:mod:`tests.e2e.engine_steadiness`), on the loaded
suite's llama.cpp windows (issue 19) and on a steady engine."""

from __future__ import annotations

import pytest

from tests.e2e.engine_steadiness import WindowTruth


def _truth(tpot_ms: list[float], tokens: int = 10_000) -> WindowTruth:
    t = WindowTruth()
    seconds = 0.0
    t.read(0.0, 0)
    for i, ms in enumerate(tpot_ms, 1):
        seconds += ms / 1e3 * tokens
        t.read(seconds, i * tokens)
    return t


def test_the_loaded_llamacpp_windows_are_not_judged() -> None:
    # the engine's own TPOT per window in the loaded run that failed: 0.354, 0.60, 0.285, 0.50 ms
    t = _truth([0.354, 0.60, 0.285, 0.50])
    assert t.tpot() == pytest.approx([0.354e-3, 0.60e-3, 0.285e-3, 0.50e-3])
    assert t.unsteady() == "the engine's own TPOT moved 0.285 → 0.500 ms between the last two windows"


def test_a_steady_engine_is_judged() -> None:
    # 15–20 % moves between windows are the unloaded CPU engines' own noise: judged
    assert _truth([0.40, 0.46, 0.39]).unsteady() is None
    assert _truth([0.40]).unsteady() is None  # one window: the first is never the judged one
    assert _truth([0.40, 0.49]).unsteady() is not None  # +22.5 %: ln 1.225 = 0.203 ≥ 0.2


def test_a_window_without_tokens_is_not_judged() -> None:
    t = WindowTruth()
    for mark in ((0.0, 0), (1.0, 1000), (1.0, 1000)):
        t.read(*mark)
    assert t.tpot() == [pytest.approx(1e-3), None]
    assert t.unsteady() == "the engine counted nothing for its TPOT in a window (0.001, None)"


def test_a_prefill_truth_names_itself() -> None:
    # the CPU vLLM's prefill (TTFT less queue time) per window under a loaded CI run (CI 97): judged on its own moves
    t = WindowTruth(what="prefill (TTFT less queue time)")
    for mark in ((0.0, 0), (0.9, 100), (2.2, 200)):  # 9 ms, then 13 ms a request
        t.read(*mark)
    assert (
        t.unsteady()
        == "the engine's own prefill (TTFT less queue time) moved 9.000 → 13.000 ms between the last two windows"
    )
