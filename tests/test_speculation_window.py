"""Speculative decoding's counters: read by the vLLM and llama.cpp adapters, turned into a window's increases
(:func:`advisor.telemetry.speculation_window`) and summed over targets (:func:`combine_speculation`)."""

from __future__ import annotations

import math

import pytest

from advisor.domain import EngineSnapshot, TimedSnapshot
from advisor.engines.llamacpp import LlamaCppAdapter
from advisor.engines.vllm import VLLMAdapter
from advisor.sources.exposition import parse_exposition
from advisor.telemetry import SpeculationWindow, combine_speculation, speculation_window

VLLM_PAGE = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3
vllm:num_requests_running{engine="1",model_name="m"} 2
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 40
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 300
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 120
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 115
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 50
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 80
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 30
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 5
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 30
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 15
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 5
"""


def test_vllm_sums_the_counters_over_ranks_and_positions_by_label() -> None:
    a = VLLMAdapter()
    s = a.snapshot(parse_exposition(VLLM_PAGE, a.wants))
    assert (s.spec_drafts_total, s.spec_draft_tokens_total, s.spec_accepted_tokens_total) == (140, 420, 165)
    assert s.spec_accepted_tokens_by_position == (110, 45, 10)
    assert not [m for m in s.missing if "spec_decode" in m]  # no speculation is no fault


def test_a_page_without_speculation_leaves_every_field_unknown() -> None:
    a = VLLMAdapter()
    page = 'vllm:num_requests_running{engine="0",model_name="m"} 3\n'
    s = a.snapshot(parse_exposition(page, a.wants))
    assert (s.spec_drafts_total, s.spec_accepted_tokens_by_position) == (None, ())
    assert not [m for m in s.missing if "spec_decode" in m]


def test_a_nan_position_is_unknown_and_a_skipped_one_too() -> None:
    a = VLLMAdapter()
    page = (
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} NaN\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 1\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="x"} 7\n'
    )
    s = a.snapshot(parse_exposition(page, a.wants))
    assert s.spec_accepted_tokens_by_position == (None, None, 1.0)


def test_llamacpp_reads_the_same_counters_unlabelled() -> None:
    page = (
        "llamacpp:requests_processing 2\n"
        "llamacpp:spec_decode_num_drafts_total 50\n"
        "llamacpp:spec_decode_num_draft_tokens_total 400\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 90\n"
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 40\n'
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 30\n'
    )
    a = LlamaCppAdapter()
    s = a.snapshot(parse_exposition(page, a.wants))
    assert (s.spec_drafts_total, s.spec_draft_tokens_total, s.spec_accepted_tokens_total) == (50, 400, 90)
    assert s.spec_accepted_tokens_by_position == (40, 30)


def _at(
    t: float,
    drafts: float | None,
    tokens: float | None,
    accepted: float | None,
    pos: tuple[float | None, ...] = (),
    start: float | None = None,
) -> TimedSnapshot:
    snap = EngineSnapshot(
        engine="vllm",
        process_start_time_seconds=start,
        spec_drafts_total=drafts,
        spec_draft_tokens_total=tokens,
        spec_accepted_tokens_total=accepted,
        spec_accepted_tokens_by_position=pos,
    )
    return TimedSnapshot("http://a", t, snap)


def test_the_window_reads_increases_and_vllms_mean_acceptance_length() -> None:
    # the docstring's example: 400 drafts of 3 tokens, 464 accepted → 1 + 464 ÷ 400 = 2.16 tokens a round
    history = [
        _at(0, 1000, 3000, 1200, (600, 400, 200)),
        _at(15, 1200, 3600, 1430, (700, 450, 280)),
        _at(30, 1400, 4200, 1664, (820, 540, 304)),
    ]
    w = speculation_window(history, now=30, window_seconds=60)
    assert w is not None
    assert (w.drafts, w.draft_tokens, w.accepted_tokens) == (400, 1200, 464)
    assert w.accepted_by_position == (220, 140, 104)
    assert w.mean_acceptance_length == pytest.approx(2.16)
    assert w.draft_length == pytest.approx(3.0)
    assert w.acceptance_ratio == pytest.approx(464 / 1200)
    assert w.position_acceptance() == pytest.approx((0.55, 0.35, 0.26))


def test_a_restart_counts_the_new_process_from_zero() -> None:
    history = [_at(0, 1000, 3000, 1200, start=1.0), _at(30, 100, 300, 150, start=500.0)]
    w = speculation_window(history, now=30, window_seconds=60)
    assert w is not None
    assert (w.drafts, w.draft_tokens, w.accepted_tokens) == (100, 300, 150)


@pytest.mark.parametrize(
    "history",
    [
        [_at(0, None, None, None), _at(30, None, None, None)],
        [_at(30, 10, 30, 12)],
        [_at(0, 10, 30, None), _at(30, 20, 60, None)],
    ],
    ids=["no counters", "one point", "accepted unknown"],
)
def test_unknown_is_none_never_zero(history: list[TimedSnapshot]) -> None:
    assert speculation_window(history, now=30, window_seconds=60) is None


def test_a_position_first_listed_inside_the_window_counts_from_zero() -> None:
    history = [_at(0, 10, 30, 5, (5,)), _at(30, 30, 90, 25, (15, 10))]
    w = speculation_window(history, now=30, window_seconds=60)
    assert w is not None and w.accepted_by_position == (10, 10)


def test_targets_sum_and_positions_need_every_target() -> None:
    a = SpeculationWindow(100, 300, 120, (60, 40, 20))
    b = SpeculationWindow(50, 150, 30, (20, 10))
    both = combine_speculation([a, None, b])
    assert both is not None
    assert (both.drafts, both.draft_tokens, both.accepted_tokens) == (150, 450, 150)
    assert both.accepted_by_position == (80, 50, 20)
    mixed = combine_speculation([a, SpeculationWindow(10, 30, 3)])
    assert mixed is not None and mixed.accepted_by_position == ()
    assert combine_speculation([None]) is None


def test_no_drafts_gives_no_ratios() -> None:
    w = SpeculationWindow(0, 0, 0)
    assert (w.mean_acceptance_length, w.draft_length, w.acceptance_ratio, w.position_acceptance()) == (
        None,
        None,
        None,
        (),
    )
    assert math.isfinite(SpeculationWindow(1, 3, 9).acceptance_ratio or math.nan)


SGLANG_LABELS = 'engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"'


def _sglang(accept: float, draft_tokens: float, steps: float, generated: float) -> EngineSnapshot:
    from advisor.engines.sglang import SGLangAdapter

    page = (
        f"sglang:num_running_reqs{{{SGLANG_LABELS}}} 64\n"
        f"sglang:spec_accept_length{{{SGLANG_LABELS}}} {accept}\n"
        f"sglang:spec_num_draft_tokens{{{SGLANG_LABELS}}} {draft_tokens}\n"
        f"sglang:spec_num_steps{{{SGLANG_LABELS}}} {steps}\n"
        f'sglang:generation_tokens_total{{engine_type="unified",is_streaming="true",model_name="m"}} {generated}\n'
    )
    a = SGLangAdapter()
    return a.snapshot(parse_exposition(page, a.wants))


def test_sglang_gauges_read_as_an_acceptance_length_and_a_verify_size() -> None:
    s = _sglang(2.43, 4, 3, 1000)
    assert (s.spec_accept_length, s.spec_verify_tokens) == (2.43, 4)
    # only the steps (0.5.4 pages lack the draft-token gauge): a chain of 3 steps verifies 4 tokens
    assert _sglang(2.43, 0, 3, 1000).spec_verify_tokens == 4
    # SGLang writes the gauges at 0 without speculation: nothing read
    off = _sglang(0, 0, 0, 1000)
    assert (off.spec_accept_length, off.spec_verify_tokens) == (None, None)


def test_sglang_rounds_are_the_generated_tokens_over_the_acceptance_length() -> None:
    # 2,430 tokens generated in the window at 2.43 tokens a round: 1,000 rounds of 3 drafted, 1,430 accepted
    history = [
        TimedSnapshot("http://a", 0, _sglang(2.43, 4, 3, 10_000)),
        TimedSnapshot("http://a", 30, _sglang(2.43, 4, 3, 12_430)),
    ]
    w = speculation_window(history, now=30, window_seconds=60)
    assert w is not None
    assert w.drafts == pytest.approx(1000)
    assert w.draft_tokens == pytest.approx(3000)
    assert w.accepted_tokens == pytest.approx(1430)
    assert w.mean_acceptance_length == pytest.approx(2.43)
    # a positive gauge says speculation runs (SGLang writes 0 without a speculative algorithm)
    assert w.accepted_by_position == () and w.configured and w.runs
    # a length above the tokens verified contradicts itself: no measurement
    bad = [TimedSnapshot("http://a", 0, _sglang(5.0, 4, 3, 0)), TimedSnapshot("http://a", 30, _sglang(5.0, 4, 3, 500))]
    w_bad = speculation_window(bad, now=30, window_seconds=60)
    assert w_bad is not None and not w_bad.consistent


def test_the_draft_share_is_drafts_over_the_sequence_steps_where_tokens_count_as_decoded() -> None:
    def at(t: float, drafts: float, tokens: float, accepted: float, generated: float) -> TimedSnapshot:
        snap = EngineSnapshot(
            engine="vllm",
            generation_tokens_total=generated,
            spec_drafts_total=drafts,
            spec_draft_tokens_total=tokens,
            spec_accepted_tokens_total=accepted,
        )
        return TimedSnapshot("http://a", t, snap)

    # 2,000 tokens generated, 500 of them accepted drafts: 1,500 sequence-steps, 300 of which drafted
    history = [at(0, 0, 0, 0, 0), at(30, 300, 900, 500, 2000)]
    w = speculation_window(history, now=30, window_seconds=60, generation_advances=True)
    assert w is not None and w.generated_tokens == 2000
    assert w.draft_share == pytest.approx(0.2)
    # an engine counting tokens at the end of a request (llama.cpp, SGLang): no share
    w2 = speculation_window(history, now=30, window_seconds=60)
    assert w2 is not None and w2.generated_tokens is None and w2.draft_share is None
