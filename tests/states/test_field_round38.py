"""Field states, round 38: SGLang states where the gauges invite a GPU reading of what the GPU does not decide — an
embedding server that tops out on its Python frontend with the GPU a third busy, an EAGLE-3 draft on a 3B-active MoE
whose measured worth flips between batch 32 (a loss) and batch 64 (a win) on an engine far slower than a plain step's
weight reads, and an EAGLE-3 draft on a dense 8B that wins less than its paper promised — from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes one
second apart rendered by :class:`tests.states.SGLangEngine` (the 0.5.x scheduler and tokenizer families) plus, where
speculation runs, SGLang's speculative gauges (:func:`tests.states.test_field_round11.sglang_spec_lines`). The
assertions come from the reports' numbers, the verdict each thread establishes and engine facts, never from the
advisor's output:

* ``sglang-qwen3-embedding-0.6b-a6000-800rps-frontend-bound`` — a tuned single SGLang server serving
  ``/v1/embeddings`` (Qwen3-Embedding-0.6B, one RTX A6000) tops out around 800 requests/s with the GPU's SM-active at
  ~33 %: the bottleneck is the Python side (tokenization, scheduling, serialization); two servers on the same GPU
  give 1.83× (2.6× on an H200 NVL). Nothing waits in the scheduler, nothing decodes, the pool is empty. No engine dial
  the advisor has fixes a CPU-bound frontend, and one second cannot size replicas: no advice at all (never more TP,
  a pool turn, more sequences, speculation, chunked prefill, replicas up or down, a restart).
* ``sglang-qwen3-30b-a3b-tp4-eagle3-bs32-927-vs-1128-tps`` — EAGLE-3 (4 steps, top-k 4, 16 draft tokens) on
  Qwen3-30B-A3B at TP 4 on H100s, 32 concurrent requests: 927.11 tokens/s against 1,128.30 without speculation
  (0.82×), acceptance length 2.560. A speculative turn, off or down, is what the measurement supports; never up,
  never more sequences (the cap is the benchmark's concurrency, nothing waits), a pool turn, replicas, a restart.
* ``sglang-qwen3-30b-a3b-tp4-eagle3-bs64-1308-vs-1238-tps`` — the same sweep at 64 concurrent requests: 1,307.95
  tokens/s against 1,237.84 without (1.057×), acceptance length 2.553; plain decoding there runs at 51.7 ms a token,
  far slower than a plain step's weight reads. Speculation pays at this batch: never turn it off; never more
  sequences, a pool turn, replicas, a restart.
* ``sglang-qwen3-8b-tp2-a800-eagle3-bs1-1x-speedup-stays-on`` — EAGLE-3 (3 steps, top-k 1, 4 draft tokens) on
  Qwen3-8B at TP 2 on A800s, one stream at ~175 tokens/s, acceptance length ~1.95: "the overall speedup is only in
  the 1.x range" — a win, smaller than the paper's. Never turn it off; never more TP, a pool turn, a sequence-cap
  turn, replicas, a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import json
from typing import Any

from tests.states import SGLangEngine, spread
from tests.states.field import Advice, FieldState, brief, round_tests
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all
from tests.states.test_field_round11 import sglang_spec_lines

IDLE_IS_NOT_SPARE: list[Advice] = [
    ("replicas", "decrease"),
    ("tensor_parallel_size", "decrease"),
    ("instance_type", None),
]
"""The GPU-freeing turns: wrong where the GPU idles because something in front of it (here the server's own Python
frontend) caps the rate, not because demand is low."""


def _spec_turns_only_down(result: dict[str, Any]) -> None:
    """Every speculative turn proposed (alternatives included) turns it down or off."""
    for rec in result.get("recommendations") or []:
        for cand in [rec, *(rec.get("alternatives") or [])]:
            if cand.get("dial") == "speculative_decoding":
                assert cand.get("action") in {"disable", "decrease"}, f"speculation turned up: {brief([cand])}"


# --- 1. SGLang embeddings: a tuned server tops out at ~800 requests/s on its Python frontend, the GPU a third busy ---

QWEN3_EMBEDDING_06B_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "model_type": "qwen3",
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151669,
}
"""Qwen/Qwen3-Embedding-0.6B's ``config.json`` as published (the Qwen3-0.6B-Base architecture: 28 layers, 8 KV heads
of 128, 112 KiB of KV a token); the advisor's tables hold no embedding model, so it is given as a config path."""


