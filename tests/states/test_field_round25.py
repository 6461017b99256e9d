"""Field states, round 25: speculation that wins at low batch on vLLM and on SGLang, and a TGI stress test whose
full-VRAM warm-up is by design, from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as the engine prints them: vLLM through :class:`tests.states.VLLMEngine` (V1, the 0.11
label set) plus the speculative-decoding counters of ``vllm/v1/spec_decode/metrics.py``
(:func:`tests.states.test_field_round3_vllm._spec_decode_lines`), SGLang through :class:`tests.states.SGLangEngine`
(0.5.x scheduler and tokenizer families) plus its speculative gauges
(:func:`tests.states.test_field_round11.sglang_spec_lines`), TGI through
:class:`tests.states.test_field_round3_others.TGIRouter` (the router's ``metrics-exporter-prometheus`` names; no
``tgi_batch_max_total_tokens`` before v2.3.1). The assertions come from the reports' numbers, the verdict each
thread establishes and engine facts, never from the advisor's output:

* ``vllm-eagle3-ten-streams-rtx4090-1.62x-stays-on`` — EAGLE-3 with six draft tokens on a ~4B model on one RTX
  4090 at ten concurrent requests: 215.84 s without speculation, 133.24 s with it for the same 106,678 output tokens
  (1.62×), mean acceptance length 2.47, per-position acceptance measured. The engine's own time per token with
  speculation (12.5 ms) is above what a roofline says plain decoding could reach on this card — the measured A/B says
  the opposite. Never turn speculation off, never "enable" it (it runs), never replicas from one second, never a
  restart.
* ``sglang-eagle2-llama2-7b-bs1-156-to-297-tps-stays-on`` — SGLang's EAGLE-2 worker on one H100 at batch 1:
  156 tokens/s without speculation, 297 with it (1.9×), verifying a 64-token draft tree a round (5 steps, top-k 8).
  A per-token acceptance rate of a tree looks tiny (~3 %); the tokens a round say it wins. Never off, never enable,
  never replicas, never a restart.
* ``tgi-0.9.4-warmup-takes-76gb-per-shard-stress-test-by-design`` — TGI 0.9.4 on four 80 GB shards takes 76,020 MiB
  each where 0.9.3 took 11,300 with the same flags; the maintainer: "There's nothing wrong. After 0.9.4 we're warming
  up the RAM to prevent explosion during runtime" — the budget is sized at start-up for the worst case, and no OOM
  has been seen since. Under the reporter's stress test (concurrent users, max token lengths) nothing waits. Never a
  memory-fraction turn, never a context cap below the 8,192 the test uses, never replicas from one second, never a
  restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from tests.states import SGLangEngine, VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import TGIRouter
from tests.states.test_field_round3_vllm import RESTART, _spec_decode_lines, no_stall_claimed
from tests.states.test_field_round11 import sglang_spec_lines

INTERACTIVE = {"ttft_seconds": 2.0, "tpot_seconds": 0.025, "target_ratio": 0.9}
"""An interactive chat SLO (25 ms a token): chosen where the reports state none."""

SPEC_KEEPS = [
    ("speculative_decoding", "disable"),
    ("speculative_decoding", "enable"),
    ("replicas", "increase"),
    RESTART,
]
"""A speculation measured as a win at low batch: never off, never "enable" (it runs), never replicas from one
second, never a restart."""


# --- 1. vLLM: EAGLE-3, six draft tokens, ten streams on an RTX 4090, 1.62× ---------------------------------------


def vllm_eagle3_ten_streams_wins() -> FieldState:
    """vllm-project/vllm#24243 ("Eagle3 that supports the Minicpm3 model", merged September 2025), test plan on a
    "single RTX 4090": "200 samples, 10 concurrency … Total output tokens: 106,678 · Number of draft proposals: 43,221
    · Number of draft tokens generated: 259,326 · Number of accepted tokens: 63,669 · Mean acceptance length: 2.47 ·
    Acceptance rate at token 0: 0.58 · … 1: 0.34 · … 2: 0.22 · … 3: 0.15 · … 4: 0.11 · Baseline (non-speculative):
    215.84 s · Speculative decoding model: 133.24 s · Speedup: 1.62×"; at one request at a time the same drafter gives
    1.71× (382.29 s → 224.20 s, acceptance length 2.44).

    Engine facts: vLLM V1 counts drafts (one per sequence a round), draft tokens, accepted tokens and accepted tokens
    per draft position (``vllm/v1/spec_decode/metrics.py``); ``inter_token_latency_seconds`` observes one gap per
    engine step per request (``vllm/v1/metrics/stats.py`` ``update_from_output``), so a speculative round is one
    observation of the whole round; ``request_time_per_output_token_seconds`` is the per-request mean, observed when a
    request finishes. Arithmetic: 259,326 ÷ 43,221 = 6 draft tokens a round; 1 + 63,669 ÷ 43,221 = 2.47 tokens a round;
    106,678 tokens in 215.84 s is 494 tokens/s (49 a stream, 20.2 ms a token) without speculation and in 133.24 s 801
    tokens/s (80 a stream, 12.5 ms a token) with it; a round is 2.47 × 12.5 = 30.9 ms, 32.4 a second a stream, 324
    drafts a second over ten. The per-position rates sum to 1.40 over positions 0–4; the sixth is the rest of 1.47
    (0.07). Ten streams of a 3.8B bf16 model read 7.1 GiB a step, which a roofline prices near 8 ms on an RTX 4090 —
    below the 12.5 ms the engine measures with speculation — but the same engine measured 20.2 ms without it: the
    run's A/B, not a roofline, is what says whether speculation pays, and it pays 1.62×. So must never: speculation off,
    enable (it runs), replicas (one second), a restart.

    Not asserted: a shorter draft (positions 4 and 5 accept 0.11 and 0.07 of the rounds; the thread measures no other
    length).

    Chosen where the report is silent, and the stand-in: MiniCPM3-4B (multi-head latent attention) is not in the
    advisor's tables; Phi-3-mini-4k-instruct (3.8B, bf16, 4,096-token context) on the same RTX 4090 stands in, with an
    EAGLE-3 head of one layer (~240M parameters with its draft vocabulary); ``gpu_memory_utilization`` 0.9; the pool
    is the capacity pass's for that deployment (2,189 blocks of 16). Prompts of ~120 tokens, outputs ~533 (106,678 ÷
    200). The moment: mid-run, 100 answered (half the report's counts), ten running, ~4,000 tokens held; the window:
    one second, 324 drafts at the report's per-position rates (802 tokens), two requests finish (TPOT 12.5 ms) and
    two are admitted. vLLM of September 2025 (0.10.2) rendered with the 0.11 label set. SLO: :data:`INTERACTIVE`.
    """
    model = "microsoft/Phi-3-mini-4k-instruct"
    eng = VLLMEngine(model_name=model, num_gpu_blocks=2_189, max_model_len=4_096, gpu_memory_utilization=0.9)
    rates = (0.58, 0.34, 0.22, 0.15, 0.11, 0.073)
    rounds, rnd = 43_221 // 2, 0.0309
    accepted = [round(rounds * a) for a in rates]
    window_rounds = 324
    window = [round(window_rounds * a) for a in rates]

    def decode(tokens: float, steps: float) -> None:
        eng.counters["vllm:generation_tokens"] += tokens
        for name in ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"):
            eng.hists[name].observe(rnd, steps)
        eng.hists["vllm:iteration_tokens_total"].observe(10, steps / 10)

    eng.finish(100, prompt=120, output=533, ttft=0.08, tpot=0.0125, queue=0.0)
    eng.first_tokens([0.08] * 110)
    eng.prefill(110 * 120)
    decode(rounds + sum(accepted), rounds)
    eng.running, eng.waiting, eng.kv_usage = 10.0, 0.0, 4_000 / (2_189 * 16)
    first = eng.render() + _spec_decode_lines(eng, rounds, 6 * rounds, accepted)
    decode(window_rounds + sum(window), window_rounds)
    eng.finish(2, prompt=120, output=533, ttft=0.08, tpot=0.0125, queue=0.0)
    eng.first_tokens([0.08] * 2)
    eng.prefill(2 * 120)
    eng.kv_usage = 4_100 / (2_189 * 16)
    second = eng.render() + _spec_decode_lines(
        eng,
        rounds + window_rounds,
        6 * (rounds + window_rounds),
        [a + w for a, w in zip(accepted, window, strict=True)],
    )
    return FieldState(
        id="vllm-eagle3-ten-streams-rtx4090-1.62x-stays-on",
        source="https://github.com/vllm-project/vllm/pull/24243",
        engine_version="vLLM 0.10.2 of September 2025 (rendered with the 0.11 label set)",
        deployment={
            "name": "phi3-mini-eagle3-4090",
            "engine": "vllm",
            "model": model,
            "gpu": "rtx4090",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 4_096,
            "speculative_decoding": True,
            "speculative_config": {
                "method": "eagle3",
                "num_speculative_tokens": 6,
                "draft_parameters": 240_000_000,
                "draft_layers": 1,
            },
            "slo": INTERACTIVE,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 10, "requests_waiting": 0, "kv_cache_capacity_tokens": 35_024},
        must_never=SPEC_KEEPS,
        extra_check=no_stall_claimed,
    )


# --- 2. SGLang: the EAGLE-2 worker on Llama-2-7B at batch 1, 156 → 297 tokens/s ------------------------------------


def sglang_eagle2_bs1_wins() -> FieldState:
    """sgl-project/sglang#2150 ("Eagle speculative decoding part 4: Add EAGLE2 worker", merged November 2024): "The
    following results are obtained on a single H100. … Normal decoding speed (SGLang): 156 token/s ``python3 -m
    sglang.launch_server --model meta-llama/Llama-2-7b-chat-hf`` · Eagle decoding speed (SGLang): 297 token/s
    ``--speculative-algo EAGLE --speculative-draft lmzheng/sglang-EAGLE-llama2-chat-7B --speculative-num-steps 5
    --speculative-eagle-topk 8 --speculative-num-draft-tokens 64 --mem-fraction 0.7`` · (w/ torch.compile): 316
    token/s"; the benchmark script sends one request (``max_new_tokens`` 256, temperature 0) and times it.

    Engine facts (SGLang ``speculative/eagle_worker.py``): each round the draft head runs ``num_steps`` (5) times,
    expanding the ``topk`` (8) best branches, and the target verifies a tree of ``num_draft_tokens`` (64) tokens in
    one forward pass; the accepted path plus one bonus token is emitted. ``sglang:spec_accept_length`` is the mean of
    that count; ``spec_accept_rate`` divides the accepted drafts by the 63 proposed a round, so a tree looks like a poor
    drafter while it wins. SGLang's inter-token-latency histogram divides a chunk's interval by its tokens
    (``observe_inter_token_latency``). Arithmetic: 297 ÷ 156 = 1.90× at batch 1; 1 ÷ 156 = 6.4 ms a token without
    speculation, 1 ÷ 297 = 3.37 ms with it. At batch 1 a 7B model's step reads 12.6 GiB of weights (~4 ms on an H100
    at 3.35 TB/s); verifying 64 tokens is ~0.9 TFLOP, under a millisecond of compute, so a round costs about a step
    plus the five draft passes. So must never: speculation off (1.9× slower), enable (it runs), replicas (one second),
    a restart.

    Not asserted: a smaller tree (the thread measures one configuration).

    Chosen where the report is silent: the accept length — 3.0 tokens a round (297 tokens/s at a round of 10.1 ms,
    1.6 plain steps: five one-layer draft passes and a 64-token verify); the model — Llama-2-7b-hf, the chat
    checkpoint's shapes; the pool — the capacity pass's for the target at ``--mem-fraction-static`` 0.7 on one
    H100-SXM (87,045 tokens; the draft's one layer left out, < 1 %); the SLO — :data:`INTERACTIVE`. The moment: the
    benchmark's requests one after another (~25 tokens of prompt, 256 out, TTFT ~30 ms): before, 100 answered; in the
    window one finishes and the next is admitted, 297 tokens out. SGLang 0.4.0 of November 2024 replayed with the
    0.5.x exposition and the speculative gauges of 0.5.23.
    """
    model = "meta-llama/Llama-2-7b-hf"
    pool = 87_045
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=4_096, swa_tokens=0)

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 1.0, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 4)
        eng.g["gen_throughput"] = 297.0

    eng.finish(100, prompt=25, output=256, ttft=0.03, tpot=1 / 297, queue=0.0)
    eng.prompt["true"], eng.generation["true"] = 101 * 25.0, 100 * 256.0 + 120.0
    eng.itl.observe(1 / 297, 100 * 255 + 120)
    gauges(145.0)
    spec = sglang_spec_lines(eng, 3.0, 64.0, 5.0)
    first = eng.render() + spec
    eng.finish(1, prompt=25, output=256, ttft=0.03, tpot=1 / 297, queue=0.0)
    eng.prompt["true"] += 25.0
    eng.generation["true"] += 297.0
    eng.itl.observe(1 / 297, 296)
    gauges(186.0)
    return FieldState(
        id="sglang-eagle2-llama2-7b-bs1-156-to-297-tps-stays-on",
        source="https://github.com/sgl-project/sglang/pull/2150",
        engine_version="SGLang 0.4.0 of November 2024 (0.5.x exposition with the speculative gauges)",
        deployment={
            "name": "llama2-7b-eagle2-h100",
            "engine": "sglang",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 1,
            "mem_fraction_static": 0.7,
            "max_model_len": 4_096,
            "speculative_decoding": True,
            "slo": INTERACTIVE,
        },
        scrapes=[(first, eng.render() + spec)],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_never=SPEC_KEEPS,
        extra_check=no_stall_claimed,
    )


# --- 3. TGI 0.9.4: warm-up sizes the budget to the whole card; a stress test runs clean ----------------------------


def tgi_warmup_full_vram_by_design() -> FieldState:
    """huggingface/text-generation-inference#832 ("max batch total tokens problem", closed): "The cli command to run
    the docker for ``0.9.3`` and ``0.9.4`` with identical flags which is a different between 4x 11300MiB vs. 4x
    76020MiB" (``--num-shard $num_shard --max-total-tokens 8192 --max-input-length 4096``, four shards). The
    maintainer: "There's nothing wrong. After 0.9.4 we're warming up the RAM to prevent explosion during runtime (when
    you receive enough load). If you don't want to use all the VRAM you can use ``--cuda-memory-fraction``. … The
    warmup assumes worse possible conditions which are max batch size + max PREFILL step :). Since we've added that we
    haven't seen any OOM in production anymore". The reporter had been "stress-testing the system by concurrent users
    and max token lengths"; closed with "Totally makes sense, thanks for this new feature."

    Engine facts (TGI 0.9.4, huggingface/text-generation-inference#630): at start-up the server runs a prefill of
    ``--max-batch-prefill-tokens``, measures the free memory and allocates the rest of ``--cuda-memory-fraction``
    (default 1.0, its maximum) as KV blocks, reported as the inferred ``max_batch_total_tokens``; the router admits a
    request when input + ``max_new_tokens`` fit that budget. So the 76 GB a shard is the KV budget by design, and
    lowering the fraction only shrinks the budget the stress test runs in. Arithmetic: the stand-in's budget on four
    A100-80GB is the capacity pass's ~2.32M tokens (70.9 GiB of KV a shard — the report's 76,020 MiB less weights);
    64 users at max lengths reserve 64 × (4,000 + 4,096) = 518,144 tokens, 22 % of it; nothing waits. So must never:
    a memory-fraction turn (either way: 1.0 is the maximum, and the thread establishes nothing to lower), a context
    cap below 8,192 (the test's ``--max-total-tokens``: TGI would refuse its max-length requests), replicas (one
    second of history), a restart (nothing is wrong; a restart re-runs the same warm-up).

    Not asserted: fewer shards (the stand-in's weights fit one card, but the thread does not weigh the deployment's
    size).

    Chosen where the report is silent, and the stand-in: the model (``$model_id`` in the report) — Meta-Llama-3-8B
    (an 8,192-token context, which the report's ``--max-total-tokens 8192`` needs; 8B bf16 on four shards), four
    A100-80GB (the 76,020 MiB a shard of an 80 GB card). The moment of the stress test: 64 concurrent users each
    sending ~4,000 tokens with ``max_new_tokens`` 4,096, outputs ending near 1,000 tokens at 20 ms a token (TGI's
    router mean per request), no queue; before, 1,200 answered; in the window three finish and their users send
    three more. TGI 0.9.4 exposes no ``tgi_batch_max_total_tokens`` (v2.3.1+). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    tgi = TGIRouter(max_input=4_096, max_total=8_192, budget=None)
    tgi.arrive(1_264, prompt=4_000, max_new=4_096)
    tgi.finish(1_200, generated=1_000, tpot=0.02, queue=0.05)
    tgi.queue, tgi.batch, tgi.reserved = 0.0, 64.0, 64 * 8_096.0
    first = tgi.render()
    tgi.arrive(3, prompt=4_000, max_new=4_096)
    tgi.finish(3, generated=1_000, tpot=0.02, queue=0.05)
    return FieldState(
        id="tgi-0.9.4-warmup-takes-76gb-per-shard-stress-test-by-design",
        source="https://github.com/huggingface/text-generation-inference/issues/832",
        engine_version="TGI 0.9.4 (August 2023)",
        deployment={
            "name": "llama3-8b-tgi-4-shards",
            "engine": "tgi",
            "model": "meta-llama/Meta-Llama-3-8B",
            "gpu": "a100-80gb",
            "tensor_parallel_size": 4,
            "max_model_len": 8_192,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, tgi.render())],
        snapshot={"requests_running": 64, "requests_waiting": 0},
        must_never=[
            ("gpu_memory_utilization", None),
            ("max_model_len", "decrease"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_eagle3_ten_streams_wins(),
    sglang_eagle2_bs1_wins(),
    tgi_warmup_full_vram_by_design(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
