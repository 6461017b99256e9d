"""Field states for issue 12, class 5 on vLLM: why requests wait, and which pool a hybrid model has.

* vLLM 0.20+ splits ``vllm:num_requests_waiting`` by ``reason`` (``vllm:num_requests_waiting_by_reason``,
  ``vllm/v1/metrics/loggers.py``): ``capacity`` (no KV blocks) or ``deferred`` (LoRA budget, KV transfer,
  blocked). Only capacity-waiting calls for a KV-pool turn.
* Hybrid models (Mamba/GDN + attention: Jamba, Nemotron-H, Granite-4, Qwen3-Next) report ``block_size`` as the
  minimum over their KV groups; before 0.33's group-aware ``kv_cache_size_tokens`` label the pool is not
  ``num_gpu_blocks × block_size``. ``vllm:cache_config_info`` marks them with ``mamba_page_size_padded`` (a
  ``CacheConfig`` field, ``vllm/config/cache.py``, set by ``vllm/model_executor/models/config.py``).

Every row is built from the public report in ``source``, as that vLLM version exposes it (the stand-in
:class:`tests.states.VLLMEngine` renders the version's label set). The expositions are written here, not copied
from any capture.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.states import VLLMEngine
from tests.states.field import FieldState, FieldStateRuns, check_field_state, run_field_states

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}

KV_TURNS_NEVER: list[tuple[str, str | None]] = [
    ("kv_cache_dtype", None),
    ("max_model_len", "decrease"),
    ("gpu_memory_utilization", "increase"),
]
"""KV-pool turns: they make room in the KV pool, which is not what the requests wait for here."""


def scrapes(eng: VLLMEngine, *, preempt: float = 0.0) -> tuple[str, str]:
    """Two scrapes one second apart: the engine prefills and decodes between them (and preempts ``preempt``)."""
    eng.prefill(2_000_000)
    eng.decode(300_000, 0.03)
    first = eng.render()
    eng.prefill(20_000)
    eng.decode(2_000, 0.03)
    eng.preempt(preempt)
    return first, eng.render()


def _rule_reason(result: dict[str, Any], rule: str) -> str:
    return next((str(r.get("reason")) for r in result.get("rules") or [] if r.get("rule") == rule), "")


def lora_deferred() -> FieldState:
    """vLLM 0.33 with LoRA adapters: the KV pool is at 94 %, 14 requests wait, every one ``deferred``.

    vllm-project/vllm PR #15422: in V1 with LoRA the scheduler stops admitting waiting requests when it can no
    longer honour ``--max-loras`` (requests for a fifth adapter wait while four are running), whatever the KV
    pool holds. vLLM 0.20+ counts these as ``reason="deferred"``. No KV turn admits them; before the adapter
    read the split, the 14 read as capacity-waiting and the KV pool was turned.
    """
    eng = VLLMEngine(
        model_name="meta-llama/Llama-3.1-8B-Instruct",
        num_gpu_blocks=27000,
        max_model_len=32768,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.running, eng.waiting, eng.deferred, eng.kv_usage = 38.0, 14.0, 14.0, 0.94
    first, second = scrapes(eng)
    return FieldState(
        id="vllm-lora-waiting-deferred-not-capacity",
        source="https://github.com/vllm-project/vllm/pull/15422",
        engine_version="vLLM 0.33 (V1, --enable-lora --max-loras 4)",
        deployment={
            "name": "llama-lora",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32768,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={
            "requests_waiting": 14,
            "requests_waiting_by_reason": {"capacity": 0, "deferred": 14},
            "kv_cache_usage_ratio": 0.94,
        },
        must_never=KV_TURNS_NEVER,
    )


def hybrid_pool_unknown() -> FieldState:
    """vLLM 0.11, hybrid Mamba model: ``num_gpu_blocks × block_size`` reads 0.5 max-length requests.

    kaito-project/kaito PR #2052: "concurrency = floor(num_gpu_blocks * block_size / seq_len) over-estimates
    concurrency for hybrid Mamba models (e.g. NemotronH, FalconH1) because Mamba layers allocate their own
    KV-cache blocks from the same shared pool"; vllm-project/vllm#24280: the attention block is raised to 672
    tokens for NVIDIA-Nemotron-Nano-9B-v2 to match the Mamba page. Before 0.33 vLLM exports no group-aware
    ``kv_cache_size_tokens``, so the pool is unknown: no ``max_model_len`` cut may be sized from it.
    (``ai21labs/Jamba-v0.1``, the model table's hybrid, stands in for the reports' models.)
    """
    eng = VLLMEngine(
        model_name="ai21labs/Jamba-v0.1",
        num_gpu_blocks=48,
        block_size=672,
        max_model_len=65536,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    eng.cache_labels = {"mamba_page_size_padded": "1376256"}
    eng.running, eng.waiting, eng.kv_usage = 3.0, 0.0, 0.41
    first, second = scrapes(eng)

    def says_hybrid(result: dict[str, Any]) -> None:
        reason = _rule_reason(result, "pool_context")
        assert "hybrid" in reason, f"pool_context status does not say why the pool is unknown: {reason!r}"

    return FieldState(
        id="vllm-hybrid-mamba-pool-not-blocks-times-block-size",
        source="https://github.com/kaito-project/kaito/pull/2052",
        engine_version="vLLM 0.11 (V1, hybrid attention + Mamba)",
        deployment={
            "name": "hybrid-mamba",
            "engine": "vllm",
            "model": "ai21labs/Jamba-v0.1",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 65536,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"kv_cache_hybrid": True, "kv_cache_capacity_tokens": None, "kv_cache_usage_ratio": 0.41},
        must_never=KV_TURNS_NEVER,
        extra_check=says_hybrid,
    )


def hybrid_group_aware_pool_full() -> FieldState:
    """vLLM 0.33, hybrid GDN/Mamba model: the group-aware pool (``kv_cache_size_tokens`` 457,880) is full with
    three requests and five wait for ``capacity``.

    vllm-project/vllm#54458: on a hybrid linear-attention model vLLM raises the attention block to 7,808 tokens
    ("Setting attention block size to 7808 tokens to ensure that attention page size is >= mamba page size");
    every request pins ~23 pages, "only 2-3 requests of ANY size run, the rest queue on capacity" in a
    457,880-token pool. The engine's group-aware number is the pool (not 70 blocks × 7,808 = 546,560): it is
    read, the model is named hybrid, and the pool really is full — the queue is capacity, so the KV rules run;
    raising max_num_seqs admits no one, and a max-model-len cap frees nothing: a 12-token prompt held 32.9 % of
    the pool, whole pages per KV group, not its length. (``ai21labs/Jamba-v0.1`` stands in for the report's
    model.)
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
    first, second = scrapes(eng, preempt=2.0)
    return FieldState(
        id="vllm-hybrid-group-aware-pool-full",
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
        scrapes=[(first, second)],
        snapshot={
            "kv_cache_hybrid": True,
            "kv_cache_capacity_tokens": 457880,
            "requests_waiting_by_reason": {"capacity": 5, "deferred": 0},
        },
        # the long-context replica is withheld: once's 1 s of history sizes no replicas (≥ 30 s needed)
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "decrease"),
            ("max_model_len", "decrease"),
            ("replicas", "increase"),
        ],
        extra_check=_kv_rule_ran,
    )


def _kv_rule_ran(result: dict[str, Any]) -> None:
    reason = _rule_reason(result, "kv_saturation")
    assert "5 waiting" in reason and "withheld" not in reason, f"kv_saturation should judge the full pool: {reason!r}"
    recs = result.get("recommendations") or []
    assert "admission_thrash" in {r.get("rule") for r in recs}
    held = [w for r in recs for w in r.get("withheld") or [] if w.get("dial") == "replicas"]
    assert held and all("≥ 30 s" in str(w.get("reason")) for w in held), held


STATES = [lora_deferred(), hybrid_pool_unknown(), hybrid_group_aware_pool_full()]


@pytest.fixture(scope="module")
def once(tmp_path_factory: pytest.TempPathFactory) -> FieldStateRuns:
    """``once --json`` of every state of this module, a few at a time (:func:`tests.states.field.run_field_states`)."""
    return run_field_states(tmp_path_factory, STATES)


@pytest.mark.parametrize("state", STATES, ids=[s.id for s in STATES])
def test_field_state(once: FieldStateRuns, state: FieldState) -> None:
    check_field_state(once[state], state)