def sglang_embedding_frontend_bound() -> FieldState:
    """sgl-project/sglang#31891 ("[Feature] Native same-GPU data parallelism: colocated DP gives 1.8x (A6000) to 2.6x
    (H200) embedding throughput; currently blocked by gpu_id_step assert", open, July 2026): "running multiple
    embedding servers on one GPU delivers 1.83x (RTX A6000) to 2.6x (H200 NVL) the throughput of a tuned single server
    on the same GPU … While benchmarking ``/v1/embeddings`` serving (Qwen3-Embedding-0.6B, RTX A6000), we found the
    short-input path is CPU-bound at saturation: GPU SM-active is only ~33% while the server tops out around 800
    req/s. The bottleneck is Python-side work (tokenization/scheduling/serialization), not the GPU". The PR that
    implements it (sgl-project/sglang#31893) names what stands between "starts" and "is faster": colocated startup
    races and "the shared tokenizer frontend".

    Engine facts (``python/sglang/srt/managers/tokenizer_manager.py``, ``_handle_batch_output`` and
    ``collect_metrics``): an embedding request's one output (``BatchEmbeddingOutput``) is its end: the tokenizer
    manager observes its TTFT (the whole request), counts its prompt tokens and the request, and 0 completion tokens —
    no inter-token latency, no per-request TPOT, no generated token. The scheduler runs embedding requests as prefill
    batches only: nothing stays in the running batch to decode (``num_running_reqs`` 0), the waiting queue is drained
    into each prefill batch (a batch takes up to ``--max-prefill-tokens`` 16,384 tokens, far above what 64 requests
    of ~32 tokens ask), the pool holds nothing between batches, ``gen_throughput`` stays 0. Arithmetic: 800 requests/s
    of ~32 tokens is ~25,600 prompt tokens/s, ~0.9 GFLOP each for the 0.44 B non-embedding weights: ~23 TFLOP/s, a
    small share of an A6000's dense bf16 rate — the GPU waits on the host, as the report's 33 % SM-active says; a
    closed loop of 64 clients at 800/s holds each request ~80 ms (64 ÷ 800). The report's
    fix is more server processes on the same GPU (colocated DP), not a GPU or pool turn. So no advice at all: must
    never more TP (the GPU is two-thirds idle), a pool turn (nothing is held), more sequences (nothing waits, nothing
    runs between batches), speculation (nothing decodes), chunked prefill (prompts of ~32 tokens), replicas (one
    second of history; the report's extra servers share the one GPU, a deployment-level count it does not establish),
    fewer replicas, a lower TP or a smaller GPU (the server is at its ceiling, not idle), a restart (it serves 800/s).

    Not asserted: the colocated-DP remedy itself (``--gpu-id-step 0`` is not an SGLang flag before the PR; the advisor
    has no dial for processes per GPU).

    Chosen where the report is silent: SGLang of July 2026 with ``--is-embedding`` and the 0.5.x exposition; the pool
    is the capacity pass's for SGLang's default memory fraction on one RTX A6000 (336,890 tokens, an input here);
    closed loop of 64 clients, short retrieval queries of ~32 tokens (the report's "short-input path"; its lengths
    are not given), non-streaming (the tokenizer series labelled ``is_streaming="false"``); ten minutes at saturation
    before the first scrape (480,000 requests, ~80 ms each, ~1 ms queued); the window: 800 more. SLO:
    TTFT 0.5 s (an embedding's whole latency; a retrieval step), TPOT 0.1 s (never observed here).
    """
    model_dir = "Qwen3-Embedding-0.6B"
    pool = 336_890
    eng = SGLangEngine(
        model_name="Qwen/Qwen3-Embedding-0.6B", max_total_num_tokens=pool, context_len=32_768, swa_tokens=0
    )

    def served(n: int) -> None:
        """``n`` embedding requests answered (non-streaming): prompt tokens, TTFT = e2e, queue time; nothing else."""
        per = n // 8
        for f in spread(1.0, 8):
            eng.requests["false"] += per
            eng.prompt["false"] += per * 32.0 * f
            eng.ttft["false"].observe(0.08 * f, per)
            eng.e2e["false"].observe(0.08 * f, per)
            eng.queue.observe(0.001 * f, per)

    eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 0.0, 0.0
    eng.g["kv_available_tokens"] = float(pool)
    served(480_000)
    first = eng.render()
    served(800)
    return FieldState(
        id="sglang-qwen3-embedding-0.6b-a6000-800rps-frontend-bound",
        source="https://github.com/sgl-project/sglang/issues/31891",
        engine_version="SGLang of July 2026, --is-embedding (0.5.x exposition)",
        deployment={
            "name": "qwen3-embedding-a6000",
            "engine": "sglang",
            "model": f"{model_dir}/config.json",
            "served_model": "Qwen/Qwen3-Embedding-0.6B",
            "gpu": "rtx-a6000",
            "tensor_parallel_size": 1,
            "max_model_len": 32_768,
            "slo": {"ttft_seconds": 0.5, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        files={f"{model_dir}/config.json": json.dumps(QWEN3_EMBEDDING_06B_CONFIG, indent=2)},
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 0, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        no_advice=True,
        must_never=[
            ("tensor_parallel_size", "increase"),
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("speculative_decoding", "enable"),
            ("chunked_prefill", "enable"),
            ("replicas", "increase"),
            *IDLE_IS_NOT_SPARE,
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2./3. SGLang: EAGLE-3 on Qwen3-30B-A3B at TP 4 — a loss at batch 32, a win at batch 64 --------------------------

QWEN3_30B_A3B_TP4_POOL = 2_165_507
"""The capacity pass's pool for Qwen3-30B-A3B on 4 × H100 SXM at SGLang's default memory fraction (``capacity-advisor
plan``; the report prints none): an input of the renderings."""

THROUGHPUT_SLO = {"ttft_seconds": 4.0, "tpot_seconds": 0.1, "target_ratio": 0.9}
"""A throughput benchmark's SLO (SGLang bucket bounds): chosen where the reports state none."""


def _eagle3_moe_scrapes(*, batch: int, spec_tps: float, accept: float, answered: int) -> tuple[str, str]:
    """Two scrapes of SpecForge's MT-Bench closed loop on Qwen3-30B-A3B at TP 4 with EAGLE-3 (4 steps, top-k 4, 16
    draft tokens): ``batch`` streams decoding at ``spec_tps`` tokens/s in all, ~120-token prompts and ~2,200-token
    answers, ``answered`` questions done before the first scrape; in the window one answer finishes (SGLang's
    tokenizer counters and request histograms advance at a request's end) and the next question is admitted."""
    model = "Qwen/Qwen3-30B-A3B"
    pool = QWEN3_30B_A3B_TP4_POOL
    prompt, output = 120, 2_200
    tpot = batch / spec_tps
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=40_960, swa_tokens=0)

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = float(batch), 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 4)
        eng.g["gen_throughput"] = spec_tps

    eng.finish(answered, prompt=prompt, output=output, ttft=0.4, tpot=tpot, queue=0.0)
    eng.prompt["true"], eng.generation["true"] = answered * float(prompt), answered * float(output)
    eng.itl.observe(tpot, answered * (output - 1) + batch * output // 2)
    held = batch * (prompt + output / 2)
    gauges(held)
    spec = sglang_spec_lines(eng, accept, 16.0, 4.0)
    first = eng.render() + spec
    eng.finish(1, prompt=prompt, output=output, ttft=0.4, tpot=tpot, queue=0.0)
    eng.prompt["true"] += prompt
    eng.generation["true"] += output
    eng.itl.observe(tpot, round(spec_tps))
    gauges(held + spec_tps - output)
    return first, eng.render() + spec


def _eagle3_moe_deployment(batch: int) -> dict[str, Any]:
    return {
        "name": f"qwen3-30b-a3b-tp4-eagle3-bs{batch}",
        "engine": "sglang",
        "model": "Qwen/Qwen3-30B-A3B",
        "gpu": "h100-sxm",
        "tensor_parallel_size": 4,
        "max_num_seqs": batch,
        "max_model_len": 40_960,
        "speculative_decoding": True,
        "slo": THROUGHPUT_SLO,
    }


def sglang_eagle3_moe_bs32_loses() -> FieldState:
    """Tencent/AngelSlim#163 ("How to repreduce the reported results of Qwen3-30B-A3B with EAGLE3?", open, December
    2025): "I can't reproduce the results of Qwen3-30B-A3B with EAGLE3 which there is speed degrade. My results: tp |
    ep | batch_size | steps | topk | num_draft_tokens | latency | throughput | accept_length — 4 | 1 | 1 | 0 | 0 | 0 |
    795.87 | 218.89 | 1.0; 4 | 1 | 4 | 0 | 0 | 0 | 343.27 | 507.49 | 1.0; 4 | 1 | 8 | 0 | 0 | 0 | 260.86 | 677.14 |
    1.0; 4 | 1 | 32 | 0 | 0 | 0 | 155.93 | 1128.30 | 1.0; 4 | 1 | 64 | 0 | 0 | 0 | 144.17 | 1237.84 | 1.0; … 4 | 1 | 4
    | 4 | 4 | 16 | 356.15 | 476.37 | 2.556; 4 | 1 | 8 | 4 | 4 | 16 | 258.10 | 673.14 | 2.578; 4 | 1 | 32 | 4 | 4 | 16
    | 187.84 | 927.11 | 2.560; 4 | 1 | 64 | 4 | 4 | 16 | 135.72 | 1307.95 | 2.553. Env GPU: H100*4, Temperature = 0,
    Code: SGLang (SpecForge)". The reporter's open question: "Is the MoE architecture causing longer verification
    times due to high expert activation?"

    Engine facts: SpecForge's ``benchmarks/bench_eagle3.py`` launches SGLang per row with ``--cuda-graph-max-bs`` and
    ``--max-running-requests`` both at the row's batch size and runs the benchmark with that many parallel clients (a
    closed loop: the cap is the concurrency, nothing waits in the scheduler). An EAGLE round drafts
    ``--speculative-num-steps`` tokens in a top-k tree, verifies ``--speculative-num-draft-tokens`` per sequence in
    one target pass and yields the accepted prefix plus one token (``sglang:spec_accept_length`` counts that bonus
    token); SGLang's ITL histogram takes each streamed chunk's interval divided over its tokens. Arithmetic: the
    sweep's generated tokens are throughput × latency (~174,000 at this row over MT-Bench's 80 questions, ~2,200 an
    answer: Qwen3's thinking); at batch 32 a stream gets 927.11 ÷ 32 = 29.0 tokens/s with speculation (34.5 ms a
    token) and 1,128.30 ÷ 32 = 35.3 without (28.4 ms): speculation costs 18 % of the throughput and 22 % on every
    token, at an acceptance length of 2.560 for 16 drafted a round. So must propose a speculative turn, and every one
    proposed must be off or down (plain decoding is faster at this batch). Must never: enable it (it runs) or lengthen
    it, more sequences (the cap is the benchmark's 32 clients; nothing waits), a pool turn (~39,000 of 2.17 M tokens
    held, 1.8 %), replicas (one second; a closed loop of 32), a restart (it decodes).

    Not asserted: off rather than down (SGLang's gauges do not split acceptance by draft position, and the reporter
    measured no other draft shape at batch 32).

    Chosen where the report is silent: the pool :data:`QWEN3_30B_A3B_TP4_POOL`; MT-Bench prompts of ~120 tokens
    (chat template included); the first scrape halfway through the 80 questions (32 answered, 32 decoding, each
    holding its prompt and ~1,100 tokens); the window: 927 tokens decode, one answer finishes, the next question is
    admitted. SGLang of late 2025 (the SpecForge of the report) replayed with the 0.5.x exposition. SLO:
    :data:`THROUGHPUT_SLO`.
    """
    first, second = _eagle3_moe_scrapes(batch=32, spec_tps=927.11, accept=2.560, answered=32)
    return FieldState(
        id="sglang-qwen3-30b-a3b-tp4-eagle3-bs32-927-vs-1128-tps",
        source="https://github.com/Tencent/AngelSlim/issues/163",
        engine_version="SGLang of late 2025 via SpecForge bench_eagle3.py (0.5.x exposition, speculative gauges)",
        deployment=_eagle3_moe_deployment(32),
        scrapes=[(first, second)],
        snapshot={"requests_running": 32, "requests_waiting": 0, "kv_cache_capacity_tokens": QWEN3_30B_A3B_TP4_POOL},
        must_propose=[("speculative_decoding", None)],
        must_never=[
            ("speculative_decoding", "enable"),
            ("speculative_decoding", "increase"),
            ("max_num_seqs", "increase"),
            *POOL_TURNS,
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _spec_turns_only_down),
    )


def sglang_eagle3_moe_bs64_wins() -> FieldState:
    """Tencent/AngelSlim#163, the same sweep as the batch-32 row (:func:`sglang_eagle3_moe_bs32_loses`): "4 | 1 | 64 |
    0 | 0 | 0 | 144.17 | 1237.84 | 1.0" without speculation and "4 | 1 | 64 | 4 | 4 | 16 | 135.72 | 1307.95 | 2.553"
    with EAGLE-3 (4 steps, top-k 4, 16 draft tokens) on Qwen3-30B-A3B, TP 4, H100s.

    Engine facts as in the batch-32 row (SpecForge sets ``--max-running-requests`` and ``--cuda-graph-max-bs`` to the
    batch; a closed loop of 64 clients). Arithmetic: at batch 64 a stream gets 1,307.95 ÷ 64 = 20.4 tokens/s with
    speculation (48.9 ms a token) and 1,237.84 ÷ 64 = 19.3 without (51.7 ms): speculation wins 5.7 % at an
    acceptance length of 2.553, and the sweep's own latency column agrees (135.72 against 144.17). A plain step of
    64 sequences routing 8 of 128 experts each already reads nearly every expert, so a round's 16 verified tokens a
    sequence read no more weights than a plain step does. The engine runs far below a plain step's weight reads here
    (a 20-token/s stream of a 3B-active model on four H100s): the 48.9 ms is what this engine takes at this batch with
    or without speculation (51.7 ms without), so a verdict that prices plain decoding from a model of the step rather
    than from a measurement would book the whole gap to speculation. So must never turn speculation off (measured: it
    pays at this batch), nor enable it (it runs), more sequences (the cap is the 64 clients; nothing waits), a pool
    turn (~78,000 of 2.17 M tokens, 3.6 %), replicas (one second), a restart.

    Not asserted: a shorter draft (never measured at batch 64 in the report), or any TPOT turn (48.9 ms meets the
    throughput SLO).

    Chosen where the report is silent: as in the batch-32 row (pool, prompts, answers); the first scrape early in the
    80 questions (10 answered, 64 decoding, 6 still to send); the window: 1,308 tokens decode, one answer finishes
    and the next question is admitted. SLO: :data:`THROUGHPUT_SLO`.
    """
    first, second = _eagle3_moe_scrapes(batch=64, spec_tps=1_307.95, accept=2.553, answered=10)
    return FieldState(
        id="sglang-qwen3-30b-a3b-tp4-eagle3-bs64-1308-vs-1238-tps",
        source="https://github.com/Tencent/AngelSlim/issues/163",
        engine_version="SGLang of late 2025 via SpecForge bench_eagle3.py (0.5.x exposition, speculative gauges)",
        deployment=_eagle3_moe_deployment(64),
        scrapes=[(first, second)],
        snapshot={"requests_running": 64, "requests_waiting": 0, "kv_cache_capacity_tokens": QWEN3_30B_A3B_TP4_POOL},
        must_never=[
            ("speculative_decoding", "disable"),
            ("speculative_decoding", "enable"),
            ("max_num_seqs", "increase"),
            *POOL_TURNS,
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 4. SGLang: EAGLE-3 on Qwen3-8B at one stream, a 1.x speedup (less than the paper's, still a win) ---------------


def sglang_eagle3_qwen3_8b_bs1_modest_win() -> FieldState:
    """sgl-project/sglang#11948 ("[Bug] The speedup of Eagle3 in sglang is inconsistent with the paper and does not
    reach the speedup expected in the paper.", open, October 2025): "I used Qwen8 with sglang and Eagle3 for
    acceleration, but the overall speedup is only in the **1.x** range and doesn't reach the **5x** reported in the
    paper. I used AngelSlim/Qwen3-8B_eagle3, and the overall acceptance rate is around **0.5~**", served with
    ``--model Qwen3-8B --speculative-algorithm EAGLE3 --tensor-parallel-size 2 --speculative-draft-model-path
    AngelSlim/Qwen3-8B_eagle3 --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4
    --cuda-graph-max-bs 128`` on "NVIDIA A800-SXM4-80GB … sglang: 0.5.3.post3"; the log with EAGLE-3: "Prefill batch.
    #new-seq: 1, #new-token: 28 … Decode batch. #running-req: 1, #token: 186, token usage: 0.00, accept len: 1.95,
    accept rate: 0.49, cuda graph: True, gen throughput (token/s): 178.86 … accept len: 1.80 … 165.41 … accept len:
    2.05 … 188.68 … accept len: 1.80 … 165.59 … accept len: 1.57".

    Engine facts: ``accept len`` is ``sglang:spec_accept_length`` (the bonus token included; the log's ``accept
    rate`` is that length over the 4 tokens verified a round: 1.95 ÷ 4 = 0.49); ``gen throughput`` is the decode
    batch's tokens/s over the logging interval. Arithmetic: one stream at
    ~175 tokens/s is ~5.7 ms a token with speculation; "only in the 1.x range" puts plain decoding between 88 and
    175 tokens/s (5.7–11.4 ms): the reporter's complaint is the size of the win against the paper, not a loss. So
    must never turn speculation off (it is a win, if smaller than published), enable it (it runs), more TP or a
    pool turn (one stream, the pool ~0 % used), more sequences (one request), replicas (one second), a restart.

    Not asserted: a longer or shorter draft (the thread measures one shape), or the draft's quality (not a dial).

    Chosen where the report is silent: the reporter's normal-decode log is cut off in what could be read, so the
    plain rate is bounded only by "1.x"; prompts of ~28 tokens (the log's), answers of ~1,000 tokens one after
    another; the pool is the capacity pass's for SGLang's default fraction on two A800-80GB (841,801 tokens, an input
    here); the first scrape after 12 answers, the window: 175 tokens decode at an acceptance length of 1.95 and the
    13th answer finishes. SGLang 0.5.3.post3 rendered with the 0.5.x exposition and its speculative gauges. SLO: an
    interactive TTFT 2 s, TPOT 25 ms (both on SGLang's bucket bounds).
    """
    model = "Qwen/Qwen3-8B"
    pool = 841_801
    prompt, output, tps = 28, 1_000, 175.0
    tpot = 1 / tps
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=40_960, swa_tokens=0)

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 1.0, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 5)
        eng.g["gen_throughput"] = tps

    eng.finish(12, prompt=prompt, output=output, ttft=0.05, tpot=tpot, queue=0.0)
    eng.prompt["true"], eng.generation["true"] = 12.0 * prompt, 12.0 * output
    eng.itl.observe(tpot, 12 * (output - 1) + 825)
    gauges(prompt + 825.0)
    spec = sglang_spec_lines(eng, 1.95, 4.0, 3.0)
    first = eng.render() + spec
    eng.finish(1, prompt=prompt, output=output, ttft=0.05, tpot=tpot, queue=0.0)
    eng.prompt["true"] += prompt
    eng.generation["true"] += output
    eng.itl.observe(tpot, 175)
    gauges(prompt + 1.0)
    return FieldState(
        id="sglang-qwen3-8b-tp2-a800-eagle3-bs1-1x-speedup-stays-on",
        source="https://github.com/sgl-project/sglang/issues/11948",
        engine_version="SGLang 0.5.3.post3 (0.5.x exposition, speculative gauges)",
        deployment={
            "name": "qwen3-8b-tp2-eagle3",
            "engine": "sglang",
            "engine_version": "0.5.3.post3",
            "model": model,
            "gpu": "a800-80gb",
            "tensor_parallel_size": 2,
            "max_model_len": 40_960,
            "speculative_decoding": True,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.025, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render() + spec)],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("speculative_decoding", "disable"),
            ("speculative_decoding", "enable"),
            ("tensor_parallel_size", "increase"),
            *POOL_TURNS,
            ("max_num_seqs", None),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    sglang_embedding_frontend_bound(),
    sglang_eagle3_moe_bs32_loses(),
    sglang_eagle3_moe_bs64_wins(),
    sglang_eagle3_qwen3_8b_bs1_modest_win(),
]

XFAIL: dict[str, str] = {
    "sglang-qwen3-30b-a3b-tp4-eagle3-bs64-1308-vs-1238-tps": (
        "wrong disable, kept as the finding: the page cannot tell this batch (a 1.057x win) from the same report's "
        "bs32 "
        "row (a 0.82x loss, which passes): both measure ~5x the prior latency model's plain-decode TPOT (48.9 vs "
        "10.48 ms; 34.5 vs 9.23 ms), and the model is not calibrated on a speculating engine "
        "(speculative._per_token), so SpeculativeRule's per-token check (MEASURED_LOSS_BOUND, which assumes the model "
        "within 25 %) reads both as losses; what would tell them apart is the plain-decode TPOT, which the page of a "
        "speculating engine does not hold"
    ),
}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
