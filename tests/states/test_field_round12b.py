"""Field states, round 12b: the Triton ``tensorrtllm`` backend and llama.cpp server (``llama-server``), from three
public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as those engines print them: the Triton 2024 category-labelled gauges of
:func:`tests.states.test_field_round4_others._triton_trtllm` (no ``request_type="waiting"`` before 2025) and the
``llama-server --metrics`` rows of :mod:`tests.states.test_field_round3_others` (no KV gauges after PR #13660). The
assertions come from the reports' numbers, the fix each thread establishes and engine facts, never from the
advisor's output:

* ``triton-trtllm-llama3-8b-docs-pool-2560-ttft-47s`` — the tensorrtllm_backend docs' ``max_tokens_in_paged_kv_cache:
  2560`` pins Llama-3-8B's pool on an 80 GB A100 to 40 blocks of 64 tokens: five requests fit, 0.80 requests/s
  served against 7 offered, mean TTFT 47 s. Deleting the field fixed it. Lift the pin; never replicas, more
  sequences, a memory fraction, an fp8 cache or a restart.
* ``llamacpp-one-slot-four-routed-three-deferred`` — a grid master routes four concurrent requests at a
  ``llama-server`` started with one slot: one runs, three wait. The merged fix: ``--parallel`` = the advertised
  concurrency (4). Propose more slots; never replicas, fewer slots, a pool turn or a restart.
* ``llamacpp-unified-131072-four-slots-context-exceeded`` — four auto slots each advertised the full 131,072-token
  ``--ctx-size`` off one shared cache; four long agent requests overflow it ("Context size has been exceeded",
  50 HTTP 500s). The merged fix pins ``--parallel 1``. Propose fewer slots (at most the three that fit); never
  more slots, replicas, a restart, or a per-request cap at the 32,768-token slot share (four requests overflowing
  131,072 cells average more than that).

``once`` sees about one second of history, so no replica count may be proposed where a queue exists (it needs
≥ 30 s of history to measure an arrival rate); every such row says so with ``("replicas", "increase")`` in
``must_never``.
"""

from __future__ import annotations

from tests.states.field import (
    FieldState,
    round_tests,
)
from tests.states.test_field_round3_others import KV_GROWING_TURNS, _cap_at_least, _llamacpp, _llamacpp_rows
from tests.states.test_field_round3_vllm import RESTART, SLO, no_stall_claimed
from tests.states.test_field_round4_others import _triton_trtllm
from tests.states.test_field_round5 import _all, _suggests

# --- 1. Triton TRT-LLM: the docs' 2,560-token pin, five requests in a pool the GPU could make 100x larger -----------


