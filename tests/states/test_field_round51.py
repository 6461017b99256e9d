"""Field states, round 51: large MoE deployments (DeepSeek-V3/R1 class, MLA, 671B) on SGLang with DP attention or
tensor parallelism across nodes, where the aggregate page invites a turn of the wrong dial — a PD decode server whose
``total_tokens`` dispatcher piles 21 preallocations onto DP0 while other ranks hold a tenth of their pools, a DP
attention server whose round-robin leaves DP5 overloaded beside DP2 running 2, and two multi-node TP 16 servers whose
decode step is the network's all-reduces, not their GPUs' memory reads — from four public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as SGLang 0.5.x serves them (:class:`tests.states.SGLangEngine`'s tokenizer-manager
counters and histograms; with DP attention every DP rank's scheduler gauges labelled ``dp_rank``, as in round 30; on
a PD decode server ``engine_type="decode"`` and the scheduler's ``num_decode_prealloc_queue_reqs`` /
``num_decode_transfer_queue_reqs`` per rank, as in round 41). The assertions come from the reports' numbers, the
verdict each thread establishes and engine facts, never from the advisor's output:

* ``sglang-pd-decode-dp8-total-tokens-prealloc-21-on-dp0-others-idle`` — "[DP0] #running-req: 1, #token: 106752,
  token_usage: 0.67, #prealloc-req: 21 … [DP4] … token_usage: 0.09 … [DP5] #running-req: 2, #token: 150272,
  token_usage: 0.94"; "DP2/DP4/DP6 had plenty of free memory but received no new requests". The dispatcher is the
  fault (the PR fixes ``DPBudget.dispatch()``): spread the load; never a pool turn (the ranks together hold 36 %),
  more running requests, more TP, replicas or a restart.
* ``sglang-dp-attention-round-robin-dp5-overloaded-dp2-runs-2`` — "note how DP5 is overloaded, while DP2 only has 2
  requests running … the overloaded rank will not recover due to current schedule policy". The fix is the dispatch
  (``shortest_queue``): spread the load first; never a pool turn, more sequences, more TP, replicas or a restart.
* ``sglang-deepseek-v3-tp16-over-16-nodes-1.5-tokens-per-s`` — ``--tp 16 --nnodes 16`` on "16 Nvidia H100 GPU
  nodes", ``--disable-cuda-graph``: "only ~1.5 tokens/s". 122 all-reduces a token cross the nodes' network; the
  GPUs' own reads are ~1 % of the step. Never more TP, lighter weights or KV, replicas, a restart.
* ``sglang-deepseek-r1-tp16-two-h100-nodes-19-tokens-per-s-vllm-30`` — TP 16 over 2 × 8 H100 (IB): "推理速度只有
  19tokens/s, vllm部署的推理速度有30tokens/s". The same weights and GPUs stream at 30 tokens/s under another engine:
  not a capacity figure. Never more TP, lighter weights or KV, replicas, a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tests.states import SGLangEngine, go_float
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all

MODEL = "deepseek-ai/DeepSeek-V3"

_RANK_GAUGES = (
    ("num_running_reqs", "The number of running requests."),
    ("num_queue_reqs", "The number of requests in the waiting queue."),
    ("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
    ("page_size", "KV cache page size in tokens."),
    ("num_pages", "Number of KV cache pages."),
    ("context_len", "Maximum context length."),
    ("gen_throughput", "The generation throughput (token/s)."),
    ("token_usage", "The token usage."),
    ("full_token_usage", "The token usage for full attention layers."),
    ("num_used_tokens", "The number of used tokens."),
    ("kv_used_tokens", "Used KV token slots."),
    ("kv_available_tokens", "Available KV token slots."),
)
"""The scheduler gauges rendered once per DP rank (SGLang's ``SchedulerMetricsCollector``, each DP group's attention
TP rank 0 reporting); the tokenizer-manager families stay one process's, without ``dp_rank``."""

