"""Field states, round 17: a request longer than the pool, a memory fraction that starves two pools, data-parallel
ranks that queue while their siblings idle, and a client that caps the load, from five public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not, or
where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes one
second apart rendered as the engine prints them: vLLM through :class:`tests.states.VLLMEngine` (V1, the 0.33 label set,
the 0.11 one for 0.14; several DP engines merged by :func:`tests.states.test_field_pools.vllm_dp_text`), SGLang through
:class:`tests.states.SGLangEngine` (0.5.x scheduler and tokenizer families, the Mamba-pool gauges appended) and the DP
renderer :func:`tests.states.test_field_pools.sglang_text`. The assertions come from the reports' numbers, the fix each
thread establishes and engine facts, never from the advisor's output:

* ``vllm-0.19-gemma-100k-request-over-76k-pool-blocks-queue`` — Gemma-4-31B on 2 × H100 at TP 2 with the default
  262,144-token context and a 76,640-token pool: one ~100k-token request sits at the head of the queue with nothing
  running and blocks every request behind it; the thread's workaround is ``--max-model-len`` matched to the pool.
  Propose the context cap (at most 76,640); never replicas (each has the same pool) or more sequences.
* ``sglang-flash-next-mem-fraction-070-pool-052x-context-5-of-16`` — two DGX Sparks at SGLang's recipe default
  ``MEM_FRACTION_STATIC=0.70``: a 137,408-token KV pool (0.52 of one 262,144 context) and 28 Mamba slots, so
  ``max_running_requests`` is cut from 16 to 5; raising the fraction to 0.80 measured 715,136 tokens and 16. Propose
  the memory fraction up (at least 0.72); never more running requests (the Mamba slots cap them, not the count),
  replicas or a restart.
* ``sglang-dpa-glm52-one-rank-queues-11-three-ranks-idle`` — an agentic RL rollout engine with DP attention 4: rank 2
  runs 1 and queues 11 while ranks 0, 1 and 3 run nothing; the fix the PR merged is the router's ``--router-dp-aware``.
  Never a pool turn, more running requests, replicas, an instance change or a restart.
* ``vllm-v1-grpo-aiohttp-cap-100-running-none-waiting-no-advice`` — an async GRPO trainer wants 256 rollouts in
  flight and vLLM runs 100, none waiting, the pool 12.7 % used: aiohttp's default ``TCPConnector(limit=100)`` in the
  client holds the rest. No advice at all: no scale-up (nothing waits), and no scale-down sized for the 100 the
  client lets through (256 are offered).
* ``vllm-0.14-dp8-b200-waiting-stacked-on-engines-0-and-1`` — 512 client threads against DP 8 × ``--max-num-seqs 64``:
  engine 0 runs 51 with 117 waiting at 100 % KV, engine 1 runs 31 with 108 waiting at 98.6 %. Never replicas, more
  sequences per engine, an instance change or a restart.

``once`` sees about one second of history, so no replica count may be proposed where a queue exists (it needs
≥ 30 s of history to measure an arrival rate); every row with a queue says so with ``("replicas", "increase")`` in
``must_never``.
"""

from __future__ import annotations

from tests.states import SGLangEngine, VLLMEngine, go_float
from tests.states.field import FieldState, round_tests
from tests.states.test_field_pools import sglang_text, vllm_dp_text
from tests.states.test_field_round3_others import KV_GROWING_TURNS, _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, SLO, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all, _suggests

# --- 1. vLLM 0.19: a 100k-token request longer than the 76,640-token pool blocks the queue ---------------------------


