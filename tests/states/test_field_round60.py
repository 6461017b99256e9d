"""Field states, round 60: large MoE models on multi-GPU nodes — DeepSeek-R1 with DP attention and MTP at a light
load (nothing to turn), DeepSeek-R1 on H20 decode nodes at the batch its tuned recipe chose (nothing drastic), and
gpt-oss-120b admitting a 256-request burst of 6k-token prompts at its prefill rate (no pool or cap turn) — from
three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart as that engine version serves them: SGLang with DP attention through
:func:`tests.states.test_field_pools.sglang_text` (scheduler gauges per ``dp_rank``, tokenizer counters without it)
plus SGLang's speculative gauges per rank (``spec_accept_length``, ``spec_accept_rate``, ``spec_num_steps``,
``spec_num_draft_tokens``), vLLM through :class:`tests.states.VLLMEngine` (V1, the
0.11 label set for a December 2025 build). The assertions come from the reports' numbers and the verdict each thread
establishes, never from the advisor's output:

* ``sglang-dsr1-dp8-mtp-8-per-rank-accept-2.9-nothing-to-turn`` — sgl-project/sglang#6081 ("feat: mtp support
  dp-attention"): DeepSeek-R1 with ``--enable-dp-attention`` on 8 ranks and MTP, every rank "#running-req: 8 …
  token usage: 0.13, accept len: 2.58–2.94, cuda graph: True, gen throughput (token/s): 152–173, #queue-req: 0";
  "both acceptance rates and correctness are functioning properly … it's working well now". No advice at all.
* ``sglang-dsr1-h20-pd-decode-dp8-mtp-bs32-nothing-drastic`` — sgl-project/sglang#11854 (Ant Group's "Deploying
  DeepSeek-R1 on H20-96G with SGLang: Best Practices"): the decode node's example output at batch 32 a rank:
  "#running-req: 32, #token: 157952–168768, token usage: 0.21–0.22, accept len: 1.90–1.93 … #retracted-req: 0,
  cuda graph: True, gen throughput (token/s): 655–693, #queue-req: 0–2". A tuned recipe at its chosen batch: never
  speculation off or shorter, fewer sequences, a pool turn, more TP, replicas or a restart.
* ``vllm-gpt-oss-120b-burst-256-6k-prompts-admitted-at-prefill-rate`` — vllm-project/vllm#30738 (the MFU metric PR):
  "GPT-OSS 120B TP=1 BatchSize=256 Input=6K Output=3K NumBatch=1": "Avg prompt throughput: 37800.0 tokens/s …
  Running: 176 reqs, Waiting: 80 reqs, GPU KV cache usage: 25.6% … MFU: 521.2 TF/s/GPU". A one-shot burst admitted
  at the GPU's prefill rate while the pool is a quarter full: never a pool turn, more sequences, replicas or a
  restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tests.states import VLLMEngine, go_float
from tests.states.field import FieldState, round_tests
from tests.states.test_field_pools import sglang_text
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS

SPEC_DOWN = [("speculative_decoding", "disable"), ("speculative_decoding", "decrease")]
"""Speculation off or a shorter draft."""


def _spec_rank_lines(
    model: str, engine_type: str, ranks: Sequence[tuple[float, float, float]], *, start_rank: int = 0
) -> str:
    """SGLang's speculative gauges, one series per DP rank (``dp_rank`` label with DP attention; TP rank 0 of each
    attention group reporting): ``(accept_length, draft_tokens, steps)`` a rank; ``spec_accept_rate`` = accepted ÷
    proposed draft tokens = (accept_length − 1) ÷ (draft_tokens − 1)."""
    out: list[str] = []
    for name, text in (
        ("spec_accept_length", "Mean acceptance length of speculative decoding."),
        ("spec_accept_rate", "Speculative acceptance rate."),
        ("spec_num_steps", "Currently active speculative_num_steps."),
        ("spec_num_draft_tokens", "Currently active speculative_num_draft_tokens."),
    ):
        out += [f"# HELP sglang:{name} {text}", f"# TYPE sglang:{name} gauge"]
        for i, (accept, drafts, steps) in enumerate(ranks):
            value = {
                "spec_accept_length": accept,
                "spec_accept_rate": (accept - 1) / (drafts - 1) if drafts > 1 else 0.0,
                "spec_num_steps": steps,
                "spec_num_draft_tokens": drafts,
            }[name]
            labels = (
                f'dp_rank="{start_rank + i}",engine_type="{engine_type}",model_name="{model}",'
                'moe_ep_rank="0",pp_rank="0",tp_rank="0"'
            )
            out.append(f"sglang:{name}{{{labels}}} {go_float(value)}")
    return "\n".join(out) + "\n"


def _ranks(rows: Sequence[Mapping[str, float]], *, pool: int, context: int, page: int) -> list[dict[str, float]]:
    """Each rank's scheduler gauges: ``running``, ``queued``, ``used`` tokens and ``gen`` throughput."""
    out: list[dict[str, float]] = []
    for r in rows:
        usage = r["used"] / pool
        out.append(
            {
                "num_running_reqs": r["running"],
                "num_queue_reqs": r["queued"],
                "token_usage": round(usage, 2),
                "full_token_usage": usage,
                "max_total_num_tokens": pool,
                "context_len": context,
                "page_size": page,
                "gen_throughput": r["gen"],
            }
        )
    return out


