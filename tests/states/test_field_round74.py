"""Field states, round 74: one sustained preemption storm that the thread ended with a dial — eight seats against a
pool that holds four 16k-token streams on an RTX 3090 (ten preemptions a run; two seats: none, and 40 % more work) —
and three pages whose trouble lay outside the GPU's step or was made worse by the dial turned: a Llama-3-8B whose
grammar sampler spent 85 ms of every 96 ms token on the CPU, a BLOOM engine rebuilt at TP 8 on V100 that ran 12.4×
slower than on one GPU, and a vLLM server "capped" at 100 running requests by the client that fed it — from four
public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine prints them: vLLM through :class:`tests.states.VLLMEngine` (the V1 0.33
label set for the 2026 image, the 0.11 label set for V0 0.6, as rounds 61–73 render them), llama.cpp through
:func:`tests.states.test_field_round3_others._llamacpp` (a May 2024 build: ``kv_cache_usage_ratio`` and
``kv_cache_tokens`` still served, before PR #13660), TensorRT-LLM through :class:`tests.states.test_field_round4_others.
TRTLLMServe` (``trtllm-serve``'s ``collector.py`` names, as rounds 4, 21, 71 and 73 render the releases that had no
Prometheus page). The assertions come from the reports' numbers and the verdict each thread establishes, never from
the advisor's output:

* ``vllm-2026-rtx3090-eight-seats-16k-streams-pool-holds-four-preempting-cap-the-seats`` — syv-ai/qwen38-27b-rtx3090
  #25 ("Known issues and progress: KVarN / DFlash2 / CTX=huge (tracking)", the maintainer's reply, August 2026): eight
  16k-token streams on one RTX 3090 with the seat count overridden to 8 against "a 4.90 GiB pinned pool — five
  residents with a short prompt, four with a 16k one": "Ten preemptions in one run"; "The same eight streams against
  the shipped 2 seats: 0 preemptions, e2e 14.4 tok/s against 10.3 — 40% more work out of the same card by admitting
  fewer requests". Must propose a sequence cap at or below the four the pool holds; never more sequences, a context
  cap below the 16,384-token prompts, replicas or a restart.
* ``llamacpp-b2998-rtx3090-llama3-8b-grammar-sampling-85ms-of-96ms-never-gpu-turn`` — ggml-org/llama.cpp#7554 ("Bug:
  sample time becomes very long when using Llama-3", May 2024): Llama-3-8B-Instruct fully offloaded to an RTX 3090,
  with a grammar: "sample time = 7656.05 ms / 90 runs (85.07 ms per token)", "eval time = 944.78 ms / 89 runs
  (10.62 ms per token, 94.20 tokens per second)"; "GPU utilization dropped from 70%+ (when not using grammar) to
  10%". Never a GPU-side turn (lighter weights or KV, more TP), replicas or a restart.
* ``trtllm-0.5-v100-bloom-tp1-page-tp8-measured-12x-slower-never-more-tp`` — NVIDIA/TensorRT-LLM#389 ("using trt-llm
  run bloom, tensor parallelism (built with --world_size =8) slower seriously than single gpu (GPU is 8X V100)",
  November 2023): "single gpu total latency: 9.276402950286865 sec, world_size =8 tensor parallelism total latency:
  115sec"; the maintainers: "maybe the communication overhead becomes too large". The page: the single-GPU engine.
  Never more tensor parallelism; never replicas or a restart.
* ``vllm-0.6.1-200-users-100-running-none-waiting-client-capped-no-capacity-turn`` — vllm-project/vllm#14513
  ("[Usage]: How to improve concurrent processing capacity", March 2025): vLLM 0.6.1.post2, "When I was testing the
  performance at 200 concurrent users, I found that vLLM can handle up to 100 requests at most … After each request
  is processed, a new request will be added, but the maximum number of requests is 100"; the maintainer: "I suspect
  something in your client code is limiting concurrency to 100". Never a capacity turn (replicas, more sequences, a
  larger pool, more GPUs) or a restart.

Every row passes. The V100 row failed when written (``goodput_below_target``'s small-batch TPOT branch offered TP 1 → 2
to the engine whose TP 8 rebuild measured 12.4× slower); since 2026-12-07 ``goodput_below_target`` lists the small-batch
TP turn withheld (``advisor.rules.goodput.SMALL_BATCH_TP_WITHHELD``: no report collected measured it winning). The
eight-seat row failed when written: ``admission_thrash`` capped the context at 8,192 tokens under the 16,384-token
prompts (its falsifier, the lifetime mean request length, was read only from 20 finished requests; this freshly booted
server had answered 2) and never lowered the seats; since 2026-12-07 the mean is read from one finished request
(``advisor.evaluate.MIN_LIFETIME_FINISHED``), the cap is withheld and ``max_num_seqs`` 8 → 3 is proposed.

Candidates set aside (within the round's time limit): vllm-project/vllm#49259 (Qwen3-VL-32B-FP8 throughput collapse on
v0.25.1, fixed by reverting to v0.24.0 — the figures were not returned with the thread), #1492 (vLLM 0.2 hung with two
running at 98.7 % KV — not self-consistent: two requests cannot hold 98.7 % of an A100's pool at LLaMA-7B's 2,048
positions), #1206 (vLLM 0.2 stuck at 100 % KV — the smaller ``max_model_len`` a later thread credits is in a comment
that was not returned), #4806 (Qwen-7B-Chat at 128 concurrency, CPU at 100 % — no verdict), #6737 (Qwen2-0.5B on an
H800, 247 running and 740 pending at 99.7 % KV — no verdict in the thread), #9113 and #13247 (penalties slowing TPOT at
TP 1 — no figures returned beyond a py-spy profile), #14022 (DeepSeek-R1-Distill-Llama-8B, TP 2/4 "up to around 40%" GPU
utilisation — no throughput figures), #18619 (Qwen2.5-VL-3B 0.8.4 → 0.8.5, 62.79 → 57.80 req/s — the model outside the
tables), sgl-project/sglang#14972 (overlap schedule + retract alloc failure on a ~2,000-token pool — a crash, not a
page), MiaAI-Lab/Qwen3.8-Flash-Next-Single-DGX-Spark#19 and joryirving/home-ops#10165 (seat counts on hybrid models
outside the tables), kooexperience.com's "LLM Serving Gauntlet" (FP8 → GPTQ-Int4 1,070 → 3,114 tok/s on a hybrid MoE
whose load was two unique prompts); vllm-project/vllm#3567, #7241, #14412, #23444, #27073, #39734,
tenstorrent/tt-xla#5874, sgl-project/sglang#1477, #1947, #2746, #2805, #4022, #4305, #4759, #6623, #23393, #26248,
MiaAI-Lab/Qwen3.8-Flash-Next-Dual-DGX-Sparks#8, triton-inference-server/server#7676 (= tensorrtllm_backend#609),
lemonade-sdk/lemonade#3276, ggml-org/llama.cpp#23652 — already rows of earlier rounds.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import _cap_at_least, _llamacpp, _llamacpp_rows
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_others import TRTLLMServe
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all, _suggests

# --- 1. vLLM (2026 image), eight seats on an RTX 3090 whose pool holds four 16k-token streams: preempting -------------


def vllm_rtx3090_eight_seats_pool_holds_four() -> FieldState:
    """syv-ai/qwen38-27b-rtx3090#25 ("Known issues and progress: KVarN / DFlash2 / CTX=huge (tracking)", open), the
    maintainer's reply to a user's eight-stream table (mhenrichsen, August 2026): "Ten preemptions in one run, and that
    spread is your Code Max distribution: you posted ``[3.8, 3.8, 5.7, 4.7, 4.5, 6.2, 6.1, 5.5]`` at N=8, I get 3 to
    7 with one straggler at 72. Same profile, same seat override, same shape"; "The shipped default for ``CTX=huge``
    is ``MAX_SEQS=2`` precisely because the state pages are ~0.8 GiB each against a 4.90 GiB pinned pool — five
    residents with a short prompt, four with a 16k one — and the README told you to override it to 8. That is on me.
    The same eight streams against the shipped 2 seats: **0 preemptions, e2e 14.4 tok/s** against 10.3 — 40% more work
    out of the same card by admitting fewer requests"; "At 4k prompts the same profile is fine — four resident, 218
    tok/s aggregate at N=4, no preemptions — so it is the combination of long prompts and forced seats that tips it".
    The deployment that followed it (joryirving/home-ops#10165) moved to ``MAX_SEQS=2`` and reads
    ``vllm:num_preemptions_total`` to confirm.

    The turn that helped, measured: on the same card, profile and eight 16k streams, 2 seats instead of 8 took the
    run from ten preemptions to none and its end-to-end rate from 10.3 to 14.4 tokens/s (+40 %). The state is the page
    BEFORE it: 8 seats, eight 16k streams, the pool full. Arithmetic: a pool that keeps four 16k-token residents holds
    ~65,500 tokens; eight admitted streams of 16,384 prompt tokens want 131,072 before their first answer token — half
    of them cannot be resident, so the engine admits, runs out of blocks, preempts one (recompute: its 16k prompt is
    prefilled again) and admits the next, ten times a run. A cap at or below four keeps every admitted stream resident
    (the report's two is the measured one). Must propose ``max_num_seqs`` down to at most 4. Must never: more
    sequences (deeper into the thrash); a context cap below the 16,384-token prompts every stream carries (it would
    refuse the whole workload); replicas (one second of history); a restart (tokens flow).

    Not asserted: a larger pool (``gpu_memory_utilization``, a lighter KV dtype — the profile already pins a 4/2-bit KV
    pool at 4.90 GiB; no such turn was measured), the per-stream rates (the thread's e2e figures include the 16k
    prefills).

    Chosen where the report is silent or its model is outside the tables: Qwen3.8-27B is a hybrid (state pages) the
    tables lack; ``Qwen/Qwen2.5-14B-Instruct`` with AWQ weights stands in — ~9.5 GB of weights beside a 12 GiB bf16 KV
    pool on the 3090 at ``gpu_memory_utilization`` 0.95 is the same four 16k residents (48 layers × 8 KV heads × 128 × 2
    × 2 B = 192 KiB a token; 4,096 blocks of 16 = 65,536 tokens: an input); ``max_num_seqs`` 8 (the override),
    ``max_model_len`` 32,768; the load — eight closed-loop streams of 16,384 prompt and ~1,024 generated tokens; the
    server booted for the run (the seat count is a launch flag, so an eight-seat run starts on a server booted with it;
    the thread's controlled comparisons run "one N=4 cell each"); the moment, ~5 minutes into the run: two streams
    answered, four resident and decoding at ~40 ms a token, four waiting (two never admitted, two preempted), nine
    preemptions so far, the pool 99.5 % used; the window: the tenth preemption (one resident evicted, one waiting one
    re-admitted: 14,336 of its 16,384 prompt tokens still in the prefix cache, 2,048 prefilled again), 4 × 25 tokens
    decoded, the pool 99 % used. vLLM of August 2026 with the 0.33 label set (all waiting for capacity). SLO: TTFT 60 s,
    TPOT 0.1 s (a coding agent's long prompts).
    """
    model = "Qwen/Qwen2.5-14B-Instruct"
    blocks = 4_096
    pool = blocks * 16
    prompt, output, tpot = 16_384, 1_024, 0.04
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=32_768,
        gpu_memory_utilization=0.95,
        version="0.33",
        started=time.time() - 360.0,
    )
    eng.finish(2, prompt=prompt, output=output, ttft=95.0, tpot=tpot, queue=80.0, max_tokens=2_048)
    eng.first_tokens([95.0, 95.0, 20.0, 40.0, 60.0, 80.0])
    eng.prefill(8 * prompt + 9 * prompt, cached=9 * (prompt - 2_048))
    generated = 2 * output + 4 * 300
    eng.decode(generated, tpot, steps=generated / 4, batch=4)
    eng.preempt(9)
    eng.running, eng.waiting, eng.kv_usage = 4.0, 4.0, 0.995
    first = eng.render()
    eng.preempt(1)
    eng.prefill(prompt, cached=prompt - 2_048)
    eng.decode(4 * 25, tpot, steps=25, batch=4)
    eng.kv_usage = 0.99
    return FieldState(
        id="vllm-2026-rtx3090-eight-seats-16k-streams-pool-holds-four-preempting-cap-the-seats",
        source="https://github.com/syv-ai/qwen38-27b-rtx3090/issues/25",
        engine_version="vLLM of August 2026 (V1) rendered with the 0.33 label set",
        deployment={
            "name": "qwen-27b-class-rtx3090-eight-seats",
            "engine": "vllm",
            "model": model,
            "quantization": "awq",
            "gpu": "rtx3090",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.95,
            "max_model_len": 32_768,
            "max_num_seqs": 8,
            "slo": {"ttft_seconds": 60.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 4, "requests_waiting": 4, "kv_cache_capacity_tokens": pool},
        must_propose=[("max_num_seqs", "decrease")],
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(_suggests("max_num_seqs", "decrease", at_most=4), _cap_at_least(16_384), no_stall_claimed),
    )


# --- 2. llama.cpp b2998 (May 2024), Llama-3-8B on an RTX 3090 with a grammar: 85 ms of every ~96 ms token sampling ----


def llamacpp_rtx3090_llama3_8b_grammar_sampling() -> FieldState:
    """ggml-org/llama.cpp#7554 ("Bug: sample time becomes very long when using Llama-3", kooWZ, 2024-05-27, closed,
    labelled bug-unconfirmed, medium severity): "I was running Llama-3 on 3090 … When using grammar files, sample time
    becomes very long and GPU utilization dropped from 70%+(when not using grammar) to 10%. I tried two different
    fine-tuned version of Llama-3 and the problem remains. With Llama-2 there is no such problem … I offloaded all
    layers to GPU"; "version: 2998 (9588f196)"; "Llama-3-8B-Instruct with grammar: … sample time = 7656.05 ms / 90 runs
    (85.07 ms per token, 11.76 tokens per second); prompt eval time = 192.27 ms / 410 tokens (0.47 ms per token,
    2132.44 tokens per second); eval time = 944.78 ms / 89 runs (10.62 ms per token, 94.20 tokens per second); total
    time = 9298.97 ms / 499 tokens". The repository's open work item for the sampler's cost is "llama : speed-up
    grammar sampling" (ggml-org/llama.cpp#4218).

    The verdict the report's own numbers establish: the GPU's step is 10.62 ms a token (94 tokens/s, what the card
    does without the grammar); the other 85.07 ms of each ~95.7 ms token is the grammar sampler on the CPU, which
    checks the grammar against the candidates of Llama-3's 128,256-token vocabulary (Llama-2 has 32,000; "With Llama-2
    there is no such problem") — the GPU sits at 10 %. Arithmetic:
    Llama-3-8B at 8 bits is ~8.5 GB, read in ~9 ms at the 3090's 936 GB/s: the 10.6 ms step is the weight read, and
    anything that shortens it (4-bit weights, a lighter KV cache, a second GPU) saves at most ~10 % of a token that
    spends 89 % of its time outside the GPU. Must never: weight quantization, a KV dtype turn or more tensor
    parallelism (each speeds only the 11 % on the GPU); replicas (one second of history; one stream); a restart
    (tokens flow).

    Not asserted: more slots (the report runs one stream; the sampler is per sequence and would run for each);
    speculative decoding (not measured); TTFT (0.19 s of prompt, well inside any target).

    Chosen where the report is silent: the report timed the CLI (``llama_print_timings``); the page is what
    ``llama-server --metrics`` of the same build shows serving that request in its one slot (``-c 8192 -np 1``:
    ``t_token_generation`` runs from the first token to the last, sampling included, so the server's predicted-time
    counter carries the same 95.7 ms a token). The model: ``meta-llama/Meta-Llama-3-8B`` (the tables' Llama-3-8B:
    Llama-3-8B-Instruct's geometry) as ``Q8_0`` (8.5 GB: the 10.6 ms a token the card reads it in); the history —
    200 requests of the report's shape (410 prompt, 90 generated tokens) answered one after another; the window: one
    request released — its 90 tokens and 89 × 95.7 ms = 8.5 s of generation land in the counters, which llama.cpp moves
    at a release — and the next request's 410-token prompt evaluated in the slot; b2998 still serves
    ``kv_cache_usage_ratio`` and ``kv_cache_tokens`` (~400 of 8,192 cells). SLO: TTFT 1 s; TPOT 50 ms — the reporter
    expected the no-grammar speed (10.6 ms), so the target sits between it and the ~96 ms the page shows.
    """
    served, prompt, output = 200.0, 410.0, 90.0
    step, sample = 0.01062, 0.08507
    per_token = step + sample
    c1 = {
        "prompt": served * prompt,
        "prompt_s": served * 0.19227,
        "gen": served * output,
        "gen_s": served * (output - 1) * per_token,
        "decodes": served * output,
        "busy_avg": 1.0,
        "prompt_tps": 2_132.44,
        "gen_tps": 1 / per_token,
    }
    c2 = dict(
        c1,
        prompt=c1["prompt"] + prompt,
        prompt_s=c1["prompt_s"] + 0.19227,
        gen=c1["gen"] + output,
        gen_s=c1["gen_s"] + (output - 1) * per_token,
        decodes=c1["decodes"] + 9.0,
    )
    return FieldState(
        id="llamacpp-b2998-rtx3090-llama3-8b-grammar-sampling-85ms-of-96ms-never-gpu-turn",
        source="https://github.com/ggml-org/llama.cpp/issues/7554",
        engine_version="llama.cpp b2998 (9588f196, May 2024; KV gauges still served)",
        deployment={
            "name": "llama3-8b-q8-llamacpp-3090-grammar",
            "engine": "llamacpp",
            "model": "meta-llama/Meta-Llama-3-8B",
            "gguf_file_type": "Q8_0",
            "gpu": "rtx3090",
            "max_model_len": 8_192,
            "ctx_size": 8_192,
            "parallel": 1,
            "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[
            (
                _llamacpp(_llamacpp_rows(c1, busy=1, deferred=0, kv=(400 / 8_192, 400.0))),
                _llamacpp(_llamacpp_rows(c2, busy=1, deferred=0, kv=(420 / 8_192, 420.0))),
            )
        ],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        must_never=[
            ("weight_quantization", None),
            ("kv_cache_dtype", None),
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 3. TensorRT-LLM 0.5 (November 2023), BLOOM on one V100: the TP 8 rebuild measured 12.4× slower ------------------

BLOOM_3B_CONFIG = """{
  "architectures": ["BloomForCausalLM"], "model_type": "bloom", "torch_dtype": "float16",
  "num_hidden_layers": 30, "hidden_size": 2560, "num_attention_heads": 32, "num_key_value_heads": 32,
  "intermediate_size": 10240, "vocab_size": 250880, "max_position_embeddings": 2048,
  "tie_word_embeddings": true
}
"""
"""``bigscience/bloomz-3b``'s geometry (``n_layer`` 30, ``hidden_size`` 2560, ``n_head`` 32, 250,880 vocabulary
rows, a 4 × hidden MLP, tied embeddings; ALiBi, trained at 2,048 positions), written with the keys the advisor reads;
BLOOM is not in the advisor's tables."""


def trtllm_v100_bloom_tp1_no_more_tp() -> FieldState:
    """NVIDIA/TensorRT-LLM#389 ("using trt-llm run bloom, tensor parallelism (built with --world_size =8 ) slower
    seriously than single gpu (GPU is 8X V100)", yank666, 2023-11-15, closed, labelled triaged): "single gpu total
    latency: 9.276402950286865 sec, world_size =8 tensor parallelism total latency: 115sec, it shouldn't be faster?";
    the maintainer's answer (wm2012011492, 2023-11-16): "Agreed with @0xymoro. It's recommended to use nsight system to
    analyze the timeline (maybe the communication overhead becomes too large). Besides, could you try
    ``--use_parallel_embedding`` for engine building?"; closed as inactive (2024-04-02). The reporter's companion issue
    of the same day (NVIDIA/TensorRT-LLM#392, "the larger batch, the longger latency cost") names the model and card:
    "I run bloomz-2b6 on 8 X V100 GPU".

    The turn that did not help, measured: on the same eight V100s and request, the engine rebuilt with
    ``--world_size 8`` answered in 115 s against 9.28 s on one GPU — 12.4× slower; the thread puts it on
    communication. The state is the page BEFORE it: the TP 1 engine serving that request. Arithmetic: BLOOM at ~3 B
    parameters in fp16 is ~6 GB, read in ~6.7 ms at the V100's 900 GB/s; at TP 8 each GPU reads 0.75 GB (~0.8 ms) but
    every layer's two all-reduces — 60 a token — cross the GPUs, and 115 s for the same request is 12.4× the whole
    single-GPU answer: the split buys back at most the 6 ms of weight read and costs far more. Must never: more tensor
    parallelism (measured 12.4× slower); replicas (one second of history, one stream); a restart (tokens flow).

    Not asserted: TP 2 (not measured; the measured direction is the only evidence), weight quantization (a V100 runs no
    FP8; not measured), ``--use_parallel_embedding`` (not a dial of the advisor's).

    Chosen where the report is silent: the model — ``bigscience/bloomz-3b``'s geometry given as a config (the report's
    "bloomz-2b6" is no published checkpoint; bloomz-3b is the BLOOM of that size); the GPU ``v100-32gb`` (an
    eight-GPU V100 server is SXM2 32 GB); the request — 128 prompt and 512 generated tokens, ~0.3 s of prefill and
    17.5 ms a token (0.3 + 511 × 0.0176 = 9.28 s: the report's single-GPU latency), one at a time; 40 answered; the
    window: the 41st finishes (``collector.py`` observes a request's tokens and latencies when it finishes) and the
    next is admitted. TensorRT-LLM of November 2023 (0.5) had no Prometheus page; rendered with ``trtllm-serve``'s
    ``collector.py`` names. The pool at ``free_gpu_memory_fraction`` 0.9 of the ~23 GiB the 6 GB of weights leave on a
    32 GB card: 2,250 blocks of 32 (72,000 tokens at 30 layers × 2 × 2,560 × 2 B = 300 KiB a token; an input). SLO:
    TTFT 1 s; TPOT 15 ms — the reporter expected TP to be faster, so the target sits just under the 17.5 ms the page
    shows, where a tempted advisor reaches for more GPUs.
    """
    model = "bloomz-3b.json"
    srv = TRTLLMServe("bigscience/bloomz-3b")
    srv.finish(40, prompt=128, output=512, ttft=0.3, tpot=0.0176, queue=0.005)

    def gauges(used: float) -> None:
        srv.gauges(running=1.0, waiting=0.0, paused=0.0, max_blocks=2_250.0, used=used, max_batch=8.0)

    gauges(12.0)
    first = srv.render()
    srv.finish(1, prompt=128, output=512, ttft=0.3, tpot=0.0176, queue=0.005)
    gauges(5.0)
    return FieldState(
        id="trtllm-0.5-v100-bloom-tp1-page-tp8-measured-12x-slower-never-more-tp",
        source="https://github.com/NVIDIA/TensorRT-LLM/issues/389",
        engine_version="TensorRT-LLM 0.5 (November 2023) rendered with trtllm-serve's collector.py names",
        deployment={
            "name": "bloomz-3b-trtllm-v100",
            "engine": "trtllm",
            "model": model,
            "gpu": "v100-32gb",
            "tensor_parallel_size": 1,
            "max_model_len": 2_048,
            "max_num_seqs": 8,
            "kv_cache_config": {"free_gpu_memory_fraction": 0.9},
            "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.015, "target_ratio": 0.9},
        },
        files={model: BLOOM_3B_CONFIG},
        scrapes=[(first, srv.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        must_never=[
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 4. vLLM 0.6.1.post2 (V0), 200 "concurrent users" and 100 running, none waiting: the client held the rest --------


def vllm_061_client_capped_at_100() -> FieldState:
    """vllm-project/vllm#14513 ("[Usage]: How to improve concurrent processing capacity", shaoxinghua0623,
    2025-03-09, closed, labelled usage): "vllm version: 0.6.1.post2. When I was testing the performance at 200
    concurrent users, I found that vLLM can handle up to 100 requests at most. After each request is processed, a new
    request will be added, but the maximum number of requests is 100"; "how to increase the number of concurrent
    connections from 100 to 200 or more?"; the maintainer (robertgshaw2-redhat, 2025-03-10): "I suspect something in
    your client code is limiting concurrency to 100. E.g. the python openai client only allows X number of concurrent
    requests. Can you verify by running the benchmark scripts in vllm repo? Feel free to reopen if you are still
    stuck" — closed.

    The verdict the page itself carries: vLLM queues every request it has received beyond what it runs —
    ``num_requests_waiting`` counts them — so a server with 100 running and none waiting has been sent 100
    requests, not 200: the other hundred never reached it. 100 is the default connection limit of common HTTP clients
    (aiohttp's ``TCPConnector(limit=100)``; a thread of the same shape, vllm-project/vllm#7241, found exactly that), far
    below vLLM's own cap of 256 sequences. Arithmetic for the stand-in: Qwen2.5-7B keeps 28 layers × 4 KV heads × 128
    × 2 × 2 B = 56 KiB a token; 100 requests of ~1,500 tokens hold 150,000 of a ~970,000-token pool (15 %). Must
    never: replicas (one second of history; a second server would get none of the withheld hundred); more sequences
    (100 of 256 in use); a pool-growing turn (15 % used) or more GPUs; a restart (tokens flow).

    Not asserted: any turn at all (the engine is healthy: the fix is in the client).

    Chosen where the report is silent (its launch script and charts are screenshots the thread did not return): the
    model ``Qwen/Qwen2.5-7B-Instruct`` on one ``a100-80gb``; ``max_num_seqs`` 256 (the default), ``max_model_len``
    32,768, ``gpu_memory_utilization`` 0.9, the pool 60,600 blocks of 16 (969,600 tokens; an input); the load — 100
    requests in flight, ~1,000 prompt and ~500 generated tokens each at ~25 ms a token (100 streams on an A100),
    TTFT 0.3 s; 6,000 answered over the hour; the window: four answered and four admitted (100 ÷ ~13 s a request).
    vLLM 0.6.1.post2 (V0, September 2024) rendered with the V1 0.11 label set. SLO: TTFT 2 s, TPOT 0.05 s.
    """
    model = "Qwen/Qwen2.5-7B-Instruct"
    blocks = 60_600
    pool = blocks * 16
    tpot = 0.025
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        started=time.time() - 3_600.0,
    )
    eng.finish(6_000, prompt=1_000, output=500, ttft=0.3, tpot=tpot, queue=0.01, max_tokens=1_024)
    eng.first_tokens([0.3] * 6_100)
    eng.prefill(6_100 * 1_000, cached=6_100 * 100)
    generated = 6_000 * 500 + 100 * 250
    eng.decode(generated, tpot, steps=generated / 100, batch=100)
    eng.running, eng.waiting, eng.kv_usage = 100.0, 0.0, 100 * 1_250 / pool
    first = eng.render()
    eng.finish(4, prompt=1_000, output=500, ttft=0.3, tpot=tpot, queue=0.01, max_tokens=1_024)
    eng.first_tokens([0.3] * 4)
    eng.prefill(4 * 1_000, cached=4 * 100)
    eng.decode(100 * 39, tpot, steps=39, batch=100)
    eng.kv_usage = 100 * 1_255 / pool
    return FieldState(
        id="vllm-0.6.1-200-users-100-running-none-waiting-client-capped-no-capacity-turn",
        source="https://github.com/vllm-project/vllm/issues/14513",
        engine_version="vLLM 0.6.1.post2 (V0, September 2024) rendered with the V1 0.11 label set",
        deployment={
            "name": "qwen25-7b-a100-client-capped",
            "engine": "vllm",
            "engine_version": "0.6.1",
            "model": model,
            "gpu": "a100-80gb",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "max_num_seqs": 256,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 100, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("replicas", "increase"),
            ("max_num_seqs", "increase"),
            *POOL_TURNS,
            ("tensor_parallel_size", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_rtx3090_eight_seats_pool_holds_four(),
    llamacpp_rtx3090_llama3_8b_grammar_sampling(),
    trtllm_v100_bloom_tp1_no_more_tp(),
    vllm_061_client_capped_at_100(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
