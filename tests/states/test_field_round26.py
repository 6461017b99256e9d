"""Field states, round 26: two healthy vLLM deployments whose low KV-cache usage is by design, from two public
reports where a maintainer answers "why is the KV cache usage so low?".

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes one
second apart rendered through :class:`tests.states.VLLMEngine` (V1, the 0.11 label set). The assertions come from
the reports' numbers, the verdict each thread establishes and engine facts, never from the advisor's output:

* ``vllm-llama2-7b-tp4-rtx4090-low-kv-percent-by-design-no-pool-turn`` — Llama-2-7B over four RTX 4090s; the more GPUs,
  the lower the KV usage. The maintainer: more GPUs leave more memory for the pool, so the same tokens are a smaller
  percentage. Nothing waits, decode is on target: never a pool turn either way, never replicas, never a restart.
* ``vllm-2x-l20-one-request-kv-barely-used-no-pool-turn`` — two L20s serving one request at a time; the KV usage is
  near zero. The maintainer: with one request running, the cache is unlikely to fill. Never a pool turn (more
  memory, a larger pool), never more sequences (one is running, the cap is not what limits), never a context cap,
  never replicas from one second, never a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed

INTERACTIVE = {"ttft_seconds": 2.0, "tpot_seconds": 0.025, "target_ratio": 0.9}
"""An interactive chat SLO (25 ms a token): chosen where the reports state none."""


# --- 1. vLLM: Llama-2-7B over four RTX 4090s, the pool four times larger, usage a quarter -----------------------


def vllm_tp4_low_kv_percent_by_design() -> FieldState:
    """vllm-project/vllm#9660 ("What does GPU KV cache usage relate to?", closed): "device：4090 … When performing
    multi-GPU (4090) inference on the llama2-7b model, I found that the more GPUs there are, the lower this indicator
    is. What is the reason?" The maintainer (hmellor): "When you start vLLM a certain amount of memory is allocated to
    KV cache. The GPU KV cache usage is the percentage of this KV cache that is currently in use. When you use more
    GPUs, more memory is available to be allocated for KV cache. So, the same amount of KV cache usage in GB
    corresponds to a lower amount of KV cache in %."

    Engine facts: vLLM sizes the pool at start-up from ``gpu_memory_utilization`` × the card minus weights and the
    profiled activation peak, per GPU (``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory``); with tensor
    parallelism each GPU holds 1/TP of the KV heads of every token, so the pool in tokens grows with TP;
    ``vllm:kv_cache_usage_perc`` is ``1 − free blocks ÷ total blocks`` (``vllm/v1/core/block_pool.py``
    ``get_usage``). Arithmetic: Llama-2-7B keeps 32 layers × 2 × 4,096 × 2 bytes = 512 KiB a token (128 KiB a GPU
    at TP 4); a 4090 at 0.9 is 21.6 GiB, less 3.1 GiB of weights (a quarter of 12.6) and ~1.5 GiB of activations
    and graphs, ~17 GiB a GPU = 139,264 tokens (8,704 blocks of 16). On one 4090 the same arithmetic leaves ~7.5 GiB
    = ~15,000 tokens. Eight requests holding ~12,000 tokens are 8.6 % of the TP 4 pool and ~80 % of the one-GPU
    pool: the percentage falls with TP, as the reporter saw, and says nothing about pressure. Nothing waits, no
    preemption, decode at 12 ms a token — so must never: a pool turn (``gpu_memory_utilization`` or
    ``kv_cache_memory_bytes`` either way: the low percentage is the larger pool, not waste to reclaim nor a limit),
    replicas from one second, a restart.

    Not asserted: "no advice at all" — the thread says nothing of cost, and a cheaper card for eight streams (the
    advisor's over-provisioning rule proposes an A10 here) is outside what it establishes.

    Chosen where the report is silent: ``meta-llama/Llama-2-7b-hf`` (the report's "llama2-7b"), TP 4 (the largest
    count the reporter's "more GPUs" implies on one host of four), ``gpu_memory_utilization`` 0.9 (the default),
    ``max_model_len`` 4,096 (the model's); traffic: eight chat streams of ~1,000 prompt and ~500 output tokens,
    TTFT ~0.1 s, 12 ms a token. Before: 400 answered; the window: 80 decode steps of eight, one finishes, one is
    admitted; KV 8.6 → 8.7 %. vLLM of October 2024 (0.6.3) rendered with the 0.11 label set. SLO:
    :data:`INTERACTIVE`.
    """
    model = "meta-llama/Llama-2-7b-hf"
    eng = VLLMEngine(model_name=model, num_gpu_blocks=8_704, max_model_len=4_096, gpu_memory_utilization=0.9)
    eng.finish(400, prompt=1_000, output=500, ttft=0.1, tpot=0.012, queue=0.0)
    eng.first_tokens([0.1] * 408)
    eng.prefill(408 * 1_000)
    eng.decode(400 * 500 + 8 * 250, 0.012, steps=(400 * 500 + 8 * 250) / 8, batch=8)
    eng.running, eng.waiting, eng.kv_usage = 8.0, 0.0, 12_000 / 139_264
    first = eng.render()
    eng.finish(1, prompt=1_000, output=500, ttft=0.1, tpot=0.012, queue=0.0)
    eng.first_tokens([0.1])
    eng.prefill(1_000)
    eng.decode(8 * 80, 0.012, steps=80, batch=8)
    eng.kv_usage = 12_100 / 139_264
    return FieldState(
        id="vllm-llama2-7b-tp4-rtx4090-low-kv-percent-by-design-no-pool-turn",
        source="https://github.com/vllm-project/vllm/issues/9660",
        engine_version="vLLM 0.6.3 of October 2024 (rendered with the 0.11 label set)",
        deployment={
            "name": "llama2-7b-tp4-4090",
            "engine": "vllm",
            "model": model,
            "gpu": "rtx4090",
            "tensor_parallel_size": 4,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 4_096,
            "slo": INTERACTIVE,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 8, "requests_waiting": 0, "kv_cache_capacity_tokens": 139_264},
        must_never=[
            ("gpu_memory_utilization", None),
            ("kv_cache_memory_bytes", None),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. vLLM on 2 × L20: one request at a time, the pool barely touched ---------------------------------------------


def vllm_two_l20_one_request() -> FieldState:
    """vllm-project/vllm#5626 ("Why is the GPU KV cache usage very low?", labelled usage, June 2024): "GPU models and
    configuration: GPU 0: NVIDIA L20 · GPU 1: NVIDIA L20", PyTorch 2.3.0 (the vLLM 0.5.0 stack). The maintainer
    (richardliaw): "If you're only running 1 request, your KV Cache is unlikely to be filled up. If you want to
    improve generation speed you can consider using FP8 or speculation".

    Engine facts: as in round 26's first row (``determine_available_memory``, ``get_usage``); the scheduler admits
    a waiting request whenever the running set is under ``max_num_seqs`` and the pool has its blocks
    (``vllm/v1/core/sched/scheduler.py``), so with one request in flight neither the cap nor the pool limits
    anything — only the arrivals do. Arithmetic for the stand-in: Llama-3.1-8B keeps 32 layers × 2 × 8 KV heads ×
    128 × 2 bytes = 128 KiB a token (64 KiB a GPU at TP 2); an L20 (48 GB, 44.7 GiB) at 0.9 is 40.2 GiB, less 7.5 GiB
    of weights (half of 15) and ~1 GiB of activations, ~31.7 GiB a GPU = ~519,000 tokens (32,450 blocks of 16). One
    request of ~2,000 tokens is 0.4 % of it. Decode at one stream reads ~8 GB a GPU a step, ~9 ms at 864 GB/s plus
    the all-reduce: ~12 ms a token, on target. So must never: a pool turn (``gpu_memory_utilization`` up,
    ``kv_cache_memory_bytes`` up — the pool is 0.4 % used); ``max_num_seqs`` up (one runs, nothing waits); a context
    cap (the pool holds 250 contexts of 2,000); replicas (one second); a restart.

    Not asserted: the maintainer's own pointers (FP8, speculation) — they are for speed, not a fault, and the thread
    measures neither; nor "no advice at all".

    Chosen where the report is silent, and the stand-in: the model is not in the excerpt — Llama-3.1-8B-Instruct
    (8B, bf16, GQA) at TP 2 over the two L20s stands in; ``gpu_memory_utilization`` 0.9 (the default);
    ``max_model_len`` 8,192; ``max_num_seqs`` 256 (the default); one chat request at a time, ~1,500 prompt and
    ~500 output tokens, TTFT 0.15 s. Before: 200 answered one after another; the window: 80 tokens of the current
    one, none finishes. vLLM 0.5.0 (June 2024) rendered with the 0.11 label set. SLO: :data:`INTERACTIVE`.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    eng = VLLMEngine(model_name=model, num_gpu_blocks=32_450, max_model_len=8_192, gpu_memory_utilization=0.9)
    pool = 32_450 * 16
    eng.finish(200, prompt=1_500, output=500, ttft=0.15, tpot=0.012, queue=0.0)
    eng.first_tokens([0.15] * 201)
    eng.prefill(201 * 1_500)
    eng.decode(200 * 500 + 300, 0.012, steps=200 * 500 + 300, batch=1)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 1_800 / pool
    first = eng.render()
    eng.decode(80, 0.012, steps=80, batch=1)
    eng.kv_usage = 1_880 / pool
    return FieldState(
        id="vllm-2x-l20-one-request-kv-barely-used-no-pool-turn",
        source="https://github.com/vllm-project/vllm/issues/5626",
        engine_version="vLLM 0.5.0 of June 2024 (rendered with the 0.11 label set)",
        deployment={
            "name": "llama31-8b-2x-l20",
            "engine": "vllm",
            "model": model,
            "gpu": "l20",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_192,
            "max_num_seqs": 256,
            "slo": INTERACTIVE,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("gpu_memory_utilization", "increase"),
            ("kv_cache_memory_bytes", "increase"),
            ("max_num_seqs", "increase"),
            ("max_model_len", "decrease"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_tp4_low_kv_percent_by_design(),
    vllm_two_l20_one_request(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
