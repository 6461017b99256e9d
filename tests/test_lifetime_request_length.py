"""The traffic's mean request length from the engines' lifetime counters (evaluate's
``_lifetime_tokens_per_finished_request``), which admission_thrash's context cap is held against when the window
finished nothing (huggingface/text-generation-inference#2744: a 3,072-token cap under 6,000-token prompts)."""

from __future__ import annotations

import pytest

from advisor.domain import EngineSnapshot
from advisor.evaluate import _lifetime_tokens_per_finished_request as lifetime


def _snap(engine: str = "vllm", **kw: float | None) -> EngineSnapshot:
    base: dict[str, float | None] = {
        "prompt_tokens_total": 2_406_000.0,
        "generation_tokens_total": 468_000.0,
        "requests_finished_total": 390.0,
    }
    base.update(kw)
    return EngineSnapshot(engine=engine, **base)  # type: ignore[arg-type]


def test_tokens_over_finished_requests() -> None:
    # 401 prompts of 6,000 and 390 × 1,200 generated over 390 finished: 7,369 each (errs long: one prompt runs)
    assert lifetime([_snap()]) == pytest.approx((2_406_000 + 468_000) / 390)


def test_vllm_s_running_requests_are_taken_out_and_nothing_for_preemptions() -> None:
    # vLLM counts a prompt at its first token and each generated token as sampled: the 28,500 tokens the 3 running
    # requests hold are in the counters; a preempted request's recomputed prompt is not counted again
    snap = _snap(
        kv_cache_usage_ratio=28_500 / 30_816, kv_cache_capacity_tokens=30_816.0, requests_running=3.0,
        preemptions_total=2.0,
    )  # fmt: skip
    assert lifetime([snap]) == pytest.approx((2_406_000 + 468_000 - 28_500) / 390, rel=1e-9)


@pytest.mark.parametrize("engine", ["sglang", "tgi", "llamacpp"])
def test_engines_that_count_at_finish_keep_the_finished_requests_own_mean(engine: str) -> None:
    # SGLang's observe_one_finished_request adds prompt, generation and the request together: nothing to take out
    snap = _snap(engine, kv_cache_usage_ratio=0.9, kv_cache_capacity_tokens=400_000.0, requests_running=6.0)
    assert lifetime([snap]) == pytest.approx((2_406_000 + 468_000) / 390)


def test_summed_over_targets() -> None:
    assert lifetime([_snap(), _snap()]) == pytest.approx((2_406_000 + 468_000) / 390)


@pytest.mark.parametrize(
    "kw",
    [
        {"requests_finished_total": 0.0},
        {"requests_finished_total": None},
        {"prompt_tokens_total": None},
        {"generation_tokens_total": float("nan")},
    ],
)
def test_unknown_is_none_not_zero(kw: dict[str, float | None]) -> None:
    assert lifetime([_snap(**kw)]) is None
    assert lifetime([]) is None
