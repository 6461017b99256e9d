"""Breaker tests for speculative decoding read from SGLang's gauges (ad3e3ee), the vLLM draft share (616ca1c) and
llama.cpp's ``n_tokens_max`` in pool_context (fe0e7d6): inputs where the advisor gave wrong advice, each written as
the right behaviour (all fixed since; they stay as regressions), and pins of behaviour that held.

Engine facts used (SGLang ``python/sglang/srt/managers/scheduler_metrics_mixin.py``, ``log_decode_stats``):
``spec_accept_length`` is 0 when ``spec_algorithm.is_none()``, else accepted tokens (bonus included) ÷ forward count
over the last ``--decode-log-interval`` decode steps; it is written only from a decode batch, so a rank that decodes
nothing keeps its last value. SGLang counts ``generation_tokens_total`` when a request finishes (the catalog's
``counters_advance_during_decode=False``). llama.cpp ``server_metrics.n_tokens_max`` is a running maximum of the
slots' token counts, zero at process start (``reset_bucket`` leaves it, a restart does not).

Deployments: Llama-3.1-8B on one H100-SXM (:func:`tests.factories.context`) for the speculative cases; Qwen2.5-1.5B on
an RTX 4090 with llama.cpp ``--ctx-size 1024 --parallel 4 --kv-unified`` (as ``test_pool_context_unified.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor import conventions as c
from advisor.capacity.hardware import get_gpu
from advisor.capacity.inputs import EngineSettings
from advisor.capacity.kv import CapacityInputs, capacity_pass
from advisor.capacity.models import get_preset
from advisor.domain import EngineSnapshot, TimedSnapshot
from advisor.engines.sglang import SGLangAdapter
from advisor.evaluate import Quality, TargetView, evaluate_deployment
from advisor.rules.base import DeploymentContext, Evaluation, SLOTargets
from advisor.rules.pool_context import PoolContextRule
from advisor.rules.speculative import SpeculativeRule
from advisor.sources.exposition import parse_exposition
from tests.factories import context
from tests.rules.helpers import ctx

RULE = SpeculativeRule(max_batch_per_replica=4, disable_by_batch_size=8, disable_above_batch_per_replica=32)
SLO = SLOTargets(ttft_seconds=5.0, tpot_seconds=0.05, target_ratio=0.9)
URL = "http://e:30000/metrics"
RANK0 = 'engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"'


def _sglang_page(
    accept: float | None,
    draft_tokens: float | None,
    steps: float | None,
    generated: float | None,
    itl_count: float,
    running: float = 2,
) -> str:
    """One SGLang scrape on TP rank 0: the speculative gauges (``None``: not on the page, as before 0.5.23 for the
    verify size), the finish-time generation counter (``None``: absent, as a labelled multiprocess counter is before
    its first increment) and an ITL histogram whose every observation lies in (0.05, 0.2] s, over the 50 ms target."""
    lines = [f"sglang:num_running_reqs{{{RANK0}}} {running}", f"sglang:num_queue_reqs{{{RANK0}}} 0"]
    for name, value in (
        ("spec_accept_length", accept),
        ("spec_num_draft_tokens", draft_tokens),
        ("spec_num_steps", steps),
    ):
        if value is not None:
            lines.append(f"sglang:{name}{{{RANK0}}} {value}")
    if generated is not None:
        lines.append(
            f'sglang:generation_tokens_total{{engine_type="unified",is_streaming="true",model_name="m"}} {generated}'
        )
    lines += [
        f'sglang:inter_token_latency_seconds_bucket{{{RANK0},le="0.05"}} 0',
        f'sglang:inter_token_latency_seconds_bucket{{{RANK0},le="0.2"}} {itl_count}',
        f'sglang:inter_token_latency_seconds_bucket{{{RANK0},le="+Inf"}} {itl_count}',
        f"sglang:inter_token_latency_seconds_count{{{RANK0}}} {itl_count}",
        f"sglang:inter_token_latency_seconds_sum{{{RANK0}}} {itl_count * 0.1}",
    ]
    return "\n".join(lines) + "\n"


def _evaluate_sglang(pages: list[str], dep: DeploymentContext | None = None) -> Evaluation:
    """The evaluation of one SGLang target scraped every 15 s (a 60 s window), through the adapter."""
    a = SGLangAdapter()
    history = tuple(
        TimedSnapshot(URL, 1000.0 + 15 * i, a.snapshot(parse_exposition(p, a.wants))) for i, p in enumerate(pages)
    )
    dep = dep or ctx(engine="sglang", slo=SLO)
    e, _ = evaluate_deployment(
        dep, [TargetView(URL, True, None, None, history)], history[-1].timestamp, 60.0, Quality(15)
    )
    return e


def _actions(e: Evaluation) -> list[str]:
    return [p.action for p in RULE.propose(e)] if RULE.fires(e).holds else []


# --- A. SGLang: a gauge above 0 says speculation runs ---------------------------------------------------------------


def test_an_sglang_page_with_only_the_accept_length_never_proposes_enable() -> None:
    # SGLang 0.4.3-0.5.4 expose sglang:spec_accept_length but neither spec_num_draft_tokens nor spec_num_steps
    # (engine-metrics-catalog §2). SGLang writes the gauge at 0 without a speculative algorithm, so 2.4 means EAGLE
    # runs. The adapter reads 2.4, _gauge_window needs a verify size and returns None, and with the config silent the
    # small batch missing TPOT gets '--speculative-algorithm ...' proposed: enabling what runs.
    pages = [_sglang_page(2.4, None, None, 10_000 + 300 * i, 100 + 50 * i) for i in range(5)]
    e = _evaluate_sglang(pages)
    assert e.speculation_runs() is True
    assert "enable" not in _actions(e)


@pytest.mark.parametrize(
    "generated",
    [
        pytest.param([10_000.0] * 5, id="counter-flat"),
        pytest.param([None] * 5, id="counter-absent"),
    ],
)
def test_an_sglang_window_where_no_request_finished_never_proposes_enable(generated: list[float | None]) -> None:
    # SGLang counts generated tokens when a request finishes: 2 streams of a few thousand tokens at ~10 tokens/s
    # finish none in 60 s (the stalled rule's own premise for finish-only engines). The gauges still say EAGLE runs
    # (2.4 tokens a round, 4 verified). Flat: _gauge_window returns SpeculationWindow(0, 0, 0) -- an unknown count of
    # rounds read as 0 -- whose `runs` is False. Absent (no request finished since start: the labelled counter is not
    # on a multiprocess page yet): no window at all. Either way the rule proposes enabling speculation that runs.
    pages = [_sglang_page(2.4, 4, 3, generated[i], 100 + 50 * i) for i in range(5)]
    e = _evaluate_sglang(pages)
    assert e.speculation_runs() is True
    assert "enable" not in _actions(e)


def _dp_page(generated: float, itl_count: float) -> str:
    """Two DP ranks: rank 0 decodes 512 sequences at 1.3 tokens a round; rank 1 runs nothing and still shows 3.7, the
    value of its last decode batch (SGLang writes the gauge only from log_decode_stats)."""
    lines: list[str] = []
    for rank, running, accept, usage in ((0, 512, 1.3, 0.9), (1, 0, 3.7, 0.0)):
        labels = f'dp_rank="{rank}",{RANK0}'
        lines += [
            f"sglang:num_running_reqs{{{labels}}} {running}",
            f"sglang:num_queue_reqs{{{labels}}} 0",
            f"sglang:token_usage{{{labels}}} {usage}",
            f"sglang:spec_accept_length{{{labels}}} {accept}",
            f"sglang:spec_num_draft_tokens{{{labels}}} 4",
            f"sglang:spec_num_steps{{{labels}}} 3",
        ]
    lines += [
        f'sglang:generation_tokens_total{{engine_type="unified",is_streaming="true",model_name="m"}} {generated}',
        f'sglang:inter_token_latency_seconds_bucket{{model_name="m",le="0.05"}} {itl_count}',
        f'sglang:inter_token_latency_seconds_bucket{{model_name="m",le="+Inf"}} {itl_count}',
        f'sglang:inter_token_latency_seconds_count{{model_name="m"}} {itl_count}',
        f'sglang:inter_token_latency_seconds_sum{{model_name="m"}} {itl_count * 0.02}',
    ]
    return "\n".join(lines) + "\n"


def test_an_idle_dp_ranks_stale_acceptance_length_does_not_hide_a_loss() -> None:
    # Every round in the window ran on rank 0 (512 running, 1.3 tokens a round); rank 1 ran none, so its 3.7 is
    # older than the window. The adapter's unweighted mean over ranks reads 2.5: at 512 sequences the bound is ~0.98,
    # no loss. At the 1.3 every round actually yielded the bound is ~0.51 < 0.9: speculation costs both latency and
    # throughput and the rule must turn it off (TPOT met or not). A rank with no running request contributes no round.
    pages = [_dp_page(100_000 + 20_000 * i, 1_000 + 20_000 * i) for i in range(5)]
    e = _evaluate_sglang(pages)
    assert e.speculation is not None
    assert e.speculation.mean_acceptance_length == pytest.approx(1.3)
    assert _actions(e) == ["disable"]


# --- A'. vLLM: the draft share the commit prices never reaches the evaluation ---------------------------------------


def test_vllm_ngram_draft_share_reaches_the_rule() -> None:
    # vLLM counts generated tokens as they are decoded (counters_advance_during_decode=True). Per 15 s: 300 drafts of
    # 4 tokens, 300 accepted (L = 2.0), 1,800 tokens generated -> 1,800 - 300 = 1,500 sequence-steps, 300 drafted:
    # share 0.2 (an n-gram that finds no match decodes one plain token). 616ca1c prices that share, but
    # evaluate_deployment calls speculation_window without generation_advances, so generated_tokens is None, the
    # share reads 1.0 and at 512 sequences the bound is ~0.81 -> disable. With the measured share it is ~0.93: no
    # loss the roofline shows, and TPOT unknown leaves the batch threshold undecided.
    def at(i: int) -> TimedSnapshot:
        snap = EngineSnapshot(
            engine="vllm",
            requests_running=512,
            requests_waiting=0,
            kv_cache_usage_ratio=0.9,
            kv_cache_capacity_tokens=432_000.0,
            generation_tokens_total=10_000.0 + 1_800 * i,
            prompt_tokens_total=5_000.0 + 100 * i,
            requests_finished_total=10.0 + i,
            spec_drafts_total=1_000.0 + 300 * i,
            spec_draft_tokens_total=4_000.0 + 1_200 * i,
            spec_accepted_tokens_total=1_000.0 + 300 * i,
            spec_accepted_tokens_by_position=(500.0 + 150 * i, 300.0 + 90 * i, 150.0 + 45 * i, 50.0 + 15 * i),
        )
        return TimedSnapshot(URL, 1000.0 + 15 * i, snap)

    history = tuple(at(i) for i in range(5))
    e, _ = evaluate_deployment(context(), [TargetView(URL, True, None, None, history)], 1060.0, 60.0, Quality(15))
    assert e.speculation is not None
    assert e.speculation.draft_share == pytest.approx(0.2)
    assert RULE.fires(e).holds is not True


# --- B. llama.cpp n_tokens_max ------------------------------------------------------------------------------------


def _unified(ctx_size: int, parallel: int, max_model_len: int) -> DeploymentContext:
    gpu = get_gpu("rtx4090")
    inputs = CapacityInputs(
        model=get_preset("Qwen/Qwen2.5-1.5B-Instruct"),
        gpu_memory_bytes=gpu.memory_bytes,
        max_model_len=max_model_len,
        max_num_seqs=parallel,
        engine="llamacpp",
        engine_settings=EngineSettings(ctx_size=ctx_size, parallel=parallel, kv_unified=True),
    )
    return dataclasses.replace(ctx(engine="llamacpp"), inputs=inputs, capacity=capacity_pass(inputs), gpu=gpu)


def _llamacpp_at(t: float, generated: float, longest: float | None) -> TimedSnapshot:
    snap = EngineSnapshot(
        engine="llamacpp",
        requests_running=4,
        requests_waiting=0,
        generation_tokens_total=generated,
        prompt_tokens_total=2 * generated,
        longest_sequence_tokens=longest,
    )
    return TimedSnapshot("http://l:8080/metrics", t, snap)


def test_a_restart_inside_the_window_does_not_forget_the_longest_sequence() -> None:
    # 1,024 unified cells, 4 slots: the per-slot cap is 256. Before the restart (counters drop at t=1030) the engine
    # had held a 600-token sequence; the new process's running maximum starts again from 0 and reads 180. The
    # clients are the same: a 600-token request will come again, and the 256 cap would refuse it where --parallel 1
    # serves it. The window still holds the 600: the cap stays withheld as it was one scrape earlier.
    history = (
        _llamacpp_at(1000, 90_000, 600),
        _llamacpp_at(1015, 91_000, 600),
        _llamacpp_at(1030, 200, 120),
        _llamacpp_at(1045, 1_200, 180),
    )
    view = TargetView("http://l:8080/metrics", True, None, None, history)
    e, _ = evaluate_deployment(_unified(1024, 4, 1024), [view], 1045.0, 60.0, Quality(15))
    assert e.longest_sequence_tokens == 600
    by_dial = {p.dial: p for p in PoolContextRule().propose(e)}
    assert by_dial[c.DIAL_MAX_MODEL_LEN].withheld is not None
    assert by_dial[c.DIAL_MAX_NUM_SEQS].withheld is None


# --- pins: behaviour that held ---------------------------------------------------------------------------------------


def test_sglang_underscore_prefix_and_tp_replicas_read_as_the_colon_form() -> None:
    # --enable-metrics-for-all-schedulers repeats rank 0's numbers on every TP rank; a relabelled scrape spells
    # sglang_. Both give the same acceptance length and verify size as the plain page.
    a = SGLangAdapter()
    plain = _sglang_page(2.43, 4, 3, 1000, 10)
    replica = plain + plain.replace('tp_rank="0"', 'tp_rank="1"').replace("2.43", "9.9")
    for page in (plain, plain.replace("sglang:", "sglang_"), replica):
        s = a.snapshot(parse_exposition(page, a.wants))
        assert (s.spec_accept_length, s.spec_verify_tokens) == (2.43, 4)


@pytest.mark.parametrize("value", ["NaN", "+Inf"])
def test_a_non_finite_n_tokens_max_is_unknown(value: str) -> None:
    from advisor.engines.llamacpp import LlamaCppAdapter

    a = LlamaCppAdapter()
    page = f"# TYPE llamacpp:n_tokens_max counter\nllamacpp:n_tokens_max {value}\nllamacpp:requests_processing 4\n"
    s: Any = a.snapshot(parse_exposition(page, a.wants))
    assert s.longest_sequence_tokens is None
