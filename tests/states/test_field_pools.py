"""Field states for issue 12, classes 3, 4 and 5: which pool a request needs, and which rank reports it.

* Class 3 — data-parallel pools summed where one rank's pool is what matters (SGLang DP attention, vLLM DP).
* Class 4 — one rank reporting an impossible value must be named and left out, not silence the deployment.
* Class 5 — pools other than the KV pool: SGLang Mamba/SWA state pools, llama.cpp slots, SGLang
  prefill/decode-disaggregation queues.

Every row is built from the public report in ``source``, as that engine version exposes it. Metric names and
labels are the engines' own (SGLang ``python/sglang/srt/metrics/collector.py`` /
``observability/metrics_collector.py``: ``full_token_usage``, ``swa_token_usage``, ``mamba_usage``,
``num_decode_prealloc_queue_reqs`` …, labels ``engine_type, model_name, dp_rank, tp_rank``; llama.cpp
``tools/server/server-task.cpp`` ``to_metrics()``; vLLM ``vllm/v1/metrics/loggers.py``, label ``engine`` per
DP rank). The expositions are written here, not copied from any capture.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from tests.states import VLLMEngine, go_float
from tests.states.field import FieldState, FieldStateRuns, check_field_state, number, run_field_states

# --- SGLang: several DP ranks ------------------------------------------------------------------------------

_SGL_HELP = {
    "num_running_reqs": "The number of running requests.",
    "num_queue_reqs": "The number of requests in the waiting queue.",
    "token_usage": "The token usage.",
    "full_token_usage": "The token usage for full attention layers.",
    "swa_token_usage": "The token usage for SWA layers.",
    "mamba_usage": "The token usage for Mamba layers.",
    "max_total_num_tokens": "Maximum total number of tokens in the KV cache pool.",
    "context_len": "Maximum context length.",
    "page_size": "KV cache page size in tokens.",
    "cache_hit_rate": "The prefix cache hit rate.",
    "gen_throughput": "The generation throughput (token/s).",
    "num_prefill_prealloc_queue_reqs": "The number of requests in the prefill prealloc queue.",
    "num_prefill_inflight_queue_reqs": "The number of requests in the prefill inflight queue.",
    "num_decode_prealloc_queue_reqs": "The number of requests in the decode prealloc queue.",
    "num_decode_transfer_queue_reqs": "The number of requests in the decode transfer queue.",
    "mamba_used_tokens": "Used Mamba state slots.",
    "mamba_available_tokens": "Available Mamba state slots.",
    "swa_used_tokens": "Used SWA token slots.",
    "swa_available_tokens": "Available SWA token slots.",
}


def _labels(labels: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def sglang_text(
    model: str,
    ranks: Sequence[Mapping[str, float]],
    *,
    engine_type: str = "unified",
    prompt: float,
    generation: float,
    requests: float,
    retracted: float | None = None,
) -> str:
    """One SGLang scrape: scheduler gauges per DP rank (``dp_rank`` only with several ranks; TP rank 0
    reporting), tokenizer counters without ``dp_rank``, the retraction counter (0.5.23) when given."""
    out: list[str] = []
    names = [n for n in _SGL_HELP if any(n in r for r in ranks)]
    for name in names:
        out += [f"# HELP sglang:{name} {_SGL_HELP[name]}", f"# TYPE sglang:{name} gauge"]
        for i, r in enumerate(ranks):
            if name not in r:
                continue
            labels = {"engine_type": engine_type, "model_name": model, "moe_ep_rank": "0", "pp_rank": "0"}
            labels["tp_rank"] = "0"
            if len(ranks) > 1:
                labels["dp_rank"] = str(i)
            out.append(f"sglang:{name}{_labels(labels)} {go_float(r[name])}")
    tok = {"engine_type": engine_type, "is_streaming": "true", "model_name": model}
    for name, value in (
        ("prompt_tokens_total", prompt),
        ("generation_tokens_total", generation),
        ("num_requests_total", requests),
    ):
        out += [f"# HELP sglang:{name} {name}", f"# TYPE sglang:{name} counter"]
        out.append(f"sglang:{name}{_labels(tok)} {go_float(value)}")
    if retracted is not None:
        out += ["# HELP sglang:num_retracted_requests_total Total number of retracted requests."]
        out += ["# TYPE sglang:num_retracted_requests_total counter"]
        labels = {"engine_type": engine_type, "model_name": model, "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}
        out.append(f"sglang:num_retracted_requests_total{_labels(labels)} {go_float(retracted)}")
    return "\n".join(out) + "\n"


# --- vLLM: several DP engines behind one API server --------------------------------------------------------


def vllm_dp_text(engines: Sequence[VLLMEngine]) -> str:
    """The engines' expositions as one ``/metrics``: each engine's samples relabelled ``engine="<i>"``, the
    families kept together (one HELP/TYPE each), as vLLM's ``PrometheusStatLogger`` serves DP engines."""
    families: dict[str, list[str]] = {}
    heads: dict[str, list[str]] = {}
    for i, eng in enumerate(engines):
        family = ""
        for line in eng.render().replace('engine="0"', f'engine="{i}"').splitlines():
            if line.startswith("# HELP "):
                family = line.split()[2]
                heads.setdefault(family, [])
                if len(heads[family]) < 2:
                    heads[family].append(line)
                continue
            if line.startswith("# TYPE "):
                family = line.split()[2]
                if len(heads.setdefault(family, [])) < 2:
                    heads[family].append(line)
                continue
            if i > 0 and line.startswith("process_"):
                continue
            families.setdefault(family, []).append(line)
    out: list[str] = []
    for family, lines in families.items():
        out += heads.get(family, [])
        out += lines
    return "\n".join(out) + "\n"