# --- 1. SGLang (May 2025): DeepSeek-R1, DP attention on 8 ranks with MTP, 8 requests a rank -------------------------


def sglang_dsr1_dp8_mtp_light() -> FieldState:
    """sgl-project/sglang#6081 ("feat: mtp support dp-attention", merged): "Updates: The MTP now supports
    dp-attention, and both acceptance rates and correctness are functioning properly regardless of whether CUDA Graph
    is enabled or disabled … we have tested it, and it's working well now", with the log "[DP0 TP0] Decode batch.
    #running-req: 8, #token: 37217, token usage: 0.13, accept len: 2.90, cuda graph: True, gen throughput (token/s):
    171.01, #queue-req: 0", "[DP6 TP6] … #running-req: 8, #token: 36267, token usage: 0.12, accept len: 2.86 … 168.28",
    "[DP5 TP5] … 37565 … 0.13, accept len: 2.94 … 173.06", "[DP7 TP7] … 37357 … 0.13, accept len: 2.65 … 155.80",
    "[DP2 TP2] … 37787 … 0.13, accept len: 2.58 … 152.08", all "#queue-req: 0".

    Arithmetic from the log: each rank's pool is 37,217 ÷ 0.13 ≈ 286,000 tokens; 8 requests hold ~37,000 of it
    (13 %); no rank queues; 152–173 tokens/s over 8 streams is 19–22 tokens/s a stream (~45–52 ms a token) with MTP
    returning 2.6–2.9 tokens a round. The thread's verdict is that this runs as it should: speculation accepted at
    2.9 at a batch of 8 a rank (the small batch speculation is for), a pool at 13 %, no queue, no retraction. Nothing
    on the page asks for a turn: no advice at all (never speculation off or shorter, fewer or more sequences, a pool
    turn, more TP, replicas or a restart; no stall claimed).

    Chosen where the report is silent: the GPUs (8 × H200: 671 GB of FP8 weights leave each rank a ~286,000-token
    MLA pool at SGLang's default fraction; an H20's 96 GB would not), the MTP draft (``--speculative-num-steps 3
    --speculative-eagle-topk 1 --speculative-num-draft-tokens 4``: the accepted lengths near 3 need at least three
    draft tokens), context 163,840 (DeepSeek-R1's), the ranks the log does not print (DP1, DP3, DP4) like its
    neighbours; the window: ~1,320 tokens generated over the 8 ranks, one request finishing and one admitted. SGLang
    of May 2025 (0.4.6) replayed with the 0.5.x per-rank exposition. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model = "deepseek-ai/DeepSeek-R1"
    pool, context = 286_000, 163_840
    used = [37_217, 37_400, 37_787, 37_300, 37_500, 37_565, 36_267, 37_357]
    gen = [171.01, 165.0, 152.08, 160.0, 166.0, 173.06, 168.28, 155.80]
    accept = [2.90, 2.80, 2.58, 2.75, 2.85, 2.94, 2.86, 2.65]

    def page(step: float, prompt: float, generation: float, requests: float) -> str:
        rows = [
            {"running": 8.0, "queued": 0.0, "used": u + step * 21, "gen": g} for u, g in zip(used, gen, strict=True)
        ]
        text = sglang_text(
            model,
            _ranks(rows, pool=pool, context=context, page=1),
            prompt=prompt,
            generation=generation,
            requests=requests,
            retracted=0.0,
        )
        return text + _spec_rank_lines(model, "unified", [(a, 4.0, 3.0) for a in accept])

    first = page(0, 1_600 * 900.0, 1_600 * 1_200.0, 1_600)
    second = page(1, 1_601 * 900.0, 1_600 * 1_200.0 + 1_311.0, 1_601)
    return FieldState(
        id="sglang-dsr1-dp8-mtp-8-per-rank-accept-2.9-nothing-to-turn",
        source="https://github.com/sgl-project/sglang/pull/6081",
        engine_version="SGLang 0.4.6 (May 2025; DP attention 8 ranks + MTP; replayed with the 0.5.x exposition)",
        deployment={
            "name": "dsr1-dp8-mtp",
            "engine": "sglang",
            "engine_version": "0.4.6",
            "model": model,
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "max_model_len": context,
            "speculative_decoding": True,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 64, "requests_waiting": 0},
        no_advice=True,
        must_never=[
            *SPEC_DOWN,
            ("max_num_seqs", None),
            *POOL_TURNS,
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. SGLang (October 2025): DeepSeek-R1 decode node on H20-96G, DP attention + MTP at 32 a rank -----------------


def sglang_dsr1_h20_pd_decode_bs32() -> FieldState:
    """sgl-project/sglang#11854 ("[Don't merge] Deploying DeepSeek-R1 on H20-96G with SGLang: Best Practices",
    October 2025; the reproduction of LMSYS's "Together with SGLang: Best Practices for Serving DeepSeek-R1 on
    H20-96G"): "We recommend running four containers: two for Prefill nodes and two for Decode nodes", and the decode
    node's "Example Output (for batch size = 32)": "[DP3 TP3 EP3] Decode batch. #running-req: 32, #token: 157952,
    token usage: 0.21, accept len: 1.93, pre-allocated usage: 0.00, #retracted-req: 0, cuda graph: True, gen
    throughput (token/s): 693.45, #queue-req: 0", "[DP5 …] 32, 164224, 0.22, 1.92 … 674.19, #queue-req: 1", "[DP2 …]
    32, 162112, 0.22, 1.90 … 655.17, 1", "[DP4 …] 32, 168768, 0.22, 1.93 … 679.00, 2", "[DP7 …] 32, 157696, 0.21,
    1.92".

    Arithmetic from the log: each rank's pool is 157,952 ÷ 0.21 ≈ 752,000 tokens; 32 requests hold ~160,000 of it
    (~5,000 tokens each); 655–693 tokens/s over 32 streams is ~21 tokens/s a stream (~47 ms a token) with MTP
    returning ~1.92 tokens a round; no retraction; at most 2 wait a rank. The report's verdict is its recipe: batch
    32 a rank with MTP is the configuration chosen for this node, and the log is the node serving at it. So nothing
    drastic: never speculation off or shorter (1.92 of 2 accepted: the draft lands almost always), never fewer
    sequences (the batch is the recipe's), a pool turn (21 % used), more TP, replicas (one second), a restart; no stall
    claimed.

    Not asserted: more sequences a rank. The recipe's own batch-48 run (the same PR) holds 0.76 of the pool with 13–17
    queued a rank; whether 48 beats 32 is the recipe's latency target, which the page does not state.

    Chosen where the report is silent: the decode launch is not quoted in the excerpt: DP attention over the node's
    8 GPUs (``--tp 8 --dp 8 --enable-dp-attention``, page size 64), MTP ``--speculative-num-steps 1
    --speculative-num-draft-tokens 2`` (accept lengths of 1.90–1.93 sit just under 2), ``--max-running-requests`` 32
    a rank, context 65,536; the ranks the log does not print (DP0, DP1, DP6) like their neighbours; the decode node's
    disaggregation queues empty (no pre-allocated usage); the window: ~5,440 tokens generated over 8 ranks, 4
    requests finishing and 4 arriving from prefill. This node's own ``/metrics`` (its 8 schedulers). SGLang of
    October 2025 (0.5.3), 0.5.x exposition with ``engine_type="decode"``. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model = "deepseek-ai/DeepSeek-R1"
    pool, context = 752_000, 65_536
    used = [160_000, 161_000, 162_112, 157_952, 168_768, 164_224, 159_000, 157_696]
    gen = [670.0, 680.0, 655.17, 693.45, 679.00, 674.19, 665.0, 662.0]
    queued = [0.0, 1.0, 1.0, 0.0, 2.0, 1.0, 0.0, 0.0]
    accept = [1.92, 1.91, 1.90, 1.93, 1.93, 1.92, 1.91, 1.92]

    def page(step: float, generation: float, requests: float) -> str:
        rows = [
            {"running": 32.0, "queued": q, "used": u + step * 680, "gen": g}
            for u, g, q in zip(used, gen, queued, strict=True)
        ]
        ranks = _ranks(rows, pool=pool, context=context, page=64)
        for r in ranks:
            r["num_decode_prealloc_queue_reqs"] = 0.0
            r["num_decode_transfer_queue_reqs"] = 0.0
        text = sglang_text(
            model, ranks, engine_type="decode", prompt=0.0, generation=generation, requests=requests, retracted=0.0
        )
        return text + _spec_rank_lines(model, "decode", [(a, 2.0, 1.0) for a in accept])

    first = page(0, 40_000 * 1_000.0, 40_000)
    second = page(1, 40_000 * 1_000.0 + 5_439.0, 40_004)
    return FieldState(
        id="sglang-dsr1-h20-pd-decode-dp8-mtp-bs32-nothing-drastic",
        source="https://github.com/sgl-project/sglang/pull/11854",
        engine_version="SGLang 0.5.3 (October 2025; PD decode node, DP attention 8 ranks + MTP)",
        deployment={
            "name": "dsr1-h20-decode",
            "engine": "sglang",
            "engine_version": "0.5.3",
            "model": model,
            "gpu": "h20",
            "tensor_parallel_size": 8,
            "max_model_len": context,
            "max_num_seqs": 32,
            "speculative_decoding": True,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 256, "requests_waiting": 5},
        must_never=[
            *SPEC_DOWN,
            ("max_num_seqs", "decrease"),
            *POOL_TURNS,
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 3. vLLM (December 2025): gpt-oss-120b admits a 256-request burst of 6k-token prompts at its prefill rate -------


def vllm_gpt_oss_burst_prefill_bound() -> FieldState:
    """vllm-project/vllm#30738 ("[Metrics] Model FLOPs Utilization estimation", merged December 2025): "GPT-OSS 120B
    TP=1 BatchSize=256 Input=6K Output=3K NumBatch=1": "18:32:22 … Avg prompt throughput: 29400.6 tokens/s, Avg
    generation throughput: 8.7 tokens/s, Running: 50 reqs, Waiting: 206 reqs, GPU KV cache usage: 9.1% … MFU: 405.0
    TF/s/GPU"; "18:32:32 … 37799.9 tokens/s … Running: 113 reqs, Waiting: 143 reqs, GPU KV cache usage: 17.4% … MFU:
    521.0 TF/s/GPU"; "18:32:42 … 37800.0 tokens/s, Avg generation throughput: 46.5 tokens/s, Running: 176 reqs,
    Waiting: 80 reqs, GPU KV cache usage: 25.6% … MFU: 521.2 TF/s/GPU".

    Arithmetic from the log: all 256 requests arrive at once; 63 are admitted every 10 s (37,800 prompt tokens/s ÷
    ~6,000 a prompt ≈ 6.3 a second), the queue falls 206 → 143 → 80 and is empty ~13 s later; the GPU is computing
    prompts at 521 TF/s (the PR's measured MFU), and the pool is a quarter full (176 running hold ~1.06 M tokens at
    25.6 %: ~4.1 M tokens). The thread's own reading is the MFU line: the queue waits on prefill compute, not on KV
    or on the sequence cap, and it is a finite burst that drains on its own. So: never a pool turn (fp8 KV, a larger
    memory budget, lighter weights: 74 % is free), never more sequences (176 run under the cap, and admission is
    prefill-bound), never replicas (one second; a burst is no arrival rate), a restart (37,800 tokens/s flow), or
    fewer sequences; no stall claimed.

    Not asserted: more TP or a larger prefill budget (``max_num_batched_tokens``): either might drain the burst
    faster, which the PR does not measure.

    Chosen where the report is silent: the GPU (one B200: the ~4.1 M-token pool the usage implies does not fit an
    H200 beside 65 GB of MXFP4 weights), vLLM 0.13 of December 2025 (0.11 label set, V1), ``max_num_seqs`` 256 (the
    batch), ``max_model_len`` 10,240 (6K in + 3K out), 4 096 000 tokens of pool (256,000 blocks of 16), prefix
    caching on with no hits; the window: 1 s around 18:32:42, 6.3 requests admitted (37,800 prompt tokens), 46.5
    tokens generated, nothing finishing. SLO: TTFT 60 s, TPOT 0.1 s (a batch job's; the report states none).
    """
    model = "openai/gpt-oss-120b"
    eng = VLLMEngine(model_name=model, num_gpu_blocks=256_000, max_model_len=10_240, gpu_memory_utilization=0.9)
    eng.first_tokens([2.0 + 0.2 * i for i in range(170)])
    eng.prefill(170 * 6_000.0)
    eng.decode(2_000.0, 0.2, steps=60, batch=30.0)
    eng.running, eng.waiting, eng.kv_usage = 170.0, 86.0, 0.248
    first = eng.render()
    eng.first_tokens([36.0 + 0.2 * i for i in range(6)])
    eng.prefill(37_800.0)
    eng.decode(46.5, 0.9, steps=1, batch=46.5)
    eng.running, eng.waiting, eng.kv_usage = 176.0, 80.0, 0.256
    return FieldState(
        id="vllm-gpt-oss-120b-burst-256-6k-prompts-admitted-at-prefill-rate",
        source="https://github.com/vllm-project/vllm/pull/30738",
        engine_version="vLLM 0.13 (December 2025; V1, 0.11 label set)",
        deployment={
            "name": "gpt-oss-120b-b200",
            "engine": "vllm",
            "engine_version": "0.13.0",
            "model": model,
            "gpu": "b200",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 10_240,
            "max_num_seqs": 256,
            "slo": {"ttft_seconds": 60.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 176, "requests_waiting": 80},
        must_never=[
            *POOL_TURNS,
            ("max_num_seqs", None),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    sglang_dsr1_dp8_mtp_light(),
    sglang_dsr1_h20_pd_decode_bs32(),
    vllm_gpt_oss_burst_prefill_bound(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