def triton_trtllm_docs_pin_2560() -> FieldState:
    """triton-inference-server/tensorrtllm_backend#453 ("tensorrt-llm serving performance is extreamly low for
    llama3-8b", closed): Llama-3-8B on an A100-SXM4-80GB, ``nvcr.io/nvidia/tritonserver:24.04-trtllm-python-py3``,
    the model repository filled as the backend's ``docs/llama.md`` says (its ``tensorrt_llm/config.pbtxt`` line:
    ``triton_max_batch_size:64, … max_tokens_in_paged_kv_cache:2560, max_attention_window_size:2560,
    kv_cache_free_gpu_mem_fraction:0.5, … batching_strategy:inflight_fused_batching``). The fix, from the thread: "You
    can try to remove "max_tokens_in_paged_kv_cache" in tensorrt_llm/config.pbtxt" — and a second operator: "It does
    become much faster after deleting this field." The reporter's benchmark of the same server (vllm-project/vllm#4803,
    same author, same day, same image and doc): ``benchmark_serving`` at 7 requests/s, 100 ShareGPT requests of
    22,925 input and 21,752 generated tokens in all; "Request throughput (req/s): 0.80", "Mean TTFT (ms): 47395.15",
    "P99 TTFT (ms): 96636.63", "Mean TPOT (ms): 19.38".

    Engine facts: the backend sizes the paged pool as the smaller of ``kv_cache_free_gpu_mem_fraction`` of the free
    memory and ``max_tokens_in_paged_kv_cache`` tokens, and its default ``guaranteed_no_evict`` scheduler admits a
    request only when its prompt + requested output fit in free blocks. Arithmetic: a request reserves ~229 + ~218 =
    ~447 tokens, 7 blocks of 64; the 2,560-token pin is 40 blocks, so ⌊40 ÷ 7⌋ = 5 run at once. Five at 218 tokens
    × 19.4 ms ≈ 4.2 s each serve at most ~1.2 requests/s (0.80 measured, prefill included) against 7 offered: the
    queue TTFT of 47 s is the pin. Without it, 0.5 × (80 − 16 GB of bf16 weights) = 32 GB at 128 KiB a token is
    ~250,000 tokens, ~100× more. So: must propose lifting the pin (the pool's token budget, ``kv_cache_memory_bytes``
    increase — ``max_tokens_in_paged_kv_cache``/``kv_cache_config.max_tokens``). Must never: replicas (one second of
    history; each replica would be pinned the same; the batch cap of 64 is not what binds), more sequences (five
    fit), a larger memory fraction or an fp8 cache (the token pin is the smaller bound: neither adds a token while it
    stands), a restart (it serves, just five at a time), a context cap below the ~447 tokens a request reserves.

    Chosen where the report is silent: the moment ~30 s into the run, all 100 requests arrived (by 14.3 s), ~24
    served: 76 active in the batcher (Triton 24.04 has no ``request_type="waiting"``: active counts the queued
    ones), 5 scheduled, 35 of 40 blocks used; one request finishes in the window and one is admitted. The engine
    built per the doc with ``trtllm-build`` defaults (``max_batch_size`` 256 in 0.9; ``max_input_len`` 1,024 +
    1,024 output: ``max_model_len`` 2,048). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    blocks1 = {"tokens_per": 64.0, "used": 35.0, "free": 5.0, "max": 40.0}
    blocks2 = {"tokens_per": 64.0, "used": 35.0, "free": 5.0, "max": 40.0}
    first = _triton_trtllm(active=77, scheduled=5, context=0, max_batch=256, blocks=blocks1, success=23)
    second = _triton_trtllm(active=76, scheduled=5, context=1, max_batch=256, blocks=blocks2, success=24)
    return FieldState(
        id="triton-trtllm-llama3-8b-docs-pool-2560-ttft-47s",
        source="https://github.com/triton-inference-server/tensorrtllm_backend/issues/453",
        engine_version="Triton 24.04 (tensorrtllm backend of TRT-LLM 0.9, no waiting gauge)",
        deployment={
            "name": "llama3-8b-triton-docs",
            "engine": "triton-trtllm",
            "model": "meta-llama/Meta-Llama-3-8B",
            "served_model": "tensorrt_llm",
            "gpu": "a100-80gb",
            "max_model_len": 2048,
            "max_num_seqs": 256,
            "kv_cache_config": {"max_tokens": 2560, "free_gpu_memory_fraction": 0.5},
            "slo": SLO,
        },
        scrapes=[(first, second)],
        # running = scheduled, waiting = active − scheduled (the executor's IterationStats: active is its active list,
        # filled up to max whether or not the capacity scheduler runs them; 76 < 256, so its own queue is empty)
        snapshot={"requests_running": 5, "requests_waiting": 71, "kv_cache_capacity_tokens": 2560},
        must_propose=[("kv_cache_memory_bytes", "increase")],
        must_never=[
            ("replicas", "increase"),
            ("max_num_seqs", "increase"),
            ("gpu_memory_utilization", "increase"),
            ("kv_cache_dtype", None),
            RESTART,
        ],
        extra_check=_all(_cap_at_least(447), no_stall_claimed),
    )


# --- 2. llama.cpp: a grid master routes four at a server with one slot ---------------------------------------------


def llamacpp_one_slot_four_routed() -> FieldState:
    """autonomous-ai/autonomous-grid#102 ("fix: map llama.cpp --parallel to the advertised max-concurrency", merged):
    "Built-in ``--serve`` engines launched with the profile default of one llama.cpp slot regardless of
    ``--max-concurrency``, so the master routed N concurrent requests at a server that could only hold one and queued
    the rest. Now ``parallel`` derives from ``effective_max_concurrency`` when ``--parallel`` is unset … Verified:
    ``grid join --serve m.gguf --max-concurrency 4`` now emits ``--parallel 4``".

    Engine facts: ``llama-server`` runs at most ``--parallel`` requests, one per slot; a task that finds no idle slot
    is deferred (``requests_deferred``) until one frees. With one slot and four routed, one runs and three wait a
    whole request each. Arithmetic: ~500 generated tokens at ~110 tokens/s is ~4.5 s a request, so the third queued
    request waits ~14 s before its first token, while the GPU decodes one sequence at a time (a 7B decode step at
    batch 4 costs about what it costs at batch 1: the weights are read once). The fix the PR merged is four slots.
    So: must propose more slots (``max_num_seqs`` increase: ``--parallel``). Must never: replicas (one second of
    history; and the one replica has idle capacity the missing slots hide), fewer slots, a KV-pool turn (one request
    of ~2,000 tokens in a 32,768-cell cache: the pool is not the limit), a restart (it serves), a context cap below
    the ~2,000 tokens a request holds.

    Chosen where the PR is silent: the model and GPU (Qwen2.5-7B-Instruct Q4_K_M on an RTX 4090), ``-c 32768 -np 1``
    (one slot of 32,768; with four slots of 8,192 the ~2,000-token requests still fit), a closed loop of four from
    the master: one request finishes in the window (500 tokens, 4.5 s of generation), the next deferred one is
    admitted (1,500-token prompt) and the master sends another: deferred stays 3. llama.cpp of September 2026 (no KV
    gauges). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    c1 = {"prompt": 300_000.0, "prompt_s": 100.0, "gen": 100_000.0, "gen_s": 909.0, "decodes": 101_000.0}
    c1 |= {"busy_avg": 1.0, "prompt_tps": 3000.0, "gen_tps": 110.0}
    c2 = dict(c1, prompt=301_500.0, prompt_s=100.5, gen=100_500.0, gen_s=913.5, decodes=101_110.0)
    return FieldState(
        id="llamacpp-one-slot-four-routed-three-deferred",
        source="https://github.com/autonomous-ai/autonomous-grid/pull/102",
        engine_version="llama.cpp server of September 2026 (no KV gauges)",
        deployment={
            "name": "grid-qwen7b-np1",
            "engine": "llamacpp",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "gpu": "rtx4090",
            "max_model_len": 32_768,
            "ctx_size": 32_768,
            "parallel": 1,
            "slo": SLO,
        },
        scrapes=[
            (
                _llamacpp(_llamacpp_rows(c1, busy=1, deferred=3, kv=None)),
                _llamacpp(_llamacpp_rows(c2, busy=1, deferred=3, kv=None)),
            )
        ],
        snapshot={"requests_running": 1, "requests_waiting": 3},
        must_propose=[("max_num_seqs", "increase")],
        must_never=[
            ("replicas", "increase"),
            ("max_num_seqs", "decrease"),
            *KV_GROWING_TURNS,
            RESTART,
        ],
        extra_check=_all(_cap_at_least(2_000), no_stall_claimed),
    )