def vllm_engine(blocks: int, max_model_len: int, *, running: float, waiting: float, usage: float) -> VLLMEngine:
    eng = VLLMEngine(
        model_name="deepseek-ai/DeepSeek-V3",
        num_gpu_blocks=blocks,
        max_model_len=max_model_len,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.running, eng.waiting, eng.kv_usage = running, waiting, usage
    return eng


def vllm_dp_scrapes(
    shape: Sequence[tuple[int, float, float, float]], max_model_len: int, *, preempt: float = 0.0
) -> tuple[str, str]:
    """Two scrapes of DP engines ``(blocks, running, waiting, usage)``; each engine prefills, decodes and
    (optionally) preempts over the one-second window."""
    engines = [vllm_engine(b, max_model_len, running=r, waiting=w, usage=u) for b, r, w, u in shape]
    for eng in engines:
        eng.prefill(2_000_000)
        eng.decode(300_000, 0.03)
    first = vllm_dp_text(engines)
    for eng in engines:
        eng.prefill(20_000)
        eng.decode(2_000, 0.03)
        eng.preempt(preempt)
    return first, vllm_dp_text(engines)


# --- llama.cpp ---------------------------------------------------------------------------------------------


def llamacpp_text(
    *, busy: float, deferred: float, prompt: float, predicted: float, kv_ratio: float | None = None
) -> str:
    """``llama-server --metrics`` (``to_metrics()``): no labels; ``kv_cache_usage_ratio``/``kv_cache_tokens``
    only on builds before May 2025 (PR #13660 removed them)."""
    rows: list[tuple[str, str, str, float]] = [
        ("prompt_tokens_total", "counter", "Number of prompt tokens processed.", prompt),
        ("prompt_seconds_total", "counter", "Prompt process time", prompt / 900.0),
        ("tokens_predicted_total", "counter", "Number of generation tokens processed.", predicted),
        ("tokens_predicted_seconds_total", "counter", "Predict process time", predicted / 40.0),
        ("n_decode_total", "counter", "Total number of llama_decode() calls", predicted / 3.9),
        ("n_busy_slots_per_decode", "counter", "Average number of busy slots per llama_decode() call", 3.9),
        ("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", 900.0),
        ("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", 40.0),
    ]
    if kv_ratio is not None:
        rows += [
            ("kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.", kv_ratio),
            ("kv_cache_tokens", "gauge", "KV-cache tokens.", kv_ratio * 32768),
        ]
    rows += [
        ("requests_processing", "gauge", "Number of requests processing.", busy),
        ("requests_deferred", "gauge", "Number of requests deferred.", deferred),
    ]
    out: list[str] = []
    for name, kind, text, value in rows:
        out += [
            f"# HELP llamacpp:{name} {text}",
            f"# TYPE llamacpp:{name} {kind}",
            f"llamacpp:{name} {go_float(value)}",
        ]
    return "\n".join(out) + "\n"


# --- shared pieces -------------------------------------------------------------------------------------------

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}

