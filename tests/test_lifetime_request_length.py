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


def test_no_finished_request_says_nothing() -> None:
    assert lifetime([_snap(requests_finished_total=MIN_LIFETIME_FINISHED - 1)]) is None
    assert lifetime([_snap(requests_finished_total=float(MIN_LIFETIME_FINISHED))]) is not None


def test_a_freshly_booted_servers_two_finished_requests_are_its_mean() -> None:
    # field-state round 74 (syv-ai/qwen38-27b-rtx3090#25): two 16,384 + 1,024-token streams answered since boot; the
    # mean withholds a context cap under 17,408 (read from 20 requests up before 2026-12-07: None, and a cap of 8,192)
    two = _hist(
        request_prompt_tokens_sum=2 * 16_384.0,
        request_prompt_tokens_count=2.0,
        request_generation_tokens_sum=2 * 1_024.0,
        request_generation_tokens_count=2.0,
    )
    assert lifetime([two]) == pytest.approx(17_408.0)


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


# --- the per-request length histograms (vLLM, TGI): a mean over exactly the requests each one observes -------------


def _hist(engine: str = "vllm", **kw: float | None) -> EngineSnapshot:
    """The breaker's vLLM case: 20 client-aborted 60,000-token prompts sit in the token counters (a prompt is counted
    at its first token) but in neither ``request_success`` nor the histograms (``vllm/v1/engine/output_processor.py``:
    ``abort_requests`` records no finished stats); 20 chats of 7,600 + 400 tokens finished."""
    base: dict[str, float | None] = {
        "prompt_tokens_total": 20 * 60_000.0 + 20 * 7_600.0,
        "generation_tokens_total": 20 * 400.0 + 20 * 30.0,
        "requests_finished_total": 20.0,
        "request_prompt_tokens_sum": 20 * 7_600.0,
        "request_prompt_tokens_count": 20.0,
        "request_generation_tokens_sum": 20 * 400.0,
        "request_generation_tokens_count": 20.0,
    }
    base.update(kw)
    return EngineSnapshot(engine=engine, **base)  # type: ignore[arg-type]


def test_vllm_histograms_give_the_finished_requests_mean_not_the_counters_quotient() -> None:
    # counters ÷ finished would say (1,352,000 + 8,600) ÷ 20 = 68,030 tokens: eight times the 8,000 that finished
    assert lifetime([_hist()]) == pytest.approx(8_000.0)
    assert lifetime([_hist(), _hist()]) == pytest.approx(8_000.0)


def test_tgi_takes_each_histogram_over_its_own_requests() -> None:
    # TGI observes an input length for every validated request (400, queued and failed ones too: the arriving
    # traffic) and generated tokens for every successful one (390): 6,000 + 1,200, each over its own count
    snap = _hist(
        "tgi",
        request_prompt_tokens_sum=400 * 6_000.0,
        request_prompt_tokens_count=400.0,
        request_generation_tokens_sum=390 * 1_200.0,
        request_generation_tokens_count=390.0,
    )
    assert lifetime([snap]) == pytest.approx(7_200.0)


def test_targets_are_summed_before_dividing() -> None:
    # 30 requests of 1,000 on one target, 10 of 9,000 on the other: 3,000 per request, not the mean of the means
    a = _hist(
        request_prompt_tokens_sum=30_000.0,
        request_prompt_tokens_count=30.0,
        request_generation_tokens_sum=0.0,
        request_generation_tokens_count=30.0,
    )
    b = _hist(
        request_prompt_tokens_sum=90_000.0,
        request_prompt_tokens_count=10.0,
        request_generation_tokens_sum=0.0,
        request_generation_tokens_count=10.0,
    )
    assert lifetime([a, b]) == pytest.approx(3_000.0)


@pytest.mark.parametrize(
    "kw",
    [
        {"request_prompt_tokens_count": float(MIN_LIFETIME_FINISHED - 1)},
        {"request_generation_tokens_count": float(MIN_LIFETIME_FINISHED - 1)},
        {"request_generation_tokens_sum": None},
        {"request_prompt_tokens_sum": float("nan")},
    ],
)
def test_histograms_unknown_or_too_few_fall_back_to_the_counters_rule(kw: dict[str, float | None]) -> None:
    # vLLM's counters are never read for this: None, not the 68,030 of the counters' quotient
    assert lifetime([_hist(**kw)]) is None
    # an SGLang target with the same gap still has its exact counters
    assert lifetime([_snap("sglang", **kw)]) == pytest.approx(MEAN)


