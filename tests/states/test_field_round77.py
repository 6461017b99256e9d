"""Field states, round 77: two SGLang pages where an EAGLE-3 draft made decoding slower than the base model — a
Qwen3-30B-A3B stream at ~60 tokens/s with the draft against ~130 without (SGLang 0.4.9.post2) and Qwen3-235B-A22B
at TP 8 on 8 × H100 serving 48 parallel GSM8K questions, "with speculative the throughput were slower" than 939.76
tokens/s — and a llama.cpp server whose 32 slots of ~20,000-token prompts decoded at 1.42 tokens/s each on the
unified KV cache, from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine prints them: SGLang through :class:`tests.states.SGLangEngine` (the 0.5.x
exposition) plus its speculative gauges (:func:`tests.states.test_field_round11.sglang_spec_lines`), llama.cpp
through :func:`tests.states.test_field_round3_others._llamacpp`. The assertions come from the reports' numbers and
the verdict each thread establishes, never from the advisor's output:

* ``sglang-0.4.9-qwen3-30b-a3b-angelslim-eagle3-60-vs-130-tps-disable-speculation`` — Tencent/AngelSlim#9 ("Unable
  to replicate the performance of Qwen3 A3B eagle3", July 2025): "Without eagle3: ~130 tokens/s; With eagle3: ~60
  tokens/s", SGLang 0.4.9.post2, ``--speculative-num-steps 6 --speculative-eagle-topk 10
  --speculative-num-draft-tokens 32``; the maintainers: "the acceptance length and acceleration fall short"; they
  will retrain the draft. Must propose speculation off; never enable it, replicas or a restart.
* ``sglang-8xh100-tp8-qwen3-235b-a22b-eagle3-48-parallel-slower-disable-speculation`` — sgl-project/SpecForge#164
  ("Qwen3 throughput lower with speculative added", August 2025): ``Qwen/Qwen3-235B-A22B`` with
  ``lmsys/Qwen3-235B-A22B-EAGLE3`` on 8 × H100 80GB, TP 8, ``--enable-ep-moe``; without speculation GSM8K at
  ``--parallel 48`` ran at 939.759 tokens/s; "with speculative the throughput were slower". Must propose speculation
  off; never enable it, replicas or a restart.
* ``llamacpp-6x4090-llama3.2-1b-32-slots-20k-prompts-1.42-tps-per-slot-never-more-slots`` — ggml-org/llama.cpp#14363
  ("llama : add high-throughput mode", merged July 2025), the author's ``server-bench.py`` run on master: Llama 3.2
  1B Instruct Q4_K_M on 6 × RTX 4090, average prompt 19,855 tokens, "Average generation speed per slot: 1.42 tokens/s
  / slot", 45.32 tokens/s in total, prompt speed 195.68 tokens/s; the PR's per-sequence KV cache took the same run
  to 143.66 tokens/s and 810.16. Never more slots, replicas or a restart.

All three rows pass today: ``speculative_decoding`` proposes turning speculation off on both SGLang pages (its
roofline bounds the 48-stream draft at 1.14× and reads 0.47× measured), and nothing proposes more slots for the
llama.cpp server.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from tests.states import SGLangEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import _llamacpp, _llamacpp_rows
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round11 import sglang_spec_lines

# --- 1. SGLang 0.4.9.post2, Qwen3-30B-A3B with an AngelSlim EAGLE-3 draft: ~60 tokens/s against ~130 without --------


def sglang_qwen3_30b_a3b_angelslim_eagle3_one_stream() -> FieldState:
    """Tencent/AngelSlim#9 ("Unable to replicate the performance of Qwen3 A3B eagle3", johnsbucket, 2025-07-15, open):
    "Poor performance with Qwen3 A3B eagle3. Without eagle3: ~130 tokens/s; With eagle3: ~60 tokens/s; sglang
    version: 0.4.9.post2"; launched with ``python3 -m sglang.launch_server --model-path Qwen--Qwen3-30B-A3B
    --reasoning-parser qwen3 --tool-call-parser qwen25 --attention-backend fa3 --speculative-algorithm EAGLE3
    --speculative-draft-model-path AngelSlim--Qwen3-a3B_eagle3 --speculative-num-steps 6 --speculative-eagle-topk 10
    --speculative-num-draft-tokens 32``. The maintainers (liusong1222, 2025-07-17): "Our performance benchmarks were
    obtained using PyTorch code. After reproducing the tests in sglang, we observed that the acceptance length and
    acceleration fall short of PyTorch's results. We plan to train the A3B Eagle3 model with more data".

    The verdict the report's numbers establish: on the same server and model, the draft halved the stream's speed
    (~60 against ~130 tokens/s: 0.46×), and the maintainers' answer is a better draft, not a setting of this one.
    Arithmetic: ~130 tokens/s is ~7.7 ms a token without speculation; ~60 is ~16.7 ms with it. Each round drafts 6
    steps over a top-10 tree and verifies 32 tokens in one target pass — on a 128-expert MoE each verified token
    routes to its own 8 experts, so the pass reads far more expert weights than a plain step — and returns only the
    accepted prefix plus one. At 16.7 ms a token a round returning ~2 tokens costs ~33 ms, four plain steps. Must
    propose turning speculation off (the measured base speed is 2.2× the speculative one). Must never: enable it (it
    runs); replicas (one stream; one second of history); a restart (tokens move).

    Not asserted: a shorter or narrower draft (the thread measured only this shape), a pool turn.

    Chosen where the report is silent: the GPU — one ``h100-sxm`` (``--attention-backend fa3`` is Hopper's; no TP
    given: TP 1); the pool, 200,000 tokens (0.88 of 80 GB less 61 GB of bf16 weights and the draft at 48 KiB a token
    — 48 layers × 4 KV heads × 128 × 2 × 2 B; an input); the acceptance length 2.0 tokens a round (SGLang's gauge
    counts the bonus token; the maintainers say only that it "falls short"); the load — one chat stream at a time,
    ~150 prompt and ~800 generated tokens (a reasoning answer), TTFT 0.15 s, 12 answered; the window: the 13th
    answer's last 60 tokens decode and it finishes, the 14th question is admitted. SGLang 0.4.9.post2 (July 2025)
    replayed with the 0.5.x exposition. SLO: TTFT 2 s, TPOT 12 ms — between the base model's 7.7 ms and the
    speculative 16.7 ms.
    """
    model = "Qwen/Qwen3-30B-A3B"
    pool = 200_000
    prompt, output, tpot = 150.0, 800.0, 1 / 60.0
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=40_960, swa_tokens=0)

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 1.0, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 6)
        eng.g["gen_throughput"] = 60.0

    eng.finish(12, prompt=prompt, output=output, ttft=0.15, tpot=tpot, queue=0.0)
    eng.prompt["true"], eng.generation["true"] = 13 * prompt, 12 * output
    eng.itl.observe(tpot, 12 * (output - 1) + 300)
    gauges(prompt + 740.0)
    spec = sglang_spec_lines(eng, 2.0, 32.0, 6.0)
    first = eng.render() + spec
    # the window: the 13th answer's last 60 tokens, then the 14th question (prefilled, first token out)
    eng.finish(1, prompt=prompt, output=output, ttft=0.15, tpot=tpot, queue=0.0)
    eng.prompt["true"] += prompt
    eng.generation["true"] += output
    eng.itl.observe(tpot, 60)
    gauges(prompt + 1.0)
    return FieldState(
        id="sglang-0.4.9-qwen3-30b-a3b-angelslim-eagle3-60-vs-130-tps-disable-speculation",
        source="https://github.com/Tencent/AngelSlim/issues/9",
        engine_version="SGLang 0.4.9.post2 (July 2025), replayed with the 0.5.x exposition and speculative gauges",
        deployment={
            "name": "qwen3-30b-a3b-sglang-eagle3",
            "engine": "sglang",
            "engine_version": "0.4.9",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 1,
            "max_model_len": 40_960,
            "speculative_decoding": True,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.012, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render() + spec)],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_propose=[("speculative_decoding", "disable")],
        must_never=[("speculative_decoding", "enable"), ("replicas", "increase"), RESTART],
        extra_check=no_stall_claimed,
    )


# --- 2. SGLang (Aug 2025), Qwen3-235B-A22B at TP 8 on 8 × H100, EAGLE-3 at 48 parallel: slower than 939.76 tokens/s


def sglang_qwen3_235b_tp8_eagle3_48_parallel() -> FieldState:
    """sgl-project/SpecForge#164 ("Qwen3 throughput lower with speculative added", etwk, 2025-08-21, open): "I tried
    ``Qwen/Qwen3-235B-A22B`` with ``lmsys/Qwen3-235B-A22B-EAGLE3``, with speculative the throughput were slower";
    "GPU: 8 x NVIDIA H100 80GB HBM3", ``lmsysorg/sglang:dev``; without speculation: ``python3 -m
    sglang.launch_server --model /data/models/Qwen/Qwen3-235B-A22B --mem-fraction-static 0.75 --tp 8 --context-length
    8192 --enable-ep-moe … --dtype bfloat16``; "python benchmarks/run_gsm8k.py --num-questions 1000 --parallel 48:
    Accuracy: 0.950 … Latency: 147.472 s, Output throughput: 939.759 token/s, Accept length: 1.000" (and HumanEval
    1103.382 token/s); with speculation the same launch plus ``--speculative-algorithm EAGLE3
    --speculative-draft-model-path /data/models/lmsys/Qwen3-235B-A22B-EAGLE3 --speculative-num-steps 5
    --speculative-eagle-topk 8 --speculative-num-draft-tokens 32``.

    The verdict the report establishes: on the same eight GPUs, model and benchmarks, the published EAGLE-3 draft made
    the server slower than the base model's 939.76 tokens/s at 48 parallel questions. Arithmetic: 939.76 tokens/s over
    48 streams is ~51 ms a token; each speculative round verifies 32 tree tokens for each of the 48 sequences (1,536
    tokens a pass, a prefill-sized batch on 22B active parameters routed to up to 8 of 128 experts each), so at this
    batch the verification is no longer the price of one decode step, and the accepted prefix does not repay it. Must
    propose turning speculation off (the base model is the faster configuration measured). Must never: enable it (it
    runs); replicas (one second of history); a restart (tokens move).

    Not asserted: a shorter draft (not measured), a sequence-cap or pool turn (the thread measured neither).

    Chosen where the report is silent: the speculative run's throughput — 700 tokens/s (the report says only
    "slower" than 939.76; its figure was not returned), so TPOT 68.6 ms at 48 streams; the acceptance length 2.4 tokens
    a round; the pool, 60,000 tokens (``--mem-fraction-static 0.75`` leaves each GPU ~1–2 GB past its ~59 GB of bf16
    weights and the draft; 94 layers × 4 KV heads × 128 × 2 × 2 B, one KV head a GPU at TP 8: 47 KiB a token a GPU; an
    input); GSM8K's ~230 prompt tokens (few-shot questions) and ~250 generated; 48 running, none queued (the client's
    ``--parallel 48``), 40 % of the pool held; 400 answered; the window: 1 answered and 1 admitted, 700 tokens decoded.
    ``engine_version`` 0.5.0 stands in for the ``lmsysorg/sglang:dev`` image of August 2025, replayed with the 0.5.x
    exposition. SLO: TTFT 2 s, TPOT 60 ms — between the base model's ~51 ms and the speculative 68.6 ms.
    """
    model = "Qwen/Qwen3-235B-A22B"
    pool = 60_000
    running, prompt, output, tps = 48.0, 230.0, 250.0, 700.0
    tpot = running / tps
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=8_192, swa_tokens=0)

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = running, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 4)
        eng.g["gen_throughput"] = tps

    eng.finish(400, prompt=prompt, output=output, ttft=0.4, tpot=tpot, queue=0.0)
    eng.prompt["true"], eng.generation["true"] = 448 * prompt, 400 * output + 48 * 125.0
    eng.itl.observe(tpot, 400 * (output - 1) + 48 * 124)
    gauges(0.40 * pool)
    spec = sglang_spec_lines(eng, 2.4, 32.0, 5.0)
    first = eng.render() + spec
    eng.finish(1, prompt=prompt, output=output, ttft=0.4, tpot=tpot, queue=0.0)
    eng.prompt["true"] += prompt
    eng.generation["true"] += tps
    eng.itl.observe(tpot, round(tps))
    gauges(0.405 * pool)
    return FieldState(
        id="sglang-8xh100-tp8-qwen3-235b-a22b-eagle3-48-parallel-slower-disable-speculation",
        source="https://github.com/sgl-project/SpecForge/issues/164",
        engine_version="SGLang dev image of August 2025 (0.5 line), replayed with the 0.5.x exposition",
        deployment={
            "name": "qwen3-235b-sglang-8xh100-eagle3",
            "engine": "sglang",
            "engine_version": "0.5.0",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 8,
            "mem_fraction_static": 0.75,
            "max_model_len": 8_192,
            "speculative_decoding": True,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.06, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render() + spec)],
        snapshot={"requests_running": 48, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_propose=[("speculative_decoding", "disable")],
        must_never=[("speculative_decoding", "enable"), ("replicas", "increase"), RESTART],
        extra_check=no_stall_claimed,
    )


# --- 3. llama.cpp master (July 2025), Llama 3.2 1B on 6 × RTX 4090: 32 slots of ~20k-token prompts, 1.42 tokens/s each


def llamacpp_32_slots_long_prompts_unified_kv() -> FieldState:
    """ggml-org/llama.cpp#14363 ("llama : add high-throughput mode", ggerganov, merged July 2025), JohannesGaessler's
    measurement (2025-07-16): "I did some more performance testing using the new ``server-bench.py`` script, I used
    the command ``LLAMA_ARG_MODEL=/opt/models/llama_3.2_instruct-1b-q4_k_m.gguf python3 server-bench.py --path_server
    …/llama-server --prompt_source rng-1024-40000`` in conjunction with 6x RTX 4090 (frequency limited to 1350 MHz).
    With master I get: Benchmark duration: 3393.22 s; Request throughput: 0.03 requests/s = 1.77 requests/min; Total
    prompt length: 1985544 tokens; Average prompt length: 19855.44 tokens; Average prompt latency: 101467.55 ms;
    Average prompt speed: 195.68 tokens/s; Total generated tokens: 153785; Average generation depth: 20717.69 tokens;
    Average total generation speed: 45.32 tokens/s; Average generation speed per slot: 1.42 tokens/s / slot". "With
    this PR I get: Benchmark duration: 989.57 s; Request throughput: 0.10 requests/s = 6.06 requests/min … Average
    prompt latency: 24507.98 ms; Average prompt speed: 810.16 tokens/s … Average total generation speed: 143.66".

    The verdict the report establishes: the same build flags, GPUs, model and prompts ran 3.2× faster in total (45.32
    → 143.66 tokens/s) and prefilled 4.1× faster (195.68 → 810.16) once each sequence got its own KV cache instead of
    one unified cache that every sequence's attention spans. 45.32 ÷ 1.42 = 32 slots decoding at once; on master each
    step attends over the unified cache all 32 slots share (~32 × 20,700 = ~660,000 cells), so a 1B model decodes at
    1.42 tokens/s a slot. Engine fact: a larger ``--parallel`` grows that shared cache and every slot's step with it
    (ggml-org/llama.cpp#7802, ggerganov: "To some extend it is expected because the KV cache size grows with each new
    sequence in a new slot"). Must never: more slots (``max_num_seqs`` increase: more sequences in the same unified
    cache, the cost the PR removed); replicas (one second of history); a restart (tokens move).

    Not asserted: fewer slots (not measured), the PR's per-sequence KV mode (``--kv-unified`` off; the advisor has no
    such dial), any pool turn.

    Chosen where the report is silent: the model — ``meta-llama/Llama-3.2-1B-Instruct`` (the tables' entry for the
    report's Q4_K_M GGUF); the GPU ``rtx4090`` (one of the six; the server splits the 1B model's layers across them);
    ``--parallel`` 32 (45.32 ÷ 1.42), ``--ctx-size`` 1,310,720 (32 × 40,960, the benchmark's longest prompt, in one
    unified cache); no KV gauges (master of July 2025 exposes none); the lifetime counters — 40 requests answered over
    the first ~1,350 s (0.03 requests/s), 794,200 prompt tokens at 195.68 tokens/s, 61,200 generated at 45.32; the
    window: 45 tokens generated across the 32 busy slots, 200 prompt tokens of a newly admitted request processed,
    none deferred. SLO: TTFT 30 s, TPOT 0.5 s (a batch benchmark's, looser than the 0.7 s a token the page shows).
    """
    decodes = 61_200 / 32
    c1 = {"prompt": 794_200.0, "prompt_s": 794_200 / 195.68, "gen": 61_200.0, "gen_s": 61_200 / 1.42 / 32}
    c1 |= {"decodes": decodes, "busy_avg": 32.0, "prompt_tps": 195.68, "gen_tps": 1.42}
    c2 = dict(c1)
    c2["prompt"] += 200.0
    c2["prompt_s"] += 200.0 / 195.68
    c2["gen"] += 45.0
    c2["gen_s"] += 45.0 / 1.42 / 32
    c2["decodes"] += 45.0 / 32
    return FieldState(
        id="llamacpp-6x4090-llama3.2-1b-32-slots-20k-prompts-1.42-tps-per-slot-never-more-slots",
        source="https://github.com/ggml-org/llama.cpp/pull/14363",
        engine_version="llama.cpp master of July 2025 (no KV metrics)",
        deployment={
            "name": "llamacpp-llama32-1b-32-slots",
            "engine": "llamacpp",
            "model": "meta-llama/Llama-3.2-1B-Instruct",
            "gpu": "rtx4090",
            "max_model_len": 40_960,
            "ctx_size": 1_310_720,
            "parallel": 32,
            "kv_unified": True,
            "slo": {"ttft_seconds": 30.0, "tpot_seconds": 0.5, "target_ratio": 0.9},
        },
        scrapes=[
            (
                _llamacpp(_llamacpp_rows(c1, busy=32, deferred=0, kv=None)),
                _llamacpp(_llamacpp_rows(c2, busy=32, deferred=0, kv=None)),
            )
        ],
        snapshot={"requests_running": 32, "requests_waiting": 0},
        must_never=[("max_num_seqs", "increase"), ("replicas", "increase"), RESTART],
        extra_check=no_stall_claimed,
    )


STATES = [
    sglang_qwen3_30b_a3b_angelslim_eagle3_one_stream(),
    sglang_qwen3_235b_tp8_eagle3_48_parallel(),
    llamacpp_32_slots_long_prompts_unified_kv(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