KV_TURNS_NEVER: list[tuple[str, str | None]] = [
    ("kv_cache_dtype", None),
    ("max_model_len", "decrease"),
    ("gpu_memory_utilization", "increase"),
]
"""KV-pool turns: wrong whenever a pool other than the KV pool is the one saturated."""


def _rule_reason(result: dict[str, Any], rule: str) -> str:
    return next((str(r.get("reason")) for r in result.get("rules") or [] if r.get("rule") == rule), "")


def _withheld_says_pool(pool: str) -> Any:
    def check(result: dict[str, Any]) -> None:
        reason = _rule_reason(result, "kv_saturation")
        assert "withheld" in reason and pool in reason, f"kv_saturation status does not say why: {reason!r}"

    return check


# --- class 3: one rank's pool ------------------------------------------------------------------------------


def sglang_dp8_long_context() -> FieldState:
    """SGLang DP attention, 8 ranks, each rank's pool (40,960 tokens) far below the context (163,840).

    sgl-project/sglang#6027: with ``--enable-dp-attention`` on 2 × 8 H100 a single 64k-token input crashes the
    server that serves it without DP attention: each rank holds only its own share of the KV pool. The summed
    pool (327,680) says two max-length requests fit; no rank holds even one.
    """
    ranks_a = [
        {"num_running_reqs": 3, "num_queue_reqs": 1, "full_token_usage": 0.42, "token_usage": 0.42}
        | {"max_total_num_tokens": 40960, "context_len": 163840, "page_size": 1}
        for _ in range(8)
    ]
    ranks_b = [dict(r, num_queue_reqs=2, full_token_usage=0.45, token_usage=0.45) for r in ranks_a]
    model = "deepseek-ai/DeepSeek-V3"
    return FieldState(
        id="sglang-dp8-rank-pool-below-context",
        source="https://github.com/sgl-project/sglang/issues/6027",
        engine_version="SGLang 0.5.23 (DP attention, 8 ranks)",
        deployment={
            "name": "dsv3-dp8",
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
                sglang_text(model, ranks_a, prompt=9e6, generation=4e5, requests=900),
                sglang_text(model, ranks_b, prompt=9.05e6, generation=4.02e5, requests=905),
            )
        ],
        snapshot={
            "kv_cache_capacity_tokens": 327680,
            "kv_cache_capacity_tokens_largest_rank": 40960,
            "max_model_len_ceiling_requests": 0,
        },
        named=["largest of 8 data-parallel ranks"],
        must_first=("max_model_len", "decrease"),
        must_never=[("replicas", "increase")],
        extra_check=_cap_at_most(40960),
    )


def _cap_at_most(limit: float) -> Any:
    def check(result: dict[str, Any]) -> None:
        from tests.states.field import matching, number

        caps = matching(result.get("recommendations") or [], ("max_model_len", "decrease"))
        assert caps and all(number(r["suggested"]) <= limit for r in caps), caps

    return check


