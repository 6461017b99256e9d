"""Field states, round 71: three dial turns measured away from vLLM — Medusa speculation (``--speculate 3``) on a
13B Llama under TGI (time per token +50 %), a second and a fourth TGI shard for CodeLlama-34B on H100 (28.0 → 28.0 →
31.8 ms a token), and a larger batch for Llama-3-8B under TensorRT-LLM on an A100 80GB (2,000 → 5,500 tokens/s) —
each rendered as the page BEFORE that turn, from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine prints them: TGI through :class:`tests.states.test_field_round3_others.
TGIRouter` (the router's ``metrics-exporter-prometheus`` names; no ``tgi_batch_max_total_tokens`` before v2.3.1, as
rounds 3, 53 and 57 render TGI 1.x–2.x), TensorRT-LLM through :class:`tests.states.test_field_round4_others.
TRTLLMServe` (``trtllm-serve``'s ``collector.py`` names, as rounds 4 and 21 render it). The assertions come from the
reports' numbers and the verdict each thread establishes, never from the advisor's output:

* ``tgi-1.4-a100-llama2-13b-eight-streams-medusa-speculate-3-measured-slower-never-enable-speculation`` —
  huggingface/text-generation-inference#1493 ("Medusa-1 slow down the model", January 2024): TGI sha-9c320e2, a
  Llama-13B fine-tune with three self-trained Medusa-1 heads, ``--dtype bfloat16 --max-total-tokens 4096 --sharded
  false --speculate 3``: "the ``time_per_token`` and time to finish 50 requests increased by about 50% compared with
  the base model". Before the turn: the base model, eight streams, TPOT 18 ms against a 15 ms target. Never enable
  speculative decoding; never replicas or a restart.
* ``tgi-1.2-h100-codellama-34b-one-stream-second-shard-measured-no-faster-never-more-shards`` —
  huggingface/text-generation-inference#1315 ("Tensor Parallelism on TGI", December 2023): TGI v1.2,
  ``codellama/CodeLlama-34b-Instruct-hf``, requests sent one at a time, latency per token (ms, average / P50 / P99):
  H100 × 1 27.98 / 27.56 / 30.68, × 2 28.02 / 27.82 / 30.81, × 4 31.77 / 30.50 / 47.52 (A100-80G: 46.79, 29.39, 32.06).
  Before the turn: one H100, ``--num-shard 1``, one stream at 28 ms a token against a 25 ms target. Never more shards
  (tensor parallelism); never replicas or a restart. It failed when written: the advisor offered ``--num-shard 2``
  beside fp8 weights (``goodput_below_target``: the prior roofline's 31 → 18 ms, where the report measured 27.98 → 28.02
  ms); since 2026-12-07 that TP turn is listed withheld (``advisor.rules.goodput.SMALL_BATCH_TP_WITHHELD``).
* ``trtllm-0.16-a100-80gb-llama3-8b-batch-16-larger-batch-measured-2.75x`` — NVIDIA/TensorRT-LLM#2648 ("Throughput
  Measurements", January 2025): Llama 3 8B in float16 on an A100 80GB SXM, 35 input and 250 output tokens, "about 2000
  tokens per second"; then "I increased batch size and reached to 5500 tokens per second". Before the turn: the batch
  full at 16, ~500 requests waiting, the KV pool 1 % used. Must propose more sequences (``max_batch_size``); never
  fewer, never a pool-growing turn (the pool is not what holds them), replicas or a restart.

Candidates set aside (within the round's time limit): sgl-project/sglang#4022 (DeepSeek-R1-Distill-Qwen-32B, running
low at 100 clients — the launch line and the thread's answers were not returned), sgl-project/sglang#5274 (EAGLE-3 at
20 clients on an A6000 "dropped sharply" — only one of the two result tables was returned), sgl-project/sglang#25199
(the ×0.85 fraction derate on AMD: KV 2.03 M → 2.49 M tokens for +1.6 % input TPM — MiniMax-M2.5 and the GPU outside
the tables, a 1.6 % change supports neither a must-propose nor a must-never), sgl-project/sglang#5808 (``--dp 2``
slower than one A10 — a flag mix-up, resolved by ``--tp``), sgl-project/sglang#1477 and #4305 (concurrency not reached
— no dial turn measured), sgl-project/sglang-omni#1135 (a wrapper's own thinker cap, not SGLang's page),
0xSero/GLM-5.3-Flash-DGX-Spark#1 (``--chunked-prefill-size`` 256 → 1024: 1.5× prefill — GB10 and GLM-5.3 outside the
tables), huggingface/text-generation-inference#1363 (Medusa slower at every batch in ``text-generation-benchmark`` —
the reporter doubts the benchmark's token count, unresolved), #1503 (``--speculate 3`` +3 % — no verdict either way),
#1129 (the same reporter's earlier TP numbers, superseded by #1315), triton-inference-server/tensorrtllm_backend#429
and #185 (larger ``max_batch_size`` without more throughput — results as images), NVIDIA/TensorRT-LLM#1380 (fp8 vs
int8 weights — which build ran first not established), SafeAILab/EAGLE#298 (results as an image).

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from typing import Any

from tests.states.field import FieldState, matching, number, round_tests
from tests.states.test_field_round3_others import TGIRouter, _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_others import TRTLLMServe
from tests.states.test_field_round5 import _all

# --- 1. TGI of January 2024, a Llama-13B fine-tune at eight streams: Medusa measured 50 % slower ----------------------


def tgi_llama13b_eight_streams_no_medusa() -> FieldState:
    """huggingface/text-generation-inference#1493 ("Medusa-1 slow down the model", thuwyh, 2024-01-26, closed stale):
    "I trained a Medusa model and inferenced it with the version: ghcr.io/huggingface/text-generation-inference:
    sha-9c320e2. What I found is the ``time_per_token`` and time to finish 50 requests increased by about 50% compared
    with the base model"; the Medusa config ``"base_model_name_or_path": "/data/exp/llama_13bf_0104",
    "medusa_num_heads": 3, "medusa_num_layers": 1``; ``docker run … --gpus '"device=6"' … --model-id
    /data/exp/medusa_13bf_0125 --dtype bfloat16 --max-total-tokens 4096 --sharded false --max-input-length 4095
    --speculate 3``; the client: ``async with sem: … text_generation(prompt, max_new_tokens=512, … do_sample=True,
    temperature=0.7, top_p=0.95, top_k=40, repetition_penalty=1.1 …)`` over 50 prompts. A maintainer in the
    neighbouring thread (#1503, Narsil, 2024-01-31), pointing back to this one: "Medusa models will perform highly on
    how they are finetuned … Medusa *will* limit the throughput if the hitrate is to[o low]".

    The wrong turn, measured: on the same server, GPU, model and client, speculation with three Medusa heads
    (``--speculate 3``) made every token ~50 % slower and the 50-request run ~50 % longer. The state is the page BEFORE
    it: the base model, the 50-request run under way, eight streams decoding (the client's semaphore), nothing queued
    at the router. Arithmetic: 13.0 B parameters in bf16 are 26 GB; an A100 80GB reads them in ~13 ms, so eight
    streams at 18 ms a token are bound by the weight read — the regime speculation is sold for, and where it lost
    here. Must never: enabling speculative decoding (the engine's ``--speculate`` on this model, batch and engine
    measured 50 % slower); replicas (one second of history); a restart (tokens flow).

    Not asserted: whether a better-trained head would win (the thread says it depends on the hit rate; none was
    measured here), any turn that would speed the eight streams (none was measured).

    Chosen where the report is silent: the GPU (``device=6`` on an unnamed box) — an A100 SXM 80GB; the model —
    ``meta-llama/Llama-2-13b-hf`` (the tables' 13B Llama; "llama_13bf" is the reporter's own fine-tune of a 13B
    Llama, same geometry); the semaphore — 8; prompts of ~300 tokens, ~400 generated (sampling stops some before 512);
    the moment: 34 of the 50 answered, 8 decoding; the window: one answered, the next admitted. TGI of late January
    2024 (sha-9c320e2, ~1.4.0: no ``tgi_batch_max_total_tokens``). SLO: TTFT 2 s; TPOT 15 ms — the reporter was
    timing ``time_per_token`` (the reason to try speculation), so the target sits just under the 18 ms the page shows,
    where a tempted advisor would reach for a draft.
    """
    tpot, prompt, generated, max_new = 0.018, 300, 400, 512
    tgi = TGIRouter(max_input=4_095, max_total=4_096, budget=None)
    tgi.arrive(42, prompt=prompt, max_new=max_new)
    tgi.finish(34, generated=generated, tpot=tpot, queue=0.004)
    tgi.queue, tgi.batch, tgi.reserved = 0.0, 8.0, 8 * (prompt + max_new)
    first = tgi.render()
    tgi.arrive(1, prompt=prompt, max_new=max_new)
    tgi.finish(1, generated=generated, tpot=tpot, queue=0.004)
    second = tgi.render()
    return FieldState(
        id="tgi-1.4-a100-llama2-13b-eight-streams-medusa-speculate-3-measured-slower-never-enable-speculation",
        source="https://github.com/huggingface/text-generation-inference/issues/1493",
        engine_version="TGI sha-9c320e2 (late January 2024, ~1.4.0; no tgi_batch_max_total_tokens)",
        deployment={
            "name": "llama-13b-tgi-a100",
            "engine": "tgi",
            "engine_version": "1.4.0",
            "model": "meta-llama/Llama-2-13b-hf",
            "gpu": "a100-80gb",
            "tensor_parallel_size": 1,
            "max_model_len": 4_096,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.015, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 8, "requests_waiting": 0},
        must_never=[
            ("speculative_decoding", "enable"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. TGI v1.2, CodeLlama-34B on one H100, one stream: a second shard measured no faster, a fourth slower -----------

CODELLAMA_34B_CONFIG = """{
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
  "num_hidden_layers": 48, "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
  "intermediate_size": 22016, "vocab_size": 32000, "max_position_embeddings": 16384, "rope_theta": 1000000,
  "tie_word_embeddings": false
}
"""
"""``codellama/CodeLlama-34b-Instruct-hf``'s geometry (48 layers, 64 heads of 128, 8 KV heads, 16,384 positions; not
in the advisor's tables)."""


def tgi_h100_codellama34b_one_stream_no_more_shards() -> FieldState:
    """huggingface/text-generation-inference#1315 ("Tensor Parallelism on TGI", Rogerwyf, 2023-12-06, closed stale):
    "I'm running the benchmarks on K8s with the v1.2 image on ``codellama/CodeLlama-34b-Instruct-hf``. Each deployment
    shares the same spec except for the number of GPUs and thus the value for ``--num-shard``. All of the requests are
    sent **non-concurrently** … the metric of interest here is simply **latency per token (in ms) for each request**
    (Each request generates ~100 tokens)"; latency per token, average / P50 / P99: "H100 | 1 | 27.98 | 27.56 | 30.68",
    "H100 | 2 | 28.02 | 27.82 | 30.81", "H100 | 4 | 31.77 | 30.50 | 47.52" (A100-80G: 46.79, 29.39, 32.06 at 1, 2, 4).
    The same reporter's earlier thread (#1129, TGI v1.1 on A10G) had found that sharding over more GPUs cut the latency
    per token for 7B and 13B models; here, on H100, it did not.

    The turn that did not help, measured: on the same H100s, image, model and one-at-a-time load, a second shard left
    the latency per token where it was (27.98 → 28.02 ms) and a fourth made it 13.5 % worse (31.77 ms, P99 +55 %).
    The state is the page BEFORE it: one H100, ``--num-shard 1``, one request decoding at 28 ms a token, nothing
    queued. Arithmetic: 33.7 B parameters in bf16 are 67.5 GB; an H100 SXM reads them in ~20 ms at 3.35 TB/s, so a
    second shard halves the bytes a GPU reads a step — the roofline says ~14 ms — and the measurement says 28.02 ms:
    what bounds this stream is not the weight read a second GPU would split. Must never: more shards
    (``tensor_parallel_size`` increase: 2 measured no faster, 4 slower); replicas (one second of history, one
    stream); a restart (tokens flow).

    Not asserted: why (the thread names a start-up warning it does not quote in full and no cause), the A100 rows
    (a different GPU: there 2 shards did help, 46.8 → 29.4 ms), any other turn that would cut the latency per token
    (none measured).

    Chosen where the report is silent: an H100 SXM 80GB; the model geometry given as a config (CodeLlama-34B is not in
    the tables); ``--max-total-tokens`` 4,096 (v1.2's default 2,048 would not matter to a 100-token answer; 4,096 with
    prompts of ~200 tokens); the history — 60 requests answered one after another (~200 prompt and ~100 generated
    tokens, ~3 s each); the window: one answered, the next admitted (non-concurrent: one in the batch). TGI v1.2
    (December 2023: no ``tgi_batch_max_total_tokens``). SLO: TTFT 1 s; TPOT 25 ms — the reporter's metric of interest
    is the latency per token, so the target sits just under the 28 ms the page shows, where a tempted advisor would
    split the model over more GPUs.
    """
    tpot, prompt, generated = 0.028, 200, 100
    tgi = TGIRouter(max_input=4_095, max_total=4_096, budget=None)
    tgi.arrive(61, prompt=prompt, max_new=generated)
    tgi.finish(60, generated=generated, tpot=tpot, queue=0.002)
    tgi.queue, tgi.batch, tgi.reserved = 0.0, 1.0, float(prompt + generated)
    first = tgi.render()
    tgi.arrive(1, prompt=prompt, max_new=generated)
    tgi.finish(1, generated=generated, tpot=tpot, queue=0.002)
    second = tgi.render()
    return FieldState(
        id="tgi-1.2-h100-codellama-34b-one-stream-second-shard-measured-no-faster-never-more-shards",
        source="https://github.com/huggingface/text-generation-inference/issues/1315",
        engine_version="TGI v1.2 (December 2023; no tgi_batch_max_total_tokens)",
        deployment={
            "name": "codellama-34b-tgi-h100",
            "engine": "tgi",
            "engine_version": "1.2.0",
            "model": "codellama-34b.json",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 1,
            "max_model_len": 4_096,
            "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.025, "target_ratio": 0.9},
        },
        files={"codellama-34b.json": CODELLAMA_34B_CONFIG},
        scrapes=[(first, second)],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        must_never=[
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 3. TensorRT-LLM 0.16, Llama-3-8B on an A100 80GB: a batch of 16, a larger batch measured 2.75× -------------------


def _more_sequences_than(cap: int) -> Any:
    """Some proposal (alternatives included) raises the sequence cap above ``cap`` — the direction
    NVIDIA/TensorRT-LLM#2648 measured (a larger batch: 2,000 → 5,500 tokens/s)."""

    def check(result: dict[str, Any]) -> None:
        ups = [t for t in matching(result.get("recommendations") or [], ("max_num_seqs", "increase"))]
        assert any(number(t["suggested"]) > cap for t in ups), (
            f"no turn to more than {cap} sequences: {[(t.get('current'), t.get('suggested')) for t in ups]}; "
            f"rules: {[(r.get('rule'), r.get('state'), r.get('reason')) for r in result.get('rules') or []]}"
        )

    return check


def trtllm_a100_llama3_8b_batch_16() -> FieldState:
    """NVIDIA/TensorRT-LLM#2648 ("Throughput Measurements", Alireza3242, 2025-01-02, closed), the whole thread: "My
    hardware is an A100 GPU. I benchmarked the Llama 3 8B model, and I reached a speed of about 2000 tokens per second
    for an input of 35 tokens and an output of 250 tokens. However, this page [perf-overview.md] states that for an
    input of 128 tokens and an output of 128 tokens, it reached 6552.62 tokens … I achieved 2000 tokens with float16";
    then (2025-01-06) "I increased batch size and reached to 5500 tokens per second"; asked by a maintainer for the
    GPU, "A100 80GB SXM".

    The turn that helped, measured: on the same A100 80GB SXM, model, precision and request shape, a larger batch took
    the engine from ~2,000 to ~5,500 tokens/s (2.75×). The state is the page BEFORE it: the batch full, the benchmark's
    requests queued behind it, the KV pool nearly empty. Arithmetic: 8.03 B parameters in fp16 are 16.1 GB; the A100
    SXM reads them in ~8 ms at 2.04 TB/s, so 2,000 tokens/s is ~16 streams at ~8 ms a step — a step bound by the
    weight read, which a larger batch shares: 5,500 tokens/s is ~64 streams at ~11.6 ms a step. A request holds 285
    tokens (35 + 250) at 128 KiB a token: the pool (0.9 of the ~61 GB left after the weights and activations, ~441,600
    tokens) holds over 1,500 of them. Must propose a turn in the measured direction: more sequences
    (``max_num_seqs`` increase, i.e. ``--max_batch_size``) above 16. Must never: fewer sequences (the measured wrong
    direction); a pool-growing turn (a larger memory fraction or an fp8 KV cache: 1 % of the pool is in use, it is not
    what holds the queue); replicas (one second of history); a restart (tokens flow); a context cap below the 285
    tokens a request holds.

    Not asserted: by how much (the thread names neither batch size), the per-stream latency cost (not reported), fp8
    weights (the perf-overview page it compares with used fp8; not measured here).

    Chosen where the report is silent: the batch before — 16 (the arithmetic above), ``max_model_len`` 8,192 (Llama 3
    8B's context), ``meta-llama/Meta-Llama-3-8B`` (the tables' Llama 3 8B), the pool at
    ``free_gpu_memory_fraction`` 0.9 (the default): 13,800 blocks of 32 tokens; the load — an offline benchmark that
    submitted 1,000 requests at once (the thread names no tool), 60 s in: 480 answered, 16 decoding, 504 waiting, each
    answered request queued ~58 s before its prefill; the window: 8 answered, 8 admitted. TensorRT-LLM of January 2025
    (0.16) had no Prometheus page; the page is rendered with ``trtllm-serve``'s ``collector.py`` names (as round 4
    renders v1.2.1) — the stand-in a served deployment of this engine shows. SLO: TTFT 120 s, TPOT 0.2 s (a
    throughput benchmark submitting everything at once: TTFT is queueing by construction; the target is throughput).
    """
    model = "meta-llama/Meta-Llama-3-8B"
    srv = TRTLLMServe(model)
    srv.finish(480, prompt=35, output=250, ttft=58.2, tpot=0.008, queue=58.0)

    def gauges(waiting: float, used: float) -> None:
        srv.gauges(running=16.0, waiting=waiting, paused=0.0, max_blocks=13_800.0, used=used, max_batch=16.0)

    gauges(504.0, 96.0)
    first = srv.render()
    srv.finish(8, prompt=35, output=250, ttft=59.0, tpot=0.008, queue=58.8)
    gauges(496.0, 98.0)
    return FieldState(
        id="trtllm-0.16-a100-80gb-llama3-8b-batch-16-larger-batch-measured-2.75x",
        source="https://github.com/NVIDIA/TensorRT-LLM/issues/2648",
        engine_version="TensorRT-LLM 0.16 (January 2025) rendered with trtllm-serve's collector.py names",
        deployment={
            "name": "llama3-8b-trtllm-a100",
            "engine": "trtllm",
            "model": model,
            "gpu": "a100-80gb",
            "tensor_parallel_size": 1,
            "max_model_len": 8_192,
            "max_num_seqs": 16,
            "kv_cache_config": {"free_gpu_memory_fraction": 0.9},
            "slo": {"ttft_seconds": 120.0, "tpot_seconds": 0.2, "target_ratio": 0.9},
        },
        scrapes=[(first, srv.render())],
        snapshot={"requests_running": 16, "requests_waiting": 496, "kv_cache_capacity_tokens": 441_600},
        must_propose=[("max_num_seqs", "increase")],
        must_never=[
            ("max_num_seqs", "decrease"),
            ("gpu_memory_utilization", "increase"),
            ("kv_cache_dtype", None),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(_more_sequences_than(16), _cap_at_least(285), no_stall_claimed),
    )


STATES = [
    tgi_llama13b_eight_streams_no_medusa(),
    tgi_h100_codellama34b_one_stream_no_more_shards(),
    trtllm_a100_llama3_8b_batch_16(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
