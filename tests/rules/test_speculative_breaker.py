"""Breaker tests for speculative_decoding's measured reading (commit 11437d5): inputs where the draft counters, their
window or the rule gave wrong or harmful advice, each with the right value (all fixed since; they stay as
regressions), and a few cases that pin behaviour that held.

Deployment: Llama-3.1-8B on one H100-SXM (:func:`tests.factories.context`), as in ``test_speculative_measured.py``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.capacity.speculative import SpeculativeDraft
from advisor.domain import EngineSnapshot, TimedSnapshot
from advisor.evaluate import Quality, TargetView, evaluate_deployment
from advisor.rules.speculative import SpeculativeRule
from advisor.telemetry import SpeculationWindow, speculation_window
from tests.factories import context
from tests.rules.helpers import ctx, ev, hist

RULE = SpeculativeRule(max_batch_per_replica=4, disable_by_batch_size=8, disable_above_batch_per_replica=32)
TPOT = hist((0.05, 0), (0.1, 100), total_sum=7.5)
URL = "http://e:8000/metrics"


def _ev(spec: SpeculationWindow | None, *, dep: Any = None, **kw: Any) -> Any:
    stats: dict[str, Any] = {"requests_running": 4, "tpot_ok": 0.95, "tpot": TPOT, "kv_cache_usage_ratio": 0.9}
    stats.update(kw)
    return dataclasses.replace(ev(dep=dep, **stats), speculation=spec)


def _window(drafts: float, k: int, positions: list[float]) -> SpeculationWindow:
    accepted = [drafts * p for p in positions]
    return SpeculationWindow(drafts, drafts * k, sum(accepted), tuple(accepted))


def _with_draft(draft: SpeculativeDraft) -> Any:
    base = ctx()
    return dataclasses.replace(base, inputs=dataclasses.replace(base.inputs, speculative=draft))


def _at(
    t: float,
    drafts: float | None,
    tokens: float | None,
    accepted: float | None,
    pos: tuple[float | None, ...] = (),
    start: float | None = None,
    generated: float | None = None,
    running: float | None = None,
) -> TimedSnapshot:
    snap = EngineSnapshot(
        engine="vllm",
        process_start_time_seconds=start,
        generation_tokens_total=generated,
        requests_running=running,
        spec_drafts_total=drafts,
        spec_draft_tokens_total=tokens,
        spec_accepted_tokens_total=accepted,
        spec_accepted_tokens_by_position=pos,
    )
    return TimedSnapshot(URL, t, snap)


def _evaluate(history: list[TimedSnapshot], now: float) -> Any:
    view = TargetView(URL, True, None, None, tuple(history))
    e, _ = evaluate_deployment(context(), [view], now, 60.0, Quality(15.0))
    return e


# --- "running" must never read as "not running" -----------------------------------------------------------------


def test_spec_counters_present_but_flat_never_propose_enable() -> None:
    # vLLM registers vllm:spec_decode_* only when a speculative_config is set (vllm/v1/spec_decode/metrics.py,
    # SpecDecodingProm.__init__: ``if not self.spec_decoding_enabled: return``; vllm#15958): the families on the page
    # say speculation is configured even when no draft was made in the window (an n-gram method whose prompts never
    # repeat). Proposing '--speculative-config {"method": "ngram", ...}' then tells the operator to enable what runs.
    history = [_at(1000 + 15 * i, 5000, 20000, 1200, (600, 300, 200, 100), running=2) for i in range(5)]
    e = _evaluate(history, now=1060)
    assert e.speculation is not None and e.speculation.drafts == 0  # the counters are read: present, not moved
    assert e.speculation_runs() is True


def test_flat_counters_at_the_rule_do_not_enable() -> None:
    # a vLLM page (configured: the counters exist only with a speculative_config) whose drafts stood still
    e = _ev(SpeculationWindow(0, 0, 0, (0, 0, 0, 0), configured=True), requests_running=2, tpot_ok=0.5)
    assert [p.action for p in RULE.propose(e)] != ["enable"]
    # llama.cpp writes the same counters at 0 without a draft model: flat ones there say nothing, enabling stays open
    flat = _ev(SpeculationWindow(0, 0, 0), requests_running=2, tpot_ok=0.5)
    assert [p.action for p in RULE.propose(flat)] == ["enable"]


def test_draft_tokens_moving_without_a_drafts_counter_say_speculation_runs() -> None:
    # vllm#15151 (0.8.2) added num_draft_tokens and num_accepted_tokens; num_drafts and the per-position counter came
    # with vllm#16665 (0.8.5). On those builds the draft-token counter moves while spec_drafts_total is None: the
    # evaluation skips the target (``spec_drafts_total is not None``) and a config silent about speculation leads the
    # rule to enable it again. A draft token proposed means speculation runs, whatever counts the drafts.
    history = [_at(1000 + 15 * i, None, 3000 + 900 * i, 1000 + 400 * i, running=2) for i in range(5)]
    e = _evaluate(history, now=1060)
    assert e.speculation_runs() is True


# --- inconsistent counters must not produce a "clear win" ---------------------------------------------------------


def test_accepted_beyond_drafted_cannot_withhold_the_big_batch_disable() -> None:
    # 1,000 drafts of 2 tokens with 3,000 'accepted' (impossible: at most 2,000 of 2,000 proposed; a reset seen by one
    # counter and not the other gives this). A round yields at most k + 1 = 3 tokens: at 1,024 sequences the capped
    # bound is ~1.45 < CLEAR_WIN, so 1,024 per replica > 32 with TPOT missed disables (unmeasured: the same). The rule
    # reads 1 + 3000/1000 = 4 tokens a round, a bound of ~1.93, and withholds the disable.
    w = SpeculationWindow(1000, 2000, 3000)
    e = _ev(w, dep=ctx(speculative=True), requests_running=1024, tpot_ok=0.5)
    assert RULE.fires(e).holds is True


def test_a_restart_flagged_where_the_draft_counter_is_unknown_still_resets_it() -> None:
    # process_start_time moves at t=15 (a new process), whose page does not yet carry the spec counters; at t=30 the
    # new process has counted 1,200 drafts, 4,800 draft tokens, 300 accepted. _walk_counter carries a flag on an unknown
    # point to the next known one, but speculation_window drops the unknown points (and their flags) first: drafts and
    # draft tokens, which did not drop, read 200 and 800 while accepted (which dropped) reads 300 -> 2.5 tokens a round
    # where the new process makes 1.25.
    history = [
        _at(0, 1000, 4000, 2000, start=1.0),
        _at(15, None, None, None, start=500.0),
        _at(30, 1200, 4800, 300, start=500.0),
    ]
    w = speculation_window(history, now=30, window_seconds=60)
    assert w is not None
    assert (w.drafts, w.draft_tokens, w.accepted_tokens) == (1200, 4800, 300)


def test_positions_first_listed_inside_the_window_count_from_zero_when_the_page_listed_none() -> None:
    # llama.cpp writes ..._per_pos_total only once a draft token there was accepted (NAME_TABLE). At t=0 the page counts
    # 20 drafts, 0 accepted and lists no position: each position is 0 then (the same reading _position gives a position
    # past a shorter tuple). Skipping t=0 counts positions from t=150 only: (200, 80, 20) against 1,000 drafts, half of
    # the truth, and their sum (300) disagrees with the accepted counter (600).
    history = [
        _at(0, 20, 160, 0, ()),
        _at(150, 520, 4160, 300, (200, 80, 20)),
        _at(300, 1020, 8160, 600, (400, 160, 40)),
    ]
    w = speculation_window(history, now=300, window_seconds=300)
    assert w is not None
    assert w.accepted_by_position == (400, 160, 40)


# --- unknown is not "no" ----------------------------------------------------------------------------------------------


def test_tpot_unknown_with_an_undecided_bound_is_unknown() -> None:
    # 1.9 tokens a round for 3 drafted at 256 per replica: bound ~1.15, neither a loss nor a clear win, so the batch
    # threshold decides, and it needs TPOT. Without TPOT the old reading (and this rule without counters) says None;
    # the measured reading says False, so clears() is True and an open "disable at this batch" resolves on a scrape
    # that lost the TPOT histogram.
    w = _window(1000, 3, [0.6, 0.2, 0.1])
    e = dataclasses.replace(_ev(w, dep=ctx(speculative=True), requests_running=256), tpot_ok=None)
    m = RULE.measure(e)
    assert m is not None and 0.9 <= m.speedup < 1.5
    assert RULE.fires(e).holds is None
    assert RULE.clears(e).holds is None


# --- the proposal must be what runs and what the engine accepts ----------------------------------------------------


def test_the_counters_draft_length_is_the_current_one() -> None:
    # vLLM creates exactly num_speculative_tokens position counters and every EAGLE/ngram draft scores k tokens, so
    # 8,000 draft tokens over 1,000 drafts and 8 positions say k = 8 runs, whatever the advisor's config says (2).
    # At 1,024 sequences the bound is ~0.72 at k = 8 and ~1.42 (>= 1.1) at k = 3: shorten 8 -> 3. The rule takes
    # current = 2 from the config, finds 3 not below it and turns speculation off.
    w = _window(1000, 8, [0.95, 0.9, 0.85, 0.05, 0.02, 0.01, 0.0, 0.0])
    e = _ev(w, dep=_with_draft(SpeculativeDraft(method="ngram", num_speculative_tokens=2)), requests_running=1024)
    (p,) = RULE.propose(e)
    assert (p.action, p.current, p.suggested) == ("decrease", 8, 3)


def test_a_shortened_eagle_config_keeps_its_draft_model() -> None:
    # vLLM SpeculativeConfig.__post_init__ (vllm/config/speculative.py): model None with num_speculative_tokens set and
    # a method other than mtp/ngram/ngram_gpu/suffix raises "num_speculative_tokens was provided but without
    # speculative model." '{"method": "eagle", "num_speculative_tokens": 1}' cannot start the engine; the flag must
    # carry the draft (the head's path, or a placeholder for it) or say to change only num_speculative_tokens.
    w = _window(1000, 8, [0.7, 0.05, 0.02, 0.01, 0.0, 0.0, 0.0, 0.0])
    dep = _with_draft(SpeculativeDraft(method="eagle", num_speculative_tokens=8, draft_layers=1))
    (p,) = RULE.propose(_ev(w, dep=dep, requests_running=512))
    assert p.action == "decrease" and p.flag is not None
    assert '"num_speculative_tokens": 1' in p.flag and "keep its method, model" in p.flag
    assert "'{" not in p.flag  # no whole config that would replace the running one without its model


# --- what holds ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["sglang", "tgi", "trtllm"])
def test_engines_without_counters_read_as_before(engine: str) -> None:
    # no counters read: the batch threshold alone (enable at <= 4 per replica with TPOT missed)
    (p,) = RULE.propose(_ev(None, dep=ctx(engine=engine), requests_running=2, tpot_ok=0.5))
    assert p.action == "enable"
    assert (
        RULE.fires(_ev(None, dep=ctx(engine=engine, speculative=True), requests_running=64, tpot_ok=0.95)).holds
        is False
    )


def test_a_gpu_without_figures_is_no_measurement_and_no_crash() -> None:
    low = _window(1000, 7, [0.3, 0.1, 0.05, 0.03, 0.01, 0.005, 0.005])
    base = ctx()
    assert base.gpu is not None
    dep = dataclasses.replace(base, gpu=dataclasses.replace(base.gpu, bf16_flops=None))
    e = _ev(low, dep=dep, requests_running=1024, tpot_ok=0.95)
    assert RULE.measure(e) is None
    assert RULE.fires(e).holds is False  # TPOT met: the unmeasured threshold does not fire
