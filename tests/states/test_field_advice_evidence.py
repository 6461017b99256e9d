"""Field states for issue 13, problems 2 and 3: every diagnosis checked against its evidence, and predicted effects
anchored on the engine.

* A context cap only when the observed request lengths make long contexts the pool's consumer (a hybrid model's
  pages are not its length; a DP rank full of short requests is not freed by a cap above them).
* More TP for TTFT only when the modeled prefill is a material share of the observed TTFT (not when a transfer
  stage of prefill/decode disaggregation holds the time).
* A KV-pool turn only when the KV pool is the saturated one (not a Mamba state pool, not llama.cpp slots).
* Effects start from the engine's pool when it reports one, and say so in numbers when the model is far off.

Every row is built from the public report in ``source``, as that engine version exposes it (the stand-ins in
:mod:`tests.states` and the SGLang/llama.cpp renderers of :mod:`tests.states.test_field_pools` write the
version's metric names and labels; nothing is copied from a capture). Each row is checked twice:

1. the rules, in-process on the state's evaluation (:func:`tests.states.direct.rule_proposals`): what is withheld,
   by which rule, on which dial, and why (substrings of the reason, in numbers); and what no firing rule may
   suggest (a proposal that is not withheld);
2. ``once --json`` through :func:`tests.states.field.check_field_state`: the snapshot, the names, the effects.

AFTER-MERGE: the recommendation-level expectations that depend on the lifecycle routing ``Proposal.withheld``
(helper "incidents": the first recommendation, what must never be proposed, and the recommendation's ``withheld``
list of ``{rule, dial, reason}``) are asserted only when :data:`LIFECYCLE_ROUTES_WITHHELD`; until then the lifecycle
opens a withheld proposal like any other, and those checks are skipped with that reason. The integrator must see
them pass after the merge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import advisor.rules.lifecycle as lifecycle_module
from tests.states import SGLangEngine, VLLMEngine, go_float
from tests.states.direct import brief_runs, rule_proposals, suggested_of, withheld_of
from tests.states.field import (
    Advice,
    FieldState,
    FieldStateRuns,
    check_field_state,
    matching,
    run_field_states,
)
from tests.states.test_field_pools import llamacpp_text, sglang_text

LIFECYCLE_ROUTES_WITHHELD = "withheld" in Path(lifecycle_module.__file__).read_text(encoding="utf-8")
"""Whether the lifecycle puts withheld proposals in the incident's ``withheld`` (issue 13, helper "incidents")."""

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}

KV_TURNS: list[Advice] = [
    ("kv_cache_dtype", None),
    ("gpu_memory_utilization", "increase"),
    ("weight_quantization", None),
    ("tensor_parallel_size", "increase"),
]
"""Turns that grow the KV pool: wrong while a different pool is the saturated one."""


@dataclass
class EvidenceRow:
    """A field state plus what the rules must withhold and never suggest.

    Attributes:
        state: the field state (``once --json`` expectations that hold whatever the lifecycle does).
        withheld: ``(rule, dial, substrings of the reason)`` that must be withheld.
        never: advice no firing rule may suggest (a proposal not withheld).
        after_merge_first: the first recommendation once the lifecycle routes ``withheld`` (AFTER-MERGE).
        after_merge_never: advice ``once --json`` must never show once the lifecycle routes ``withheld``.
        status_withheld: ``(rule, substrings)`` the rule's status must give (a rule whose own condition is withheld:
            ``kv_saturation`` does not fire on another pool's pressure and says why), in-process and in ``rules``.
    """

    state: FieldState
    withheld: Sequence[tuple[str, str, Sequence[str]]] = ()
    never: Sequence[Advice] = ()
    after_merge_first: Advice | None = None
    after_merge_never: Sequence[Advice] = field(default_factory=list)
    status_withheld: Sequence[tuple[str, Sequence[str]]] = ()


# --- 1. hybrid model on vLLM: short prompts hold the pool in whole pages -----------------------------------------


