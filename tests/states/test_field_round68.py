"""Field states, round 68: three turns operators made and measured worse — a speculative head enabled at two concurrent
streams of a 1.5B model (335 s → 367 s for 100 prompts), a quantized K/V cache on Gemma 3 under llama.cpp's CUDA
backend (prompt processing "effectively unusable"), and an FP8 checkpoint of Qwen3-235B-A22B at four streams (worse
than BF16) — each rendered as the page BEFORE that turn, from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine prints them: vLLM through :class:`tests.states.VLLMEngine` (V1; the 0.11
label set for the 2024–2025 releases, as rounds 61, 63 and 67 do), llama.cpp through
:func:`tests.states.test_field_round3_others._llamacpp` (the 2025 rows with the KV gauges before PR #13660, as round
42's March 2025 row). The assertions come from the reports' numbers and the verdict each thread establishes, never
from the advisor's output:

* ``vllm-a100-40gb-qwen2-1.5b-2-streams-medusa-measured-slower-never-enable-speculation`` —
  vllm-project/vllm#10031 ("latency of medusa is longer than naive inferece even the concurreny =2", November 2024):
  Qwen2-1.5B-Instruct on one A100 40GB, 100 prompts; naive 785 / 335 / 268 / 226 / 220 s at concurrency 1–5,
  Medusa (3 heads, one speculative token, ~50 % acceptance) 577 / 367 / 291 / 263 / 268 s. Before the turn: plain
  decoding at two streams. Must never propose enabling speculative decoding (measured 9.6 % slower at two streams,
  up to 22 % at five); never replicas, more sequences, a pool turn or a restart. Failed before the fix: the
  speculative rule proposed n-gram speculation here ("decode is bound by reading the weights", TPOT 17.5 → 8.3 ms at
  an assumed 60 % acceptance) while the goodput rule on the same page found ~3 ms of the 11 ms a token in the
  modelled step; an n-gram draft is now withheld where the step explains at most half of the TPOT.
* ``llamacpp-3060-gemma3-12b-f16-kv-slot-full-never-quantize-kv`` — ggml-org/llama.cpp#12352 ("Gemma 3 extremly slow
  prompt processing when using quantized kv cache", March 2025): Gemma-3-12B ``Q5_K_M`` on an RTX 3060 12 GB with
  ``-c 4000 --flash-attn``; with ``--cache-type-k q8_0 --cache-type-v q8_0`` (to reach ``-c 8000``) prompt eval is
  "way slower" and runs on the CPU; the CUDA maintainer: head size 256 with a quantized KV cache runs out of
  registers, "the performance is effectively unusable which is why the CUDA backend does not support it". Before
  the turn: the f16 cache, its one slot nearly full. Must never propose a cache-type turn; never more slots or
  replicas.
* ``vllm-h200-tp4-qwen3-235b-bf16-4-streams-fp8-measured-worse-never-quantize`` — vllm-project/vllm#25540
  ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 performance is worse than Qwen/Qwen3-235B-A22B-Instruct-2507 (bf16)",
  September 2025): TP 4, ``--max-model-len 50000 --no-enable-prefix-caching``, 50 prompts of 10,240 in / 1,024 out
  at ``--max-concurrency 4``: BF16 0.23 requests/s, 239.27 output tokens/s, mean TTFT 1,218.96 ms; the FP8
  checkpoint measured worse. Before the turn: the BF16 server at four streams. Must never propose weight
  quantization; never replicas, more sequences or a restart.

Candidates set aside (within the round's time limit): huggingface/text-generation-inference#1722 (n-gram speculation
lowering throughput under parallel requests — no numbers, no reply returned), #1493 and #1641 (Medusa slower; the
load and the maintainers' verdict were not returned in full), sgl-project/sglang#11045 (DeepSeek-V2-Lite FP8 7.5 →
8.4 ms a token; batch and verdict unstated), sgl-project/sglang#30815 (FP8 KV decode slower at small batches — its
table was not returned in full), ggml-org/llama.cpp#15766 (q8_0 KV on gpt-oss-20b; its numbers were not returned);
vllm-project/vllm#17598, #19254 and #42058, sglang#938 and #1947, llama.cpp#10054 and #10860 — already rows of
earlier rounds.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import _llamacpp, _llamacpp_rows
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS

# --- 1. vLLM, Qwen2-1.5B on one A100 40GB at two streams: Medusa measured slower -------------------------------------


def vllm_qwen2_1p5b_two_streams_no_medusa() -> FieldState:
    """vllm-project/vllm#10031 ("[Performance]: latency of medusa is longer than naive inferece even the concurreny
    =2", 2024-11-05, closed stale): "I compared the performance of the Medusa method and the naive method on a dataset
    containing 100 prompts and found that even when the concurrency was set to 2, the performance of the Medusa method
    was worse than that of naive inference … the draft acceptance rate is around 50% (reported by the vllm log)";
    "hardware: single A100 40GB, model: Qwen2-1.5B"; ``vllm serve /mnt/model/Qwen2-1.5B-Instruct --max-model-len
    32768 --tensor-parallel-size 1 --speculative-model …_medusa_3_head… --num-speculative-tokens 1``; total seconds
    for the 100 prompts, naive / Medusa: concurrency 1 — 785 / 577, 2 — 335 / 367, 3 — 268 / 291, 4 — 226 / 263,
    5 — 220 / 268.

    The wrong turn, measured: speculation enabled at two concurrent streams took 367 s against 335 s (+9.6 %), and
    the loss grows with the streams (+8.6 %, +16 %, +22 % at 3, 4, 5). Only one stream gained (−26 %). The state is
    the page BEFORE the turn at two streams: plain decoding, two requests running, nothing waiting, the pool nearly
    empty. Arithmetic: two streams each serve 50 of the 100 prompts in 335 s, 6.7 s a request. Must never:
    enabling speculative decoding (the measured loss at this batch on this GPU and model: a 1.5B model's step on an
    A100 is not what a verify step saves); replicas (one second of history); more sequences (two in use, none
    waiting); a pool turn (the pool is nearly empty); a restart (tokens flow). Not asserted: any turn that would
    speed the two streams (the thread names none).

    Chosen where the report is silent: Qwen2.5-1.5B-Instruct as the model (the tables' entry; Qwen2-1.5B has its
    geometry: 28 layers, 2 KV heads of 128, hidden 1,536); the A100 SXM 40GB; ``gpu_memory_utilization`` 0.9 (the
    default); the pool 68,000 blocks of 16 (1,088,000 tokens: 28 KiB a token in the ~30 GiB left after 3 GB of weights;
    an input, not asserted); ~300 prompt and ~600 generated tokens a request (the report gives no lengths), so 6.7 s a
    request is ~11 ms a token after a 50 ms TTFT. History: 40 requests served; the window: two streams decode 90 tokens
    each, one request finishes and the next is admitted. vLLM 0.6.x (the report's V0 engine, November 2024) rendered
    with the V1 0.11 label set. SLO: TTFT 1 s; TPOT 10 ms — the reporter was after lower latency (the reason to try
    Medusa), so the target sits just under the ~11 ms measured, where a tempted advisor would reach for speculation.
    """
    model = "Qwen/Qwen2.5-1.5B-Instruct"
    blocks = 68_000
    tpot = 0.011
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        started=time.time() - 900.0,
    )
    eng.finish(40, prompt=300, output=600, ttft=0.05, tpot=tpot, queue=0.002)
    eng.first_tokens([0.05] * 42)
    eng.prefill(42 * 300)
    eng.decode(40 * 600 + 2 * 200, tpot, steps=(40 * 600 + 2 * 200) / 2, batch=2)
    eng.running, eng.waiting, eng.kv_usage = 2.0, 0.0, 2 * 500 / (blocks * 16)
    first = eng.render()
    eng.finish(1, prompt=300, output=600, ttft=0.05, tpot=tpot, queue=0.002)
    eng.first_tokens([0.05])
    eng.prefill(300)
    eng.decode(180, tpot, steps=90, batch=2)
    eng.kv_usage = (500 + 390) / (blocks * 16)
    return FieldState(
        id="vllm-a100-40gb-qwen2-1.5b-2-streams-medusa-measured-slower-never-enable-speculation",
        source="https://github.com/vllm-project/vllm/issues/10031",
        engine_version="vLLM 0.6.x (V0, November 2024) rendered with the V1 0.11 label set",
        deployment={
            "name": "qwen2-1.5b-a100-40gb",
            "engine": "vllm",
            "model": model,
            "gpu": "a100-40gb",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.010, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 2, "requests_waiting": 0},
        must_never=[
            ("speculative_decoding", "enable"),
            ("replicas", "increase"),
            ("max_num_seqs", "increase"),
            *POOL_TURNS,
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. llama.cpp, Gemma-3-12B on an RTX 3060: the f16 cache's one slot nearly full --------------------------------


def llamacpp_gemma3_12b_f16_slot_full() -> FieldState:
    """ggml-org/llama.cpp#12352 ("Eval bug: Gemma 3 extremly slow prompt processing when using quantized kv cache.",
    2025-03-12, open): "Ryzen 3900x + rtx 3060 12gb", "Gemma-3-12b_Q5_K_M", build b4876; unquantized: ``llama-server
    -m …gemma-3-12b-it-Q5_K_M.gguf --n-gpu-layers -1 --batch_size 1024 --flash-attn -c 4000 --port 7777 -t 8 -ngl
    99``; "Prompt eval time is way slower when using quantized kv cache than standard kv cache. Also I see that the
    cpu is used when the quantized kv cache is turned on"; the quantized run, ``--cache-type-k q8_0 --cache-type-v
    q8_0 -c 8000``: "Without the flash attention flag it does not load at all". Verdict (JohannesGaessler, the CUDA
    backend's maintainer, 2025-03-16): "Head size 256 needs more registers than head size 128 and a quantized KV
    cache also needs more registers than an FP16 KV cache. If you combine the two the current kernel simply runs out
    of registers and the performance is effectively unusable which is why the CUDA backend does not support it";
    "still very relevant" (2025-08-28).

    The wrong turn, measured: a q8_0 K/V cache — taken to fit twice the context (8,000 cells) in the same memory —
    sent Gemma 3's attention (head size 256) to the CPU and made prompt processing unusable; without flash attention
    a quantized V cache does not load. The state is the page BEFORE it: ``-c 4000`` with the f16 cache, one slot, a
    long conversation filling 3,900 of its 4,000 cells, one request in flight. Arithmetic: Gemma-3-12B keeps 48
    layers × 8 KV heads × 256 × 2 (K and V) × 2 B = 384 KiB a cell in f16 — 1.5 GiB for 4,000 cells next to ~8.4 GB
    of ``Q5_K_M`` weights on the 12 GiB card; q8_0 (34 B per 32 elements) would halve it, which is the temptation.
    Must never: a cache-type turn (any direction: the report and the maintainer show q8_0 unusable for head size 256
    on CUDA, and f16 is what runs); more slots (one user) or replicas (one second of history).

    Not asserted: a context cap or a larger card (the thread measures neither); whether turning off flash attention
    with only the K cache quantized would serve (the maintainer's suggestion, not measured in the thread, and not a
    dial of the advisor's).

    Chosen where the report is silent: the moment — a conversation of ~3,900 tokens, its latest turn's prompt being
    evaluated (one ``llama_decode`` in the window), 30 earlier turns served with ~1,200 newly evaluated prompt tokens
    and ~300 generated each (the cached prefix of a conversation is not evaluated again); prompt processing at ~900
    tokens/s and decoding at ~28 tokens/s (35.7 ms a token: a 12B ``Q5_K_M`` on 360 GB/s); ``--parallel`` 1 (the
    default of early 2025); Gemma-3-12B-it as the model; the build of March 2025 (the KV gauges present). SLO: TTFT
    5 s, TPOT 0.1 s (what an interactive local user would accept; the decode meets it).
    """
    prompt, output, prompt_tps, tpot = 1_200.0, 300.0, 900.0, 1 / 28
    served = 30.0
    c1 = {
        "prompt": served * prompt,
        "prompt_s": served * prompt / prompt_tps,
        "gen": served * output,
        "gen_s": served * output * tpot,
        "decodes": served * (3 + output),
        "busy_avg": 1.0,
        "prompt_tps": prompt_tps,
        "gen_tps": 1 / tpot,
    }
    c2 = dict(c1, decodes=c1["decodes"] + 1)
    cells = 4_000.0
    return FieldState(
        id="llamacpp-3060-gemma3-12b-f16-kv-slot-full-never-quantize-kv",
        source="https://github.com/ggml-org/llama.cpp/issues/12352",
        engine_version="llama.cpp b4876 (March 2025; the 2025 rows, KV gauges present)",
        deployment={
            "name": "gemma3-12b-q5km-3060",
            "engine": "llamacpp",
            "model": "google/gemma-3-12b-it",
            "gguf_file_type": "Q5_K_M",
            "gpu": "rtx3060",
            "max_model_len": 4_000,
            "ctx_size": 4_000,
            "parallel": 1,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[
            (
                _llamacpp(_llamacpp_rows(c1, busy=1, deferred=0, kv=(3_900 / cells, 3_900.0))),
                _llamacpp(_llamacpp_rows(c2, busy=1, deferred=0, kv=(3_900 / cells, 3_900.0))),
            )
        ],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        must_never=[
            ("kv_cache_dtype", None),
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
        ],
    )


# --- 3. vLLM V1, Qwen3-235B-A22B BF16 at TP 4, four streams: the FP8 checkpoint measured worse ----------------------


def vllm_qwen3_235b_bf16_four_streams_no_fp8() -> FieldState:
    """vllm-project/vllm#25540 ("[Performance]: Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 performance is worse than
    Qwen/Qwen3-235B-A22B-Instruct-2507 (bf16)", 2025-09-24, open, labelled performance): ``vllm serve
    Qwen/Qwen3-235B-A22B-Instruct-2507 --tensor-parallel-size 4 --max-model-len 50000 --no-enable-prefix-caching``;
    ``vllm bench serve … --dataset-name random --random-input-len 10240 --random-output-len 1024 --ignore-eos
    --max-concurrency 4 --num-prompts 50``; BF16: "Benchmark duration (s): 213.98", "Request throughput (req/s):
    0.23", "Output token throughput (tok/s): 239.27", "Mean TTFT (ms): 1218.96"; the FP8 checkpoint, served and
    benchmarked alike, measured worse (the title).

    The wrong turn, measured: BF16 → the FP8 checkpoint at four streams of 10k-token prompts lowered the server's
    performance. The state is the page BEFORE it: BF16 at TP 4, four requests running, nothing waiting in the engine
    (the benchmark holds the rest client-side), the pool a quarter used. Arithmetic: 50 requests at concurrency 4 in
    214 s is 17.1 s a request; less the 1.22 s TTFT, 1,023 tokens in ~15.9 s: ~15.5 ms a token (239 tokens/s over
    four streams is 60 each). Must never: weight quantization (the measured loss); replicas (one second of history);
    more sequences (four in use, none waiting); a restart (tokens flow). Not asserted: by how much FP8 was worse (its
    figures were not returned with the thread), nor any turn that would speed the streams.

    Chosen where the report is silent: the GPU — H200 (BF16 Qwen3-235B is ~470 GB, ~118 GB a GPU at TP 4: no 80 GB card
    holds it; the report's host is an AWS instance, and p5en carries H200); Qwen/Qwen3-235B-A22B as the model (the
    tables' entry; the 2507 Instruct has its geometry: 94 layers, 4 KV heads of 128, 128 experts, 8 active), and with it
    ``max_model_len`` 40,960 (that entry's context; the report's 50,000 is the 2507's longer one — the requests' 11,264
    tokens fit either); ``gpu_memory_utilization`` 0.9 (the default); the pool 11,000 blocks of 16 (176,000 tokens: 47
    KiB a token per GPU in the ~8.3 GiB a GPU keeps of its 0.9 × 141 GB after ~117.5 GB of weights and ~1 GB of
    activations and graphs; an input, not asserted). History: 30
    requests served (finished by length: ``--ignore-eos``); the window: the four streams decode ~64 tokens each, one
    request finishes and the next is admitted (its 10,240-token prompt scheduled), and the request admitted before it
    gets its first token (TTFT 1.22 s). vLLM 0.10.2 (September 2025) with the 0.11 label set, ``enable_prefix_caching``
    False. SLO: TTFT 2 s; TPOT 12 ms — the reporter expected the FP8 checkpoint to be faster than the ~15.5 ms measured,
    so the target sits under it, where a tempted advisor would reach for lighter weights.
    """
    model = "Qwen/Qwen3-235B-A22B"
    blocks = 11_000
    tpot = 0.0155
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=40_960,
        gpu_memory_utilization=0.9,
        started=time.time() - 1_200.0,
    )
    eng.cache_labels["enable_prefix_caching"] = "False"
    eng.finish(30, prompt=10_240, output=1_024, ttft=1.22, tpot=tpot, queue=0.01, reason="length", max_tokens=1_024)
    eng.first_tokens([1.22] * 34)
    eng.prefill(34 * 10_240)
    eng.decode(30 * 1_024 + 4 * 500, tpot, steps=(30 * 1_024 + 4 * 500) / 4, batch=4)
    eng.running, eng.waiting, eng.kv_usage = 4.0, 0.0, 4 * (10_240 + 500) / (blocks * 16)
    first = eng.render()
    eng.finish(1, prompt=10_240, output=1_024, ttft=1.22, tpot=tpot, queue=0.01, reason="length", max_tokens=1_024)
    eng.first_tokens([1.22])
    eng.prefill(10_240)
    eng.decode(4 * 64, tpot, steps=64, batch=4)
    eng.kv_usage = (3 * (10_240 + 564) + 10_240) / (blocks * 16)
    return FieldState(
        id="vllm-h200-tp4-qwen3-235b-bf16-4-streams-fp8-measured-worse-never-quantize",
        source="https://github.com/vllm-project/vllm/issues/25540",
        engine_version="vLLM 0.10.2 (V1, September 2025; the 0.11 label set)",
        deployment={
            "name": "qwen3-235b-bf16-h200-tp4",
            "engine": "vllm",
            "model": model,
            "gpu": "h200",
            "tensor_parallel_size": 4,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 40_960,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.012, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 4, "requests_waiting": 0},
        must_never=[
            ("weight_quantization", None),
            ("replicas", "increase"),
            ("max_num_seqs", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_qwen2_1p5b_two_streams_no_medusa(),
    llamacpp_gemma3_12b_f16_slot_full(),
    vllm_qwen3_235b_bf16_four_streams_no_fp8(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
