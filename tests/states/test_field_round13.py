"""Field states, round 13: the Triton ``tensorrtllm`` backend, from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as the Triton backend prints them (:func:`tests.states.test_field_round4_others.
_triton_trtllm`: the category-labelled gauges, no ``request_type="waiting"`` before 2025). The assertions come from
the reports' numbers, the fix each thread establishes and engine facts, never from the advisor's output:

* ``triton-trtllm-99-active-5-scheduled-40-block-pool`` — a batcher log line from Triton 24.07: 99 requests active
  of a 256 maximum, 5 scheduled, the paged pool 40 blocks of 64 tokens (2,560, the docs template's
  ``max_tokens_in_paged_kv_cache``), 31 used. The pool, not the batch, admits five. Lift the pin; never more
  sequences, replicas, a memory fraction, an fp8 cache or a restart.
* ``triton-trtllm-batch-8-of-64-sequences-held`` — an engine built with ``max_batch_size`` 8 behind a batcher
  holding ``max_num_sequences`` 64 on eight A100s: the scheduler forms batches of ``min(max_num_sequences,
  max_batch_size)`` = 8, the rest wait with the pool nearly empty. Rebuild with a larger batch; never a pool turn,
  more GPUs, replicas or a restart.
* ``triton-trtllm-one-request-idle-pool-no-advice`` — the batcher's log line for one 2,048-token request on a
  513-block pool with 64 request slots: nothing waits, nothing is short. No advice at all. (The line reads used 1 +
  free 480 of 513 blocks: the 32 blocks of the context just scheduled count neither as used nor free — a
  consistent reading, not a shifted one.)

``once`` sees about one second of history, so no replica count may be proposed where a queue exists (it needs
≥ 30 s of history to measure an arrival rate); every such row says so with ``("replicas", "increase")`` in
``must_never``.
"""

from __future__ import annotations

from typing import Any

from tests.states.field import FieldState, FieldStateRuns, brief, matching, number, round_tests
from tests.states.test_field_round3_others import _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, SLO, no_stall_claimed
from tests.states.test_field_round4_others import _triton_trtllm
from tests.states.test_field_round5 import _all

# --- 1. Triton 24.07: 99 active, 5 scheduled, a 40-block pool ---------------------------------------------------


