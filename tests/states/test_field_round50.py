"""Field states, round 50: SGLang's prefill chunk as operators met it in 2026 — a one-GPU agent box whose 256-token
chunk makes a 79K-token cold prompt take 203 s (1,024 takes 133 s), and a GLM-5.2 deployment whose prefill stays at
~10K tokens/s whether ``--chunked-prefill-size`` is 16K or 32K — from two public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered through :class:`tests.states.SGLangEngine` (the 0.5.x scheduler and tokenizer families:
``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:token_usage``, ``sglang:max_total_num_tokens``,
``sglang:prompt_tokens_total`` … as ``python/sglang/srt/metrics/collector.py`` names them). The assertions come
from the reports' numbers and engine facts, never from the advisor's output:

* ``sglang-2026-gb10-chunk-256-cold-79k-prompt-203s`` — "At chunk 256 a single cold prefill runs ~389 tok/s";
  79,096 tokens in 203.2 s at 256, 133.2 s at 1,024 (594 tok/s). Must propose a larger step budget (SGLang's
  ``--chunked-prefill-size``); never a smaller one, more running requests, replicas, a pool turn or a restart.
* ``sglang-0.5.13-glm52-chunk-16k-32k-same-10k-input-tps`` — "always input tps :10k, my settings is no use (16K/32K
  all tryed)": a larger chunk does not raise a prefill that is already compute-bound. Never a larger step budget,
  replicas or a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from tests.states import SGLangEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all

SLO = {"ttft_seconds": 30.0, "tpot_seconds": 0.2, "target_ratio": 0.9}


def _gauges(eng: SGLangEngine, *, running: float, queue: float, used: float, gen: float) -> None:
    pool = eng.g["max_total_num_tokens"]
    eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = running, queue
    eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
    eng.g["kv_available_tokens"] = pool - used
    eng.g["token_usage"] = round(used / pool, 2)
    eng.g["full_token_usage"] = used / pool
    eng.g["gen_throughput"] = gen


# --- 1. SGLang on one GB10: a 256-token prefill chunk, a 79K-token cold prompt in 203 s -----------------------------


def sglang_gb10_chunk_256_cold_prefill() -> FieldState:
    """0xSero/GLM-5.3-Flash-DGX-Spark#1 ("Raise prefill chunk to 1024 (~1.5x cold-prefill speedup, measured)",
    open, 2026-09-16): "Raise the serving prefill chunk from **256 → 1024** tokens … ``--chunked-prefill-size``/
    ``--max-prefill-tokens`` ``256 → 1024``"; "At chunk 256 a single cold prefill runs ~389 tok/s, so an agent-scale
    prompt (tens of thousands of tokens) spends minutes pre-filling"; measured on one GB10, cache-cold prompts,
    ``max_tokens=1``: "256 (prior) | 79,096 | 203.2 s | 389" and "1024 | 79,096 | 133.2 s | 594"; "isolated
    39,828-token prompt at 1024 = 76.1 s (523 tok/s)"; "Step time grows with chunk size (256 tok in ≈0.8 s → 1024 tok
    in ≈1.9 s), so the gain is sub-linear. Decode is unchanged (~9 tok/s at ~190k context, context-bound)."

    Engine facts (SGLang ``scheduler.py``): a prompt longer than ``--chunked-prefill-size`` is prefilled that many
    tokens a forward pass; each pass pays the step's fixed cost (weights read, launches) whatever the chunk, so a
    small chunk spends a cold prompt's time on per-step overhead. Arithmetic: 79,096 ÷ 256 = 309 passes at ~0.66 s
    (203.2 s); at 1,024, 78 passes at ~1.7 s (133.2 s): 1.53× faster. The pool does not enter it (one session), and
    decode (~9 tokens/s at long context) is unchanged. So must propose a larger step budget
    (``max_num_batched_tokens`` increase: SGLang's ``--chunked-prefill-size``); must never: a smaller one (the report
    measures the cost of small chunks), more running requests (one agent, nothing queued), replicas (one second), a
    pool turn (one session holds ~20 % of the pool), a restart (it decodes), a context cap below the 79,096-token
    prompts (plus their answers); no stall claimed.

    Not asserted: tensor parallelism (a second Spark is possible; the thread does not weigh it), speculation.

    Chosen where the report is silent, and the stand-ins: GLM-5.3-Flash (an EXL3 build of SGLang) and the GB10 are
    not in the advisor's tables; Llama-3.1-8B-Instruct (``awq`` weights) on one RTX PRO 6000 Blackwell stands in, its
    131,072-token context holding the 79K prompts; the pool 400,000 tokens (an input); SGLang 0.5.10 exposition.
    History: 12 agent turns answered (79,096 prompt tokens each, TTFT ~203 s, ~600 generated at ~110 ms); the 13th
    turn's cold prompt fills the pool's first 79,096 slots. The window: its 203.2 s prefill ends (its first token),
    then 8 tokens at ~110 ms; nothing waits. SLO: TTFT 30 s, TPOT 0.2 s.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    pool, context, prompt = 400_000, 131_072, 79_096
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=context, swa_tokens=0)
    eng.finish(12, prompt=prompt, output=600, ttft=203.2, tpot=0.11, queue=0.05)
    eng.prompt["true"], eng.generation["true"] = 12 * float(prompt), 12 * 600.0
    eng.itl.observe(0.11, 12 * 599)
    _gauges(eng, running=1.0, queue=0.0, used=prompt, gen=0.0)
    first = eng.render()
    # the window: the running turn's 203.2 s cold prefill ends (its first token), then 8 tokens at ~110 ms
    eng.ttft["true"].observe(203.2)
    eng.itl.observe(0.11, 8)
    _gauges(eng, running=1.0, queue=0.0, used=prompt + 9.0, gen=9.0)
    return FieldState(
        id="sglang-2026-gb10-chunk-256-cold-79k-prompt-203s",
        source="https://github.com/0xSero/GLM-5.3-Flash-DGX-Spark/pull/1",
        engine_version="SGLang 0.5.x (EXL3 build, September 2026; 0.5.x exposition), --chunked-prefill-size 256",
        deployment={
            "name": "glm53-flash-gb10-chunk-256",
            "engine": "sglang",
            "engine_version": "0.5.10",
            "model": model,
            "quantization": "awq",
            "gpu": "rtx-pro-6000-blackwell",
            "max_model_len": context,
            "max_num_batched_tokens": 256,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_propose=[("max_num_batched_tokens", "increase")],
        must_never=[
            ("max_num_batched_tokens", "decrease"),
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            *POOL_TURNS,
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(prompt + 600)),
    )


# --- 2. SGLang 0.5.13, GLM-5.2 w4afp8: 16K or 32K chunks, the same ~10K prefill tokens/s ---------------------------


def sglang_glm52_chunk_16k_32k_same_input_tps() -> FieldState:
    """sgl-project/sglang#29358 ("[Bug] glm-5.2-w4afp8 --chunked-prefill-size 16384/32768 it not effect and gemm
    warmup slower", closed inactive, June 2026): "sglang 0.5.13.post1 glm-5.2-w4afp8"; "but any input/output (both
    1k/1k 8k/1k 64k/1k 200k/8k) all ``[2026-06-26 01:33:52 ATTN_CP7 TP7] Prefill batch, #new-seq: 1, #new-token:
    16384, #cached-token: 0, token usage: 0.75, #running-req: 3, #queue-req: 10, #pending-token: 92550, cuda graph:
    False, input throughput (token/s): 10069.28``"; "bug1: always input tps :10k, my settings is no use(16K/32K all
    tryed)".

    Engine facts (SGLang ``scheduler.py``): ``--chunked-prefill-size`` bounds the tokens a prefill pass takes; a pass
    of 16,384 tokens of a large MoE already fills the GPUs' compute, so a larger chunk takes proportionally longer and
    the prefill rate stays where it is — the report measures exactly that (10K tokens/s at 16K and at 32K). The larger
    chunk only lengthens every running request's pause for it. So must never: a larger step budget
    (``max_num_batched_tokens`` increase: measured to change nothing), replicas (one second), a restart (it
    prefills 10K tokens a second); no stall claimed.

    Not asserted: a pool turn or more TP (10 wait beside a pool at 0.75 — the thread does not say what holds them),
    a smaller chunk (it would shorten decode pauses; not measured).

    Chosen where the report is silent, and the stand-ins: GLM-5.2 is not in the advisor's tables; DeepSeek-V3 (a
    large MLA MoE, fp8) stands in at TP 8 on H200 (the log's TP7 is the eighth rank; the GPU is not named); the pool
    262,144 tokens (an input); the 64k/1k run: 3 running hold ~196,600 tokens (0.75), 10 prompts of 65,536 wait.
    History: 30 requests answered (TTFT ~20 s, ~1,000 generated at ~60 ms). The window: one 16,384-token pass at
    ~10,069 tokens/s, the three running decode ~16 tokens each. SGLang 0.5.13.post1 with the 0.5.x exposition. SLO:
    TTFT 30 s, TPOT 0.2 s.
    """
    model = "deepseek-ai/DeepSeek-V3"
    pool, context = 262_144, 163_840
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=context, swa_tokens=0)
    eng.finish(30, prompt=65_536, output=1_000, ttft=20.0, tpot=0.06, queue=12.0)
    eng.prompt["true"], eng.generation["true"] = 30 * 65_536.0, 30 * 1_000.0
    eng.ttft["true"].observe_many([19.0, 20.0, 21.0])
    eng.itl.observe(0.06, 30 * 999 + 3 * 400)
    used = 196_600.0
    _gauges(eng, running=3.0, queue=10.0, used=used, gen=50.0)
    first = eng.render()
    eng.itl.observe(0.06, 3 * 16)
    _gauges(eng, running=3.0, queue=10.0, used=used + 48.0, gen=50.0)
    return FieldState(
        id="sglang-0.5.13-glm52-chunk-16k-32k-same-10k-input-tps",
        source="https://github.com/sgl-project/sglang/issues/29358",
        engine_version="SGLang 0.5.13.post1 (0.5.x exposition), --chunked-prefill-size 16384",
        deployment={
            "name": "glm52-w4afp8-tp8",
            "engine": "sglang",
            "engine_version": "0.5.13",
            "model": model,
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "max_model_len": context,
            "max_num_batched_tokens": 16_384,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 3, "requests_waiting": 10, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("max_num_batched_tokens", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    sglang_gb10_chunk_256_cold_prefill(),
    sglang_glm52_chunk_16k_32k_same_input_tps(),
]

XFAIL: dict[str, str] = {
    "sglang-2026-gb10-chunk-256-cold-79k-prompt-203s": (
        "advisor/rules/goodput.py (goodput_below_target) sees the 203 s TTFT against a 30 s target but withholds with "
        "'no dial turn to suggest': it has no step-budget increase (SGLang --chunked-prefill-size) for a 256-token "
        "chunk; the only max_num_batched_tokens turn in advisor/rules/common.py is a vLLM decrease"
    ),
}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
