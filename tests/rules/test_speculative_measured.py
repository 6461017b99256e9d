"""speculative_decoding with the engine's draft counters (vLLM V1, llama.cpp): the measured round against the
roofline decides; the batch threshold still applies unless the measurement shows a clear win; a speculation the
counters show running is never proposed again.

Every case sits far from the rule's bounds (0.9 to fire, 1.1 to shorten, 1.5 for a clear win) on Llama-3.1-8B on
one H100-SXM (:func:`tests.factories.context`) with its 432,000-token pool 90 % used: a small batch is bound by
reading the weights (4 sequences verify 5 tokens each for about one step's time), while 1,024 sequences of ~380
tokens are bound by their FLOPs and pay about k + 1 steps for every round.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.capacity.speculative import SpeculativeDraft
from advisor.rules.speculative import REENABLE_AFTER_SECONDS, SpeculativeRule, _per_token
from advisor.telemetry import SpeculationWindow
from tests.rules.helpers import ctx, ev, hist

RULE = SpeculativeRule(max_batch_per_replica=4, disable_by_batch_size=8, disable_above_batch_per_replica=32)
TPOT = hist((0.05, 0), (0.1, 100), total_sum=7.5)


def _ev(spec: SpeculationWindow | None, *, dep: Any = None, **kw: Any) -> Any:
    stats: dict[str, Any] = {"requests_running": 4, "tpot_ok": 0.95, "tpot": TPOT, "kv_cache_usage_ratio": 0.9}
    stats.update(kw)
    return dataclasses.replace(ev(dep=dep, **stats), speculation=spec)


def _window(drafts: float, k: int, positions: list[float]) -> SpeculationWindow:
    """``drafts`` drafts of ``k`` tokens with the given share accepted at each position."""
    accepted = [drafts * p for p in positions]
    return SpeculationWindow(drafts, drafts * k, sum(accepted), tuple(accepted))


# 1.5 tokens a round for 7 scored: at 1,024 sequences the round costs ~8 steps
LOW = _window(1000, 7, [0.3, 0.1, 0.05, 0.03, 0.01, 0.005, 0.005])
# position 0 mostly accepted, the rest rarely: one draft token pays where eight do not (at 512 sequences)
FRONT = _window(1000, 8, [0.7, 0.05, 0.02, 0.01, 0.0, 0.0, 0.0, 0.0])
# 3 tokens a round for 3 scored (EAGLE-like acceptance)
HIGH = _window(1000, 3, [0.8, 0.7, 0.5])


def test_a_compute_bound_loss_fires_with_tpot_met_and_turns_speculation_off() -> None:
    e = _ev(LOW, requests_running=1024, tpot_ok=0.95)
    assert RULE.fires(e).holds is True
    (p,) = RULE.propose(e)
    assert (p.dial, p.action, p.severity) == ("speculative_decoding", "disable", "info")
    assert p.evidence["spec_mean_acceptance_length"] == pytest.approx(1.5)
    assert p.evidence["spec_speedup_bound"] < 0.5  # ~0.32
    assert "1.50 tokens per sequence" in p.description


def test_the_loss_is_a_warning_when_tpot_misses() -> None:
    (p,) = RULE.propose(_ev(LOW, requests_running=1024, tpot_ok=0.5))
    assert (p.action, p.severity) == ("disable", "warning")


def test_a_shorter_draft_is_proposed_where_only_the_first_position_pays() -> None:
    base = ctx()
    draft = SpeculativeDraft(method="eagle", num_speculative_tokens=8, draft_layers=1)
    dep = dataclasses.replace(base, inputs=dataclasses.replace(base.inputs, speculative=draft))
    e = _ev(FRONT, dep=dep, requests_running=512)
    assert RULE.fires(e).holds is True
    (p,) = RULE.propose(e)
    assert (p.action, p.current, p.suggested) == ("decrease", 8, 1)
    # only the draft length changes: a whole config without the EAGLE head's model would not start the engine
    assert p.flag is not None and '"num_speculative_tokens": 1' in p.flag and "keep its method, model" in p.flag
    assert p.evidence["spec_position_acceptance"][:2] == [0.7, 0.05]
    assert (
        p.predicted_effect["spec_speedup_bound"]["after"]
        > 1.1
        > 0.9
        > p.predicted_effect["spec_speedup_bound"]["before"]
    )


def test_llamacpp_shortens_with_draft_max() -> None:
    e = _ev(FRONT, dep=ctx(engine="llamacpp"), requests_running=512)
    (p,) = RULE.propose(e)
    assert (p.action, p.suggested) == ("decrease", 1)
    assert p.flag is not None and "--draft-max 1" in p.flag


def test_without_positions_the_loss_can_only_turn_speculation_off() -> None:
    bare = dataclasses.replace(FRONT, accepted_by_position=())
    (p,) = RULE.propose(_ev(bare, requests_running=512))
    assert p.action == "disable"


def test_a_memory_bound_round_is_no_loss_and_running_speculation_is_never_enabled() -> None:
    # 4 sequences, TPOT missed, config silent about speculation: the counters say it runs
    weak = _window(1000, 4, [0.1, 0.05, 0.03, 0.02])
    e = _ev(weak, requests_running=4, tpot_ok=0.5)
    assert e.ctx.speculative_decoding is False
    assert RULE.fires(e).holds is False
    assert RULE.propose(e) == []
    # the same evaluation without the counters: the old reading, which enables speculation
    (p,) = RULE.propose(dataclasses.replace(e, speculation=None))
    assert p.action == "enable"


def test_a_clear_win_withholds_the_batch_threshold() -> None:
    # 64 per replica > 32 with TPOT missed: the threshold alone would disable; 3 tokens a round at ~1 step says no
    e = _ev(HIGH, dep=ctx(speculative=True), requests_running=64, tpot_ok=0.5)
    assert RULE.fires(e).holds is False
    assert RULE.clears(e).holds is True


def test_near_break_even_the_batch_threshold_still_disables() -> None:
    # 1.9 tokens a round for 3 scored at 256 sequences: no loss the roofline shows (~1.15), no clear win either
    even = _window(1000, 3, [0.6, 0.2, 0.1])
    e = _ev(even, dep=ctx(speculative=True), requests_running=256, tpot_ok=0.5)
    bound = RULE.measure(e)
    assert bound is not None and 0.9 <= bound.speedup < 1.5
    assert RULE.fires(e).holds is True
    (p,) = RULE.propose(e)
    assert p.action == "disable" and "TPOT misses its target" in p.description


def test_too_few_drafts_fall_back_to_the_batch_threshold() -> None:
    few = _window(49, 7, [0.3, 0.1, 0.05, 0.03, 0.01, 0.005, 0.005])
    e = _ev(few, requests_running=1024, tpot_ok=0.95)
    assert RULE.measure(e) is None
    assert RULE.fires(e).holds is False  # TPOT met: the threshold does not fire


def test_no_gpu_means_no_measurement() -> None:
    dep = dataclasses.replace(ctx(), gpu=None)
    e = _ev(LOW, dep=dep, requests_running=1024, tpot_ok=0.95)
    assert RULE.measure(e) is None


def test_a_bound_just_above_the_loss_bound_neither_fires_nor_clears() -> None:
    # the loss fires below 0.9 and clears only at 0.95 or more: between, an open recommendation stays
    for window, expect_fire, expect_clear in (
        (_window(1000, 3, [0.6, 0.2, 0.1]), False, True),  # ~1.15 at 256: clear of the band
    ):
        e = _ev(window, requests_running=256)
        assert RULE.fires(e).holds is expect_fire
        assert RULE.clears(e).holds is expect_clear
    band = _in_band()
    assert RULE.fires(band).holds is False
    assert RULE.clears(band).holds is False


def _in_band() -> Any:
    """An evaluation whose bound lies in [0.9, 0.95), found by raising the batch of a fixed window (the bound falls
    as the batch grows past the ridge)."""
    w = _window(1000, 3, [0.6, 0.2, 0.1])
    for running in range(256, 4096, 4):
        e = _ev(w, requests_running=running)
        m = RULE.measure(e)
        assert m is not None
        if 0.9 <= m.speedup < 0.95:
            return e
    raise AssertionError("no batch puts the bound in the band")


def test_sglang_measured_from_its_gauges_can_only_turn_speculation_off() -> None:
    # SGLang's gauges give no positions: a measured loss at 1,024 sequences is a disable, never a shorter draft
    gauges = SpeculationWindow(1000.0, 1000.0 * 6, 1000.0 * 0.2)
    (p,) = RULE.propose(_ev(gauges, dep=ctx(engine="sglang"), requests_running=1024))
    assert (p.action, p.flag) == ("disable", "turn speculative decoding off")


# --- the engine's own time per token against the modelled plain decode (MEASURED_LOSS_BOUND) ------------------------


def _timed(spec: SpeculationWindow, tpot_seconds: float) -> Any:
    """4 sequences on one engine, 1 request/s of 500 prompt + 200 output tokens, 100 requests whose TPOT averages
    ``tpot_seconds``; the running sequences hold ~600 tokens each (0.55 % of the 432,000-token pool)."""
    tpot = hist((10.0, 100), total_sum=100 * tpot_seconds)
    return _ev(
        spec,
        tpot=tpot,
        kv_cache_usage_ratio=0.0055,
        requests_finished_per_second=1.0,
        prompt_tokens_per_second=500.0,
        generation_tokens_per_second=200.0,
    )


def _plain_tpot() -> float:
    plain = _per_token(_timed(HIGH, 0.01))[1]
    assert plain is not None
    # Llama-3.1-8B bf16 on one H100-SXM at 4 sequences: 16.1 GB of weights at 3.35 TB/s × 0.5-0.95, plus a step's
    # overhead, plus the prompts' share of the GPU
    assert 16.06e9 / 3.35e12 / 0.95 < plain < 16.06e9 / 3.35e12 / 0.5 + 0.01
    return plain


def test_a_token_slower_than_plain_decoding_beyond_the_model_s_bound_turns_speculation_off() -> None:
    # the roofline bounds HIGH's free-draft speedup well above 1.5 (a clear win): only the engine's own time per token,
    # twice the modelled plain TPOT, shows the draft's cost
    e = _timed(HIGH, 2.0 * _plain_tpot())
    holds = RULE.fires(e)
    assert holds.holds is True, holds.reason
    (p,) = RULE.propose(e)
    assert (p.dial, p.action) == ("speculative_decoding", "disable")
    assert p.evidence["spec_measured_speedup"] == pytest.approx(0.5, rel=1e-3)
    assert "without speculation" in holds.reason


@pytest.mark.parametrize("times", [0.6, 1.0, 1.3])
def test_a_token_within_the_model_s_error_of_plain_decoding_is_no_measured_loss(times: float) -> None:
    # 1.3× the modelled plain TPOT is within what the model's 25 % error allows (the engine's plain decoding could be
    # that slow): no loss is measured, and HIGH's clear win keeps the rule quiet
    e = _timed(HIGH, times * _plain_tpot())
    assert RULE.fires(e).holds is False
    assert RULE.propose(e) == []


def test_the_measured_loss_clears_only_past_its_margin() -> None:
    # 0.77: no longer a loss (≥ 0.75) but within the 0.05 margin, so an open incident stays open
    e = _timed(HIGH, _plain_tpot() / 0.77)
    assert RULE.fires(e).holds is False
    assert RULE.clears(e).holds is False
    assert RULE.clears(_timed(HIGH, _plain_tpot() / 0.9)).holds is True


def test_a_per_step_inter_token_latency_is_a_round_not_a_token() -> None:
    # vLLM before its per-request TPOT (0.11) has only inter-token latency, one gap per engine step per request
    # (v1/metrics/stats.py update_from_output): a round of HIGH's 3.0 tokens in 2.5 plain steps is one 2.5-step gap,
    # 0.83 of a plain step per token: a win, not a loss
    e = dataclasses.replace(_timed(HIGH, 2.5 * _plain_tpot()), tpot_is_itl=True)
    assert RULE.fires(e).holds is False
    assert RULE.propose(e) == []
    # SGLang divides a multi-token interval by its tokens (collector.py): its inter-token latency is per token, and
    # 2.5 plain steps a token is a loss
    sglang = dataclasses.replace(e, ctx=dataclasses.replace(e.ctx, engine="sglang"))
    assert RULE.fires(sglang).holds is True


def test_a_speculation_measured_as_a_loss_is_not_enabled_again_for_a_day() -> None:
    """vllm-project/vllm#35387's shape: MTP measured at 2× the plain TPOT at a small batch is turned off; with it off
    the small batch still misses TPOT, and the enable side would propose the same speculation again. It does not for
    REENABLE_AFTER_SECONDS (24 h), then may."""
    rule = SpeculativeRule(max_batch_per_replica=4, disable_by_batch_size=8, disable_above_batch_per_replica=32)
    loss = dataclasses.replace(_timed(HIGH, 2.0 * _plain_tpot()), now=1_000.0)
    assert rule.fires(loss).holds is True
    # held for the rule's 300 s for-duration, as the lifecycle turns it off
    assert rule.fires(dataclasses.replace(loss, now=1_300.0)).holds is True
    off = dataclasses.replace(_ev(None, requests_running=2, tpot_ok=0.5), now=1_000.0 + 600)
    fired = rule.fires(off)
    assert fired.holds is False and "measured as a loss" in fired.reason
    assert rule.propose(off) == []
    later = dataclasses.replace(off, now=1_300.0 + REENABLE_AFTER_SECONDS + 1)
    assert rule.fires(later).holds is True
    # another deployment's loss says nothing of this one
    assert SpeculativeRule().fires(off).holds is True


def test_a_loss_read_in_one_window_only_does_not_keep_speculation_off() -> None:
    """A loss measured in one window and gone in the next never held for the for-duration, so it never turned
    speculation off: the enable side stays free to propose it (the 24 h memory needs a loss the rule fired on)."""
    rule = SpeculativeRule(max_batch_per_replica=4, disable_by_batch_size=8, disable_above_batch_per_replica=32)
    assert rule.fires(dataclasses.replace(_timed(HIGH, 2.0 * _plain_tpot()), now=1_000.0)).holds is True
    assert rule.fires(dataclasses.replace(_timed(HIGH, 1.0 * _plain_tpot()), now=1_060.0)).holds is False
    assert rule.fires(dataclasses.replace(_timed(HIGH, 2.0 * _plain_tpot()), now=1_400.0)).holds is True
    off = dataclasses.replace(_ev(None, requests_running=2, tpot_ok=0.5), now=1_500.0)
    assert rule.fires(off).holds is True


def test_a_few_short_requests_slower_than_the_engine_s_own_pace_are_not_its_time_per_token() -> None:
    """4 sequences generate 420 tokens/s (9.5 ms between a sequence's tokens, Little's law); the one request that
    finished had two gaps, each on a 2,048-token prefill chunk, and averages 130 ms: its TPOT is not the engine's
    pace, so no loss is read from it (it read 0.24× and turned a winning EAGLE off)."""
    tpot = hist((10.0, 1), total_sum=0.130)
    e = _ev(
        HIGH,
        tpot=tpot,
        requests_finished_per_second=0.05,
        prompt_tokens_per_second=500.0,
        generation_tokens_per_second=420.0,
    )
    e = dataclasses.replace(e, counter_deltas={"generation_tokens": 420.0 * 30})
    assert _per_token(e) == (None, None)
    assert RULE.fires(e).holds is False
    # the same request at the engine's pace (within twice its interval) is read
    paced = dataclasses.replace(e, stats=dataclasses.replace(e.stats, tpot=hist((10.0, 1), total_sum=0.012)))
    assert _per_token(paced)[0] == pytest.approx(0.012)


def test_the_plain_step_is_priced_at_the_running_sequences_context() -> None:
    """8 sequences hold 90 % of a 432,000-token pool (~48,600 tokens each) while the requests that finished were
    short chats (500 + 200 tokens): a plain step reads the running sequences' KV, so the modelled plain TPOT is the
    long context's, well above the short one's."""
    long_running = _ev(
        HIGH,
        requests_running=8,
        tpot=hist((10.0, 100), total_sum=100 * 0.02),
        requests_finished_per_second=1.0,
        prompt_tokens_per_second=500.0,
        generation_tokens_per_second=400.0,
    )
    short_running = dataclasses.replace(
        long_running, stats=dataclasses.replace(long_running.stats, kv_cache_usage_ratio=0.01)
    )
    long_plain, short_plain = _per_token(long_running)[1], _per_token(short_running)[1]
    assert long_plain is not None and short_plain is not None
    # 8 × 48,600 tokens × 128 KiB a token (Llama-3.1-8B bf16: 32 layers × 8 KV heads × 128 × 2 × 2 B) ≈ 51 GB more a
    # step at 3.35 TB/s: at least 10 ms slower than the chats' plain step
    assert long_plain - short_plain > 0.010


def test_a_loss_interrupted_by_an_unmeasured_window_starts_afresh() -> None:
    """A loss read at t = 1,000, then a window with too few drafts to measure (the lifecycle resets its pending timer
    on it), then a loss again at t = 2,200: the loss never held for the for-duration, so the enable side stays free
    (it was remembered as held from t = 1,000 and kept speculation off for a day)."""
    rule = SpeculativeRule(max_batch_per_replica=4, disable_by_batch_size=8, disable_above_batch_per_replica=32)
    assert rule.fires(dataclasses.replace(_timed(HIGH, 2.0 * _plain_tpot()), now=1_000.0)).holds is True
    few = _window(10, 3, [0.8, 0.7, 0.5])  # below MIN_DRAFTS: not measured
    rule.fires(dataclasses.replace(_timed(few, 2.0 * _plain_tpot()), now=1_600.0))
    assert rule.fires(dataclasses.replace(_timed(HIGH, 2.0 * _plain_tpot()), now=2_200.0)).holds is True
    off = dataclasses.replace(_ev(None, requests_running=2, tpot_ok=0.5), now=3_000.0)
    assert rule.fires(off).holds is True