def test_one_target_without_histograms_makes_the_histogram_mean_unknown() -> None:
    # a fleet mean over some targets would be a different traffic's: the counters' rule then decides (vLLM: none)
    assert lifetime([_hist(), _snap("vllm")]) is None


# --- the same histograms over the window (evaluate's ``_window_histogram_request_tokens``) --------------------------

from advisor.evaluate import _window_histogram_request_tokens as window_mean  # noqa: E402


def _at(p_sum: float, p_n: float, g_sum: float, g_n: float, start: float | None = 1_000.0) -> EngineSnapshot:
    return EngineSnapshot(
        engine="vllm",
        request_prompt_tokens_sum=p_sum,
        request_prompt_tokens_count=p_n,
        request_generation_tokens_sum=g_sum,
        request_generation_tokens_count=g_n,
        process_start_time_seconds=start,
    )


def test_window_mean_is_the_rise_of_each_sum_over_the_rise_of_its_count() -> None:
    # prompt 100,000 → 180,000 over 10 → 20 requests; generation 5,000 → 9,000 over 10 → 20: 8,000 + 400
    window = [_at(100_000, 10, 5_000, 10), _at(140_000, 15, 7_000, 15), _at(180_000, 20, 9_000, 20)]
    assert window_mean([(None, window)]) == pytest.approx(8_400.0)  # type: ignore[list-item]


def test_window_mean_sums_targets_before_dividing() -> None:
    a = [_at(0, 0, 0, 0), _at(30_000, 30, 0, 30)]
    b = [_at(0, 0, 0, 0), _at(90_000, 10, 0, 10)]
    assert window_mean([(None, a), (None, b)]) == pytest.approx(3_000.0)  # type: ignore[list-item]


def test_window_mean_counts_a_restart_from_zero() -> None:
    # the engine restarted between the scrapes (new start time) and has since finished 2 requests of 500 + 50: the
    # restart's values are the rise, not 1,000 − 100,000
    window = [_at(100_000, 10, 5_000, 10, start=1_000.0), _at(1_000, 2, 100, 2, start=5_000.0)]
    assert window_mean([(None, window)]) == pytest.approx(550.0)  # type: ignore[list-item]


@pytest.mark.parametrize(
    "window",
    [
        [_at(100_000, 10, 5_000, 10)],  # one sample: no rise
        [_at(100_000, 10, 5_000, 10), _at(100_000, 10, 5_000, 10)],  # nothing observed
        [_at(100_000, 10, 5_000, 10), _at(140_000, 15, 5_000, 10)],  # no generation observed
    ],
)
def test_window_mean_unknown_without_observations(window: list[EngineSnapshot]) -> None:
    assert window_mean([(None, window)]) is None  # type: ignore[list-item]


def test_a_target_without_the_histograms_makes_the_window_mean_unknown() -> None:
    # the counters' quotient then decides for the whole deployment, as before
    plain = [EngineSnapshot(engine="sglang"), EngineSnapshot(engine="sglang")]
    assert window_mean([(None, [_at(0, 0, 0, 0), _at(1_000, 1, 10, 1)]), (None, plain)]) is None  # type: ignore[list-item]


# --- found by a breaker: restarts without a start time, sums and counts over different scrapes, impossible values --


def _bare(p_sum: float | None, p_n: float | None, g_sum: float | None, g_n: float | None) -> EngineSnapshot:
    """A page without ``process_start_time_seconds`` (TGI; vLLM serving from several API processes)."""
    return _at(p_sum, p_n, g_sum, g_n, start=None)  # type: ignore[arg-type]


def test_a_restart_without_a_start_time_resets_all_four_together() -> None:
    # 100 requests of 3,000 + 300, restart, then 101 chats of 1,000 + 200: the prompt sum fell (100,000 < 300,000) but
    # its count did not (101 > 100); read apart, the count's rise would be 1 and the mean 121,200. One restart resets
    # every series: the rises are the post-restart values, 1,000 + 200
    window = [_bare(300_000, 100, 30_000, 100), _bare(101_000, 101, 20_200, 101)]
    assert window_mean([(None, window)]) == pytest.approx(1_200.0)  # type: ignore[list-item]


def test_a_sum_and_its_count_span_the_same_scrapes() -> None:
    # the last scrape lost its prompt count: the rises are taken between the scrapes that give all four, here the
    # first two (20 requests of 1,000 + 200), not the prompt sum to the third over the count to the second
    window = [_bare(0, 0, 0, 0), _bare(20_000, 20, 4_000, 20), _bare(60_000, None, 12_000, 60)]
    assert window_mean([(None, window)]) == pytest.approx(1_200.0)  # type: ignore[list-item]