_DECODE_QUEUE_GAUGES = (
    ("num_decode_prealloc_queue_reqs", "The number of requests in the decode prealloc queue."),
    ("num_decode_transfer_queue_reqs", "The number of requests in the decode transfer queue."),
)
"""A PD decode server's disaggregation queues (requests waiting for decode-side KV memory; requests whose KV is
arriving), per DP rank."""


def _rank(*, running: float, queue: float, used: float, pool: float, page: float, ctx: float, step: float) -> dict:
    """One DP rank's scheduler gauges: ``used`` of ``pool`` token slots, ``running`` decoding at ``step`` s a token."""
    return {
        "num_running_reqs": running,
        "num_queue_reqs": queue,
        "max_total_num_tokens": pool,
        "page_size": page,
        "num_pages": pool / page,
        "context_len": ctx,
        "gen_throughput": round(running / step, 1),
        "token_usage": round(used / pool, 2),
        "full_token_usage": used / pool,
        "num_used_tokens": used,
        "kv_used_tokens": used,
        "kv_available_tokens": pool - used,
    }


def _sglang_dp_ranks_page(
    eng: SGLangEngine, ranks: Sequence[Mapping[str, float]], *, engine_type: str = "unified"
) -> str:
    """One SGLang ``/metrics`` with DP attention: each DP rank's scheduler gauges labelled ``dp_rank`` (and, on a
    decode server, its prealloc/transfer queues), then ``eng``'s page without its own scheduler gauges (the
    tokenizer-manager counters and histograms, and the queue-time histogram); ``engine_type`` as the server's
    ``--disaggregation-mode`` sets it."""
    gauges = list(_RANK_GAUGES) + ([*_DECODE_QUEUE_GAUGES] if engine_type == "decode" else [])
    names = {f"sglang:{n}" for n, _ in gauges} | {f"sglang:{n}" for n in eng.g}
    out: list[str] = []
    for name, text in gauges:
        out += [f"# HELP sglang:{name} {text}", f"# TYPE sglang:{name} gauge"]
        for i, r in enumerate(ranks):
            labels = (
                f'dp_rank="{i}",engine_type="{engine_type}",model_name="{eng.model_name}",moe_ep_rank="0",'
                'pp_rank="0",tp_rank="0"'
            )
            out.append(f"sglang:{name}{{{labels}}} {go_float(r[name])}")
    for line in eng.render().splitlines():
        token = line.split(" ", 3)[2] if line.startswith("# ") else line.split("{", 1)[0].split(" ", 1)[0]
        if token in names:
            continue
        out.append(line.replace('engine_type="unified"', f'engine_type="{engine_type}"'))
    return "\n".join(out) + "\n"


def _served(eng: SGLangEngine, n: int, *, prompt: float, output: float, ttft: float, tpot: float, queue: float) -> None:
    """``n`` requests answered: the tokenizer manager counts their tokens and observes their latencies at the end."""
    eng.finish(n, prompt=prompt, output=output, ttft=ttft, tpot=tpot, queue=queue)
    eng.prompt["true"] += n * prompt
    eng.generation["true"] += n * output


# --- 1. SGLang PD decode, DP 8: total_tokens dispatch piles 21 preallocations on DP0, other ranks hold a tenth -------


