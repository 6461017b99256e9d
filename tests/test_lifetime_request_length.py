"""The finished requests' mean length from the engines' lifetime counters (evaluate's
``_lifetime_tokens_per_finished_request``), which admission_thrash's context cap is held against when the window
finished nothing; read only where the token counters count exactly the finished requests."""

from __future__ import annotations

import pytest

from advisor.domain import EngineSnapshot
from advisor.evaluate import MIN_LIFETIME_FINISHED
from advisor.evaluate import _lifetime_tokens_per_finished_request as lifetime

MEAN = (2_406_000 + 468_000) / 390


def _snap(engine: str = "sglang", **kw: float | None) -> EngineSnapshot:
    base: dict[str, float | None] = {
        "prompt_tokens_total": 2_406_000.0,
        "generation_tokens_total": 468_000.0,
        "requests_finished_total": 390.0,
    }
    base.update(kw)
    return EngineSnapshot(engine=engine, **base)  # type: ignore[arg-type]


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "triton-trtllm"])
def test_engines_that_count_a_request_s_tokens_when_it_finishes_give_its_mean(engine: str) -> None:
    # SGLang's observe_one_finished_request adds the request and its tokens in one call: nothing else is in them
    assert lifetime([_snap(engine, kv_cache_usage_ratio=0.9, kv_cache_capacity_tokens=4e5)]) == pytest.approx(MEAN)
    assert lifetime([_snap(engine), _snap(engine)]) == pytest.approx(MEAN)


@pytest.mark.parametrize("engine", ["vllm", "tgi", "llamacpp", "auto"])
def test_engines_whose_counters_hold_unfinished_requests_give_none(engine: str) -> None:
    # vLLM counts a prompt at its first token (an aborted request's tokens stay in, out of request_success); TGI an
    # input length at validation; llama.cpp counts no finished requests: a quotient there errs long, not known
    assert lifetime([_snap(engine)]) is None
    assert lifetime([_snap("sglang"), _snap(engine)]) is None


def test_a_few_finished_requests_say_nothing() -> None:
    assert lifetime([_snap(requests_finished_total=MIN_LIFETIME_FINISHED - 1)]) is None
    assert lifetime([_snap(requests_finished_total=float(MIN_LIFETIME_FINISHED))]) is not None


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