def vllm_dp8_ceiling() -> FieldState:
    """vLLM DP 8 (one engine per GPU): the ceiling at max-model-len is 8 × ⌊rank pool ÷ context⌋, not the
    summed pool ÷ context.

    vllm-project/vllm#51454: DeepSeek DP8 vs TP8 on 8 × B200 (vLLM 0.25): with DP each engine holds its own
    KV pool and a request lives on one engine. Each engine here holds 1.6 max-length requests (16,384 blocks ×
    16 = 262,144 tokens at 163,840): the deployment holds 8, not 12.8.
    """
    shape = [(16384, 6.0, 0.0, 0.55)] * 8
    first, second = vllm_dp_scrapes(shape, 163840)
    return FieldState(
        id="vllm-dp8-ceiling-is-per-rank",
        source="https://github.com/vllm-project/vllm/issues/51454",
        engine_version="vLLM 0.33 (V1, --data-parallel-size 8)",
        deployment={
            "name": "dsv3-vllm-dp8",
            "engine": "vllm",
            "model": "deepseek-ai/DeepSeek-V3",
            "gpu": "b200",
            "tensor_parallel_size": 8,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 163840,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={
            "kv_cache_capacity_tokens": 8 * 262144,
            "kv_cache_capacity_tokens_largest_rank": 262144,
            "max_model_len_ceiling_requests": 8,
        },
        must_never=[("max_model_len", "decrease"), ("replicas", "decrease")],
        extra_check=_ceiling_is(8),
    )


def _ceiling_is(n: float) -> Any:
    def check(result: dict[str, Any]) -> None:
        assert result.get("concurrency_ceiling") == n, result.get("concurrency_ceiling")

    return check


# --- class 4: one bad rank ---------------------------------------------------------------------------------


def vllm_dp_negative_rank() -> FieldState:
    """vLLM DP 4: engine 3 reports a negative KV usage while engines 0–2 are saturated with a queue.

    vllm-project/vllm-ascend#10048: a DP16 decode instance reports
    ``vllm:kv_cache_usage_perc{engine="3",…} -0.3875395987328405``. That one rank must be named and left
    out; the other ranks, full with requests waiting and preemptions rising, still call for a pool turn.
    """
    shape = [(8192, 40.0, 12.0, 0.97), (8192, 41.0, 9.0, 0.96), (8192, 39.0, 14.0, 0.98), (8192, 12.0, 0.0, -0.3875)]
    first, second = vllm_dp_scrapes(shape, 16384, preempt=6.0)
    return FieldState(
        id="vllm-dp4-one-rank-negative-usage",
        source="https://github.com/vllm-project/vllm-ascend/issues/10048",
        engine_version="vLLM 0.33 (V1, --data-parallel-size 4)",
        deployment={
            "name": "dsv3-decode-dp4",
            "engine": "vllm",
            "model": "deepseek-ai/DeepSeek-V3",
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 16384,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"kv_cache_usage_ratio": 0.97, "requests_waiting": 35},
        named=["3: kv_cache_usage_ratio"],
        must_propose=[("kv_cache_dtype", None)],
        extra_check=_confidence_below(0.9),
    )


def _confidence_below(limit: float) -> Any:
    def check(result: dict[str, Any]) -> None:
        recs = result.get("recommendations") or []
        assert recs and all(float(r["confidence"]) < limit for r in recs), [r.get("confidence") for r in recs]

    return check


def sglang_dp_one_rank_over_one() -> FieldState:
    """SGLang DP attention, 4 ranks: rank 2 reports a usage above 1 while ranks 0, 1, 3 are full and queueing.

    sgl-project/sglang#6892: with DP attention ``/metrics`` exports wrong per-rank values (only the last
    reporting rank's). Here rank 2's ``full_token_usage`` reads 1.6: named and left out, the decision is
    made on the other three.
    """
    model = "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"

    def ranks(q: float, u: float) -> list[dict[str, float]]:
        base = {"max_total_num_tokens": 200000, "context_len": 32768, "page_size": 1}
        return [
            {"num_running_reqs": 60, "num_queue_reqs": q, "full_token_usage": u, "token_usage": u} | base,
            {"num_running_reqs": 58, "num_queue_reqs": q, "full_token_usage": u, "token_usage": u} | base,
            {"num_running_reqs": 61, "num_queue_reqs": q, "full_token_usage": 1.6, "token_usage": 1.6} | base,
            {"num_running_reqs": 59, "num_queue_reqs": q, "full_token_usage": u, "token_usage": u} | base,
        ]

    return FieldState(
        id="sglang-dp4-one-rank-usage-above-one",
        source="https://github.com/sgl-project/sglang/issues/6892",
        engine_version="SGLang 0.5.23 (DP attention, 4 ranks)",
        deployment={
            "name": "qwen235-dp4",
            "engine": "sglang",
            "model": model,
            "gpu": "h200",
            "tensor_parallel_size": 4,
            "mem_fraction_static": 0.85,
            "max_model_len": 32768,
            "slo": SLO,
        },
        scrapes=[
            (
                sglang_text(model, ranks(8, 0.95), prompt=5e7, generation=6e6, requests=9000, retracted=40),
                sglang_text(model, ranks(11, 0.97), prompt=5.01e7, generation=6.01e6, requests=9010, retracted=46),
            )
        ],
        snapshot={"kv_cache_usage_ratio": 0.97},
        named=["2: kv_cache_usage_ratio value 1.6"],
        must_propose=[("kv_cache_dtype", None)],
        must_never=[("replicas", "decrease")],
    )


# --- class 5: pools other than the KV pool -----------------------------------------------------------------

_QWEN3_NEXT_LIKE = "ai21labs/Jamba-v0.1"
"""The model table's hybrid SSM model stands in for the reports' Qwen3-Next (a hybrid not in the table):
what matters here is the exposition, which is the same for every hybrid SSM model on SGLang."""


def sglang_mamba_exact() -> FieldState:
    """SGLang 0.5.23, hybrid SSM model: the Mamba state pool is full (0.98), the KV pool is at 31 %.

    jpezzulli/sglang-rtxpro6000#5: on a hybrid model "the mamba cache, not the KV pool, is what bounds
    concurrency": requests queue in 39 % of decode steps with the KV pool at 35 %. A KV turn admits no one.
    """
    model = _QWEN3_NEXT_LIKE

    def rank(q: float, mamba: float) -> dict[str, float]:
        return {
            "num_running_reqs": 8,
            "num_queue_reqs": q,
            "full_token_usage": 0.31,
            "swa_token_usage": 0.0,
            "mamba_usage": mamba,
            "token_usage": round(max(0.31, mamba), 2),
            "mamba_used_tokens": round(mamba * 50),
            "mamba_available_tokens": 50 - round(mamba * 50),
            "max_total_num_tokens": 183240,
            "context_len": 65536,
            "page_size": 1,
        }

    return FieldState(
        id="sglang-mamba-pool-full-kv-free",
        source="https://github.com/jpezzulli/sglang-rtxpro6000/issues/5",
        engine_version="SGLang 0.5.23",
        deployment={
            "name": "hybrid-ssm",
            "engine": "sglang",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 65536,
            "slo": SLO,
        },
        scrapes=[
            (
                sglang_text(model, [rank(5, 0.96)], prompt=4e6, generation=3e5, requests=400, retracted=3),
                sglang_text(model, [rank(9, 0.98)], prompt=4.01e6, generation=3.01e5, requests=403, retracted=5),
            )
        ],
        snapshot={"kv_cache_usage_ratio": 0.31, "pool_usage": {"mamba": 0.98}},
        named=["mamba", "sglang:mamba_usage"],
        must_never=KV_TURNS_NEVER,
        extra_check=_withheld_says_pool("mamba"),
    )


def sglang_mamba_rounded_only() -> FieldState:
    """SGLang 0.5.x before ``full_token_usage``: ``token_usage`` is max(full, mamba) and equals the Mamba
    pool's 0.97 — it must not be read as KV usage.

    sgl-project/sglang#30047: Qwen3-Next logs show "full token usage: 0.40, mamba usage: 0.60" with 49
    requests queued — the Mamba pool runs ahead of the KV pool, and ``token_usage`` follows the larger.
    """
    model = _QWEN3_NEXT_LIKE

    def rank(q: float) -> dict[str, float]:
        base = {"num_running_reqs": 49, "num_queue_reqs": q, "swa_token_usage": 0.0}
        return base | {"mamba_usage": 0.97, "token_usage": 0.97, "cache_hit_rate": 0.0}

    return FieldState(
        id="sglang-mamba-token-usage-is-not-kv",
        source="https://github.com/sgl-project/sglang/pull/30047",
        engine_version="SGLang 0.5.4",
        deployment={
            "name": "hybrid-ssm-054",
            "engine": "sglang",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 65536,
            "slo": SLO,
        },
        scrapes=[
            (
                sglang_text(model, [rank(49)], prompt=2e7, generation=1e5, requests=98),
                sglang_text(model, [rank(61)], prompt=2.004e7, generation=1.002e5, requests=99),
            )
        ],
        snapshot={"kv_cache_usage_ratio": None, "pool_usage": {"mamba": 0.97}},
        named=["mamba"],
        must_never=KV_TURNS_NEVER,
    )


def sglang_swa_pool_full() -> FieldState:
    """SGLang, gpt-oss-120b (hybrid sliding-window): the SWA pool is full (0.99), the full pool at 22 %.

    sgl-project/sglang#31205: the hybrid SWA pool (``--swa-full-tokens-ratio``, 0.1 of the full pool by
    default) is what refuses the long prompts; the full-attention pool has room.
    """
    model = "openai/gpt-oss-120b"

    def rank(q: float, swa: float) -> dict[str, float]:
        return {
            "num_running_reqs": 14,
            "num_queue_reqs": q,
            "full_token_usage": 0.22,
            "swa_token_usage": swa,
            "mamba_usage": 0.0,
            "token_usage": round(max(0.22, swa), 2),
            "swa_used_tokens": round(swa * 21000),
            "swa_available_tokens": 21000 - round(swa * 21000),
            "max_total_num_tokens": 210000,
            "context_len": 131072,
            "page_size": 1,
        }

    return FieldState(
        id="sglang-swa-pool-full",
        source="https://github.com/sgl-project/sglang/issues/31205",
        engine_version="SGLang 0.5.23",
        deployment={
            "name": "gpt-oss-120b",
            "engine": "sglang",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 131072,
            "slo": SLO,
        },
        scrapes=[
            (
                sglang_text(model, [rank(6, 0.97)], prompt=3e7, generation=2e6, requests=2000, retracted=10),
                sglang_text(model, [rank(8, 0.99)], prompt=3.01e7, generation=2.01e6, requests=2004, retracted=12),
            )
        ],
        snapshot={"kv_cache_usage_ratio": 0.22, "pool_usage": {"swa": 0.99}},
        named=["swa", "sglang:swa_token_usage"],
        must_never=KV_TURNS_NEVER,
        extra_check=_withheld_says_pool("swa"),
    )


def llamacpp_slots_full() -> FieldState:
    """llama.cpp ``--parallel 4``: all four slots busy, 46 requests deferred; no KV metrics on this build.

    ggml-org/llama.cpp#5018: when no slot is available the server defers the task ("instead of returning
    'slot unavailable'"). Slots, not the KV cache, bound concurrency: a KV turn admits no one.
    """
    return FieldState(
        id="llamacpp-slots-full",
        source="https://github.com/ggml-org/llama.cpp/pull/5018",
        engine_version="llama.cpp b5500+ (after PR #13660: no KV metrics)",
        deployment={
            "name": "llamacpp-np4",
            "engine": "llamacpp",
            "model": "Qwen/Qwen3-8B",
            "gpu": "rtx4090",
            "tensor_parallel_size": 1,
            "max_model_len": 32768,
            "max_num_seqs": 4,
            "slo": SLO,
        },
        scrapes=[
            (
                llamacpp_text(busy=4, deferred=45, prompt=90000, predicted=7700),
                llamacpp_text(busy=4, deferred=46, prompt=90900, predicted=7804),
            )
        ],
        snapshot={"requests_running": 4, "requests_waiting": 46, "pool_usage": {"slots": 1.0}},
        named=["slots", "llamacpp:requests_processing"],
        must_never=KV_TURNS_NEVER,
    )


def llamacpp_slots_full_old_build() -> FieldState:
    """llama.cpp before May 2025 (``kv_cache_usage_ratio`` still exported): 6 slots busy, requests deferred,
    the KV cache a quarter full.

    ggml-org/llama.cpp#5247: with ``-np 10`` only 6 requests ran at a time "the rest of the slots are being
    queued": a slot limit, not a KV limit. The KV rules must say so, and no budget increase may come.
    """
    return FieldState(
        id="llamacpp-slots-full-kv-quarter",
        source="https://github.com/ggml-org/llama.cpp/issues/5247",
        engine_version="llama.cpp 2025-04 (kv_cache_usage_ratio exported)",
        deployment={
            "name": "llamacpp-np6",
            "engine": "llamacpp",
            "model": "mistralai/Mixtral-8x7B-Instruct-v0.1",
            "gpu": "a100-80gb",
            "tensor_parallel_size": 1,
            "quantization": "awq",
            "max_model_len": 8192,
            "max_num_seqs": 6,
            "slo": SLO,
        },
        scrapes=[
            (
                llamacpp_text(busy=6, deferred=3, prompt=50000, predicted=9000, kv_ratio=0.24),
                llamacpp_text(busy=6, deferred=4, prompt=50600, predicted=9100, kv_ratio=0.25),
            )
        ],
        snapshot={"kv_cache_usage_ratio": 0.25, "pool_usage": {"slots": 1.0}},
        named=["slots"],
        must_never=KV_TURNS_NEVER,
        extra_check=_withheld_says_pool("slots"),
    )


def sglang_pd_prefill_bootstrap() -> FieldState:
    """SGLang PD disaggregation, prefill server: requests pile up waiting for the decode side (prealloc /
    bootstrap queue) while the prefill KV pool is at 18 %.

    sgl-project/sglang#11809: "a continuous accumulation of unbootstrapped-req metrics in the prefill logs"
    drives a surge in TTFT. The queue is the transfer's, not the prefill KV pool's.
    """
    model = "deepseek-ai/DeepSeek-V3"

    def rank(prealloc: float) -> dict[str, float]:
        return {
            "num_running_reqs": 2,
            "num_queue_reqs": 0,
            "full_token_usage": 0.18,
            "token_usage": 0.18,
            "num_prefill_prealloc_queue_reqs": prealloc,
            "num_prefill_inflight_queue_reqs": 3,
            "max_total_num_tokens": 400000,
            "context_len": 163840,
            "page_size": 64,
        }

    return FieldState(
        id="sglang-pd-prefill-bootstrap-queue",
        source="https://github.com/sgl-project/sglang/issues/11809",
        engine_version="SGLang 0.5.4 (PD disaggregation, prefill)",
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
        scrapes=[
            (
                sglang_text(model, [rank(31)], engine_type="prefill", prompt=4e8, generation=4e5, requests=90000),
                sglang_text(
                    model, [rank(40)], engine_type="prefill", prompt=4.0002e8, generation=4.0001e5, requests=90004
                ),
            )
        ],
        snapshot={"disaggregation_queues": {"prefill_prealloc": 40, "prefill_inflight": 3}},
        named=["prefill_prealloc", "prefill_inflight"],
        must_never=[*KV_TURNS_NEVER, ("replicas", "decrease")],
    )


def sglang_pd_decode_dp_one_rank_full() -> FieldState:
    """SGLang PD disaggregation, decode node with DP attention (8 ranks): requests wait in the decode
    prealloc queue for decode-side KV, one rank's pool full while the others are not.

    sgl-project/sglang#30033: "one DP rank filling its KV pool freezes all ranks on that node", with KV
    pre-allocated for requests transferred in but not yet running. The queues and the hot rank are named.
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

    return FieldState(
        id="sglang-pd-decode-dp8-prealloc-queue",
        source="https://github.com/sgl-project/sglang/issues/30033",
        engine_version="SGLang 0.5.13 (PD disaggregation, decode, DP attention 8)",
        deployment={
            "name": "dsv3-decode",
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
                sglang_text(model, ranks(9), engine_type="decode", prompt=1e5, generation=5e7, requests=40000),
                sglang_text(model, ranks(12), engine_type="decode", prompt=1e5, generation=5.0003e7, requests=40010),
            )
        ],
        snapshot={
            "disaggregation_queues": {"decode_prealloc": 12, "decode_transfer": 8},
            "kv_cache_capacity_tokens_largest_rank": 120000,
            "max_model_len_ceiling_requests": 0,
        },
        named=["decode_prealloc", "decode_transfer"],
        # issue 13's ranking: a no-GPU turn that closes the gap comes first, fp8 KV (×2: one max-length request
        # then fits a rank) before the context cap in the stated risk order; the full rank holds ~4,000-token
        # requests, so a max-model-len cap at the rank's pool (119,808) frees nothing and is withheld
        # (tests/states/test_field_advice_evidence.py)
        must_first=("kv_cache_dtype", "set"),
        must_never=[("replicas", "decrease"), ("max_num_seqs", "increase")],
    )


def llamacpp_request_longer_than_a_slot() -> FieldState:
    """llama.cpp ``-c 16384 -np 4``: the operator promises 16k-token requests, but each slot serves
    16,384 ÷ 4 = 4,096 tokens; longer requests fail "context size has been exceeded", however idle the others.

    ggml-org/llama.cpp#11681 ("--ctx-size is divided by --parallel"; PR #17767 documents it: "each slot gets
    ctx-size / parallel tokens"). The pool (16,384 cells) would hold one max-length request: the slot does not.
    The cap is max-model-len at the slot (or a larger --ctx-size); never a replica or a KV-budget turn.
    """
    return FieldState(
        id="llamacpp-request-longer-than-a-slot",
        source="https://github.com/ggml-org/llama.cpp/issues/11681",
        engine_version="llama.cpp b5500+ (after PR #13660: no KV metrics)",
        deployment={
            "name": "llamacpp-c16k-np4",
            "engine": "llamacpp",
            "model": "Qwen/Qwen3-8B",
            "gpu": "rtx4090",
            "tensor_parallel_size": 1,
            "ctx_size": 16384,
            "parallel": 4,
            "max_model_len": 16384,
            "slo": SLO,
        },
        scrapes=[
            (
                llamacpp_text(busy=1, deferred=0, prompt=9000, predicted=700),
                llamacpp_text(busy=1, deferred=0, prompt=9100, predicted=760),
            )
        ],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        named=["slot_tokens", "ctx-size"],
        must_propose=[("max_model_len", "decrease")],
        must_never=[("replicas", None), ("kv_cache_dtype", None), ("gpu_memory_utilization", "increase")],
        extra_check=_capped_at_the_slot,
    )


def _capped_at_the_slot(result: dict[str, object]) -> None:
    recs = [r for r in result["recommendations"] if r.get("dial") == "max_model_len"]  # type: ignore[union-attr]
    assert recs and number(recs[0]["suggested"]) <= 4096, recs
    # "--ctx-size 4096" would shrink each of the 4 slots to 1,024 tokens: the flag must not say that
    flag = str(recs[0].get("flag"))
    assert "--ctx-size 4096 " not in flag + " " and "--parallel" in flag, flag


STATES = [
    llamacpp_request_longer_than_a_slot(),
    sglang_dp8_long_context(),
    vllm_dp8_ceiling(),
    vllm_dp_negative_rank(),
    sglang_dp_one_rank_over_one(),
    sglang_mamba_exact(),
    sglang_mamba_rounded_only(),
    sglang_swa_pool_full(),
    llamacpp_slots_full(),
    llamacpp_slots_full_old_build(),
    sglang_pd_prefill_bootstrap(),
    sglang_pd_decode_dp_one_rank_full(),
]


@pytest.fixture(scope="module")
def once(tmp_path_factory: pytest.TempPathFactory) -> FieldStateRuns:
    """``once --json`` of every state of this module, a few at a time (:func:`tests.states.field.run_field_states`)."""
    return run_field_states(tmp_path_factory, STATES)


@pytest.mark.parametrize("state", STATES, ids=[s.id for s in STATES])
def test_field_state(once: FieldStateRuns, state: FieldState) -> None:
    check_field_state(once[state], state)