def vllm_request_over_pool_blocks_queue() -> FieldState:
    """vllm-project/vllm#39734 ("[Bug]: Scheduler deadlocks when request exceeds KV cache capacity but is within
    max_model_len", open), on "latest main" (``version 0.19.1rc1.dev301``, ``model google/gemma-4-31B-it``): "This
    situation arises naturally with models like Gemma-4-31B that have high per-token KV cache costs … On 2x H100 80GB
    with TP=2, the KV cache only holds ~76k tokens while max_model_len defaults to 262k. Any request between 76k and
    262k tokens triggers the deadlock"; reproduction: ``vllm serve google/gemma-4-31B-it --tensor-parallel-size 2``,
    the startup log "Using max model len 262144", "GPU KV cache size: 76,640 tokens"; "Send a request with more
    tokens than KV cache size but fewer than max_model_len (e.g. ~100k tokens). Observe the server logs showing
    "Waiting: 1 reqs, Running: 0 reqs" with zero throughput. All subsequent requests are also blocked. The server
    only recovers when the blocked request is aborted (e.g. client timeout). Workaround: Start the server with
    --no-scheduler-reserve-full-isl or set --max-model-len to match KV cache capacity."

    Engine facts: V1's scheduler admits from the head of the waiting queue and stops at the first request it cannot
    allocate (``vllm/v1/core/sched/scheduler.py``); with the full input reserved at admission a 100,000-token prompt
    needs 6,250 blocks of 16 and the pool has 76,640 ÷ 16 = 4,790 of them, all free — it can never be admitted, and
    everything queued behind it waits with it. Arithmetic: 100,000 > 76,640 (1.30 pools) and ≤ 262,144, so the
    front end accepts it; the pool holds 76,640 ÷ 262,144 = 0.29 of one full-length request. The thread's workaround
    is the context cap: at ``--max-model-len`` ≤ 76,640 the front end refuses the 100k request with a 400 at once and
    the queue behind it is served. So must propose ``max_model_len`` decrease, to at most 76,640 and not below the
    ~2,400-token requests served before (prompt + output). Must never: replicas (each replica has the same
    76,640-token pool: the request blocks any of them; and one second of history), more sequences (nothing runs;
    the head of the queue is refused a pool, not a slot).

    Not asserted: a pool turn (fp8 KV would double the pool to ~153,000 tokens and admit a 100k request) is a valid
    alternative; a restart is not the thread's fix (the server recovers when the client aborts, and the next long
    request blocks it again), but it does clear the queue, so it is not forbidden either.

    Chosen where the report is silent: Gemma-4-31B is not in the advisor's tables; Gemma-3-27B (the nearest Gemma
    preset, likewise sliding-window hybrid) stands in at TP 2 on H100 SXM, with its own 131,072-token context (the
    preset's ``max_position_embeddings``; 100,000 lies between the pool and it, as between the pool and 262,144 in the
    report); the engine's pool is the report's 76,640 tokens (4,790 blocks of 16, ``kv_cache_size_tokens``). Before:
    40 chat requests served (~2,000-token prompts, ~400 generated at 30 ms, TTFT 0.25 s). The moment: the 100k
    request has waited ~60 s with 3 requests behind it (4 waiting, nothing running, the pool empty: its blocks free),
    a fifth arrives in the window; no counter moves. vLLM 0.19 with the 0.33 label set. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="google/gemma-4-31B-it",
        num_gpu_blocks=4_790,
        max_model_len=131_072,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.finish(40, prompt=2_000, output=400, ttft=0.25, tpot=0.03, queue=0.01, max_tokens=1_024)
    eng.first_tokens([0.25] * 40)
    eng.prefill(40 * 2_000, cached=40 * 600)
    eng.decode(40 * 400, 0.03)
    eng.running, eng.waiting, eng.kv_usage = 0.0, 4.0, 0.0
    first = eng.render()
    # the window: nothing is scheduled (the head of the queue never fits), one more request arrives behind it
    eng.waiting = 5.0
    return FieldState(
        id="vllm-0.19-gemma-100k-request-over-76k-pool-blocks-queue",
        source="https://github.com/vllm-project/vllm/issues/39734",
        engine_version="vLLM 0.19.1rc1.dev301 (V1; rendered with the 0.33 label set)",
        deployment={
            "name": "gemma-tp2-h100",
            "engine": "vllm",
            "engine_version": "0.19.1",
            "model": "google/gemma-3-27b-it",
            "served_model": "google/gemma-4-31B-it",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 2,
            "max_model_len": 131_072,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 0, "requests_waiting": 5, "kv_cache_capacity_tokens": 76_640},
        must_propose=[("max_model_len", "decrease")],
        must_never=[("replicas", "increase"), ("max_num_seqs", "increase")],
        extra_check=_suggests("max_model_len", "decrease", at_least=2_400, at_most=76_640),
    )


# --- 2. SGLang: MEM_FRACTION_STATIC 0.70 leaves a 0.52-context pool and 28 Mamba slots — 5 run of 16 ----------------


def _mamba_lines(model: str, used: float, slots: float) -> str:
    """The Mamba-pool gauges of a hybrid model (``mamba_usage``; the slot counts of 0.5.23), TP rank 0."""
    labels = f'engine_type="unified",model_name="{model}",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
    rows = (
        ("mamba_usage", "The Mamba state pool usage.", used / slots),
        ("mamba_used_tokens", "Used Mamba state slots.", used),
        ("mamba_available_tokens", "Available Mamba state slots.", slots - used),
        ("mamba_evictable_tokens", "Evictable Mamba state slots.", 0.0),
    )
    out: list[str] = []
    for name, text, value in rows:
        out += [f"# HELP sglang:{name} {text}", f"# TYPE sglang:{name} gauge"]
        out.append(f"sglang:{name}{{{labels}}} {go_float(value)}")
    return "\n".join(out) + "\n"


def sglang_mem_fraction_starves_pools() -> FieldState:
    """MiaAI-Lab/Qwen3.8-Flash-Next-Dual-DGX-Sparks#8 ("MEM_FRACTION_STATIC=0.70 double-counts the PLE table: KV pool
    at 0.52x the advertised context, max_running_requests silently 16 -> 5", closed): "Running this recipe on a 2× DGX
    Spark (GB10) pair … Every serve knob is therefore the script default. The pair serves correctly, so this is a
    **sizing** report … the ``MEM_FRACTION_STATIC=0.70`` default appears to reserve the PLE table twice, which starves
    the KV and mamba pools by roughly 26 GB/rank. Raising it to 0.80 — the value ``start.sh:41`` already documents —
    gives **5.2× the KV pool** and lifts ``max_running_requests`` from an effective **5 to 16**"; measured, 0.70 →
    0.80: "weight load, main model | 73.13 GB | 73.47 GB", "mamba cache | 28 slots (1.43 GB) | 143 slots (5.78 GB)",
    "``max_running_requests is capped …`` warning | present → 5 | absent", "effective ``max_running_requests`` | 5 |
    16 (the requested value)", "KV pool | 137,408 tok (1.58 GB) | 715,136 tok (8.18 GB)", "KV pool ÷ one
    ``--context-length`` request | 0.52× | 2.73×". The follow-up: after the fix "the mamba pool sizes to 141–146
    slots at 5 slots/request, so 28 is the real admission ceiling". The recipe is SGLang's two-node cell (TP 2, the
    PLE table GPU-resident and TP-sharded, sgl-project/sglang#37995).

    Engine facts: SGLang sizes the KV and the Mamba-state pools out of ``mem_fraction_static`` × memory minus the
    weights, and caps ``max_running_requests`` at the requests the Mamba pool holds (the "capped" warning); a running
    request holds 5 Mamba slots. Arithmetic: 137,408 ÷ 262,144 = 0.52 (the context is 262,144: 715,136 ÷ 2.73); ⌊28 ÷
    5⌋ = 5 running of the 16 asked; 1.58 GB ÷ 137,408 = 11.5 kB a token per rank (12 full-attention layers × 1 KV
    head of 256 a rank × 2 × 2 bytes = 12,288 bytes: the Qwen3-Next attention layout). From 0.70 to 0.80 the KV pool
    gained 6.60 GB and the Mamba pool 4.35 GB, ~1.1 GB for each 0.01, ~0.66 GB of it KV (~57,000 tokens): one whole
    262,144-token context needs 124,736 tokens more, +0.022 → 0.72. So must propose the memory fraction raised
    (``gpu_memory_utilization`` increase, SGLang's ``--mem-fraction-static``), to at least 0.72. Must never: more
    running requests (16 are asked; the Mamba slots cap them at 5, and a higher count changes nothing — the report's
    "capped … → 5"), a KV byte budget (SGLang has none), replicas (one second of history), a restart (it serves).

    Chosen where the report is silent (a sizing report names no load): eight agent clients, five running (the cap:
    25 of 28 Mamba slots held), three queued, ~20,000 tokens a running request (100,000 of 137,408: 0.73 of the KV
    pool), ~24 tokens/s a stream; before: 60 agent turns served (20,000-token prompts, 800 generated at ~42 ms, TTFT
    ~6 s of which ~5 s queued); the window: one turn finishes, the head of the queue is admitted, its client's next
    turn queues. Qwen3.8-Flash-Next is not in the advisor's tables: Qwen3-Next-80B-A3B (the same hybrid Gated-DeltaNet
    layout with 1-in-4 full-attention layers, bf16 weights ~74.7 GiB a rank at TP 2 against the report's 73.13 GB)
    stands in; the GB10 (128 GB unified, ~121 GiB to CUDA) is not a catalog GPU: ``gpu_memory_gib`` 121. SGLang of
    August 2026 (the 0.5.23 families). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model = "qwen3.8-flash-next"
    pool = 137_408
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=262_144, swa_tokens=1)

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 5.0, 3.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["full_token_usage"] = used / pool
        eng.g["token_usage"] = round(max(used / pool, 25 / 28), 2)  # max over the pools: the Mamba pool's
        eng.g["swa_token_usage"] = 0.0
        eng.g["gen_throughput"] = 120.0

    eng.finish(60, prompt=20_000, output=800, ttft=6.0, tpot=0.042, queue=5.0)
    eng.prompt["true"], eng.generation["true"] = 65 * 20_000.0, 60 * 800.0 + 5 * 400.0
    eng.itl.observe(0.042, 60 * 799 + 5 * 400)
    gauges(100_000.0)
    first = eng.render() + _mamba_lines(model, 25.0, 28.0)
    # the window: one turn finishes, the head of the queue is admitted (its prompt mostly in the radix cache), the
    # finished client's next turn joins the back of the queue; five streams decode ~120 tokens
    eng.finish(1, prompt=20_000, output=800, ttft=6.0, tpot=0.042, queue=5.0)
    eng.prompt["true"] += 20_000.0
    eng.generation["true"] += 120.0
    eng.itl.observe(0.042, 120)
    gauges(100_400.0)
    second = eng.render() + _mamba_lines(model, 25.0, 28.0)
    return FieldState(
        id="sglang-flash-next-mem-fraction-070-pool-052x-context-5-of-16",
        source="https://github.com/MiaAI-Lab/Qwen3.8-Flash-Next-Dual-DGX-Sparks/issues/8",
        engine_version="SGLang of August 2026 (0.5.23 families, Mamba-pool gauges)",
        deployment={
            "name": "flash-next-dual-spark",
            "engine": "sglang",
            "model": "Qwen/Qwen3-Next-80B-A3B-Instruct",
            "served_model": model,
            "gpu_memory_gib": 121.0,
            "tensor_parallel_size": 2,
            "mem_fraction_static": 0.7,
            "max_num_seqs": 16,
            "max_model_len": 262_144,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 5, "requests_waiting": 3, "kv_cache_capacity_tokens": pool},
        must_propose=[("gpu_memory_utilization", "increase")],
        must_never=[
            ("max_num_seqs", "increase"),
            ("kv_cache_memory_bytes", None),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(_suggests("gpu_memory_utilization", "increase", at_least=0.72), no_stall_claimed),
    )


# --- 3. SGLang DP attention: one rank runs 1 and queues 11 while three ranks idle -----------------------------------


def sglang_dpa_one_rank_queues() -> FieldState:
    """radixark/miles#2012 ("router: enable dp-aware routing under dp-attention", merged): "``--enable-dp-attention``
    splits an engine into dp ranks, but the router only knows the engine: its load balancing stops at the engine
    boundary and sglang's internal dispatch decides which rank actually serves a request. Under the long sticky
    sessions an agentic RL rollout produces, that dispatch concentrates. Live metrics from a GLM-5.2 744B run (16x
    GB300, 8 engines x dp 4, session server with ``manual`` + ``min_load`` routing)": "engine 10.4.90.74 / dp_rank=0
    num_running_reqs=0 num_queue_reqs=0 / dp_rank=1 num_running_reqs=0 num_queue_reqs=0 / dp_rank=2
    num_running_reqs=1 num_queue_reqs=11 / dp_rank=3 num_running_reqs=0 num_queue_reqs=0"; "Three quarters of the
    engine idle while requests queue on the fourth rank … 2194 of 2232 rollout episode failures were timeouts, and
    step time ran roughly 2x the equivalent TP-only configuration." The fix: "sgl-router already exposes this as
    ``--router-dp-aware`` … Turn it on whenever ``--sglang-enable-dp-attention`` is set, so each dp rank registers
    with the router as its own worker and ``min_load`` balances at rank granularity." The engines of that run
    (radixark/miles#2220): "8 inference nodes (one 4-GPU dp-attention fp8 sglang engine per node)".

    Engine facts: with DP attention each rank has its own KV pool and scheduler; a request lives on the rank it is
    dispatched to; SGLang's serial chunked prefill puts one long prompt at a time through a rank (sgl-project/sglang
    #4265: "the prefill phase between different requests is serial"). Arithmetic: 12 requests on one rank, 0 on three:
    1 running of the engine's 12, 75 % of its ranks idle. Nothing any dial of the engine turns moves a queued request
    to another rank — the router does. So never: a pool turn (fp8 KV is already on; a larger fraction, lighter weights,
    more TP: the queued rank's pool is 4 % used, the idle ranks' empty), more running requests (the rank runs 1, far
    from any cap), replicas (one second of history; and three ranks idle), an instance change (a fleet is not sized
    from one rank's queue), a restart (tokens move: the rank finishes turns).

    Chosen where the report is silent: GLM-5.2 (744B-A40B) is not in the advisor's tables; DeepSeek-V3 (an MLA MoE of
    the same class) stands in at TP 4 × DP 4 with fp8 KV on B300 (the GB300's GPU: 288 GB), each rank's pool
    2,538,589 tokens (the figure ``check-config`` prints for this deployment, ÷ 4: an input here). Rank 2 holds one
    ~100,000-token agent session (4 % of its pool) and finishes one short turn in the window (60,000 prompt tokens,
    mostly cached, 150 generated), admits the next; the finished episode's next turn joins the back of its queue
    (still 11). SGLang of July 2026 (the 0.5.x DP labels, no histograms rendered). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model = "zai-org/GLM-5.2-FP8"
    pool = 2_538_589

    def ranks(used: float) -> list[dict[str, float]]:
        idle = {"num_running_reqs": 0.0, "num_queue_reqs": 0.0, "token_usage": 0.0, "max_total_num_tokens": pool}
        busy = {"num_running_reqs": 1.0, "num_queue_reqs": 11.0, "token_usage": round(used / pool, 3)}
        return [dict(idle), dict(idle), {**idle, **busy}, dict(idle)]

    first = sglang_text(model, ranks(100_000.0), prompt=6.0e8, generation=2.4e6, requests=11_800)
    second = sglang_text(model, ranks(100_300.0), prompt=6.0e8 + 60_000, generation=2.4e6 + 150, requests=11_801)
    return FieldState(
        id="sglang-dpa-glm52-one-rank-queues-11-three-ranks-idle",
        source="https://github.com/radixark/miles/pull/2012",
        engine_version="SGLang of July 2026 (0.5.x DP labels)",
        deployment={
            "name": "glm52-dpa-rollout-engine",
            "engine": "sglang",
            "model": "deepseek-ai/DeepSeek-V3",
            "served_model": model,
            "gpu": "b300",
            "tensor_parallel_size": 4,
            "data_parallel_size": 4,
            "kv_cache_dtype": "fp8_e4m3",
            "max_model_len": 163_840,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 1, "requests_waiting": 11},
        must_never=[
            *KV_GROWING_TURNS,
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            ("instance_type", None),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 4. vLLM V1: an async GRPO trainer's aiohttp client caps the rollouts at 100 — the server is not the limit -------


def vllm_client_connection_cap_100() -> FieldState:
    """huggingface/trl#5847 ("[AsyncGRPO] aiohttp limits to 100 reqs when max_inflight_tasks > 100", closed by
    huggingface/trl#5861): "By default ``max_inflight_tasks = max_staleness * per_device_train_batch_size *
    gradient_accumulation_steps * num_processes``. ``AsyncRolloutWorker`` ``aiohttp`` TCP connector limits it to 100 by
    default which results in vLLM having 100 reqs running even in cases where ``max_inflight_tasks > 100``"; "My
    max_inflight_tasks = 256 and yet I only have 100 vLLM reqs": "Engine 000: Avg prompt throughput: 255.0 tokens/s,
    Avg generation throughput: 4757.7 tokens/s Running: 100 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.7%, Prefix
    cache hit rate: 0.0%"; "User can adjust ``--max-num-seqs`` from vLLM to control Running requests from there". The
    fix merged (#5861): the worker's ``aiohttp.TCPConnector`` ``limit`` is ``max_inflight_tasks``. The same default
    cap is known elsewhere: vllm-project/vllm#7241 ("cap at 100 concurrent requests … Turns out it was because of how I
    was making requests using aiohttp"), vllm-project/production-stack#767.

    Engine facts: V1 admits while fewer than ``max_num_seqs`` run and the pool has blocks; a request the client has not
    sent is not in ``num_requests_waiting``. Arithmetic: 256 offered, 100 reach the server, 0 wait there; 4,757.7 ÷ 100
    = 47.6 tokens/s a stream (21 ms a token); Little's law with the log's rates: 4,757.7 generated and 255 prompt tokens
    a second over 100 streams fit ~117-token prompts and ~2,182 generated tokens a rollout (2.18 finish a second, each
    45.8 s in flight, ~1,208 tokens held on average: 100 × 1,208 = 120,800 of a 959,744-token pool, 12.6 %, the log's
    12.7 %). Nothing waits, nothing is preempted, TTFT and TPOT are far inside any SLO. The server has no dial that
    changes what the client sends: no advice at all. No scale-up (more sequences, pool, TP, replicas: nothing waits), no
    restart, and no scale-down either — the trainer offers 256 in flight and the 100 are the client's cap: after the
    client fix 256 run (256 × 1,208 = 309,248 tokens, 32 % of the pool), so fewer replicas, a smaller GPU or a sequence
    cap below 256 would refuse the load the trainer sends.

    Chosen where the report is silent: TRL's async GRPO examples serve Qwen2.5-7B-Instruct on one H100; the pool is
    959,744 tokens (59,984 blocks of 16, the figure ``check-config`` prints for this deployment: an input here),
    ``max_num_seqs`` V1's default on a ≥ 70 GiB GPU (1,024). Before: 2,000 rollouts served (~15 min of the run); the
    window: 2 finish and 2 are admitted (first token after ~80 ms), 4,758 tokens decode in ~47 steps of 100. vLLM of
    May 2026 with the 0.33 label set. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen2.5-7B-Instruct",
        num_gpu_blocks=59_984,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.finish(2_000, prompt=117, output=2_182, ttft=0.08, tpot=0.021, queue=0.002, max_tokens=4_096)
    eng.first_tokens([0.08] * 2_100)
    eng.prefill(2_100 * 117)
    eng.decode(2_000 * 2_182 + 100 * 1_091, 0.021)
    eng.running, eng.waiting, eng.kv_usage = 100.0, 0.0, 0.127
    first = eng.render()
    eng.finish(2, prompt=117, output=2_182, ttft=0.08, tpot=0.021, queue=0.002, max_tokens=4_096)
    eng.first_tokens([0.08, 0.08])
    eng.prefill(255)
    eng.decode(4_758, 0.021, steps=47, batch=100)
    eng.kv_usage = 0.1271
    return FieldState(
        id="vllm-v1-grpo-aiohttp-cap-100-running-none-waiting-no-advice",
        source="https://github.com/huggingface/trl/issues/5847",
        engine_version="vLLM V1 of May 2026 (rendered with the 0.33 label set)",
        deployment={
            "name": "grpo-rollout-qwen25-7b",
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "gpu": "h100-sxm",
            "max_model_len": 32_768,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 100, "requests_waiting": 0, "kv_cache_capacity_tokens": 959_744},
        no_advice=True,
        must_never=[
            ("max_num_seqs", "increase"),
            *POOL_TURNS,
            ("tensor_parallel_size", "increase"),
            ("replicas", None),
            ("instance_type", None),
            RESTART,
        ],
        extra_check=_all(_cap_at_least(256, dial="max_num_seqs"), no_stall_claimed),
    )


# --- 5. vLLM 0.14 DP 8: the waiting requests stack on two engines at a full pool --------------------------------------


def vllm_dp8_waiting_stacked_on_two_engines() -> FieldState:
    """vllm-project/vllm#36748 ("[Bug]: In DP mode, waiting request stack in a few DP ranks.", open): "I am using vLLM
    0.14.0 with data parallelism on 8×B200 GPUs and started the server with: ``vllm serve --model qwen3-vl-8b-thinking
    --port 8000 --tensor-parallel-size 1 --data-parallel-size 8 --max-num-seqs 64``. On the client side, I use a thread
    pool of size 512 to send requests concurrently. During serving, I noticed that a large number of waiting requests
    are concentrated on only a few DP ranks, rather than being evenly distributed across all ranks": "Engine 000: Avg
    prompt throughput: 16.5 tokens/s, Avg generation throughput: 1157.2 tokens/s, Running: 51 reqs, Waiting: 117 reqs,
    GPU KV cache usage: 100.0%, Prefix cache hit rate: 70.0%", "Engine 001: Avg prompt throughput: 0.0 tokens/s, Avg
    generation throughput: 809.3 tokens/s, Running: 31 reqs, Waiting: 108 reqs, GPU KV cache usage: 98.6%, Prefix cache
    hit rate: 66.0%".

    Engine facts: each DP engine has its own pool and its own ``max_num_seqs``; the API server's balancer picks the
    engine with the lowest ``waiting × 4 + running`` from counts the coordinator publishes after each step
    (vllm-project/vllm#41626: the stale window; vllm-project/vllm#47420: ties go to engine 0), so a burst is dealt on
    stale counts; a request never moves between engines once dispatched. Arithmetic: engines 0 and 1 hold 51 + 117 +
    31 + 108 = 307 of the 512 in flight; the other six hold 205 (~34 each). Engine 0 runs 51 of its 64 slots with the
    pool full (1,051,136 ÷ 51 ≈ 20,600 tokens a thinking request), engine 1 31 of 64 at 98.6 % (~33,400 each): neither
    is short of sequence slots — more would only be preempted. The six others have room. So never: replicas (one
    second of history; six of eight engines have room), more sequences per engine (the hot engines' pools, not their
    slots, are full), an instance change (a fleet is not sized from one second nor from two hot ranks), a restart
    (tokens move: 1,966 generated tokens a second on the two alone).

    Not asserted: a pool turn or a sequence cap on the hot engines: the report does not say how the load would
    distribute with either.

    Chosen where the report is silent: Qwen3-VL-8B-Thinking is not in the advisor's tables; its language model is the
    Qwen3-8B layout (36 layers, 8 KV heads of 128: 144 KiB a token), Qwen3-8B stands in with its 40,960-token context
    (thinking traces with images of ~20–35K tokens fit it); the pool 1,051,136 tokens an engine (65,696 blocks, the
    figure ``check-config`` prints ÷ 8: an input here). Engines 2–7 (the report's excerpt stops at engine 2): 34
    running each at 65 % of the pool, engine 2 with the one remaining waiting request (51 + 31 + 6 × 34 = 286 running
    and 117 + 108 + 1 = 226 waiting: 512). Before: 500 requests served an engine (4,000-token prompts with an image,
    70 % from the prefix cache, 6,000 tokens generated at ~40 ms, TTFT ~30 s of queue on the hot engines). The window:
    every engine decodes its running requests (engine 0 at 44 ms a token — 1,157 tokens — engine 1 at 38 ms — 809 —
    the others at ~30 ms), none finishes. vLLM 0.14 rendered with the 0.11 label set (the waiting split by reason came
    later, vllm-project/vllm#38435, March 2026). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    blocks = 65_696
    shape = [
        (51.0, 117.0, 1.0, 0.044, 1_157),
        (31.0, 108.0, 0.986, 0.038, 809),
        *[(34.0, 1.0 if i == 0 else 0.0, 0.65, 0.03, 1_133) for i in range(6)],
    ]
    engines = []
    for running, waiting, usage, _itl, _gen in shape:
        eng = VLLMEngine(
            model_name="qwen3-vl-8b-thinking",
            num_gpu_blocks=blocks,
            max_model_len=40_960,
            gpu_memory_utilization=0.9,
            version="0.11",
        )
        queue = 30.0 if waiting > 50 else 0.5
        eng.finish(500, prompt=4_000, output=6_000, ttft=queue + 0.4, tpot=0.04, queue=queue, max_tokens=32_768)
        eng.first_tokens([queue + 0.4] * int(500 + running))
        eng.prefill((500 + running) * 4_000, cached=(500 + running) * 2_800)
        eng.decode(500 * 6_000 + running * 3_000, 0.04)
        eng.running, eng.waiting, eng.kv_usage = running, waiting, usage
        engines.append(eng)
    first = vllm_dp_text(engines)
    for eng, (running, _w, _u, itl, gen) in zip(engines, shape, strict=True):
        eng.decode(gen, itl, steps=max(1, round(gen / running)), batch=running)
    return FieldState(
        id="vllm-0.14-dp8-b200-waiting-stacked-on-engines-0-and-1",
        source="https://github.com/vllm-project/vllm/issues/36748",
        engine_version="vLLM 0.14.0 (V1, --data-parallel-size 8; rendered with the 0.11 label set)",
        deployment={
            "name": "qwen3-vl-thinking-dp8-b200",
            "engine": "vllm",
            "engine_version": "0.14.0",
            "model": "Qwen/Qwen3-8B",
            "served_model": "qwen3-vl-8b-thinking",
            "gpu": "b200",
            "data_parallel_size": 8,
            "max_num_seqs": 64,
            "max_model_len": 40_960,
            "slo": SLO,
        },
        scrapes=[(first, vllm_dp_text(engines))],
        snapshot={"requests_running": 286, "requests_waiting": 226, "kv_cache_capacity_tokens": 8_409_088},
        must_never=[
            ("replicas", "increase"),
            ("max_num_seqs", "increase"),
            ("instance_type", None),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_request_over_pool_blocks_queue(),
    sglang_mem_fraction_starves_pools(),
    sglang_dpa_one_rank_queues(),
    vllm_client_connection_cap_100(),
    vllm_dp8_waiting_stacked_on_two_engines(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