def vllm_hybrid_short_prompts() -> EvidenceRow:
    """vLLM 0.33, hybrid GDN/Mamba + attention model: three requests fill the group-aware pool of 457,880 tokens,
    five wait for capacity, yet the requests that finish average 2,200 tokens (2,000-token prompts, 200 out).

    vllm-project/vllm#54458: the attention block is raised to 7,808 tokens to match the Mamba page, "every request
    pins a fixed ~23-page footprint regardless of prompt length" and "a 12-token prompt occupies 32.9% of the
    pool". ``admission_thrash`` reads ~151,000 KV tokens per running request; a max-model-len cap (56,320) frees
    nothing: it must be withheld, with the footprint and the observed length. (``ai21labs/Jamba-v0.1`` stands in
    for the report's model.)
    """
    eng = VLLMEngine(
        model_name="ai21labs/Jamba-v0.1",
        num_gpu_blocks=70,
        block_size=7808,
        max_model_len=131072,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.cache_labels = {
        "mamba_page_size_padded": "4096000",
        "kv_cache_size_tokens": "457880",
        "kv_cache_max_concurrency": str(457880 / 131072),
    }
    eng.running, eng.waiting, eng.kv_usage = 3.0, 5.0, 0.99
    eng.prefill(2_000_000)
    eng.decode(300_000, 0.03)
    eng.finish(900, prompt=2000, output=200, ttft=0.4, tpot=0.03, queue=0.1)
    first = eng.render()
    eng.prefill(20_000)
    eng.decode(2_000, 0.03)
    eng.first_tokens([3.0] * 10)
    eng.finish(10, prompt=2000, output=200, ttft=3.0, tpot=0.03, queue=2.5)
    eng.preempt(2.0)
    state = FieldState(
        id="vllm-hybrid-short-prompts-hold-the-pool",
        source="https://github.com/vllm-project/vllm/issues/54458",
        engine_version="vLLM 0.33 (V1, hybrid linear attention + full attention)",
        deployment={
            "name": "hybrid-gdn",
            "engine": "vllm",
            "model": "ai21labs/Jamba-v0.1",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 131072,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"kv_cache_hybrid": True, "kv_cache_capacity_tokens": 457880, "kv_cache_usage_ratio": 0.99},
    )
    return EvidenceRow(
        state,
        withheld=[
            ("admission_thrash", "max_model_len", ["hybrid model", "finished requests average 2,200 tokens"]),
            ("admission_thrash", "replicas", ["finished requests average 2,200 tokens", "frees nothing"]),
        ],
        never=[("max_model_len", "decrease"), ("max_num_seqs", "increase")],
        after_merge_never=[("max_model_len", "decrease")],
    )


# --- 2. SGLang PD prefill worker: the transfer holds TTFT, not the prefill ----------------------------------------

_SGL_SCHED = {"engine_type": "prefill", "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}


def _pd_prefill_page(eng: SGLangEngine, model: str, bootstrap: float, inflight: float) -> str:
    """The engine's page as a ``--disaggregation-mode prefill`` server: ``engine_type="prefill"`` and the
    disaggregation queue gauges of 0.5.23 (``observability/metrics_collector.py``)."""
    text = eng.render().replace('engine_type="unified"', 'engine_type="prefill"')
    labels = ",".join(f'{k}="{v}"' for k, v in sorted({**_SGL_SCHED, "model_name": model}.items()))
    for name, help_text, value in (
        ("num_prefill_bootstrap_queue_reqs", "The number of requests in the prefill bootstrap queue.", bootstrap),
        ("num_prefill_inflight_queue_reqs", "The number of requests in the prefill inflight queue.", inflight),
    ):
        text += f"# HELP sglang:{name} {help_text}\n# TYPE sglang:{name} gauge\n"
        text += f"sglang:{name}{{{labels}}} {go_float(value)}\n"
    return text


def sglang_pd_prefill_ttft() -> EvidenceRow:
    """SGLang 0.5.23 PD disaggregation, prefill server (DeepSeek-V3, TP 8 on H200): 4,096-token prompts, mean TTFT
    22 s, nothing in the waiting queue, 40 → 52 requests in the bootstrap queue waiting for the decode side.

    sgl-project/sglang#6411: "a significant increase TTFT when using PD disaggregation mode compared to the
    single-node mode" — random 4,096-token inputs, mean TTFT ~22 s. The roofline prefill of a 4,096-token prompt
    at TP 8 is a fraction of a second: more TP (and chunked prefill) cannot recover the time, which the transfer
    stage holds; both must be withheld, saying the prefill share and the queues.
    """
    model = "deepseek-ai/DeepSeek-V3"
    eng = SGLangEngine(model_name=model, max_total_num_tokens=400000, context_len=163840, swa_tokens=1)
    eng.set_usage(full_used=72000, swa_used=0)
    eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 2.0, 0.0
    eng.prompt["true"], eng.generation["true"], eng.requests["true"] = 4.0e8, 1.0e5, 97_000.0
    first = _pd_prefill_page(eng, model, 40, 3)
    eng.finish(30, prompt=4096, output=1, ttft=22.0, tpot=0.02, queue=0.05)
    eng.prompt["true"] += 30 * 4096
    eng.generation["true"] += 30
    second = _pd_prefill_page(eng, model, 52, 3)
    state = FieldState(
        id="sglang-pd-prefill-ttft-held-by-transfer",
        source="https://github.com/sgl-project/sglang/issues/6411",
        engine_version="SGLang 0.5.23 (PD disaggregation, prefill)",
        deployment={
            "name": "dsv3-prefill",
            "engine": "sglang",
            "model": model,
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "mem_fraction_static": 0.85,
            "max_model_len": 163840,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_waiting": 0, "disaggregation_queues": {"prefill_bootstrap": 52, "prefill_inflight": 3}},
        named=["prefill_bootstrap"],
    )
    return EvidenceRow(
        state,
        withheld=[
            (
                "goodput_below_target",
                "tensor_parallel_size",
                ["of the observed mean TTFT", "under 25%", "55 requests wait for a transfer stage"],
            ),
            ("goodput_below_target", "chunked_prefill", ["under 25%"]),
            ("weights_crowd", "tensor_parallel_size", ["the KV pool is not the constraint", "KV usage at most 18%"]),
        ],
        never=[("tensor_parallel_size", "increase"), ("chunked_prefill", None)],
        after_merge_never=[("tensor_parallel_size", "increase"), ("chunked_prefill", None)],
    )


# --- 3. an engine pool twelve times below the model's: effects anchored on the engine ---------------------------

ENGINE_BLOCKS = 1701
"""The co-located engine's blocks: its pool is 1,701 × 16 = 27,216 tokens (what ``--gpu-memory-utilization 0.20``
leaves a GPTQ Qwen2.5-14B on an A100-80GB), while the advisor's config assumes the default 0.9: 329,792 tokens."""


def vllm_colocated_pool_below_model() -> EvidenceRow:
    """vLLM 0.33, Qwen2.5-14B-Instruct GPTQ on an A100-80GB shared with a 72B model: the engine runs with
    ``--gpu-memory-utilization 0.20`` (its pool: 27,216 tokens), the advisor's config leaves the default 0.9 (the
    capacity pass: 329,792 tokens, +1,112 %). The pool is full and requests queue.

    vllm-project/vllm#10533: "Qwen2.5-14B-Instruct-GPTQ-Int4 and Qwen2.5-72B-Instruct-GPTQ-Int4 with one 80G
    A100", the 14B at ``--gpu-memory-utilization 0.20``. Every predicted pool effect must start from the engine's
    27,216 tokens (the capacity pass's figure kept beside it); the advisor's config is to be corrected to what the
    engine runs. The engine reports its budget (``cache_config_info``), so every turn is the capacity pass re-run
    on 0.20 — which agrees with the engine's pool, so confidence is not lowered — and the budget raise starts from
    0.20 (before, the pass ran on the config's 0.9: 329,792 tokens, +1,112 %, and no budget raise was proposed).
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen2.5-14B-Instruct",
        num_gpu_blocks=ENGINE_BLOCKS,
        max_model_len=16384,
        gpu_memory_utilization=0.2,
        version="0.33",
    )
    eng.running, eng.waiting, eng.kv_usage = 18.0, 15.0, 0.97
    first, second = _scrapes(eng, preempt=3.0)

    def anchored(result: dict[str, Any]) -> None:
        engine_pool = ENGINE_BLOCKS * 16
        recs = result.get("recommendations") or []
        pool = [c for c in _all(recs) if "kv_cache_tokens" in (c.get("predicted_effect") or {})]
        assert pool, f"no pool turn proposed: {[r.get('dial') for r in recs]}"
        for c in pool:
            e = c["predicted_effect"]["kv_cache_tokens"]
            assert e["before"] == pytest.approx(engine_pool, rel=1e-3), (c.get("dial"), e)
            assert e["model_before"] == pytest.approx(engine_pool, rel=0.02), (c.get("dial"), e)  # the pass at 0.20
            assert e["after"] == pytest.approx(engine_pool * e["model_after"] / e["model_before"], rel=1e-3)
        for r in recs:
            if "kv_cache_tokens" in (r.get("predicted_effect") or {}):
                assert "confidence lowered" not in str(r.get("description")), r.get("description")
        (budget,) = [c for c in _all(recs) if c.get("dial") == "gpu_memory_utilization" and c.get("action") != "set"]
        assert (budget["action"], budget["current"]) == ("increase", 0.2), budget
        (fix,) = [c for c in _all(recs) if c.get("dial") == "gpu_memory_utilization" and c.get("action") == "set"]
        assert (fix["current"], fix["suggested"]) == (0.9, 0.2), fix

    state = FieldState(
        id="vllm-engine-pool-twelve-times-below-the-model",
        source="https://github.com/vllm-project/vllm/issues/10533",
        engine_version="vLLM 0.33 (V1, GPTQ, co-located at --gpu-memory-utilization 0.20)",
        deployment={
            "name": "qwen14b-coloc",
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-14B-Instruct",
            "gpu": "a100-80gb",
            "quantization": "gptq",
            "max_model_len": 16384,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"kv_cache_capacity_tokens": 27216, "capacity_model_error_ratio": 329792 / 27216 - 1},
        must_propose=[("kv_cache_dtype", None), ("gpu_memory_utilization", "set")],
        extra_check=anchored,
    )
    return EvidenceRow(state, never=[("max_model_len", "decrease")])


def _scrapes(eng: VLLMEngine, *, preempt: float = 0.0) -> tuple[str, str]:
    eng.prefill(2_000_000)
    eng.decode(300_000, 0.03)
    first = eng.render()
    eng.prefill(20_000)
    eng.decode(2_000, 0.03)
    eng.preempt(preempt)
    return first, eng.render()


def _all(recs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recommendations and their alternatives."""
    return [c for r in recs for c in [r, *(r.get("alternatives") or [])]]


# --- 4. SGLang Mamba pool saturated (slots leaked), KV pool below its threshold ---------------------------------


def sglang_mamba_leak() -> EvidenceRow:
    """SGLang 0.5.23, hybrid SSM model at ``--context-length 262144``: the Mamba state pool is at 98 %, the KV pool at
    83 % (a 150,000-token shared system prompt plus 400-token questions), 49 → 60 requests wait.

    sgl-project/sglang#16067 (Qwen3-Next, ``MODEL_LENGTH=262144``, shared-prefix benchmark with a 150,000-token
    system prompt): Mamba slots are held when scheduling fails, so requests queue on the state pool while the KV
    pool has room. The KV pool (183,240 tokens) holds less than the context, so ``pool_context`` fires: its cap
    stands (the prompts are 150,400 tokens: long contexts are the consumer), but every KV-pool turn must be
    withheld, naming the Mamba pool. (``ai21labs/Jamba-v0.1`` stands in for Qwen3-Next.)
    """
    model = "ai21labs/Jamba-v0.1"

    def rank(q: float, mamba: float) -> dict[str, float]:
        return {
            "num_running_reqs": 4,
            "num_queue_reqs": q,
            "full_token_usage": 0.83,
            "swa_token_usage": 0.0,
            "mamba_usage": mamba,
            "token_usage": mamba,
            "mamba_used_tokens": round(mamba * 50),
            "mamba_available_tokens": 50 - round(mamba * 50),
            "max_total_num_tokens": 183240,
            "context_len": 262144,
            "page_size": 1,
        }

    state = FieldState(
        id="sglang-mamba-slots-held-kv-below-threshold",
        source="https://github.com/sgl-project/sglang/pull/16067",
        engine_version="SGLang 0.5.23",
        deployment={
            "name": "hybrid-ssm-256k",
            "engine": "sglang",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 8,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 262144,
            "slo": SLO,
        },
        scrapes=[
            (
                sglang_text(model, [rank(49, 0.96)], prompt=3.0e8, generation=2.0e5, requests=2000, retracted=3),
                sglang_text(
                    model,
                    [rank(60, 0.98)],
                    prompt=3.0e8 + 2 * 150_400,
                    generation=2.0e5 + 600,
                    requests=2002,
                    retracted=5,
                ),
            )
        ],
        snapshot={"kv_cache_usage_ratio": 0.83, "pool_usage": {"mamba": 0.98}},
        named=["mamba"],
    )
    why = ["the mamba pool is saturated (98%)", "KV usage 83%"]
    return EvidenceRow(
        state,
        withheld=[("pool_context", dial, why) for dial in ("kv_cache_dtype", "tensor_parallel_size")],
        never=KV_TURNS,
        after_merge_first=("max_model_len", "decrease"),
        after_merge_never=KV_TURNS,
    )


# --- 5. llama.cpp: every slot busy, the weights-crowd turns withheld ----------------------------------------------


def llamacpp_slots_deferred() -> EvidenceRow:
    """llama.cpp ``--parallel 4``, Meta-Llama-3-8B (bf16) on an RTX 4090: all four slots busy, 20 → 26 requests
    deferred; no KV metrics on this build.

    ggml-org/llama.cpp#7834: "if the number of requests in batch are greater than number of available slots. It
    leads to extra requests getting stored in deferred queue" (Meta-Llama-3-8B). The slots, not the KV pool, hold
    the requests back: the KV rules' own conditions are withheld, saying so, and no KV-pool turn is suggested
    (llama.cpp's pool is ``--ctx-size``: weights and budget turns do not grow it).
    """
    state = FieldState(
        id="llamacpp-slots-busy-kv-rules-withheld",
        source="https://github.com/ggml-org/llama.cpp/issues/7834",
        engine_version="llama.cpp b5500+ (after PR #13660: no KV metrics)",
        deployment={
            "name": "llama3-np4",
            "engine": "llamacpp",
            "model": "meta-llama/Meta-Llama-3-8B",
            "gpu": "rtx4090",
            "tensor_parallel_size": 1,
            "max_model_len": 8192,
            "max_num_seqs": 4,
            "slo": SLO,
        },
        scrapes=[
            (
                llamacpp_text(busy=4, deferred=20, prompt=90000, predicted=7700),
                llamacpp_text(busy=4, deferred=26, prompt=90900, predicted=7804),
            )
        ],
        snapshot={"requests_running": 4, "requests_waiting": 26, "pool_usage": {"slots": 1.0}},
        named=["slots"],
    )
    why = ["withheld: the slots pool is saturated (100%)", "KV pool's usage is unknown", "request slots"]
    return EvidenceRow(
        state,
        never=KV_TURNS,
        after_merge_never=KV_TURNS,
        status_withheld=[("kv_saturation", why), ("admission_thrash", why)],
    )


# --- 6. SGLang DP decode: one rank full of short requests, the context cap frees nothing --------------------------


def sglang_dp_decode_short_requests() -> EvidenceRow:
    """SGLang 0.5.23 PD decode server, DP attention over 8 ranks of 120,000 tokens for a 163,840-token context:
    rank 5 holds 30 requests at 99 % while the others hold 14 at 41 %; requests wait in the decode prealloc queue.

    sgl-project/sglang#13052: with PD disaggregation the decode server picks the DP rank by ``bootstrap_room``, so
    only round-robin balancing is possible and one rank can fill while the others idle. The ranks' pool is below
    the context, so ``pool_context`` fires — but the requests are short (~4,000 KV tokens each on the full rank,
    3,000 generated per request): a cap at 119,808 tokens frees nothing and must be withheld.
    """
    model = "deepseek-ai/DeepSeek-V3"

    def ranks(prealloc: float) -> list[dict[str, float]]:
        out = []
        for i in range(8):
            u = 0.99 if i == 5 else 0.41
            out.append(
                {
                    "num_running_reqs": 30 if i == 5 else 14,
                    "num_queue_reqs": 0,
                    "full_token_usage": u,
                    "token_usage": u,
                    "num_decode_prealloc_queue_reqs": prealloc if i == 5 else 0,
                    "num_decode_transfer_queue_reqs": 1,
                    "max_total_num_tokens": 120000,
                    "context_len": 163840,
                    "page_size": 64,
                }
            )
        return out

    state = FieldState(
        id="sglang-dp-decode-rank-full-of-short-requests",
        source="https://github.com/sgl-project/sglang/issues/13052",
        engine_version="SGLang 0.5.23 (PD disaggregation, decode, DP attention 8)",
        deployment={
            "name": "dsv3-decode-dp8",
            "engine": "sglang",
            "model": model,
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 163840,
            "slo": SLO,
        },
        scrapes=[
            (
                sglang_text(model, ranks(6), engine_type="decode", prompt=1e5, generation=5e7, requests=40000),
                sglang_text(model, ranks(10), engine_type="decode", prompt=1e5, generation=5.0003e7, requests=40010),
            )
        ],
        snapshot={"kv_cache_capacity_tokens_largest_rank": 120000, "max_model_len_ceiling_requests": 0},
        named=["decode_prealloc"],
    )
    return EvidenceRow(
        state,
        withheld=[("pool_context", "max_model_len", ["KV tokens each", "of the proposed cap of 119,808 tokens"])],
        never=[("max_model_len", "decrease")],
        after_merge_never=[("max_model_len", "decrease")],
    )


ROWS = [
    vllm_hybrid_short_prompts(),
    sglang_pd_prefill_ttft(),
    vllm_colocated_pool_below_model(),
    sglang_mamba_leak(),
    llamacpp_slots_deferred(),
    sglang_dp_decode_short_requests(),
]


def _hits(proposals: Sequence[Any], advice: Advice) -> list[Any]:
    dial, action = advice
    return [p for p in proposals if p.dial == dial and (action is None or p.action == action)]


@pytest.mark.parametrize("row", ROWS, ids=[r.state.id for r in ROWS])
def test_rules_withhold_what_the_evidence_contradicts(tmp_path: Path, row: EvidenceRow) -> None:
    _, runs = rule_proposals(tmp_path, row.state)
    withheld = withheld_of(runs)
    for rule, dial, parts in row.withheld:
        reasons = [reason for r, d, reason in withheld if r == rule and d == dial]
        assert reasons, f"{row.state.id}: {rule}/{dial} not withheld; rules: {brief_runs(runs)}"
        for part in parts:
            assert any(part in reason for reason in reasons), f"{row.state.id}: {part!r} not in {reasons}"
    for rule, parts in row.status_withheld:
        reason = next(r.fires.reason for r in runs if r.rule == rule)
        assert all(p in reason for p in parts), f"{row.state.id}: {rule} status {reason!r} lacks {parts}"
    for advice in row.never:
        hits = _hits(suggested_of(runs), advice)
        assert not hits, f"{row.state.id}: {advice} suggested by {[p.rule for p in hits]}: {brief_runs(runs)}"


@pytest.fixture(scope="module")
def once(tmp_path_factory: pytest.TempPathFactory) -> FieldStateRuns:
    """``once --json``'s deployment object per row, run once for both tests below, a few rows at a time
    (:func:`tests.states.field.run_field_states`)."""
    return run_field_states(tmp_path_factory, [row.state for row in ROWS])


@pytest.mark.parametrize("row", ROWS, ids=[r.state.id for r in ROWS])
def test_once_json(once: FieldStateRuns, row: EvidenceRow) -> None:
    result = once[row.state]
    check_field_state(result, row.state)
    for rule, parts in row.status_withheld:
        status = " ".join(str(s.get("reason")) for s in result.get("rules") or [] if s.get("rule") == rule)
        assert all(p in status for p in parts), f"{row.state.id}: {rule} status {status!r} lacks {parts}"


@pytest.mark.parametrize("row", ROWS, ids=[r.state.id for r in ROWS])
def test_once_json_after_lifecycle_merge(once: FieldStateRuns, row: EvidenceRow) -> None:
    """AFTER-MERGE: the recommendation-level expectations (first, never, the recommendation's ``withheld``)."""
    if not LIFECYCLE_ROUTES_WITHHELD:
        pytest.skip("AFTER-MERGE: the lifecycle does not route Proposal.withheld yet (helper 'incidents')")
    result = once[row.state]
    recs: list[dict[str, Any]] = list(result.get("recommendations") or [])
    for advice in row.after_merge_never:
        assert not matching(recs, advice), f"{row.state.id}: {advice} proposed: {[r.get('dial') for r in recs]}"
    if row.after_merge_first is not None:
        dial, action = row.after_merge_first
        first = recs[0] if recs else {}
        assert first.get("dial") == dial and (action is None or first.get("action") == action), (
            f"{row.state.id}: first {[(r.get('dial'), r.get('action')) for r in recs[:1]]}, expected {dial} {action}"
        )
    shown = [w for r in recs for w in (r.get("withheld") or [])]
    for rule, dial, parts in row.withheld:
        reasons = [str(w.get("reason")) for w in shown if w.get("rule") == rule and w.get("dial") == dial]
        statuses = " ".join(str(s.get("reason")) for s in result.get("rules") or [] if s.get("rule") == rule)
        assert any(all(p in r for p in parts) for r in reasons) or all(p in statuses for p in parts), (
            f"{row.state.id}: {rule}/{dial} withheld neither in a recommendation's withheld nor in the rules status"
        )