def triton_trtllm_99_active_5_scheduled() -> FieldState:
    """triton-inference-server/server#7548 ("low performance at large concurrent requests", open): the reporter
    serves Meta-Llama-3-8B-Instruct with TensorRT-LLM 0.11.0 in ``nvcr.io/nvidia/tritonserver:24.07-trtllm-python-
    py3`` on an "NVIDIA A100 80GB PCIe" and measures "TensorRT-llm | 73.36 | 193.30 | 193.81" tokens/s at 1, 50 and
    100 concurrent requests against "Vllm | 64.13 | 984.55 | 1246.50" ("result of concurrent requests 50, 100 is
    similar"). A second operator on the same image posts the batcher's log at 100 concurrent: ``"Active Request
    Count":99, … "Max Request Count":256, … "Context Requests":0, "Generation Requests":5, … "Paused Requests":0,
    "Scheduled Requests":5, … "Free KV cache blocks":9, "Max KV cache blocks":40, "Tokens per KV cache block":64,
    "Used KV cache blocks":31`` — "the client is receiving the response is count of ~5s, so inference is happening
    with 5 requests".

    Engine facts: the backend sizes the paged pool as the smaller of ``kv_cache_free_gpu_mem_fraction`` of the free
    memory and ``max_tokens_in_paged_kv_cache`` tokens ("Both free_gpu_memory_fraction and max_tokens are set … The
    smaller value will be used"); its default ``guaranteed_no_evict`` scheduler admits a request only when its
    prompt + requested output fit in blocks not promised to running ones. ``Active Request Count`` is the executor's
    active list (filled up to ``Max Request Count`` whatever the pool admits), ``Scheduled Requests`` what the
    iteration ran. Arithmetic: 40 × 64 = 2,560 tokens — exactly the ``max_tokens_in_paged_kv_cache:2560`` of the
    backend's documented ``fill_template`` line (the value triton-inference-server/server#7676 and
    tensorrtllm_backend#453 also ran with); a memory fraction could not land on it (2,560 tokens × 128 KiB = 320
    MiB, 0.5 % of the ~64 GB the 16 GB of bf16 weights leave). Five run, a sixth does not fit: each reserves more
    than 40 ÷ 6 = 6.7 blocks (427 tokens) and at most 40 ÷ 5 = 8 (512). 99 − 5 = 94 wait inside the batcher
    (99 < 256: the executor's own queue is empty). Five at a time at ~5 s a wave is the ~193 tokens/s plateau; the
    same GPU without the pin holds 0.5 × 64 GB ÷ 128 KiB ≈ 250,000 tokens, ~100× more.

    So: must propose lifting the pin (the pool's token budget, ``kv_cache_memory_bytes`` increase —
    ``max_tokens_in_paged_kv_cache``). Must never: more sequences (99 active of 256: the batch cap does not bind),
    replicas (one second of history; each replica would be pinned the same), a larger memory fraction or an fp8
    cache (the token pin is the smaller bound: neither adds a token while it stands), a restart (it serves five at
    a time), a context cap below the 456 tokens a request reserves.

    Chosen where the report is silent: the second operator's model and GPU are the reporter's (Llama-3-8B-Instruct
    on an A100-80GB-PCIe; the preset ``meta-llama/Meta-Llama-3-8B`` has the same architecture), the template's
    ``kv_cache_free_gpu_mem_fraction:0.5``, the engine's ``max_batch_size`` 256 (its "Max Request Count") and
    ``max_seq_len`` 2,048; prompts of ~200 tokens with ``max_tokens`` 256 (456 tokens, 8 blocks reserved: 5 × 8 =
    40); the window: one request finishes (~256 tokens at ~19.5 ms, ~5 s), the closed-loop client sends another,
    active stays 99, used 31 → 30 blocks. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    blocks1 = {"tokens_per": 64.0, "used": 31.0, "free": 9.0, "max": 40.0}
    blocks2 = {"tokens_per": 64.0, "used": 30.0, "free": 10.0, "max": 40.0}
    first = _triton_trtllm(active=99, scheduled=5, context=0, max_batch=256, blocks=blocks1, success=2_400)
    second = _triton_trtllm(active=99, scheduled=5, context=1, max_batch=256, blocks=blocks2, success=2_401)
    return FieldState(
        id="triton-trtllm-99-active-5-scheduled-40-block-pool",
        source="https://github.com/triton-inference-server/server/issues/7548",
        engine_version="Triton 24.07 (tensorrtllm backend of TRT-LLM 0.11, no waiting gauge)",
        deployment={
            "name": "llama3-8b-triton-2407",
            "engine": "triton-trtllm",
            "model": "meta-llama/Meta-Llama-3-8B",
            "served_model": "tensorrt_llm",
            "gpu": "a100-pcie-80gb",
            "max_model_len": 2048,
            "max_num_seqs": 256,
            "kv_cache_config": {"max_tokens": 2560, "free_gpu_memory_fraction": 0.5},
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 5, "requests_waiting": 94, "kv_cache_capacity_tokens": 2560},
        must_propose=[("kv_cache_memory_bytes", "increase")],
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            ("gpu_memory_utilization", "increase"),
            ("kv_cache_dtype", None),
            RESTART,
        ],
        extra_check=_all(_cap_at_least(456), no_stall_claimed),
    )


# --- 2. An engine built for 8 behind a batcher holding 64 --------------------------------------------------------


def _raises_the_built_batch_of(built: float) -> Any:
    """Every proposed ``max_num_seqs`` increase starts from the engine's built batch (``current`` = ``built``) and
    goes above it."""

    def check(result: dict[str, Any]) -> None:
        turns = matching(result.get("recommendations") or [], ("max_num_seqs", "increase"))
        bad = [
            (t.get("current"), t.get("suggested"))
            for t in turns
            if number(t.get("current")) != built or number(t.get("suggested")) <= built
        ]
        assert not bad, f"max_num_seqs increase not from the built batch of {built:g}: {bad}"

    return check


def triton_trtllm_batch_8_of_64_held() -> FieldState:
    """NVIDIA/TensorRT-LLM#65 ("Difference between max_batch_size in the engine builder and max_num_sequences in
    TrtGptModelOptionalParams?", closed): the batch manager's engineers, quoted in the thread: "``max_num_sequences``
    is the maximum number of requests/sequences the backend can maintain state (KV cache, decoder state) for. It
    could be smaller, equal or larger than the TensorRT engine ``max_batch_size`` … The scheduler tries to form a
    batch of size ``min(max_num_sequences, max_batch_size)``, making sure that ``max_num_tokens`` is also satisfied.
    Currently, the requests are scheduled based on the order they were received." The operator: "I'm having
    problems with an 8x A100 instance being totally unresponsive when it gets saturated with requests. I am running
    ``max_batch_size`` 8 and ``max_num_sequences`` 64."

    Engine facts: the batcher keeps up to ``max_num_sequences`` requests active (its "Max Request Count", the
    exposition's ``request_type="max"``: 64 here, not the engine's batch), and each iteration runs at most the
    engine's built ``max_batch_size`` of them, first come first served; the built batch is a ``trtllm-build`` limit
    (Triton's ``triton_max_batch_size`` does not raise it). Arithmetic: saturated, 64 are active and 8 run; the 56
    others wait their turn behind whole requests. At ~1,000 prompt + ~500 generated tokens and ~30 ms a step, a
    wave of 8 takes ~15 s, so the 56th waits seven waves, ~105 s, for its first token — "totally unresponsive" —
    while the pool (~20,000 blocks of 64, ~1.3 M tokens on eight 80 GB A100s after 17 GB of weights each) holds
    ~150 blocks. A 70B decode step at batch 64 costs little more than at batch 8 (the weights are read once per
    step), so the fix is the engine's batch: ``max_num_seqs`` increase (rebuild with a larger ``--max_batch_size``,
    from 8). Must never: a pool turn (a larger fraction, a token budget, an fp8 cache: ~1 % of the pool is used),
    more tensor parallelism (eight GPUs already hold the model with room to spare), replicas (one second of
    history), fewer sequences, a restart (the engine serves: requests complete every couple of seconds), a context
    cap below the ~1,500 tokens a request holds.

    Chosen where the report is silent: the model (Llama-2-70B, fp16, TP 8 on A100-SXM-80GB), the workload (prompts
    ~1,000 tokens, ~500 generated, a closed loop that keeps the batcher full), the moment: 64 active, 8 scheduled
    (all generating), 150 of 20,000 blocks used; in the window one request finishes and the next is admitted
    (context 1). The report is of October 2023, before the backend exposed any metrics; the rows are those of Triton
    23.12 (``nv_trt_llm_*_metrics``, and the first release whose ``nv_inference_request_success`` counts this
    backend), with no ``request_type="waiting"``: at 64 of 64 active the executor's own queue is unknown. SLO: TTFT
    5 s, TPOT 0.1 s.
    """
    blocks1 = {"tokens_per": 64.0, "used": 150.0, "free": 19_850.0, "max": 20_000.0}
    blocks2 = {"tokens_per": 64.0, "used": 146.0, "free": 19_854.0, "max": 20_000.0}
    first = _triton_trtllm(active=64, scheduled=8, context=0, max_batch=64, blocks=blocks1, success=5_210)
    second = _triton_trtllm(active=64, scheduled=8, context=1, max_batch=64, blocks=blocks2, success=5_211)
    return FieldState(
        id="triton-trtllm-batch-8-of-64-sequences-held",
        source="https://github.com/NVIDIA/TensorRT-LLM/issues/65",
        engine_version="TRT-LLM 0.5 batch manager (replayed with the Triton 23.12 exposition, no waiting gauge)",
        deployment={
            "name": "llama2-70b-tp8-triton-b8",
            "engine": "triton-trtllm",
            "model": "meta-llama/Llama-2-70b-hf",
            "served_model": "tensorrt_llm",
            "gpu": "a100-80gb",
            "tensor_parallel_size": 8,
            "max_model_len": 4096,
            "max_num_seqs": 8,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        # running = min(scheduled, active) = 8; waiting unknown (64 of 64 active: the executor's queue may hold more)
        snapshot={"requests_running": 8, "requests_waiting": None, "kv_cache_capacity_tokens": 1_280_000},
        must_propose=[("max_num_seqs", "increase")],
        must_never=[
            ("kv_cache_memory_bytes", "increase"),
            ("gpu_memory_utilization", "increase"),
            ("kv_cache_dtype", None),
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            ("max_num_seqs", "decrease"),
            RESTART,
        ],
        extra_check=_all(_raises_the_built_batch_of(8), _cap_at_least(1_500), no_stall_claimed),
    )


# --- 3. One request on an idle pool: no advice ---------------------------------------------------------------------


def triton_trtllm_one_request_idle() -> FieldState:
    """triton-inference-server/tensorrtllm_backend#217 ("[Feature Request] More Detailed Logging for In-Flight
    Batch", open): the operator asks for the batch size of each step; the maintainer points at line 2386 of the
    operator's own Triton log: ``{"Active Request Count":1,"Context Requests":1,"Free KV cache blocks":480,
    "Generation Requests":0,"Iteration Counter":0,"Max KV cache blocks":513,"Max Request Count":64,"MicroBatch
    ID":0, … "Scheduled Requests":1,"Timestamp":"12-18-2023 03:35:37","Tokens per KV cache block":64,"Total Context
    Tokens":2048,"Used KV cache blocks":1}`` — one request's 2,048-token prompt in its first iteration.

    Engine facts: the line is one ``IterationStats`` (the backend's ``/metrics`` gauges are filled from the same
    struct): one request active and scheduled of 64 request slots, the pool 513 blocks × 64 = 32,832 tokens. Its
    block counts disagree by 32 (1 used + 480 free of 513): 2,048 ÷ 64 = 32 blocks, the context just scheduled —
    taken from the free list, not yet counted as used — not a shifted reading (every key of the group is present, so
    nothing can shift). Arithmetic: the request holds at most 33 of 513 blocks (6 %); fifteen more of its size would
    fit; 63 slots are free; nothing waits. Nothing is short, nothing is wasted that a dial would recover: the right
    advice is none — no pool turn (up or down), no batch or sequence turn, no context cap, no replica change, no
    restart.

    Chosen where the report is silent: the model and GPU (the log names neither; Mistral-7B-v0.1 on one A10 24 GB at
    ``kv_cache_free_gpu_mem_fraction`` 0.5: ~7.8 GiB free after 13.5 GiB of bf16 weights, half of it at 128 KiB a
    token ≈ 32,000 tokens — the log's 32,832), the engine's ``max_batch_size`` 64 (the "Max Request Count") and
    ``max_seq_len`` 4,096; the scrape one second earlier: the engine idle (no request, 513 free); the log line is the
    second scrape. Triton 23.12 rows (the log is of 18 December 2023), no waiting gauge: 1 active of 64, so the
    executor's queue is empty. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    idle = {"tokens_per": 64.0, "used": 0.0, "free": 513.0, "max": 513.0}
    logged = {"tokens_per": 64.0, "used": 1.0, "free": 480.0, "max": 513.0}
    first = _triton_trtllm(active=0, scheduled=0, context=0, max_batch=64, blocks=idle, success=118)
    second = _triton_trtllm(active=1, scheduled=1, context=1, max_batch=64, blocks=logged, success=118)
    return FieldState(
        id="triton-trtllm-one-request-idle-pool-no-advice",
        source="https://github.com/triton-inference-server/tensorrtllm_backend/issues/217",
        engine_version="Triton 23.12 (tensorrtllm backend of TRT-LLM 0.7, no waiting gauge)",
        deployment={
            "name": "mistral-7b-triton-a10",
            "engine": "triton-trtllm",
            "model": "mistralai/Mistral-7B-v0.1",
            "served_model": "tensorrt_llm",
            "gpu": "a10",
            "max_model_len": 4096,
            "max_num_seqs": 64,
            "kv_cache_config": {"free_gpu_memory_fraction": 0.5},
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": 32_832},
        no_advice=True,
        must_never=[("replicas", None), RESTART],
        extra_check=no_stall_claimed,
    )


IDLE = triton_trtllm_one_request_idle()

STATES = [
    triton_trtllm_99_active_5_scheduled(),
    triton_trtllm_batch_8_of_64_held(),
    IDLE,
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)


def test_idle_pool_gets_no_advice_while_its_block_counts_disagree(once: FieldStateRuns) -> None:
    """The idle row's other direction, asserted apart from its capacity (xfailed above): one request running,
    nothing waiting, and no advice at all — not a pool turn, not a batch turn, not a restart."""
    result = once[IDLE]
    snap = result.get("snapshot") or {}
    assert result.get("state") == "fresh", result.get("state")
    assert snap.get("requests_running") == 1 and snap.get("requests_waiting") == 0, snap
    recs = result.get("recommendations") or []
    assert not recs, f"advice given where none is right: {brief(recs)}"
