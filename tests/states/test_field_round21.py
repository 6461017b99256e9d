"""Field states, round 21: an EAGLE-3 draft slower than plain decoding on a 3B-active MoE, a context length the pool
cannot hold, and a step budget that refuses every prompt longer than itself, from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as the engine prints them: SGLang through :class:`tests.states.SGLangEngine` (0.5.x
scheduler and tokenizer families) plus its speculative gauges
(:func:`tests.states.test_field_round11.sglang_spec_lines`), ``trtllm-serve`` through
:class:`tests.states.test_field_round4_others.TRTLLMServe` restricted to the five request families 1.1.0rc5 exposes
(catalog §4.2). The assertions come from the reports' numbers, the fix each thread
establishes and engine facts, never from the advisor's output:

* ``sglang-qwen3-30b-a3b-eagle3-bs1-160-vs-222-tps`` — EAGLE-3 on Qwen3-30B-A3B (TP 2, 2 × H100): one stream at
  159.8 tokens/s with 1.86 tokens a round, against 222.5 without speculation; every draft shape measured loses, at
  batch 1 (best 207.6) and at batch 4 (447.9 against 566.2). Propose turning speculation off; never enable it,
  replicas, a pool turn, a sequence-cap turn or a restart.
* ``sglang-dsr1-context-163840-pool-59868-160k-input-refused`` — DeepSeek-R1 at TP 8 with ``--context-length
  163840``: SGLang refuses a 160,062-token input, "exceeds the maximum allowed length (59862 tokens)", because a
  request may not exceed the KV pool (59,868 tokens). The thread's fix is a larger pool (more GPUs). Propose a turn
  that grows the pool; never replicas (each has the same pool), more sequences, less TP or memory, a restart.
* ``trtllm-serve-qwen3-32b-max-num-tokens-8192-refuses-long-inputs`` — ``trtllm-serve`` (PyTorch backend) with
  ``--max_num_tokens 8192`` and chunked prefill off: "maxInputLen: 8192 = min(maxSequenceLen - 1, maxNumTokens)",
  every longer prompt refused though the model serves 40,960. The fix the project shipped is chunked prefill
  (PR #9499: "Long sequences that exceed max_num_tokens will be automatically chunked instead of throwing an
  error"). Propose chunked prefill or a larger step budget; never a smaller step budget, a context cap below 8,192,
  replicas or a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from tests.states import SGLangEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_others import TRTLLMServe
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all
from tests.states.test_field_round11 import sglang_spec_lines
from tests.states.test_field_round19 import _proposes_one_of

INTERACTIVE = {"ttft_seconds": 4.0, "tpot_seconds": 0.025, "target_ratio": 0.9}
"""An interactive chat SLO (25 ms a token, both targets on SGLang's bucket bounds): chosen where a report states
none."""


# --- 1. SGLang: EAGLE-3 on Qwen3-30B-A3B, one stream slower with speculation than without ---------------------------


def sglang_eagle3_moe_bs1_slower() -> FieldState:
    """sgl-project/SpecForge#339 ("Throughput degradation on Qwen3-30B-A3B with EAGLE3", closed): "I got a throughput
    degrade when I try to EAGLE3 to speed up Qwen3-30B-A3B (in H100*2). My draft model is download from
    zhuyksir/EAGLE3-Qwen3-30B-A3B-DenseHead", benchmarked with ``bench_eagle3.py --model Qwen/Qwen3-30B-A3B
    --speculative-algorithm EAGLE3 … --tp-size 2 --cuda-graph-max-bs 64 --benchmark-list mtbench:20 --dtype
    bfloat16``. "The base model speed: bs | throughput — 1 | 222.47, 4 | 566.21, 8 | 733.61, 16 | 1012.96 …"; "the
    results of EAGLE3 combined: bs | steps | topk | num_draft | throughput | acc len — 1 | 3 | 1 | 4 | 159.78 | 1.86;
    1 | 3 | 3 | 8 | 172.99 | 2.20; 1 | 3 | 3 | 4 | 207.62 | 1.99; 1 | 7 | 4 | 16 | 191.90 | 2.52; 1 | 6 | 4 | 12 |
    171.54 | 2.42; 1 | 8 | 8 | 60 | 177.5 | 3.2; 4 | 3 | 1 | 4 | 447.90 | 1.86; 4 | 3 | 3 | 8 | 426.46 | 2.27". The
    same author's sgl-project/sglang#14824 ("I suspect the overhead might be overshadowing the gains"); a reply
    there: "the accept len can reach nearly 5.0 but there is 0 speedup … the draft process is likely time consuming".

    Engine facts: an EAGLE round drafts ``speculative_num_steps`` tokens with the draft head, verifies
    ``speculative_num_draft_tokens`` in one target pass and yields the accepted prefix plus one token (SGLang's
    ``sglang:spec_accept_length`` counts that bonus token). On a mixture of experts each verified token routes to its
    own 8 of 128 experts, so a verification of 4 tokens at batch 1 reads up to 4 × 8 experts per layer where a plain
    step reads 8: the round is not the price of one step. Arithmetic: 222.47 tokens/s is 4.49 ms a token without
    speculation; 159.78 is 6.26 ms with it, a round (1.86 tokens) of 11.6 ms — 2.6 plain steps to return 1.86
    tokens: 159.78 ÷ 222.47 = 0.72×. No draft shape the reporter tried pays at batch 1 (the best, 207.62, is 0.93×)
    or at batch 4 (447.90 ÷ 566.21 = 0.79×). So must propose turning speculation off (the base model is faster at
    every shape measured). Must never: enable it (it runs), replicas (one stream; one second of history), a pool turn
    (under 0.1 % of the pool is used), a sequence-cap turn either way (one stream; nothing waits), a restart (tokens
    move).

    Not asserted: a shorter or narrower draft — the reporter's sweep found none that pays, but SGLang's gauges do not
    split acceptance by position, so no draft length can be read off them.

    Chosen where the report is silent: the moment is the benchmark's batch-1 run of the first EAGLE-3 shape (3
    steps, top-k 1, 4 draft tokens), MT-Bench questions of ~120 tokens with ~600-token answers one after another;
    the pool is the figure ``check-config`` prints for this deployment (797,516 tokens); the context 40,960 (the
    model's). SGLang's ITL histogram takes each streamed chunk's interval divided over its tokens (buckets by the
    per-token share, the sum by the whole interval: ``observe_inter_token_latency``), so it reads 6.26 ms. Before:
    18 questions answered. The window: the 19th answer finishes (SGLang's tokenizer counters and request histograms
    advance at a request's end), the 20th question is admitted; 160 tokens decode. SGLang of late 2025 replayed with
    the 0.5.x exposition. SLO: :data:`INTERACTIVE`.
    """
    model = "Qwen/Qwen3-30B-A3B"
    pool = 797_516
    prompt, output, tpot = 120, 600, 1 / 159.78
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=40_960, swa_tokens=0)

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 1.0, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 5)
        eng.g["gen_throughput"] = 159.78

    eng.finish(18, prompt=prompt, output=output, ttft=0.12, tpot=tpot, queue=0.0)
    eng.prompt["true"], eng.generation["true"] = 18.0 * prompt, 18.0 * output
    eng.itl.observe(tpot, 18 * (output - 1))
    gauges(prompt + 440.0)
    spec = sglang_spec_lines(eng, 1.86, 4.0, 3.0)
    first = eng.render() + spec
    # the window: the 19th answer's last 160 tokens, then the 20th question (prefilled, first token out)
    eng.finish(1, prompt=prompt, output=output, ttft=0.12, tpot=tpot, queue=0.0)
    eng.prompt["true"] += prompt
    eng.generation["true"] += output
    eng.itl.observe(tpot, 160)
    gauges(prompt + 1.0)
    return FieldState(
        id="sglang-qwen3-30b-a3b-eagle3-bs1-160-vs-222-tps",
        source="https://github.com/sgl-project/SpecForge/issues/339",
        engine_version="SGLang of late 2025 (EAGLE-3; replayed with the 0.5.x exposition and speculative gauges)",
        deployment={
            "name": "qwen3-30b-a3b-eagle3",
            "engine": "sglang",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 2,
            "max_model_len": 40_960,
            "speculative_decoding": True,
            "slo": INTERACTIVE,
        },
        scrapes=[(first, eng.render() + spec)],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_propose=[("speculative_decoding", "disable")],
        must_never=[
            ("speculative_decoding", "enable"),
            *POOL_TURNS,
            ("max_num_seqs", None),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. SGLang: DeepSeek-R1 with --context-length 163840 on a 59,868-token pool -------------------------------------


def sglang_dsr1_context_over_pool() -> FieldState:
    """sgl-project/sglang#4048 ("[Error]Input length (160062 tokens) exceeds the maximum allowed length (59862
    tokens).", closed): "I am trying to use sglang to deploy a DeepSeek R1 serving program … ``python -m
    sglang.launch_server --model-path /models/deepseek-ai/deepseek-r1 … --tensor-parallel-size 8
    --mem-fraction-static 0.9 --trust-remote-code --context-length 163840 --chunked-prefill-size 4096``. Although I
    set the --context-length parameter to 160k and the serving program starts successfully, an error occurs when I
    send a request with content of length 160k": "[TP5] Input length (160062 tokens) exceeds the maximum allowed
    length (59862 tokens). Use a shorter input or enable --allow-auto-truncate." In the thread, for the same error on
    Qwen3-32B at 128K: "I tried to use 8 4090s instead of keeping 4 4090s and the context length goes up more and my
    problem solved".

    Engine facts (``python/sglang/srt/managers/scheduler.py``): ``max_req_len = min(context_len − 1,
    max_total_num_tokens − 1)`` and ``max_req_input_len = max_req_len − 5``; a longer input is refused. So the
    limit is the KV pool, not ``--context-length``: 59,862 + 6 = 59,868 tokens of pool (``sglang:max_total_num_tokens``)
    against a context of 163,840 (``sglang:context_len``), 0.37 of one max-length request. DeepSeek's MLA cache is one
    latent of 512 + 64 per layer per token, held whole on every TP rank (~69 KiB a token in bf16), so the pool is what
    ``--mem-fraction-static`` leaves each GPU after its eighth of the ~671B FP8 weights: a few GB. Arithmetic: the
    160,062-token input needs 2.7× the pool. The fix the thread established is a larger pool per replica (more GPUs
    per replica: with the weights split over twice the GPUs each keeps its latent cache and gains the freed bytes);
    an FP8 cache (×2) or a larger memory fraction grows it too. So must propose a turn that grows the pool: more TP,
    a KV dtype, a larger memory budget, lighter weights. Must never: replicas (each replica has the same pool and
    refuses the same input; one second of history), more sequences (one long request fills the pool), less TP or a
    smaller memory fraction (both shrink it), a restart (tokens move).

    Not asserted: a context cap to the pool (~59,392). It states truthfully what the deployment serves, but it cannot
    serve the 160,062-token input the operator sends; the thread does not weigh it.

    Chosen where the report is silent: the GPU — 8 × H20 (96 GB), the only 8-GPU Hopper node on which the FP8 weights
    fit at 0.9 with a few GB left (check-config prices 84,140 tokens here; the engine's 59,868 is read from its
    gauge); 8 × H800/A800 (80 GB) cannot hold the weights, 8 × H200 would leave ~700,000 tokens. The traffic: long
    documents of ~50,000 tokens sent one after another (they fit; the operator's 160,062-token one was refused
    before it reached the queue and leaves no trace in these families), ~1,500 tokens of reasoning at ~22 tokens/s
    (45 ms). Before: 10 documents served (TTFT ~8 s: 50,000 tokens of prefill on H20s). At scrape 1 the running
    request holds 51,490 tokens (86 % of the pool); in the window it finishes and the next document is admitted,
    its first 4,096-token chunk prefilled. SGLang 0.4.3 (March 2025) replayed with the 0.5.x exposition (0.4.3 then
    crashed on the refusal — a bug fixed since; the refusal itself stands). SLO: TTFT 20 s, TPOT 0.1 s (bucket
    bounds).
    """
    model = "deepseek-ai/DeepSeek-R1"
    pool = 59_868
    prompt, output = 50_000, 1_500
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=163_840, swa_tokens=0)

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 1.0, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 4)
        eng.g["gen_throughput"] = 22.0

    eng.finish(10, prompt=prompt, output=output, ttft=8.0, tpot=0.045, queue=0.0)
    eng.prompt["true"], eng.generation["true"] = 10.0 * prompt, 10.0 * output
    eng.itl.observe(0.045, 10 * (output - 1))
    gauges(prompt + 1_490.0)
    first = eng.render()
    eng.finish(1, prompt=prompt, output=output, ttft=8.0, tpot=0.045, queue=0.0)
    eng.prompt["true"] += prompt
    eng.generation["true"] += output
    eng.itl.observe(0.045, 10)
    gauges(4_096.0)
    return FieldState(
        id="sglang-dsr1-context-163840-pool-59868-160k-input-refused",
        source="https://github.com/sgl-project/sglang/issues/4048",
        engine_version="SGLang 0.4.3 of March 2025 (replayed with the 0.5.x exposition)",
        deployment={
            "name": "deepseek-r1-sglang-160k",
            "engine": "sglang",
            "model": model,
            "served_model": model,
            "gpu": "h20",
            "tensor_parallel_size": 8,
            "mem_fraction_static": 0.9,
            "max_model_len": 163_840,
            "max_num_batched_tokens": 4_096,
            "slo": {"ttft_seconds": 20.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("replicas", "increase"),
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "decrease"),
            ("gpu_memory_utilization", "decrease"),
            RESTART,
        ],
        extra_check=_all(
            _proposes_one_of(
                ("tensor_parallel_size", "increase"),
                ("kv_cache_dtype", None),
                ("gpu_memory_utilization", "increase"),
                ("kv_cache_memory_bytes", "increase"),
                ("weight_quantization", None),
            ),
            no_stall_claimed,
        ),
    )


# --- 3. trtllm-serve: --max_num_tokens 8192 without chunked prefill refuses every longer prompt ---------------------


class _TRTLLMServe11(TRTLLMServe):
    """``trtllm-serve`` as 1.0/1.1 exposes it (catalog §4.2, the 1.1.0rc5 capture): only the five request families —
    ``trtllm_request_success_total{finished_reason}``, the e2e, TTFT, TPOT and queue-time histograms; no token
    counters, no scheduler or KV gauges."""

    def render(self) -> str:
        counters, self.c = self.c, {}
        try:
            return super().render()
        finally:
            self.c = counters


def trtllm_serve_step_budget_refuses_long_inputs() -> FieldState:
    """NVIDIA/TensorRT-LLM#6539 ("Long input sequence with TRTLLM-serve", open): "We need to serve a certain model
    with long input sequence length. However, TRTLLM-serve seems to tie max_num_tokens with max input sequence
    length. [TensorRT-LLM][INFO] TRT GptModel maxInputLen: 8192 = min(maxSequenceLen - 1, maxNumTokens) since
    context FMHA and usePackedInput are enabled"; served with ``trtllm-serve Qwen/Qwen3-32B --backend pytorch
    --max_batch_size 512 --max_num_tokens 8192 --tp_size 1 --ep_size 1 --pp_size 1
    --kv_cache_free_gpu_memory_fraction 0.8 --extra_llm_api_options …``; "Although TRTLLM-serve has --max_seq_len
    param, it doesn't have a max_input_len param." The fix the project shipped, the text of NVIDIA/TensorRT-LLM#9499
    ("BREAKING: Enable chunked prefill by default") now in ``docs/source/features/long-sequence.md``: "Chunked context
    is now enabled by default … Long sequences that exceed ``max_num_tokens`` will be automatically chunked instead
    of throwing an error"; before it, ``enable_chunked_prefill: true`` in the extra LLM-API options
    (NVIDIA/TensorRT-LLM#4947: without it "any input sequences exceeding this token limit are outright rejected").

    Engine facts: without chunked context a prompt is prefilled in one step, so no prompt may exceed the step
    budget (``max_num_tokens``): the LLM API refuses it before it reaches the executor (``llm.py``
    ``_check_arguments``: "The sum of prompt length (9351.0), query length (0) should not exceed max_num_tokens
    (8192)", NVIDIA/TensorRT-LLM#9277), an error to the client that none of 1.0's five families counts.
    ``max_seq_len`` defaults to the model's 40,960. Arithmetic: inputs up to 40,959 tokens are what the model
    serves; 8,192 is what the step budget lets through: every longer input is refused.
    So must propose one of: chunked prefill (the shipped fix), or a step budget at least the inputs' length
    (``max_num_tokens`` increase). Must never: a smaller step budget (it lowers maxInputLen further), a context cap
    below 8,192 (it refuses what is served today), replicas (each refuses the same inputs; one second of history), a
    restart (tokens move).

    Chosen where the report is silent: the GPU — one H200 (Qwen3-32B in bf16 is 65 GB; the report's TP 1 and 0.8 of
    the free memory leave a pool of ~250,000 tokens, so the pool is not what refuses); the traffic: documents of
    2,000–24,000 tokens, the ~70 % over 8,192 refused, the rest (mean ~5,000 tokens) answered with ~500 tokens at
    ~25 ms a token, TTFT ~0.8 s, ~6 at once; before: 600 served; the window: 2 finish. trtllm-serve of August 2025
    (PyTorch backend), the 1.1.0rc5 exposition. SLO: TTFT 10 s, TPOT 0.1 s.
    """
    model = "Qwen/Qwen3-32B"
    srv = _TRTLLMServe11(model)
    srv.finish(600, prompt=5_000, output=500, ttft=0.8, tpot=0.025, queue=0.3)
    first = srv.render()
    srv.finish(2, prompt=5_000, output=500, ttft=0.8, tpot=0.025, queue=0.3)
    return FieldState(
        id="trtllm-serve-qwen3-32b-max-num-tokens-8192-refuses-long-inputs",
        source="https://github.com/NVIDIA/TensorRT-LLM/issues/6539",
        engine_version="trtllm-serve of August 2025 (PyTorch backend; the 1.1.0rc5 five-family exposition)",
        deployment={
            "name": "qwen3-32b-trtllm-serve",
            "engine": "trtllm",
            "model": model,
            "gpu": "h200",
            "tensor_parallel_size": 1,
            "max_model_len": 40_960,
            "max_num_seqs": 512,
            "max_num_batched_tokens": 8_192,
            "kv_cache_config": {"free_gpu_memory_fraction": 0.8},
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, srv.render())],
        must_never=[
            ("max_num_batched_tokens", "decrease"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(
            _proposes_one_of(("chunked_prefill", "enable"), ("max_num_batched_tokens", "increase")),
            _cap_at_least(8_192),
        ),
    )


STATES = [
    sglang_eagle3_moe_bs1_slower(),
    sglang_dsr1_context_over_pool(),
    trtllm_serve_step_budget_refuses_long_inputs(),
]

XFAIL: dict[str, str] = {
    "trtllm-serve-qwen3-32b-max-num-tokens-8192-refuses-long-inputs": (
        "missed fix (no rule): the deployment states max_num_batched_tokens 8,192 under max_model_len 40,960 on "
        "trtllm-serve, where without chunked prefill (off by default before NVIDIA/TensorRT-LLM#9499; the config "
        "schema has no enable_chunked_prefill key for trtllm or triton-trtllm) maxInputLen = min(max_seq_len − 1, "
        "max_num_tokens) and every longer prompt is refused. The refusals never reach 1.0's five request families, "
        "and no rule checks the static step budget against the context, so no advice at all (every other rule "
        "lacks running/KV data). A static check — step budget below max-model-len on an engine that refuses "
        "rather than chunks — would propose chunked prefill (enable_chunked_prefill: true) or max_num_tokens ≥ the "
        "inputs served"
    ),
}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
