"""A context cap that would reject the traffic itself is withheld (issue 13, problem 2: advice that harms).

``admission_thrash`` caps max-model-len so that ``target_concurrency`` (8) requests of the cap fit the pool. Its
diagnosis is "a few long requests hold the pool"; when the finished requests themselves average more than the cap,
the long requests are the traffic, and the cap rejects the typical request. Values below are computed by hand from
the scrapes; the states run through the rules in-process (``tests/states/direct.py``).
"""

from __future__ import annotations

from pathlib import Path

from tests.states import VLLMEngine
from tests.states.direct import brief_runs, rule_proposals
from tests.states.field import FieldState

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}


def _engine() -> VLLMEngine:
    """Llama-3.1-8B on one L40S: 12,117 blocks of 16, max-model-len 131,072, utilization 0.9."""
    return VLLMEngine(
        model_name="meta-llama/Llama-3.1-8B-Instruct",
        num_gpu_blocks=12117,
        max_model_len=131072,
        gpu_memory_utilization=0.9,
    )


def _state(short_finished: bool) -> FieldState:
    """Llama-3.1-8B on one L40S, 12,117 blocks of 16 (193,872 tokens), max-model-len 131,072; one running request
    of ~192k KV tokens, one waiting, preemptions rising (vllm-project/vllm PR #21793).

    In the window one request finishes: a 120,000-token prompt (preempted and recomputed, which vLLM V1's prompt
    counter does not count again: ``vllm/v1/core/sched/scheduler.py``, first scheduled prefill only) and 1,000
    output tokens → 121,000 tokens per finished request; or, with ``short_finished``, 20 chat requests of 1,000 +
    200 tokens → 1,200 per finished request (the long request is the exception: the cap stands).
    """
    eng = _engine()
    eng.finish(4, prompt=120000, output=1000, ttft=40.0, tpot=0.05, queue=20.0)
    eng.first_tokens([40.0] * 4)
    eng.prefill(6 * 120000)
    eng.decode(4000, 0.05)
    eng.preempt(9)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 1.0, 0.97
    first = eng.render()
    if short_finished:
        eng.finish(20, prompt=1000, output=200, ttft=8.0, tpot=0.05, queue=6.0)
        eng.first_tokens([8.0] * 20)
        eng.prefill(20 * 1000)
        eng.decode(20 * 200, 0.05)
    else:
        eng.finish(1, prompt=120000, output=1000, ttft=45.0, tpot=0.05, queue=25.0)
        eng.first_tokens([45.0])
        eng.prefill(120000)
        eng.decode(1000, 0.05)
    eng.preempt(3)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 1.0, 0.99
    return FieldState(
        id="cap-rejects-traffic",
        source="https://github.com/vllm-project/vllm/pull/21793",
        engine_version="vLLM 0.10 (V1)",
        deployment={
            "name": "llama8b-l40s",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "l40s",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 131072,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
    )


def _cap(tmp_path: Path, short_finished: bool):  # type: ignore[no-untyped-def]
    _, runs = rule_proposals(tmp_path, _state(short_finished))
    caps = [p for r in runs if r.rule == "admission_thrash" for p in r.proposals if p.dial == "max_model_len"]
    assert len(caps) == 1, brief_runs(runs)
    return caps[0]


def test_a_cap_below_the_mean_finished_request_is_withheld(tmp_path: Path) -> None:
    # pool 12,117 × 16 = 193,872 tokens; ÷ 8 = 24,234 → 23 × 1,024 = 23,552; the finished request: 120,000 prompt +
    # 1,000 generated = 121,000, from the counters and from the per-request histograms alike
    cap = _cap(tmp_path, short_finished=False)
    assert cap.suggested == 23552
    assert cap.withheld, "a cap at 23,552 tokens rejects 121,000-token requests: it must be withheld"
    assert "121,000" in cap.withheld and "23,552" in cap.withheld, cap.withheld


def test_a_cap_above_the_mean_finished_request_stands(tmp_path: Path) -> None:
    # finished (20,000 + 4,000) / 20 = 1,200 tokens, far under 23,552; the running request holds ~191,933 → a few
    # long requests hold the pool: the cap stands
    cap = _cap(tmp_path, short_finished=True)
    assert cap.suggested == 23552
    assert cap.withheld is None, cap.withheld


def test_a_long_request_prefilled_before_the_window_counts_when_it_finishes_in_it(tmp_path: Path) -> None:
    """vLLM's prompt counter takes a prompt when its prefill completes; ``request_success`` and the per-request
    histograms take the request when it finishes. The 120,000-token request holding the pool was prefilled before
    the window and finishes in it (1,000 tokens generated), beside one 1,000 + 200 chat. The counters' window reads
    (1,000 prompt + 1,200 generated) ÷ 2 = 1,100 tokens a request, and the cap of 23,552 stood; the histograms
    read (120,000 + 1,000) ÷ 2 + (1,000 + 200) ÷ 2 = 61,100: half the finished requests are five times the cap,
    which it would reject. Withheld."""
    eng = _engine()
    eng.finish(4, prompt=1000, output=200, ttft=2.0, tpot=0.05, queue=1.0)
    eng.first_tokens([2.0] * 4)
    eng.prefill(4 * 1000 + 120000)
    eng.decode(4 * 200, 0.05)
    eng.preempt(2)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 1.0, 0.97
    first = eng.render()
    eng.finish(1, prompt=120000, output=1000, ttft=30.0, tpot=0.05, queue=1.0)
    eng.finish(1, prompt=1000, output=200, ttft=8.0, tpot=0.05, queue=6.0)
    eng.first_tokens([8.0])
    eng.prefill(1000)
    eng.decode(1000 + 200, 0.05)
    eng.preempt(4)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 1.0, 0.99
    state = _state(short_finished=True)
    state = FieldState(**{**state.__dict__, "id": "cap-long-request-finishes", "scrapes": [(first, eng.render())]})
    _, runs = rule_proposals(tmp_path, state)
    caps = [p for r in runs if r.rule == "admission_thrash" for p in r.proposals if p.dial == "max_model_len"]
    assert len(caps) == 1, brief_runs(runs)
    assert caps[0].suggested == 23552
    assert caps[0].withheld and "61,100" in caps[0].withheld, caps[0].withheld
