"""Field states, round 44: the ``prefix_caching_off`` rule from both sides — a shared-prefix serving workload on a
vLLM engine whose recipe turned prefix caching off (turn it on), and two hybrid Qwen3-Next-family deployments whose
operators keep it off on purpose because, beside MTP speculative decoding, it corrupts their outputs (never turn it
on) — from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered through :class:`tests.states.VLLMEngine` (V1, the 0.33 label set for 2026 releases:
``cache_config_info`` ``enable_prefix_caching="False"`` and, on a hybrid, ``mamba_cache_mode="none"`` — vLLM's
``MambaModelConfig`` forces it whenever prefix caching is off). With prefix caching off the KV cache manager counts
no prefix-cache query, so ``vllm:prefix_cache_queries_total`` stays at 0 while ``vllm:prompt_tokens_total`` counts
every prompt token. The assertions come from the reports' numbers, the verdict each thread establishes and engine
facts, never from the advisor's output:

* ``vllm-0.26-dev-qwen38-flash-next-shared-prefix-c16-caching-off`` — the recipe ran ``--no-enable-prefix-caching``;
  on the atlas's ``serve-prefix-c16-v1`` workload (192 requests, 16 concurrent, grouped by shared prefix, same box,
  same ``SEQS=64``, only the flag differing) TTFT p50 5.86 s / p90 12.16 s with caching off, 2.55 s / 5.28 s with it
  on, a 66.5 % hit rate, and correctness checked (byte-identical answers, 30/30 on the eval). Turn prefix caching
  on; never more sequences (16 of 64 run), replicas, more TP or a restart.
* ``vllm-0.25.1-qwen36-27b-mtp-prefix-caching-off-by-policy`` — club-3090 ships prefix caching OFF on its Qwen3-Next
  MTP composes because "MTP + ``--enable-prefix-caching`` on a Qwen3-Next hybrid poisons the recurrent-state
  (Mamba/GDN) KV blocks — corrupting/dropping tool calls on chained-agent workloads" (6/6 clean probes fresh → 0/6
  after 3 agent runs). A chained-agent turn re-prefills its ~13K-token held prefix over the TTFT target: still never
  turn prefix caching on (wrong answers served fast), never replicas or a restart; no stall claimed mid-prefill.
* ``vllm-0.21-qwen36-35b-a3b-mtp-classifier-prefix-caching-off`` — vllm#43559: with MTP on, turning prefix caching
  on costs ~20 % accuracy on a classification task that is stable in the other three arms (base, base + prefix
  caching, MTP without prefix caching). The operator's arm is MTP without prefix caching; never turn it on.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import math
import time
from statistics import NormalDist

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round14 import QWEN35_27B_CONFIG
from tests.states.test_field_round33 import _hybrid_cache_labels

MTP_QWEN3_NEXT = {"method": "mtp", "num_speculative_tokens": 3, "draft_layers": 1, "draft_parameters": 1_600_000_000}
"""MTP n=3 on the Qwen3-Next stand-in: its published config names one MTP layer (``num_nextn_predict_layers`` absent
from the advisor's copy), one decoder layer of the 80B/48-layer model's shape (~1.6B parameters, mostly experts)."""


def _lognormal_ttfts(n: int, p50: float, p90: float) -> list[float]:
    """``n`` TTFTs at the quantiles of the log-normal whose median is ``p50`` and 90th percentile ``p90`` (the
    report's two figures), deterministic."""
    dist = NormalDist(math.log(p50), math.log(p90 / p50) / NormalDist().inv_cdf(0.9))
    return [math.exp(dist.inv_cdf((i + 0.5) / n)) for i in range(n)]


# --- 1. a shared-prefix workload at 16 concurrent with the recipe's prefix caching off -----------------------------


def vllm_qwen38_flash_next_shared_prefix_caching_off() -> FieldState:
    """0xBakeer/qwen38-flash-next-spark#9 ("Enable prefix caching in vllm recipe", closed): a user asks for it ("For
    coding it's necessary. In one session had 96,04 hit rate"); the maintainer: "the recipe turns it off with
    ``--no-enable-prefix-caching``, and the README explains that as 'a GB10 GDN kernel bug'. … that claim has no
    source recorded next to it", then measures: "Correctness first … Three identical requests at temperature 0 over
    an 8.6k-token prompt returned byte-identical, correct answers with a real cache hit behind calls 2 and 3 (server
    hit rate 49.3%, hits landing on 1,600-token block boundaries). ``eval-format-v1`` scored 30/30 with caching on,
    matching the cache-free cell. Then the benefit, on ``serve-prefix-c16-v1`` — 192 requests, 16 concurrent, grouped
    by shared prefix. Same box, same ``SEQS=64``, only the flag differing: Aggregate decode 46.50 → 81.79 tok/s
    (1.76×); TTFT p50 5.86 s → 2.55 s; TTFT p90 12.16 s → 5.28 s; Wall clock 1,020.9 s → 573.7 s; Requests 192/192 …
    Hit rate over the run: 66.5%"; "it is on by default as of #18". The engine (inference-atlas#111): vLLM
    ``0.1.dev20073+g8e685d198``, ``Qwen/Qwen3.8-Flash-Next`` nvfp4, one GB10 DGX Spark, MTP n=3.

    Engine facts: the model is a Qwen3-Next-style hybrid (Gated DeltaNet + full attention); with prefix caching off
    ``cache_config_info`` says ``enable_prefix_caching="False"`` and ``mamba_cache_mode="none"``, the prefix-cache
    counters stay at 0. 16 closed-loop clients against 64 sequence slots: nothing waits, so the TTFT is the
    prefill of every prompt whole, its shared prefix included. Arithmetic: 46.50 tok/s × 1,020.9 s / 192 ≈ 247 tokens
    out per request; e2e per request ≈ 1,020.9 s × 16 / 192 ≈ 85 s. A log-normal through p50 5.86 s and p90 12.16 s
    has a mean of ~6.9 s. So: prefix caching on is the fix the thread measured (TTFT −56 % at p50, wall −44 %, no
    box added, answers unchanged); never more sequences (16 of 64 slots run, none wait), never more TP or replicas
    (the cached prefix is free, a second Spark is not), never a restart.

    Chosen where the report is silent, and the stand-ins: the GB10 is not in the advisor's tables, so the deployment
    names no GPU (a stand-in card would model a prefill several times faster than the Spark's); Qwen3.8-Flash-Next is
    not either — Qwen3-Next-80B-A3B-Instruct (the hybrid A3B family it descends from) in fp8 stands in. The dev build
    reports no release; it is main of late August 2026, after 0.26 (vllm#53504 runs ``0.26.1rc1.dev1130`` on
    2026-08-24), so ``engine_version`` 0.26.1. Prompt length: 4,096 tokens (the workload's shapes are not quoted in
    the thread; ≤ 12,700 is what the Spark's ~2,400 prefill tokens/s allows in 1,020.9 s). Pool: 764 blocks of 1,072
    (round 5's stand-in pool; not asserted). History: 160 requests finished, 16 running past their first token. The
    window: 4 finish, 4 more admitted reach their first token (fewer than 20 in the window: the rule reads the 180
    since the engine started). SLO: TTFT 4 s, TPOT 0.5 s (the report states none; the cached run's p50 meets it).
    """
    served = "Qwen/Qwen3.8-Flash-Next"
    blocks, block = 764, 1_072
    eng = VLLMEngine(
        model_name=served,
        num_gpu_blocks=blocks,
        block_size=block,
        max_model_len=131_072,
        gpu_memory_utilization=0.9,
        version="0.33",
        started=time.time() - 1_200.0,
    )
    _hybrid_cache_labels(eng, pool_tokens=blocks * block, caching=False, cache_dtype="auto")
    ttfts = _lognormal_ttfts(180, 5.86, 12.16)
    mean_ttft = sum(ttfts) / len(ttfts)
    eng.finish(160, prompt=4_096, output=247, ttft=mean_ttft, tpot=0.32, queue=0.02)
    eng.first_tokens(ttfts[:176])
    eng.counters["vllm:prompt_tokens"] += 176 * 4_096  # caching off: no prefix-cache query is counted
    eng.decode(160 * 246 + 16 * 120, 0.32)
    eng.running, eng.waiting, eng.kv_usage = 16.0, 0.0, 16 * 4_300 / (blocks * block)
    first = eng.render()
    # the window: 4 finish, 4 admitted in their place prefill whole and answer their first token
    eng.finish(4, prompt=4_096, output=247, ttft=mean_ttft, tpot=0.32, queue=0.02)
    eng.first_tokens(ttfts[176:])
    eng.counters["vllm:prompt_tokens"] += 4 * 4_096
    eng.decode(3 * 16, 0.32)
    return FieldState(
        id="vllm-0.26-dev-qwen38-flash-next-shared-prefix-c16-caching-off",
        source="https://github.com/0xBakeer/qwen38-flash-next-spark/issues/9",
        engine_version="vLLM 0.1.dev20073+g8e685d198 (main of Aug 2026, 0.26.x; 0.33 label set), hybrid, caching off",
        deployment={
            "name": "qwen38-flash-next-spark",
            "engine": "vllm",
            "engine_version": "0.26.1",
            "model": "Qwen/Qwen3-Next-80B-A3B-Instruct",
            "served_model": served,
            "gpu_memory_gib": 119.63,
            "quantization": "fp8",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 131_072,
            "max_num_seqs": 64,
            "speculative_config": MTP_QWEN3_NEXT,
            "slo": {"ttft_seconds": 4.0, "tpot_seconds": 0.5, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 16, "requests_waiting": 0},
        must_propose=[("prefix_caching", "enable")],
        must_never=[
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
    )


# --- 2. club-3090: prefix caching OFF by policy on the Qwen3-Next MTP composes (MTP × prefix-cache corruption) -----


def vllm_qwen36_27b_mtp_prefix_caching_off_by_policy() -> FieldState:
    """noonghunna/club-3090#720 ("Qwen3-Next: prefix-caching OFF by default (MTP×prefix-cache corruption, #710)",
    merged): "Disable prefix-caching by default (keep MTP) across the 10 shipped Qwen3-Next MTP composes (Qwen3.6-27B
    + 35B-A3B, vLLM) … MTP + ``--enable-prefix-caching`` on a Qwen3-Next hybrid poisons the recurrent-state
    (Mamba/GDN) KV blocks — corrupting/dropping tool calls on chained-agent workloads, persisting until restart.
    MTP-alone is clean, prefix-cache-alone is clean; only the pair corrupts. Root cause (upstream): vllm#43559 …
    Fix (upstream, in flight): vllm#48375"; on their stack #710: "2×2 A/B, 6/6 fresh → 0/6 after 3 agent runs". The
    #710 protocol: "13K-token held prefix (≈8 full 1600-token blocks), 6 byte-identical greedy tool-call probes →
    chained-agent poison", arms on "v0.25.1 stock" on "the reference 2×3090 (PCIe)"; #810 prices the choice: "The
    prefix-off tax is real and measured elsewhere on this stack (#710: 7.4x TTFT on a 26.7K held prefix at 89.5% hit
    rate)", and keeps it: "prefix caching defaults OFF on both nvfp4 MTP slugs … so the vllm#43559 corruption pair
    (MTP + prefix caching) cannot form on a default boot … upstream vllm#48375 is still open".

    Engine facts: vLLM 0.25.1 does not turn prefix caching on for hybrid models by itself (from 0.26,
    ``ModelConfig.is_prefix_caching_supported``); the compose passes ``--no-enable-prefix-caching``; with it off
    ``mamba_cache_mode`` is ``none`` and the prefix-cache counters do not move. Arithmetic: a chained-agent turn
    re-prefills its ~13,000-token prompt whole; at ~2,000 prefill tokens/s (one 3090 does ~1,200 for this model,
    syv-ai/qwen38-27b-rtx3090#6; TP 2 over PCIe less than twice that) its first token comes after ~6.5 s — over a 5 s
    target, with no queue (one agent). The cache would cut that 7.4×, and the operators know it and keep it off:
    on this engine and this speculative config, it serves wrong tool calls. So: never turn prefix caching on; never
    replicas, a restart; and no stall claimed while the next turn is mid-prefill.

    Chosen where the report is silent, and the stand-ins: Qwen3.6-27B is not in the advisor's tables; Qwen3.5-27B's
    published ``config.json`` (the same GDN layout; round 14's stand-in) in a 4-bit checkpoint (``gptq`` for the
    AutoRound int4) with an fp8 KV cache, TP 2 on two RTX 3090s at 0.92, ``max_model_len`` 131,072, ``max_num_seqs``
    2, MTP n=3 (``speculative_config`` method ``mtp``). Pool: 180 blocks of 1,568 (not asserted). History: 40 agent
    turns of ~13,000 prompt tokens, ~250 out at 30 ms, TTFT 6.5 s. The window: the next turn is mid-prefill (one
    block more, no counter moves). vLLM 0.25.1 with the 0.33 label set. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    served = "qwen3.6-27b-autoround"
    blocks, block = 180, 1_568
    eng = VLLMEngine(
        model_name=served,
        num_gpu_blocks=blocks,
        block_size=block,
        max_model_len=131_072,
        gpu_memory_utilization=0.92,
        version="0.33",
        started=time.time() - 2 * 3_600.0,
    )
    _hybrid_cache_labels(eng, pool_tokens=blocks * block, caching=False, cache_dtype="fp8_e4m3")
    eng.finish(40, prompt=13_000, output=250, ttft=6.5, tpot=0.03, queue=0.05)
    eng.first_tokens([6.5] * 40)
    eng.counters["vllm:prompt_tokens"] += 40 * 13_000  # caching off: no prefix-cache query is counted
    eng.hists["vllm:iteration_tokens_total"].observe(2_048, 40 * 13_000 / 2_048)
    eng.decode(40 * 249, 0.03, steps=40 * 249, batch=1)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 5 / blocks
    first = eng.render()
    # the window: one 2,048-token chunk of the next turn's prefill lands; no prompt completes, nothing is generated
    eng.hists["vllm:iteration_tokens_total"].observe(2_048)
    eng.kv_usage = 6 / blocks
    return FieldState(
        id="vllm-0.25.1-qwen36-27b-mtp-prefix-caching-off-by-policy",
        source="https://github.com/noonghunna/club-3090/pull/720",
        engine_version="vLLM 0.25.1 (0.33 label set), hybrid GDN + MTP, prefix caching off by policy",
        deployment={
            "name": "club-3090-qwen36-27b-dual-mtp",
            "engine": "vllm",
            "engine_version": "0.25.1",
            "model": QWEN35_27B_CONFIG,
            "served_model": served,
            "gpu": "rtx3090",
            "tensor_parallel_size": 2,
            "quantization": "gptq",
            "kv_cache_dtype": "fp8_e4m3",
            "language_model_only": True,
            "gpu_memory_utilization": 0.92,
            "max_model_len": 131_072,
            "max_num_seqs": 2,
            "speculative_config": {"method": "mtp", "num_speculative_tokens": 3},
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        must_never=[
            ("prefix_caching", "enable"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 3. vllm#43559: MTP + prefix caching costs ~20 % accuracy; the operator serves MTP with caching off ------------


def vllm_qwen36_35b_a3b_mtp_classifier_prefix_caching_off() -> FieldState:
    """vllm-project/vllm#43559 ("[Bug]: Accuracy drops ~20% when ``--enable-prefix-caching`` is used together with MTP
    speculative decoding (Qwen3.6 35B-A3B)", closed): vLLM 0.21.0 on an 8-GPU NVLink node (``NV18``); four arms of a
    classification task at ``temperature=0.1`` — base, base + prefix caching, MTP, MTP + prefix caching: "Enabling
    ``--enable-prefix-caching`` should not meaningfully change generation quality … the overall classification
    accuracy should match the configuration without prefix caching (as it does for the base model in group 2, and
    for MTP without prefix caching in group 3)"; "With MTP speculative decoding enabled, turning on prefix caching
    produces noticeably different (and worse) outputs, leading to a ~20% accuracy drop". The fix PR (vllm#48375):
    "#43559 reports tool-eval accuracy dropping from ~90% to ~50%. Nothing raises an exception and nothing shows up
    in the logs"; still open in September 2026 (vllm#57128 re-files it).

    Engine facts: on 0.21 a hybrid's prefix caching is off unless asked for; the operator's arm (group 3) serves MTP
    with it off: ``enable_prefix_caching="False"``, ``mamba_cache_mode="none"``, no prefix-cache query counted. A
    classifier's prompts share their instructions, so a TTFT rule reaching for the cache is exactly the turn the
    report measured to cost a fifth of the answers. So: never turn prefix caching on (the operator's MTP arm is the
    accurate one); never replicas (``once``) or a restart.

    Chosen where the report is silent, and the stand-ins: Qwen3.6-35B-A3B is not in the advisor's tables;
    Qwen3-Next-80B-A3B-Instruct (the hybrid A3B family) in fp8 on one H200 SXM at 0.9 stands in, ``max_model_len``
    32,768, ``max_num_seqs`` 32, MTP n=3. The report states no latency: the page is the situation in which a TTFT
    rule would reach for the cache — 2,000-token classification prompts (a shared instruction block and the item),
    a few output tokens, TTFT 1.6 s of which 0.1 s queue, against a 1 s TTFT target. Pool: 2,000 blocks of 1,072 (not
    asserted). History: 400 requests; the window: 24 more (enough for the window's own reading). vLLM 0.21 with the
    0.33 label set.
    """
    served = "Qwen/Qwen3.6-35B-A3B"
    blocks, block = 2_000, 1_072
    eng = VLLMEngine(
        model_name=served,
        num_gpu_blocks=blocks,
        block_size=block,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        version="0.33",
        started=time.time() - 1_800.0,
    )
    _hybrid_cache_labels(eng, pool_tokens=blocks * block, caching=False, cache_dtype="auto")
    eng.finish(400, prompt=2_000, output=8, ttft=1.6, tpot=0.02, queue=0.1)
    eng.first_tokens([1.6] * 400)
    eng.counters["vllm:prompt_tokens"] += 400 * 2_000  # caching off: no prefix-cache query is counted
    eng.decode(400 * 7, 0.02)
    eng.running, eng.waiting, eng.kv_usage = 24.0, 0.0, 24 * 2 / blocks
    first = eng.render()
    eng.finish(24, prompt=2_000, output=8, ttft=1.6, tpot=0.02, queue=0.1)
    eng.first_tokens([1.6] * 24)
    eng.counters["vllm:prompt_tokens"] += 24 * 2_000
    eng.decode(24 * 7, 0.02)
    return FieldState(
        id="vllm-0.21-qwen36-35b-a3b-mtp-classifier-prefix-caching-off",
        source="https://github.com/vllm-project/vllm/issues/43559",
        engine_version="vLLM 0.21.0 (0.33 label set), hybrid GDN + MTP, prefix caching off",
        deployment={
            "name": "qwen36-35b-a3b-classifier",
            "engine": "vllm",
            "engine_version": "0.21.0",
            "model": "Qwen/Qwen3-Next-80B-A3B-Instruct",
            "served_model": served,
            "gpu": "h200-sxm",
            "quantization": "fp8",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "max_num_seqs": 32,
            "speculative_config": MTP_QWEN3_NEXT,
            "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_waiting": 0},
        must_never=[
            ("prefix_caching", "enable"),
            ("replicas", "increase"),
            RESTART,
        ],
    )


STATES = [
    vllm_qwen38_flash_next_shared_prefix_caching_off(),
    vllm_qwen36_27b_mtp_prefix_caching_off_by_policy(),
    vllm_qwen36_35b_a3b_mtp_classifier_prefix_caching_off(),
]

XFAIL: dict[str, str] = {
    "vllm-0.26-dev-qwen38-flash-next-shared-prefix-c16-caching-off": (
        "missed fix, kept on purpose: prefix_caching_off never turns the cache on for a hybrid model while a drafter "
        "runs (advisor/rules/prefix_caching.py), since MTP + prefix caching corrupts hybrid models' output on the "
        "releases around this build (vllm#43559; vllm#53912 open on 0.28; club-3090#720 ships it off for that) and "
        "the page cannot tell this deployment's clean 30/30 eval from those; the report's measured win (TTFT p50 "
        "5.86 -> 2.55 s) goes unproposed"
    ),
}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
