"""Field states for issue 13, problems 1 and 6: one incident, one recommendation; no rule that holds shown inactive.

* Problem 1 — one saturated deployment opened one recommendation per rule and per dial ("option k of 4"), each its
  own alert. Now the rules of one problem merge into one incident: one recommendation whose ``suggested`` is the
  best turn and whose ``alternatives`` rank the others (no dial twice, one replica number).
* Problem 6 — a rule whose condition held but whose dials another rule had taken showed ``inactive``. Now it is
  ``firing`` (merged into the incident), or ``withheld``/``superseded`` with the reason.

Every row is built from the public report in ``source`` (the state the report describes), as vLLM exposes it
(:class:`tests.states.VLLMEngine` renders the 0.11 label set; the families read — ``vllm:kv_cache_usage_perc``,
``vllm:num_requests_running``/``waiting``, ``vllm:num_preemptions_total``, the TTFT histogram — are those of
``vllm/v1/metrics/loggers.py`` since 0.9). Where a report does not name its model, a model of the table stands in,
as the docstring says. The pool each engine reports (``num_gpu_blocks``) is the capacity pass's for that
deployment, so model-vs-engine drift does not open an incident of its own. The expositions are written here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.states import VLLMEngine
from tests.states.field import FieldState, FieldStateRuns, brief, check_field_state, run_field_states

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}

NEVER_ON_A_FULL_POOL: list[tuple[str, str | None]] = [
    ("max_num_seqs", "increase"),  # more sequences in a full pool only preempt more
    ("replicas", "decrease"),
    ("speculative_decoding", "enable"),  # draft tokens take KV blocks and add no service rate to a full pool
]


def _turns(rec: dict[str, Any]) -> list[dict[str, Any]]:
    return [rec, *(rec.get("alternatives") or [])]


def _status(result: dict[str, Any], rule: str) -> dict[str, Any]:
    return next((r for r in result.get("rules") or [] if r.get("rule") == rule), {})


def one_incident(
    *firing: str, first_no_gpu: bool = True, gpu_turns: tuple[str, ...] = ("replicas",)
) -> Callable[[dict[str, Any]], None]:
    """The saturation problem opened exactly one recommendation; its turns name each dial once; the ``firing``
    rules are shown firing (never ``inactive``); a turn that adds no GPU comes first and the GPU-adding ``gpu_turns``
    are ranked after it; every alternative says why it ranks where it does."""

    def check(result: dict[str, Any]) -> None:
        recs = result.get("recommendations") or []
        sat = [r for r in recs if r.get("problem") == "saturation"]
        assert len(sat) == 1, f"{len(sat)} saturation recommendations, expected one incident: {brief(recs)}"
        (rec,) = sat
        dials = [t["dial"] for t in _turns(rec)]
        assert len(dials) == len(set(dials)), f"a dial twice in one incident: {dials}"
        for alt in rec.get("alternatives") or []:
            assert alt.get("why_rank"), f"alternative without why_rank: {alt}"
        for rule in firing:
            st = _status(result, rule)
            assert st.get("state") == "firing", f"{rule} holds but shows {st.get('state')}: {st.get('reason')}"
        if first_no_gpu:
            assert rec["dial"] not in ("replicas", "tensor_parallel_size"), f"GPU-adding turn first: {brief([rec])}"
        for dial in gpu_turns:
            assert dial in dials, f"{dial} not among the incident's turns: {dials}"

    return check


def replicas_withheld_over_one_second(*rules: str) -> Callable[[dict[str, Any]], None]:
    """``once --interval 1`` sees about 1 s of history: no replica count may be proposed from it (its arrival rate is a
    momentary backlog; it needs ≥ 30 s). The incident lists the replica turn under ``withheld`` with the span in
    numbers, and ``rules`` (whose only turn is replicas) show ``withheld`` with that reason."""

    def check(result: dict[str, Any]) -> None:
        recs = result.get("recommendations") or []
        for rec in recs:
            assert "replicas" not in [t["dial"] for t in _turns(rec)], f"replicas from 1 s of history: {brief([rec])}"
        held = [
            w
            for rec in recs
            for w in rec.get("withheld") or []
            if w.get("dial") == "replicas" and not str(w.get("reason")).startswith("superseded by ")
        ]
        assert held, f"the replica turn is not listed as withheld: {[r.get('withheld') for r in recs]}"
        for w in held:
            seen = re.search(r"≥ 30 s of history .*; this evaluation sees (\d+) s", str(w.get("reason")))
            assert seen and int(seen.group(1)) < 30, w
        for rule in rules:
            st = _status(result, rule)
            assert st.get("state") == "withheld" and "≥ 30 s" in str(st.get("reason")), st

    return check


def all_of(*checks: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """Every check, in order."""

    def check(result: dict[str, Any]) -> None:
        for c in checks:
            c(result)

    return check


def superseded_into_one_incident(
    by: str, superseded: str, *turns: str, firing: tuple[str, ...] = ()
) -> Callable[[dict[str, Any]], None]:
    """One saturation incident whose suggested turn is ``by``'s; ``superseded`` holds and is shown ``superseded``
    (never ``inactive``), its turns listed under ``withheld`` with the superseding rule's reason; the incident's
    turns include ``turns``."""

    def check(result: dict[str, Any]) -> None:
        one_incident(by, *firing, first_no_gpu=True, gpu_turns=())(result)
        (rec,) = [r for r in result.get("recommendations") or [] if r.get("problem") == "saturation"]
        assert rec["rule"] == by, f"suggested turn from {rec['rule']}, expected {by}: {brief([rec])}"
        st = _status(result, superseded)
        assert st.get("state") == "superseded" and f"superseded by {by}" in str(st.get("reason")), st
        withheld = [w for w in rec.get("withheld") or [] if w.get("rule") == superseded]
        assert withheld, f"{superseded}'s turns are not listed as withheld: {rec.get('withheld')}"
        assert all(str(w.get("reason")).startswith(f"superseded by {by}: ") for w in withheld), withheld
        dials = [t["dial"] for t in _turns(rec)]
        for dial in turns:
            assert dial in dials, f"{dial} not among the incident's turns: {dials}"

    return check


def long_prompts_thrash_a_small_pool() -> FieldState:
    """vLLM V1, Llama-3.1-8B-Instruct on one L40S, prefix caching off: two 120,000-token prompts at concurrency 2.

    vllm-project/vllm PR #21793 (and #21809 / #18115): the pool (≈ 194k tokens at 0.9 of 48 GB) holds one such
    request, not two; the scheduler admits the second, both grow, one is preempted and recomputed, again and
    again — a preemption loop that slows the running request too. The window: KV usage 0.97 → 0.99, one running
    and one waiting, 3 preemptions, one request finished (≈ 121,000 tokens), TTFT ≈ 45 s.

    ``admission_thrash`` (a few long requests hold the pool), ``kv_saturation`` and ``goodput_below_target`` all
    hold: one incident, suggested by ``admission_thrash`` (whose diagnosis supersedes the generic pool turns),
    with whole-request admission among its turns; ``kv_saturation`` is shown ``superseded`` — not
    ``inactive`` — and its turns are listed as withheld with the reason; ``goodput_below_target`` is ``withheld``
    (``once`` sees ~1 s of history: its replica count, like the long-context replica, is withheld until ≥ 30 s of
    history measure an arrival rate — issue 13, found by a new-user walkthrough). Never more sequences, fewer
    replicas or speculation. (Whether
    a context cap below the observed prompt lengths may be suggested is issue 13 problem 2, not asserted here.)
    """
    eng = VLLMEngine(
        model_name="meta-llama/Llama-3.1-8B-Instruct",
        num_gpu_blocks=12117,
        max_model_len=131072,
        gpu_memory_utilization=0.9,
    )
    eng.finish(4, prompt=120000, output=1000, ttft=40.0, tpot=0.05, queue=20.0)
    eng.first_tokens([40.0] * 4)
    eng.prefill(6 * 120000)
    eng.decode(4000, 0.05)
    eng.preempt(9)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 1.0, 0.97
    first = eng.render()
    eng.finish(1, prompt=120000, output=1000, ttft=45.0, tpot=0.05, queue=25.0)
    eng.first_tokens([45.0])
    eng.prefill(120000 + 3 * 8192)
    eng.decode(1000, 0.05)
    eng.preempt(3)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 1.0, 0.99
    return FieldState(
        id="vllm-two-120k-prompts-preemption-loop",
        source="https://github.com/vllm-project/vllm/pull/21793",
        engine_version="vLLM 0.10 (V1, --no-enable-prefix-caching)",
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
        snapshot={"requests_running": 1, "requests_waiting": 1, "kv_cache_usage_ratio": 0.99},
        must_propose=[("admission_policy", "set")],
        must_never=[*NEVER_ON_A_FULL_POOL, ("replicas", "increase")],  # 1 s of history sizes no replicas
        extra_check=all_of(
            superseded_into_one_incident("admission_thrash", "kv_saturation", "admission_policy"),
            replicas_withheld_over_one_second("goodput_below_target"),
        ),
    )


def reasoning_requests_fill_a_fp8_model_pool() -> FieldState:
    """vLLM V1, QwQ-32B-FP8 on one L40 (48 GB), ``--max-num-seqs 20 --max-model-len 32000
    --gpu-memory-utilization 0.95``: "why only two requests and KV cache is 100%?", the rest waiting.

    vllm-project/vllm#14412. The weights (fp8, ≈ 33 GB) leave ≈ 39,500 tokens of pool; two long reasoning
    requests (≈ 19,000 tokens each) fill it, six wait and grow in number, two were preempted. (Qwen2.5-32B-Instruct
    with ``quantization: fp8`` stands in: QwQ-32B has its architecture.)

    Four rules hold — ``admission_thrash``, ``queue_growth``, ``kv_saturation``, ``goodput_below_target`` — and
    they are one problem: one incident (before: a recommendation per rule and dial), suggested by
    ``admission_thrash``; ``queue_growth`` and ``goodput_below_target`` are ``withheld`` with the reason (never
    ``inactive``: their only dial, replicas, cannot be sized from ``once``'s ~1 s of history, which needs ≥ 30 s),
    ``kv_saturation`` ``superseded``. The budget is at the
    0.95 the advisor never exceeds and the weights are already fp8: neither is ever proposed.
    """
    eng = VLLMEngine(
        model_name="Qwen/QwQ-32B-FP8-Dynamic",
        num_gpu_blocks=2471,
        max_model_len=32000,
        gpu_memory_utilization=0.95,
    )
    eng.finish(30, prompt=600, output=18000, ttft=3.0, tpot=0.045, queue=2.0)
    eng.first_tokens([3.0] * 32)
    eng.prefill(32 * 600)
    eng.decode(30 * 18000 + 20000, 0.045)
    eng.preempt(4)
    eng.running, eng.waiting, eng.kv_usage = 2.0, 5.0, 0.99
    first = eng.render()
    eng.finish(1, prompt=600, output=18000, ttft=30.0, tpot=0.045, queue=28.0)
    eng.first_tokens([30.0])
    eng.prefill(600 + 2 * 18000)
    eng.decode(44, 0.045)
    eng.preempt(2)
    eng.running, eng.waiting, eng.kv_usage = 2.0, 6.0, 1.0
    return FieldState(
        id="vllm-qwq32b-fp8-l40-two-requests-fill-the-pool",
        source="https://github.com/vllm-project/vllm/issues/14412",
        engine_version="vLLM V1 (0.7/0.8; the 0.11 names of the same families)",
        deployment={
            "name": "qwq32b-l40",
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-32B-Instruct",
            "served_model": "Qwen/QwQ-32B-FP8-Dynamic",
            "quantization": "fp8",
            "gpu": "l40",
            "gpu_memory_utilization": 0.95,
            "max_model_len": 32000,
            "max_num_seqs": 20,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 2, "requests_waiting": 6, "kv_cache_usage_ratio": 1.0},
        must_propose=[("admission_policy", "set")],
        must_never=[
            *NEVER_ON_A_FULL_POOL,
            ("gpu_memory_utilization", "increase"),  # already 0.95
            ("weight_quantization", None),  # already fp8
            ("replicas", "increase"),  # 1 s of history sizes no replicas
        ],
        extra_check=all_of(
            superseded_into_one_incident("admission_thrash", "kv_saturation", "admission_policy"),
            replicas_withheld_over_one_second("queue_growth", "goodput_below_target"),
        ),
    )


def waiting_spikes_as_the_pool_fills() -> FieldState:
    """vLLM 0.10.1.1 on 8 NVLink GPUs: "hitting close to 100% cache causes spike in waiting and kills throughput".

    vllm-project/vllm#23444. (Llama-3.1-70B-Instruct at TP 8 on H100-SXM stands in: the report's GPUs are eight
    NV18-linked ones, its model unnamed.) The window: KV usage 0.97 → 0.99, 180 running, waiting 40 → 120,
    preemptions rising, 30 requests finished with TTFT far above the 5 s target (they queued). Three rules hold —
    the queue grows, the pool is full, goodput is low because of queueing — and they are one problem: one incident,
    ``kv_saturation`` firing with a no-GPU turn first; ``queue_growth`` and ``goodput_below_target``, whose only
    turn is replicas, shown ``withheld`` (never ``inactive``): ``once``'s ~1 s of history sizes no replicas
    (≥ 30 s needed), and the replica turn is listed under the incident's ``withheld`` with that reason.
    """
    eng = VLLMEngine(
        model_name="meta-llama/Llama-3.1-70B-Instruct",
        num_gpu_blocks=81025,
        max_model_len=131072,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    eng.finish(3000, prompt=5000, output=400, ttft=1.5, tpot=0.04, queue=0.5)
    eng.first_tokens([1.5] * 3000)
    eng.prefill(3180 * 5000)
    eng.decode(3000 * 400 + 180 * 200, 0.04)
    eng.preempt(50)
    eng.running, eng.waiting, eng.kv_usage = 180.0, 40.0, 0.97
    first = eng.render()
    eng.finish(30, prompt=5000, output=400, ttft=25.0, tpot=0.06, queue=22.0)
    eng.first_tokens([25.0] * 30)
    eng.prefill(30 * 5000)
    eng.decode(180 * 16, 0.06)
    eng.preempt(6)
    eng.running, eng.waiting, eng.kv_usage = 180.0, 120.0, 0.99
    return FieldState(
        id="vllm-070-8gpu-waiting-spike-at-full-pool",
        source="https://github.com/vllm-project/vllm/issues/23444",
        engine_version="vLLM 0.10.1.1 (V1)",
        deployment={
            "name": "llama70b-tp8",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-70B-Instruct",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 8,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 131072,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 180, "requests_waiting": 120, "kv_cache_usage_ratio": 0.99},
        must_never=[*NEVER_ON_A_FULL_POOL, ("replicas", "increase")],  # 1 s of history sizes no replicas
        extra_check=all_of(
            one_incident("kv_saturation", gpu_turns=()),
            replicas_withheld_over_one_second("queue_growth", "goodput_below_target"),
        ),
    )


def full_pool_without_pressure_is_no_incident() -> FieldState:
    """vLLM V1: eight long-context requests drive KV usage 0.91 → 0.96 with nothing waiting and no preemption yet.

    vllm-project/vllm#18115 (comment of 2025-07-28): "Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage 91.2%
    … 95.8%", generation steady at ≈ 240 tokens/s — it "dramatically breaks" only once the pool runs out.
    (Llama-3.1-8B-Instruct on one H100-SXM, ``max_model_len`` 131072, stands in.) At this point the pool is
    high but nothing waits for it: ``kv_saturation``'s condition does not hold, so it is ``inactive`` with the
    reason in numbers, and no incident (no KV turn, no replicas) may open.
    """
    eng = VLLMEngine(
        model_name="meta-llama/Llama-3.1-8B-Instruct",
        num_gpu_blocks=26289,
        max_model_len=131072,
        gpu_memory_utilization=0.9,
    )
    eng.finish(8, prompt=50000, output=1000, ttft=4.0, tpot=0.033, queue=0.1)
    eng.first_tokens([4.0] * 16)
    eng.prefill(16 * 50000)
    eng.decode(8 * 1000 + 8 * 900, 0.033)
    eng.running, eng.waiting, eng.kv_usage = 8.0, 0.0, 0.95
    first = eng.render()
    eng.decode(240, 0.033)
    eng.running, eng.waiting, eng.kv_usage = 8.0, 0.0, 0.958

    def kv_rule_says_why(result: dict[str, Any]) -> None:
        st = _status(result, "kv_saturation")
        assert st.get("state") == "inactive", f"kv_saturation {st.get('state')}: {st.get('reason')}"
        assert "0 waiting" in str(st.get("reason")) and "0 preemptions" in str(st.get("reason")), st

    return FieldState(
        id="vllm-high-kv-usage-nothing-waiting-no-incident",
        source="https://github.com/vllm-project/vllm/issues/18115",
        engine_version="vLLM 0.10 (V1)",
        deployment={
            "name": "llama8b-long",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 131072,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 8, "requests_waiting": 0, "kv_cache_usage_ratio": 0.958},
        no_advice=True,
        must_never=[("kv_cache_dtype", None), ("replicas", "increase"), ("gpu_memory_utilization", "increase")],
        extra_check=kv_rule_says_why,
    )


STATES = [
    long_prompts_thrash_a_small_pool,
    reasoning_requests_fill_a_fp8_model_pool,
    waiting_spikes_as_the_pool_fills,
    full_pool_without_pressure_is_no_incident,
]


@pytest.fixture(scope="module")
def once(tmp_path_factory: pytest.TempPathFactory) -> FieldStateRuns:
    """``once --json`` of every state of this module (each built once here), a few at a time
    (:func:`tests.states.field.run_field_states`)."""
    return run_field_states(tmp_path_factory, [build() for build in STATES])


@pytest.mark.parametrize("build", STATES, ids=[s.__name__ for s in STATES])
def test_field_state(build: Callable[[], FieldState], once: FieldStateRuns) -> None:
    state = build()
    check_field_state(once[state], state)