# --- 3. llama.cpp: four auto slots each promised the whole 131,072-cell cache --------------------------------------


LONGEST_40400 = ("n_tokens_max", "counter", "Largest observed sequence length (prompt + generation)", 40_400.0)
"""llama.cpp's running maximum of one slot's sequence (typed a counter): one ~40,000-token request and its answer."""


def llamacpp_unified_131072_four_slots() -> FieldState:
    """lemonade-sdk/lemonade#3276 ("llama.cpp: --ctx-size is applied per slot, so concurrent requests exhaust the KV
    cache", closed by the merged lemonade-sdk/lemonade#3277, "fix(llamacpp): pin --parallel 1 so ctx_size is not
    oversubscribed"): ``lemonade run <model> --ctx-size 131072 --llamacpp-device ROCm0`` on an AMD gfx1201; the
    backend log "n_slots = 4, n_ctx_slot = 131072, kv_unified = 'true'"; four concurrent chat completions fail "as
    HTTP 500 ``Context size has been exceeded`` (with ``truncated = 0``) … plus ``failed to find free space in the
    KV cache`` warnings and a batch-size death spiral (2048 -> 1024 -> ... -> 32)": "0 curl timeouts, 50
    context-exceeded 500s, and 190 KV-pressure warnings". The fix, verified against a live ``llama-server``
    (b10469): pinning ``--parallel 1`` "makes ``ctx_size`` the context a request actually gets".

    Engine facts: with the slot count left to llama.cpp's auto heuristic the cache is unified: all slots share the
    ``--ctx-size`` cells, and each slot is promised all of them (``n_ctx_slot`` = 131,072). Arithmetic: 4 slots ×
    up to 131,072 tokens = 524,288 promised from 131,072 cells. Four concurrent requests overflowed 131,072 cells,
    so together they held more than 131,072 tokens: their mean exceeds 131,072 ÷ 4 = 32,768, and at least one
    request held more than 32,768 tokens. A per-request cap at the slot share (32,768) would refuse exactly those
    requests; the operator asked for the long context on purpose, and the merged fix keeps it and runs fewer at once.
    So: must propose fewer slots (``max_num_seqs`` decrease, to at most 3 — with requests of ~40,000 tokens
    ⌊131,072 ÷ 40,000⌋ = 3 fit; the PR's 1 is within it). Must never: more slots, replicas (one second of history,
    and each replica would oversubscribe its cache the same), a memory-budget increase (llama.cpp has none), a
    restart (the engine serves; the aborts are its configuration), a per-request cap at or below 32,768 tokens (it
    refuses the requests that overflowed; not as the first advice, nor as an alternative).

    Chosen where the report is silent: the model and GPU (the gfx1201, a Radeon RX 9070-series / AI PRO R9700 die,
    is not in the advisor's tables; Llama-3.1-8B-Instruct Q4_K_M, a 131,072-token model, on a 32 GB RTX 5090:
    131,072 cells × 128 KiB = 16 GiB of f16 cache + 4.9 GB of weights), the requests (~40,000 tokens of agent
    context, ~400 generated), the moment before the overflow: 4 slots busy, none deferred, one request finishing in
    the window; llama.cpp b10469 exposes no KV gauges, and its ``n_tokens_max`` (the longest sequence since start)
    reads 40,400 — the report's overflow says at least one request held more than 32,768. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    c1 = {"prompt": 2_400_000.0, "prompt_s": 1_200.0, "gen": 24_000.0, "gen_s": 800.0, "decodes": 9_000.0}
    c1 |= {"busy_avg": 3.6, "prompt_tps": 2_000.0, "gen_tps": 30.0}
    c2 = dict(c1, prompt=2_404_000.0, prompt_s=1_202.0, gen=24_400.0, gen_s=813.3, decodes=9_030.0)
    return FieldState(
        id="llamacpp-unified-131072-four-slots-context-exceeded",
        source="https://github.com/lemonade-sdk/lemonade/issues/3276",
        engine_version="llama.cpp b10469 (lemonade 11.7.0; no KV gauges)",
        deployment={
            "name": "lemonade-llama31-8b-c131072",
            "engine": "llamacpp",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "rtx5090",
            "max_model_len": 131_072,
            "ctx_size": 131_072,
            "parallel": 4,
            "kv_unified": True,
            "slo": SLO,
        },
        scrapes=[
            (
                _llamacpp([*_llamacpp_rows(c1, busy=4, deferred=0, kv=None), LONGEST_40400]),
                _llamacpp([*_llamacpp_rows(c2, busy=4, deferred=0, kv=None), LONGEST_40400]),
            )
        ],
        snapshot={"requests_running": 4, "requests_waiting": 0},
        must_propose=[("max_num_seqs", "decrease")],
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            ("gpu_memory_utilization", "increase"),
            RESTART,
        ],
        extra_check=_all(_suggests("max_num_seqs", "decrease", at_most=3), _cap_at_least(32_769), no_stall_claimed),
    )


STATES = [
    triton_trtllm_docs_pin_2560(),
    llamacpp_one_slot_four_routed(),
    llamacpp_unified_131072_four_slots(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
