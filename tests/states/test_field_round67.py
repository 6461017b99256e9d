"""Field states, round 67: dials an operator turned the wrong way and measured worse — tensor parallelism raised on a
single-stream gpt-oss-120b (90 → 77–78 tokens/s) and EAGLE speculation enabled under a saturating load (0.62 → 0.52
requests/s) — each rendered as the page BEFORE that turn, from two public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes one
second apart rendered as that engine prints them: vLLM through :class:`tests.states.VLLMEngine` (V1; the 0.11 label
set for the 2025 releases, as rounds 61 and 63 do), SGLang 0.4.x through
:func:`tests.states.test_field_round62._sglang_0410_page` (the scheduler gauges and tokenizer counters of
``metrics/collector.py`` with ``engine_type``/``model_name`` labels, no ``max_total_num_tokens`` gauge before 0.5.23,
catalog §2.1; the tokenizer's latency histograms are not rendered, as round 62 and ``test_field_config`` do not). The
assertions come from the reports' numbers and the verdict each thread establishes, never from the advisor's output:

* ``vllm-0.10-gpt-oss-120b-a100-tp1-90-tps-never-raise-tp`` — vllm-project/vllm#22331 (a comment quoted on 2025-08-28):
  gpt-oss-120b on A100 80GB "fully NVlink", ``vllm/vllm-openai:gptoss``, "For TP=1, I get 90 tps. For TP=2/4, I get
  77-78 tps"; the reply: "similar with 120B on 2 devices … if local expert count per device is small, the MoE layer
  start to slow down". Before the turn: TP 1, one stream at 90 tokens/s. Must never propose more TP (measured 13–14 %
  slower at 2 and 4); never replicas, more sequences, a pool turn or a restart (one stream, the pool nearly empty). It
  failed when written: the goodput rule crashed on the mxfp4 checkpoint (no deployment printed) and, past the crash,
  proposed TP 1→2; the crash was fixed, and since 2026-12-07 ``goodput_below_target`` lists the small-batch TP turn
  withheld (``advisor.rules.goodput.SMALL_BATCH_TP_WITHHELD``: no report collected measured it winning).
* ``sglang-0.4.7-h20-tp2-llama2-70b-saturated-never-enable-eagle`` — sgl-project/sglang#6995 ("optimize speculative
  decoding with high throughput", June 2025): Llama-2-70b-chat on H20 at TP 2, 500 requests of 1024/1024 tokens
  (range ratio 0.7): "without speculative decoding: throughput: 0.62 req/s"; EAGLE (2 steps, topk 4, 4 draft tokens)
  0.52 req/s, EAGLE (1, 2, 2) 0.56 req/s. Before the turn: the plain server saturated. Must never propose enabling
  speculative decoding (measured 10–16 % fewer requests a second); never replicas (one second of history).

Two rows, not three: within the round's time limit no third unused report was found whose wrong turn the two scrapes
and the deployment can show and whose engine version can be rendered (candidates set aside: vllm-project/vllm#48786 —
Qwen3.5-35B-A3B, a hybrid model outside the advisor's tables; #19186 and #1298 — no readable load or numbers, the
latter from vLLM 0.2; #16300 — vLLM 0.7.2's V0 engine and an offline latency benchmark; sgl-project/sglang#9783 — an
fp8-KV accuracy drop the thread traces to a backend kernel, not the dial; Tencent/AngelSlim#163, SpecForge#339,
llama.cpp#27342, sglang#6949 and vllm#17598, #19254, #42058 — already rows of earlier rounds).

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round62 import _sglang_0410_page

# --- 1. vLLM (gptoss image), gpt-oss-120b on one A100: one stream at 90 tokens/s; TP 2/4 measured slower ----------


def vllm_gpt_oss_120b_a100_tp1_single_stream() -> FieldState:
    """vllm-project/vllm#22331 ("vllm/vllm-openai:gptoss AssertionError: Sinks are only supported in FlashAttention 3
    (4090 48gb)", open), a comment quoted in jkyamog's reply of 2025-08-28: "What I use is A100 80GB + fully NVlink";
    ``docker run … --env "VLLM_ATTENTION_BACKEND=TRITON_ATTN_VLLM_V1" … vllm/vllm-openai:gptoss --served-model-name
    gptoss-120b --tensor-parallel-size=2 --model openai/gpt-oss-120b``; "For TP=1, I get 90 tps. For TP=2/4, I get
    77-78 tps. Is there any hidden setting to allow me to tune performance?". jkyamog: "90 tps for 120B is about
    similar to what I got 88 tps"; the commenter: "Yes, similar with 120B on 2 devices, 20B on single A100 is also
    slow (32 experts for 20B). Looks like if local expert count per device is small, the MoE layer start to slow
    down".

    The wrong turn, measured: tensor parallelism 1 → 2 or 4 on NVLinked A100s cut one stream from 90 to 77–78
    tokens/s (−13 to −14 %). The state is the page BEFORE it: TP 1, one request at a time, 90 tokens/s (11.1 ms a
    token), the pool nearly empty, nothing waiting. Must never: more TP (the measured loss); replicas (one second of
    history, one stream); more sequences (one is in use); a pool turn (the pool is nearly empty); a restart (tokens
    flow). Not asserted: what would speed the stream (the thread names nothing that did); speculative decoding either
    way (not measured) — hence no ``no_advice``.

    Chosen where the report is silent: the pool, 22,000 blocks of 16 (352,000 tokens, as round 45 for gpt-oss-120b on
    one A100 at 0.9; an input, not asserted); ``gpu_memory_utilization`` 0.9 (the image's default); ``max_model_len``
    8,192; a chat turn of ~1,000 prompt tokens and ~600 out, TTFT 0.3 s. History: 60 such requests one after another;
    the window: the stream finishes, the next is admitted, 90 tokens decoded. The ``gptoss`` image (vLLM 0.10.1 of
    August 2025) rendered with the 0.11 label set. SLO: TTFT 1 s; TPOT 10 ms — the reporter asks for more than the 90
    tokens/s measured (11.1 ms), so the target sits just past it, where a tempted advisor would reach for TP.
    """
    model = "openai/gpt-oss-120b"
    blocks = 22_000
    itl = 1 / 90
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=8_192,
        gpu_memory_utilization=0.9,
        started=time.time() - 1_800.0,
    )
    eng.finish(60, prompt=1_000, output=600, ttft=0.3, tpot=itl, queue=0.002)
    eng.first_tokens([0.3] * 61)
    eng.prefill(61 * 1_000)
    eng.decode(60 * 600 + 200, itl, steps=60 * 599 + 200, batch=1)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 1_200 / (blocks * 16)
    first = eng.render()
    eng.finish(1, prompt=1_000, output=600, ttft=0.3, tpot=itl, queue=0.002)
    eng.first_tokens([0.3])
    eng.prefill(1_000)
    eng.decode(90, itl, steps=90, batch=1)
    eng.kv_usage = 1_090 / (blocks * 16)
    return FieldState(
        id="vllm-0.10-gpt-oss-120b-a100-tp1-90-tps-never-raise-tp",
        source="https://github.com/vllm-project/vllm/issues/22331",
        engine_version="vLLM 0.10.1 (vllm/vllm-openai:gptoss image; V1, 0.11 label set)",
        deployment={
            "name": "gpt-oss-120b-a100-tp1",
            "engine": "vllm",
            "model": model,
            "gpu": "a100-80gb",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_192,
            "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.010, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        must_never=[
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            ("max_num_seqs", "increase"),
            *POOL_TURNS,
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. SGLang 0.4.7, Llama-2-70B on 2×H20: saturated by 500 requests; EAGLE measured fewer requests a second --------


def sglang_h20_llama2_70b_saturated_no_eagle() -> FieldState:
    """sgl-project/sglang#6995 ("optimize speculative decoding with high throughput", 2025-06-09, open), by the
    contributors of SGLang's EAGLE worker: "target_model:meta-llama/Llama-2-70b-chat-hf draft_model:
    lmsys/sglang-EAGLE-llama2-chat-70B H20 / TP2 with 500 requests, input/output/ratio 1024/1024/0.7"; "without
    speculative decoding: throughput: 0.62 req/s"; "eagle: 1. --speculative-num-steps 2 --speculative-eagle-topk 4
    --speculative-num-draft-tokens 4 throughput：0.52 req/s 2. --speculative-num-steps 1 --speculative-eagle-topk 2
    --speculative-num-draft-tokens 2 throughput： 0.56req/s"; the PR's own scheme ("naive spec") 0.68 req/s.

    The wrong turn, measured: EAGLE enabled on a server saturated by 500 requests lost 10–16 % of its requests a
    second (0.62 → 0.52 and 0.56). The state is the page BEFORE it: the plain server under that load. Arithmetic:
    ratio 0.7 draws lengths in [717, 1,024], ~870 in and ~870 out per request; 0.62 requests/s is ~540 output tokens
    a second. Must never: enabling speculative decoding (the measured loss: at this load the verification steals the
    compute the batch already uses); replicas (one second of history). Not asserted: the PR's "naive spec" (a scheme
    of that unmerged PR, no dial of the release); a pool or batch turn (the report measures none; 500 requests at
    once overrun any pool).

    Chosen where the report is silent: SGLang 0.4.7 (June 2025; the 0.4.10 exposition, which has the same gauges and
    counters); Llama-2-70b-hf (the tables' entry; the chat fine-tune has its geometry), ``max_model_len`` 4,096 (the
    model's), ``mem_fraction_static`` 0.87 (SGLang 0.4's default at TP 2); the pool ~89,000 tokens (0.87 of the
    H20's 89.4 GiB less ~64 GiB of bf16 weights per GPU, at 160 KiB a token per GPU; not asserted); bench_serving's
    default request rate (all 500 at once): ~48 running on a 95 %-used pool, the rest queued; 200 requests answered
    before. The window: ~540 tokens generated (the ``gen_throughput`` gauge); one request finishes and one is admitted
    (SGLang 0.4's tokenizer counts a request's prompt and generated tokens when it finishes).
    """
    model = "meta-llama/Llama-2-70b-chat-hf"
    cap = 89_000.0
    first = _sglang_0410_page(
        model, running=48, queued=252, used=84_600, cap=cap, gen_tps=540.0, prompt=200 * 870.0,
        gen=200 * 870.0, reqs=200, hit=0.0,
    )  # fmt: skip
    second = _sglang_0410_page(
        model, running=48, queued=251, used=84_700, cap=cap, gen_tps=538.0, prompt=201 * 870.0,
        gen=201 * 870.0, reqs=201, hit=0.0,
    )  # fmt: skip
    return FieldState(
        id="sglang-0.4.7-h20-tp2-llama2-70b-saturated-never-enable-eagle",
        source="https://github.com/sgl-project/sglang/pull/6995",
        engine_version="SGLang 0.4.7 (0.4.10 exposition; no max_total_num_tokens gauge)",
        deployment={
            "name": "llama2-70b-chat-h20-tp2",
            "engine": "sglang",
            "model": "meta-llama/Llama-2-70b-hf",
            "gpu": "h20",
            "tensor_parallel_size": 2,
            "mem_fraction_static": 0.87,
            "max_model_len": 4_096,
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 48, "requests_waiting": 251},
        must_never=[
            ("speculative_decoding", "enable"),
            ("replicas", "increase"),
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_gpt_oss_120b_a100_tp1_single_stream(),
    sglang_h20_llama2_70b_saturated_no_eagle(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