def sglang_pd_decode_prealloc_piled_on_dp0() -> FieldState:
    """sgl-project/sglang#22614 ("Fix: Add token heuristic increment in ``total_tokens`` load balancing", merged,
    2026-04-12): "When using disaggregated (PD-separated) deployment with ``--load-balance-method total_tokens`` and
    multiple DP workers, we observed that prealloc requests can pile up on a single DP worker (e.g.,
    ``#prealloc-req: 21`` on DP0) while other DP workers remain nearly idle. **Production logs showing the
    imbalance:** ``[DP0] #running-req: 1, #token: 106752, token_usage: 0.67, #prealloc-req: 21, #transfer-req: 0``
    ``[DP1] #running-req: 1, #token: 32064, token_usage: 0.20, #prealloc-req: 0, #transfer-req: 1`` ``[DP2]
    #running-req: 1, #token: 25856, token_usage: 0.16 …`` ``[DP3] #running-req: 1, #token: 62592, token_usage: 0.39
    … #transfer-req: 1`` ``[DP4] #running-req: 1, #token: 14016, token_usage: 0.09 …`` ``[DP5] #running-req: 2,
    #token: 150272, token_usage: 0.94 …`` DP0 accumulated 21 prealloc requests that could not proceed to transfer
    because KV memory was exhausted (``token_usage: 0.67`` + prealloc overhead). Meanwhile, DP2/DP4/DP6 had plenty of
    free memory but received no new requests." Root cause: ``DPBudget.dispatch()`` picks the rank with the fewest
    ``total_tokens`` from asynchronous load reports, so a burst between two reports lands on the same rank; the fix
    adds each dispatched request's tokens to its rank's estimate at once.

    Engine facts (SGLang, ``python/sglang/srt/disaggregation/decode.py``, ``data_parallel_controller.py``): with DP
    attention every DP rank has its own KV pool (an MLA latent cache is per attention group); the controller assigns
    a request to one rank and a decode rank preallocates its KV in its own pool before the prefill side sends it — a
    request waiting in DP0's prealloc queue cannot use DP4's free memory. Arithmetic: each rank's pool is
    106,752 ÷ 0.67 ≈ 150,272 ÷ 0.94 ≈ 32,064 ÷ 0.20 ≈ 159,700 tokens (159,744 here); the eight ranks hold 456,832 of
    1,277,952 tokens (36 %), 9 requests run (1–2 a rank), 21 wait, all on DP0. So the binding limit is where the
    dispatcher put the requests: spread the load (the dispatch the PR fixes); and must never a pool turn (64 % of the
    pool is free, on the ranks that get no requests), more running requests (1–2 run a rank: the cap is not what
    binds), more TP, replicas (one second; and seven ranks have room), a restart (tokens flow); no stall claimed.

    Chosen where the report is silent, and the stand-ins: the model and GPUs are not named; DeepSeek-V3 (MLA, fp8)
    stands in with fp8 KV on 8 × H20 (TP 8, DP 8 attention) at a per-rank pool of 159,744 tokens (an input, 2,496
    pages of 64); DP6 and DP7, not in the quoted log, run 1 each at 20,480 and 44,800 tokens; context 131,072 (the
    128K DeepSeek's API serves; one rank's pool holds a max-length request, DP0's 106,752 and DP5's 150,272 fit). SGLang
    of April 2026 with the 0.5.x exposition. History: 2,000 requests answered (TTFT ~8 s: the prealloc wait),
    ~30 ms a token. The window: every stream decodes ~33 tokens; nothing is dispatched elsewhere, DP0's 21 stay.
    SLO: TTFT 10 s, TPOT 0.05 s.
    """
    pool, page, ctx, step = 159_744.0, 64.0, 131_072.0, 0.03
    running = [1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0]
    used = [106_752.0, 32_064.0, 25_856.0, 62_592.0, 14_016.0, 150_272.0, 20_480.0, 44_800.0]
    prealloc = [21.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    transfer = [0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    eng = SGLangEngine(model_name=MODEL, max_total_num_tokens=int(pool), context_len=int(ctx), swa_tokens=0)
    _served(eng, 2_000, prompt=20_000, output=1_000, ttft=8.0, tpot=step, queue=7.5)
    eng.itl.observe(step, 2_000 * 999)

    def ranks(grow: float) -> list[dict]:
        out = []
        for i in range(8):
            r = _rank(
                running=running[i],
                queue=0.0,
                used=used[i] + grow * running[i],
                pool=pool,
                page=page,
                ctx=ctx,
                step=step,
            )
            r["num_decode_prealloc_queue_reqs"] = prealloc[i]
            r["num_decode_transfer_queue_reqs"] = transfer[i]
            out.append(r)
        return out

    first = _sglang_dp_ranks_page(eng, ranks(0.0), engine_type="decode")
    eng.itl.observe(step, 33 * sum(running))
    second = _sglang_dp_ranks_page(eng, ranks(33.0), engine_type="decode")
    return FieldState(
        id="sglang-pd-decode-dp8-total-tokens-prealloc-21-on-dp0-others-idle",
        source="https://github.com/sgl-project/sglang/pull/22614",
        engine_version="SGLang of April 2026, PD decode, --enable-dp-attention --dp 8, total_tokens (0.5.x exposition)",
        deployment={
            "name": "dsv3-pd-decode-dp8-h20",
            "engine": "sglang",
            "model": MODEL,
            "gpu": "h20",
            "tensor_parallel_size": 8,
            "data_parallel_size": 8,
            "enable_expert_parallel": True,
            "kv_cache_dtype": "fp8_e4m3",
            "max_model_len": int(ctx),
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": sum(running), "kv_cache_capacity_tokens": 8 * pool},
        must_propose=[("load_balancer", None)],
        must_never=[
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. SGLang DP attention, round-robin dispatch: DP5 overloaded, DP2 runs 2 ------------------------------------


def sglang_dp_attention_dp5_overloaded() -> FieldState:
    """sgl-project/sglang#3526 ("[optimize][scheduler] implement shortest-queue method", 2025-02-12): "We experience a
    high unbalanced workload for different DP workers when we ``--enable-dp-attention``. For example, note how DP5 is
    overloaded, while DP2 only has 2 requests running … And the overloaded rank will not recover due to current
    schedule policy. To solve this problem, we should use ``shortest_queue`` schedule method … we use a tuple
    ``(queue-reqs, running-reqs, dp-rank)`` to represent the actual payload of each scheduler. The result shows now
    the ranks are pretty balanced". The same on DeepSeek-R1 (sgl-project/sglang#6872): "the number of requests
    between different DPs was unbalanced … Because of the communication and synchronization operations, the final
    time will be slowed down by the DP with the longest sequence."

    Engine facts (SGLang ``data_parallel_controller.py``): the controller's default dispatch is round robin, blind to
    each rank's load; with DP attention each rank holds its own requests and its own KV pool, and every MoE layer
    synchronises all ranks (the experts' all-to-all), so every rank's step is as long as the heaviest rank's.
    Arithmetic (the pool per rank is round 30's figure for this deployment, 667,902 tokens: an input): DP5 runs 120
    holding ~5,330 tokens each (640,000: 96 % of its pool) with 60 queued for its memory; six ranks run 24 (18 %), DP2
    runs 2 (1.5 %); the eight pools hold 26 % together. DP5's batch sets the step at ~70 ms for all 266 streams (the
    others alone would step in well under half). So the binding limit is where the requests were put: spread the load
    first; and must never a pool turn or more sequences (sized on DP5, they add memory and slots to seven ranks that
    do not use theirs), more TP (the step is DP5's batch, not the GPUs' count), replicas (one second), a restart.

    Chosen where the report is silent (its figures are a screenshot): DeepSeek-V3 on 8 × H200, ``--tp 8 --dp 8
    --enable-dp-attention`` at the default memory fraction, context 163,840; the loads above; a benchmark of 4,096
    prompt and 2,048 output tokens, 3,000 answered (TTFT ~3 s), ~70 ms a token. SGLang 0.4.3 (February 2025)
    rendered with the 0.5.x exposition. The window: every stream decodes ~14 tokens; DP5 finishes one and admits one
    from its queue, which another arrival refills. SLO: TTFT 10 s, TPOT 0.05 s.
    """
    pool, page, ctx, step = 667_902.0, 1.0, 163_840.0, 0.07
    loads = [(24.0, 0.0, 127_920.0)] * 8
    loads[5] = (120.0, 60.0, 640_000.0)
    loads[2] = (2.0, 0.0, 10_660.0)
    eng = SGLangEngine(model_name=MODEL, max_total_num_tokens=int(pool), context_len=int(ctx), swa_tokens=0)
    _served(eng, 3_000, prompt=4_096, output=2_048, ttft=3.0, tpot=step, queue=2.5)
    eng.itl.observe(step, 3_000 * 2_047)

    def ranks(grow: float) -> list[dict]:
        return [
            _rank(running=r, queue=q, used=u + grow * r, pool=pool, page=page, ctx=ctx, step=step) for r, q, u in loads
        ]

    first = _sglang_dp_ranks_page(eng, ranks(0.0))
    _served(eng, 1, prompt=4_096, output=2_048, ttft=30.0, tpot=step, queue=29.0)
    eng.itl.observe(step, 14 * sum(r for r, _, _ in loads))
    second = _sglang_dp_ranks_page(eng, ranks(14.0))
    return FieldState(
        id="sglang-dp-attention-round-robin-dp5-overloaded-dp2-runs-2",
        source="https://github.com/sgl-project/sglang/pull/3526",
        engine_version="SGLang 0.4.3, --enable-dp-attention --dp 8, round-robin dispatch (0.5.x exposition)",
        deployment={
            "name": "dsv3-dp8-h200-round-robin",
            "engine": "sglang",
            "model": MODEL,
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "data_parallel_size": 8,
            "max_model_len": int(ctx),
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 120 + 6 * 24 + 2, "requests_waiting": 60, "kv_cache_capacity_tokens": 8 * pool},
        named=("rank 5", "rank 2"),
        must_first=("load_balancer", "set"),
        must_never=[
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 3./4. DeepSeek on SGLang, TP 16 across nodes: the step is the network's ----------------------------------------

_NETWORK_BOUND_NEVER = [
    ("tensor_parallel_size", "increase"),
    ("weight_quantization", None),
    ("kv_cache_dtype", None),
    ("replicas", "increase"),
    RESTART,
]
"""A decode step made of inter-node all-reduces: more TP adds hops, lighter weights or KV shorten a memory read that
is a percent of the step, and one second sizes no replica count; the engine streams, so no restart."""


def _single_stream_pages(
    *, served: str, pool: int, page: float, answered: int, prompt: float, output: float, ttft: float, tpot: float
) -> tuple[str, str]:
    """One SGLang server (no DP attention: TP rank 0 reporting), one stream decoding at ``tpot``: history of
    ``answered`` requests, then a window of one second."""
    eng = SGLangEngine(model_name=served, max_total_num_tokens=pool, context_len=163_840, swa_tokens=0)
    eng.g["page_size"], eng.g["num_pages"] = page, pool / page
    _served(eng, answered, prompt=prompt, output=output, ttft=ttft, tpot=tpot, queue=0.01)
    eng.itl.observe(tpot, answered * (output - 1))
    held = prompt + output / 2
    eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 1.0, 0.0
    eng.g["gen_throughput"] = round(1 / tpot, 1)

    def usage(used: float) -> None:
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = round(used / pool, 2)
        eng.g["full_token_usage"] = used / pool

    usage(held)
    first = eng.render()
    tokens = max(1, round(1 / tpot))
    eng.itl.observe(tpot, tokens)
    usage(held + tokens)
    return first, eng.render()


def sglang_tp16_over_16_nodes() -> FieldState:
    """sgl-project/sglang#2794 ("[Bug] deepseek v3 inference on multiple nodes is very slow", closed, 2025-01-08): "We
    can run the deepseek v3 model on mutliple GPU nodes (like 16), but found it was very slow, only ~1.5 tokens/s, any
    issues with the multiple nodes serving, or any configuration issues? … ``python3 -m sglang.launch_server
    --model-path /mnt/blob/deepseek/ --tp 16 --dist-init-addr $ip:20000 --nnodes 16 --node-rank 0
    --enable-torch-compile --quantization fp8 --kv-cache-dtype fp8_e5m2 --disable-cuda-graph --trust-remote-code``
    … Environment: 16 Nvidia H100 GPU nodes"; the maintainer's first question: "Why did you disable CUDA Graph?"

    Engine facts: ``--tp 16 --nnodes 16`` puts one TP rank on each node, so every tensor-parallel collective crosses
    the nodes' network; DeepSeek-V3's decode step all-reduces twice a layer (attention output, MoE output) over 61
    layers: 122 network all-reduces a token, each launched from the host with CUDA graphs off. The MLA latent cache is
    replicated on every TP rank (one KV head), so TP 16 does not enlarge it either. Arithmetic: 1 ÷ 1.5 = 667 ms a
    token ÷ 122 ≈ 5.5 ms an all-reduce (host launch plus a network round over 16 nodes); the GPU's own work — ~37 B
    active parameters in fp8 ÷ 16 ranks ≈ 2.3 GB read at ~3.35 TB/s ≈ 0.7 ms — is ~0.1 % of the step, the KV read
    less. So must never: more TP (more ranks over the network: more hops per all-reduce, no larger latent cache),
    lighter weights or KV (they shorten the 0.7 ms, not the 666), replicas (one second), a restart (the stream
    flows: 1.5 tokens a second); no stall claimed; and no context cap below DeepSeek-V3's 163,840 (the pool holds it
    many times over).

    Not asserted: a pipeline or DP-attention layout (TP within a node, PP or DP across nodes) — the thread's first
    answer is the CUDA graph, and which layout serves best it does not measure.

    Chosen where the report is silent: one request at a time (the "tokens/s" of one stream), prompts of ~500 tokens
    and 512 generated, 20 answered (TTFT ~3 s); the pool 720,000 tokens (an input: fp8 KV on 80 GB with ~42 GB of
    weights a rank); the page names the model by its ``--model-path`` (no ``--served-model-name``). SGLang 0.4.1
    (January 2025) rendered with the 0.5.x exposition. The window: the stream decodes
    1–2 tokens. SLO: TTFT 10 s, TPOT 0.1 s.
    """
    first, second = _single_stream_pages(
        served="/mnt/blob/deepseek/",
        pool=720_000,
        page=1.0,
        answered=20,
        prompt=500,
        output=512,
        ttft=3.0,
        tpot=1 / 1.5,
    )
    return FieldState(
        id="sglang-deepseek-v3-tp16-over-16-nodes-1.5-tokens-per-s",
        source="https://github.com/sgl-project/sglang/issues/2794",
        engine_version="SGLang 0.4.1, --tp 16 --nnodes 16 (one H100 a node), CUDA graph off (0.5.x exposition)",
        deployment={
            "name": "dsv3-tp16-16-nodes",
            "engine": "sglang",
            "model": MODEL,
            "served_model": "/mnt/blob/deepseek/",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 16,
            "quantization": "fp8",
            "kv_cache_dtype": "fp8_e5m2",
            "max_model_len": 163_840,
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": 720_000},
        must_never=_NETWORK_BOUND_NEVER,
        extra_check=_all(no_stall_claimed, _cap_at_least(163_840)),
    )


def sglang_tp16_two_h100_nodes_19_vs_30() -> FieldState:
    """sgl-project/sglang#3656 (open, 2025-02-18), its title: "2*H100 2*8*80G部署DeepSeek R1,
    推理速度只有19tokens/s,vllm部署的推理速度有30tokens/s，这正常吗" (is this normal?); its text:
    "2*H100 2*8*80G部署DeepSeek R1,推理速度只有19tokens/s,vllm部署的推理速度有30tokens/s" (on two
    nodes of 8 × H100 80 GB, DeepSeek-R1 streams at only 19 tokens/s; deployed with vLLM at 30 tokens/s), launched
    with ``NCCL_IB_DISABLE=0 NCCL_IB_HCA=mlx5 … python3 -m sglang.launch_server --model-path
    /data/models/DeepSeek-R1 --tp 16 --dist-init-addr … --nnodes 2 --node-rank 0 --trust-remote-code``; "我没有使用
    --enable-dp-attention，一旦使用--enable-dp-attention就会报错" (without DP attention: enabling it errors); the
    maintainers ask for the workload and concurrency.

    Engine facts: TP 16 over two nodes puts half of every all-reduce's ring on InfiniBand; DeepSeek-R1's decode step
    is 122 of them (two a layer, 61 layers); the MLA latent cache is replicated on all 16 ranks. Arithmetic: 19
    tokens/s is 52.6 ms a token, 30 tokens/s 33.3 ms, on the same GPUs, weights and network: the 19 ms between them is
    the engine's own step (its kernels and collectives), not the GPUs' reads — ~37 B active fp8 parameters ÷ 16 ≈
    2.3 GB a rank at ~3.35 TB/s is ~0.7 ms. So must never: more TP (a third node lengthens every all-reduce), lighter
    weights or KV (they shorten the 0.7 ms), replicas (one second; and the report compares engines, not load), a
    restart (tokens flow); no stall claimed; no context cap below DeepSeek-R1's 163,840.

    Not asserted: any layout turn (DP attention errored on the operator's build; the thread settles nothing).

    Chosen where the report is silent: one stream (the report's tokens/s is a stream's), prompts of ~1,000 tokens and
    1,024 generated, 50 answered (TTFT ~1 s); the pool 1,000,000 tokens (an input: fp8 weights of ~42 GB a rank on
    80 GB, BF16 latent KV); the page names the model by its ``--model-path``. SGLang 0.4.3 (February 2025) rendered
    with the 0.5.x exposition. The window: the stream
    decodes 19 tokens. SLO: TTFT 5 s, TPOT 0.05 s (vLLM's 33 ms on the same hardware meets it).
    """
    first, second = _single_stream_pages(
        served="/data/models/DeepSeek-R1",
        pool=1_000_000,
        page=1.0,
        answered=50,
        prompt=1_000,
        output=1_024,
        ttft=1.0,
        tpot=1 / 19,
    )
    return FieldState(
        id="sglang-deepseek-r1-tp16-two-h100-nodes-19-tokens-per-s-vllm-30",
        source="https://github.com/sgl-project/sglang/issues/3656",
        engine_version="SGLang 0.4.3, --tp 16 --nnodes 2 (8 × H100 a node, IB), no DP attention (0.5.x exposition)",
        deployment={
            "name": "dsr1-tp16-2x8-h100",
            "engine": "sglang",
            "model": MODEL,
            "served_model": "/data/models/DeepSeek-R1",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 16,
            "max_model_len": 163_840,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": 1_000_000},
        must_never=_NETWORK_BOUND_NEVER,
        extra_check=_all(no_stall_claimed, _cap_at_least(163_840)),
    )


STATES = [
    sglang_pd_decode_prealloc_piled_on_dp0(),
    sglang_dp_attention_dp5_overloaded(),
    sglang_tp16_over_16_nodes(),
    sglang_tp16_two_h100_nodes_19_vs_30(),
]

XFAIL: dict[str, str] = {
    "sglang-pd-decode-dp8-total-tokens-prealloc-21-on-dp0-others-idle": (
        "advisor/rules/load_imbalance.py proposes nothing: it reads only running requests per engine/DP rank "
        "(advisor/rules/common.py uneven_engines: the busiest must run >= UNEVEN_MIN_RUNNING = 8) and counts no "
        "decode-prealloc queue as waiting, so 1-2 running a rank reads 'within the router's usual spread' while DP0 "
        "holds all 21 preallocations waiting for its KV memory and DP4 uses 9 % of its pool; no load_balancer turn"
    ),
}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