@pytest.mark.parametrize(
    "bad",
    [
        (5_000.0, 0.0, 0.0, 0.0),  # tokens over no request
        (-1.0, 1.0, 0.0, 1.0),  # a negative sum
    ],
)
def test_impossible_histogram_values_are_unknown_not_a_mean(bad: tuple[float, float, float, float]) -> None:
    snap = _hist(
        request_prompt_tokens_sum=bad[0],
        request_prompt_tokens_count=bad[1],
        request_generation_tokens_sum=bad[2],
        request_generation_tokens_count=bad[3],
    )
    good = _hist()
    assert lifetime([good, snap]) is None


def test_a_mean_longer_than_the_context_is_unknown() -> None:
    # 8,000 tokens a request cannot come from an engine capped at 4,096 tokens a request
    assert lifetime([_hist()], max_model_len=4_096) is None
    assert lifetime([_hist()], max_model_len=8_192) == pytest.approx(8_000.0)
    window = [_at(0, 0, 0, 0), _at(80_000, 10, 0, 10)]
    assert window_mean([(None, window)], 4_096) is None  # type: ignore[list-item]
    assert window_mean([(None, window)], 8_192) == pytest.approx(8_000.0)  # type: ignore[list-item]


def test_the_window_mean_is_computed_once_when_first_asked() -> None:
    from advisor.rules.base import LazyFloat

    calls: list[int] = []

    def compute() -> float:
        calls.append(1)
        return 1_200.0

    lazy = LazyFloat(compute)
    assert calls == []  # an evaluation that no cap rule reads never walks the window
    assert lazy() == lazy() == 1_200.0
    assert calls == [1]
    assert lazy == LazyFloat(lambda: 1_200.0) and lazy != LazyFloat(lambda: None)


def test_the_lifetime_prompt_to_generation_mix_sums_the_targets_and_needs_every_one() -> None:
    """Field-state round 70: the n-gram gate reads the traffic's mix since the engines started, not a window of
    seconds whose edges may hold one prefill (2.8 read where the traffic is 0.2)."""
    from advisor.evaluate import MIN_LIFETIME_GENERATED_TOKENS
    from advisor.evaluate import lifetime_prompt_per_generated_token as mix

    a = EngineSnapshot(engine="vllm", prompt_tokens_total=2_600.0, generation_tokens_total=12_930.0)
    b = EngineSnapshot(engine="vllm", prompt_tokens_total=400.0, generation_tokens_total=2_070.0)
    assert mix([a, b]) == pytest.approx(3_000 / 15_000)
    assert mix([a, EngineSnapshot(engine="vllm", prompt_tokens_total=400.0)]) is None  # one target unknown
    assert (
        mix([a, EngineSnapshot(engine="vllm", prompt_tokens_total=float("nan"), generation_tokens_total=9.0)]) is None
    )
    young = EngineSnapshot(
        engine="vllm", prompt_tokens_total=8_000.0, generation_tokens_total=MIN_LIFETIME_GENERATED_TOKENS - 1
    )
    assert mix([young]) is None  # a restarted engine's first prefill reads as all prompt
    assert mix([]) is None


def test_the_window_generation_mean_is_the_finished_requests_own_and_needs_five() -> None:
    """Breaker 25: the replica sizing read 538 generated tokens a request from the counters while the batch grew;
    the finished requests' own mean (the generation histogram's rise ÷ its count's rise) is 300."""
    from advisor.evaluate import MIN_WINDOW_FINISHED_FOR_LENGTH
    from advisor.evaluate import _window_generation_tokens as generation_mean

    window = [_at(100_000, 10, 5_000, 10), _at(140_000, 15, 6_500, 15), _at(180_000, 20, 8_000, 20)]
    assert generation_mean([(None, window)]) == pytest.approx(300.0)  # type: ignore[list-item]
    assert generation_mean([(None, window)], max_model_len=299) is None  # type: ignore[list-item]
    few = [_at(0, 0, 0, 0), _at(8_000, MIN_WINDOW_FINISHED_FOR_LENGTH - 1, 1_200, MIN_WINDOW_FINISHED_FOR_LENGTH - 1)]
    assert generation_mean([(None, few)]) is None  # type: ignore[list-item]
    bare = [EngineSnapshot(engine="vllm"), EngineSnapshot(engine="vllm")]
    assert generation_mean([(None, bare)]) is None  # type: ignore[list-item]
