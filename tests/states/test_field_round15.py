"""Field states, round 15: SGLang and llama.cpp server (``llama-server``), from four public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as those engines print them: SGLang through :class:`tests.states.SGLangEngine` (0.5.x
scheduler and tokenizer families) and the DP renderer :func:`tests.states.test_field_pools.sglang_text`; llama.cpp
through the ``llama-server --metrics`` rows of :mod:`tests.states.test_field_round3_others` (no KV gauges after PR
#13660). The assertions come from the reports' numbers, the fix each thread establishes and engine facts, never from
the advisor's output:

* ``sglang-nextn-default-cap-32-running-68-queued`` — DeepSeek-R1 on TP 8 with NextN speculation and no
  ``--max-running-requests``: SGLang 0.4.4 then set the cap to 32 for speculative decoding; the log shows 32 running,
  68 queued, the 524,288-token pool at 1 %. Propose the count cap up or speculation off; never a pool turn, a context
  cap, a lower count cap, replicas or a restart.
* ``sglang-four-requests-fourth-one-prefill-late-no-advice`` — four 1,000-token requests sent "simultaneously", three
  prefilled together, the fourth one prefill later; the maintainer: the HTTP/asyncio arrival is not simultaneous, the
  engine is not limited. No advice at all.
* ``sglang-dp8-pinned-15-of-16-per-rank`` — DP attention 8 × ``--max-running-requests 128``: every rank holds 15,
  not 16, with a request queued (a sticky ``batch_is_full`` under chunked prefill); the PR names the workaround,
  ``--max-running-requests += dp_size``. Propose the count cap up (to at least 136); never a pool turn, a lower cap,
  replicas or a restart.
* ``llamacpp-gpt-oss-swa-full-reprocess-two-of-eight-slots`` — two agents on an 8-slot unified ``llama-server`` with
  gpt-oss-120b re-process their whole prompt every turn ("forcing full prompt re-processing due to lack of cache
  data"): the SWA cache keeps no older positions. Six slots idle, nothing deferred, the cache not full: never more
  slots, fewer slots than the 2 agents, a bigger or lighter cache, replicas, a restart, or a per-request cap under
  the agents' ~25,000 tokens.

``once`` sees about one second of history, so no replica count may be proposed where a queue exists (it needs
≥ 30 s of history to measure an arrival rate); every such row says so with ``("replicas", "increase")`` in
``must_never``.
"""

from __future__ import annotations

from typing import Any

from tests.states import SGLangEngine, go_float
from tests.states.field import FieldState, brief, matching, round_tests
from tests.states.test_field_pools import sglang_text
from tests.states.test_field_round3_others import KV_GROWING_TURNS, _cap_at_least, _llamacpp, _llamacpp_rows
from tests.states.test_field_round3_vllm import RESTART, SLO, no_stall_claimed
from tests.states.test_field_round5 import _all, _suggests

# --- 1. SGLang 0.4.4: speculation's default cap of 32 holds the batch while the pool sits at 1 % ------------------


def _spec_accept_length(model: str, value: float) -> str:
    """``sglang:spec_accept_length`` on TP rank 0, the one speculative gauge SGLang had in 0.4.x (the draft-token
    and step gauges came with 0.5.23)."""
    labels = f'engine_type="unified",model_name="{model}",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
    return (
        "# HELP sglang:spec_accept_length Mean acceptance length of speculative decoding.\n"
        "# TYPE sglang:spec_accept_length gauge\n"
        f"sglang:spec_accept_length{{{labels}}} {go_float(value)}\n"
    )


def _raises_cap_or_stops_speculation(result: dict[str, Any]) -> None:
    """At least one of the two turns that lift the binding limit: more running requests, or speculation off."""
    recs = result.get("recommendations") or []
    more = matching(recs, ("max_num_seqs", "increase"))
    off = matching(recs, ("speculative_decoding", "disable"))
    assert more or off, f"neither max_num_seqs increase nor speculation off; got {brief(recs)}"


def sglang_nextn_default_cap_32() -> FieldState:
    """sgl-project/sglang#4759 ("[Bug]Throughput decreases after using speculative sampling", closed): DeepSeek-R1-671B,
    ``python3 -m sglang.launch_server --model-path /data/models/DeepSeek-R1-671B/ --trust-remote-code
    --tensor-parallel-size 8 --mem-fraction-static 0.9 --context-length 4096 --max-total-tokens 524288
    --max-prefill-tokens 8192 --disable-cuda-graph``; "When speculative sampling is not used, the throughput is 1039.
    However, after using speculative sampling, the throughput drops to 321." The log with speculation: "Prefill
    batch. #new-seq: 30, #new-token: 3810, #cached-token: 60, token usage: 0.00, #running-req: 2, #queue-req: 68",
    then "Decode batch. #running-req: 32, #token: 7352, token usage: 0.01, accept len: 2.54, gen throughput
    (token/s): 39.33, largest-len: 0, #queue-req: 68".

    Engine facts: SGLang of that time (``python/sglang/srt/server_args.py`` after sgl-project/sglang#3986, "[Eagle]
    Refactor eagle speculative decoding") sets ``if self.max_running_requests is None: self.max_running_requests = 32``
    in its EAGLE branch (NextN is built on it: sgl-project/sglang#3582, "based on EAGLE 2"); the reviewer there: "This
    setting may affect throughput … the TTFT is higher and throughput is lower with this limit." The DeepSeek-R1
    ablations (sgl-project/sglang#3956): "Speculative Decoding is great for small concurrency (less than 32), but its
    performance degrades quickly as the concurrency increases." Arithmetic from the log: 2 + 30 = 32 running is the cap
    exactly, 68 of 100 clients wait; the pool holds 7,352 of 524,288 tokens (1.4 %; 230 a running request: a ~127-token
    prompt, 3,810 ÷ 30, and ~100 generated). Nothing about memory limits admission: the count cap does. 321 tokens/s
    over 32 requests is ~10 tokens/s each; at 256 tokens a request that is ~25 s, 32 ÷ 25 ≈ 1.25 finish a second, so the
    68 queued wait ~54 s: TTFT ~55 s. So must propose one of the turns that lift the binding limit (``max_num_seqs``
    increase — ``--max-running-requests`` — or speculation off, which also lifts the default cap and brings back the
    measured 1,039 tokens/s). Must never: a pool turn (fp8 cache, a larger memory fraction, lighter weights, more TP:
    98.6 % of the pool is free), a lower count cap, a context cap (requests hold ~230 of 4,096), replicas (one second of
    history), a restart (it serves 321 tokens/s).

    Chosen where the report is silent: the GPU (H200: 671 GB of FP8 weights ÷ 8 leaves room for the 524,288-token
    pool at 0.9; an H20's 96 GB would not), the algorithm (NextN, the draft SGLang shipped for DeepSeek-R1; the
    report's command with speculation is not quoted; accept length 2.54 is the log's), outputs of 256
    tokens, a closed loop of 100 clients (one finishes in the window and one is admitted; the queue stays 68), 200
    served before the first scrape. SGLang 0.4.4 replayed with the 0.5.x exposition plus its ``spec_accept_length``
    gauge. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model = "deepseek-ai/DeepSeek-R1"
    pool = 524_288
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=4096, swa_tokens=0)

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 32.0, 68.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 2)
        eng.g["gen_throughput"] = 321.0

    eng.finish(200, prompt=127, output=256, ttft=55.0, tpot=0.1, queue=54.0)
    eng.prompt["true"] = (200 + 32) * 127.0
    eng.generation["true"] = 200 * 256.0 + 32 * 100.0
    eng.itl.observe(0.1, 200 * 255 + 32 * 100)
    gauges(7_352.0)
    first = eng.render() + _spec_accept_length(model, 2.54)
    eng.finish(1, prompt=127, output=256, ttft=55.0, tpot=0.1, queue=54.0)
    eng.prompt["true"] += 127.0
    eng.generation["true"] += 321.0
    eng.itl.observe(0.1, 321)
    gauges(7_480.0)
    second = eng.render() + _spec_accept_length(model, 2.54)
    return FieldState(
        id="sglang-nextn-default-cap-32-running-68-queued",
        source="https://github.com/sgl-project/sglang/issues/4759",
        engine_version="SGLang 0.4.4 (replayed with the 0.5.x exposition + spec_accept_length)",
        deployment={
            "name": "dsr1-nextn-tp8",
            "engine": "sglang",
            "engine_version": "0.4.4",
            "model": model,
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "max_model_len": 4096,
            "max_num_seqs": 32,
            "mem_fraction_static": 0.9,
            "speculative_decoding": True,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 32, "requests_waiting": 68, "kv_cache_capacity_tokens": pool},
        must_never=[
            *KV_GROWING_TURNS,
            ("max_num_seqs", "decrease"),
            ("max_model_len", "decrease"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(_raises_cap_or_stops_speculation, no_stall_claimed),
    )


# --- 2. SGLang 0.3.5: four requests "at once", the fourth one prefill behind: not a capacity limit ---------------


def sglang_four_requests_one_prefill_late() -> FieldState:
    """sgl-project/sglang#1947 ("Concurrency Issue: Multiple Requests Not Being Processed Simultaneously", closed):
    "I'm sending 4 concurrent requests, each with 1,000 tokens, for a total of 4,000 tokens. This should easily fit
    within the 8,000 token context length … However, only 3 of the requests are processed at the same time, and the
    4th request ends up getting queued … the queued request has a much higher Time to First Token". The maintainer
    (merrymercy): "Although you send them simultaneously, due to the HTTP delay and other python thread/asyncio
    scheduling, they won't be accepted by the engine at the same time"; send them as one batch, or add a wait in the
    scheduler — "There is always a tradeoff here."

    Engine facts: SGLang's scheduler forms a prefill batch from what is in its waiting queue when it runs; a request
    arriving during that prefill joins the next one. Arithmetic: three 1,000-token prompts (3,000 tokens, under the
    8,192 prefill budget) prefill in ~0.35 s on the GPU; the fourth waits that long and runs in the next batch: its
    TTFT is about twice the others', not a queue that grows. The pool holds ~4,000 of ~33,000 tokens, the running
    count is far from any cap. So no advice at all: no more running requests (nothing is refused), no pool turn, no
    prefill budget, no replicas, no restart.

    Chosen where the report is silent: the model and GPU (the same author's sgl-project/sglang#1030 served
    NousResearch/Meta-Llama-3-8B-Instruct with ``mem_fraction_static=0.88``, and #1828 describes "a 24GB GPU …
    llama3-8b": Meta-Llama-3-8B on an A10G; SGLang's profile leaves ~33,000 tokens of KV there), outputs of up to 200
    tokens, the window: scrape 1 during the first prefill's decode (3 running, 1 queued), the fourth admitted before
    scrape 2 (4 running, none queued); nothing finishes. SGLang 0.3.5 replayed with the 0.5.x exposition. SLO: TTFT 5 s,
    TPOT 0.1 s.
    """
    model = "meta-llama/Meta-Llama-3-8B"
    pool = 33_000
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=8192, swa_tokens=0)

    def gauges(running: float, queue: float, used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = running, queue
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 2)
        eng.g["gen_throughput"] = 105.0

    # earlier single tests on the server: 20 requests served alone
    eng.finish(20, prompt=1000, output=200, ttft=0.15, tpot=0.028, queue=0.0)
    eng.prompt["true"], eng.generation["true"] = 20 * 1000.0 + 3 * 1000.0, 20 * 200.0 + 3 * 10
    eng.itl.observe(0.028, 20 * 199 + 3 * 10)
    for _ in range(3):
        eng.ttft["true"].observe(0.35)
    gauges(3.0, 1.0, 3_030.0)
    first = eng.render()
    eng.prompt["true"] += 1000.0
    eng.generation["true"] += 105.0
    eng.itl.observe(0.032, 105)
    eng.ttft["true"].observe(0.7)
    eng.queue.observe(0.35)
    gauges(4.0, 0.0, 4_135.0)
    return FieldState(
        id="sglang-four-requests-fourth-one-prefill-late-no-advice",
        source="https://github.com/sgl-project/sglang/issues/1947",
        engine_version="SGLang 0.3.5 (replayed with the 0.5.x exposition)",
        deployment={
            "name": "llama3-8b-a10g",
            "engine": "sglang",
            "engine_version": "0.3.5",
            "model": model,
            "gpu": "a10g",
            "max_model_len": 8192,
            "mem_fraction_static": 0.88,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 4, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        no_advice=True,
        extra_check=no_stall_claimed,
    )


# --- 3. SGLang DP attention: every rank parks at 15 of 16 with a request queued ----------------------------------


def sglang_dp8_pinned_one_below_cap() -> FieldState:
    """sgl-project/sglang#30294 ("[Bug] Decode running batch pinned at `max_running_requests - 1` under Chunked
    Prefill", closed as inactive; refiled as #38118 and addressed by the open sgl-project/sglang#30295): "Observed on
    GLM-5-FP8 with `--enable-dp-attention --data-parallel-size 8 --max-running-requests 128` (a `128 // 8 = 16`
    per-rank ceiling): every rank plateaus at **`#running-req: 15`** and holds there for the whole run, while
    `#queue-req` is ≥ 1 (requests are waiting but not admitted)." The PR: "every rank plateaus at **15**, leaving one
    slot/rank idle and making the `--max-running-requests += dp_size` over-provisioning workaround necessary."

    Engine facts (the PR's root cause, ``Scheduler._get_new_batch_prefill_raw``): an in-flight chunked prefill is
    counted in the adder's ``can_run_list`` while its ``req_to_token_pool`` slot is already subtracted from
    ``available_size()``, so ``len(can_run_list) >= min(ceiling - running_bs, available_size())`` declares the batch
    full one request early, and ``batch_is_full`` stays set until a request finishes. ``max_running_requests`` is
    global and divided by the DP size per rank. Arithmetic: 8 × 15 = 120 run against a configured 128; each rank has
    1 queued while one of its 16 slots idles. The workaround the thread names: 128 + 8 = 136, which parks each rank
    at 17 − 1 = 16. So must propose ``max_num_seqs`` increase (``--max-running-requests``), to at least 136. Must
    never: a pool turn (the ranks hold a fifth of their pools; the refusal is the request-slot count), a lower count
    cap, replicas (one second of history; each replica would park the same), a restart (it serves).

    Chosen where the report is silent: GLM-5-FP8 is not in the advisor's tables: DeepSeek-V3 (an MLA MoE of the same
    class, 8 × H200 with DP attention) stands in, each rank's pool 667,902 tokens (the report gives none: the figure
    ``check-config`` prints for this deployment, an input here, not an assertion); token usage 0.20 a rank; ~20 tokens/s
    a request (2,400 tokens/s in all), outputs of ~1,000 tokens: ~2.4 finish a second and as many are admitted, so each
    rank stays at 15 running, 1 queued. SGLang of July 2026 (the 0.5.x DP labels, no histograms rendered). SLO: TTFT 5
    s, TPOT 0.1 s.
    """
    model = "deepseek-ai/DeepSeek-V3"

    def ranks() -> list[dict[str, float]]:
        return [
            {"num_running_reqs": 15.0, "num_queue_reqs": 1.0, "token_usage": 0.20, "max_total_num_tokens": 667_902}
            for _ in range(8)
        ]

    first = sglang_text(model, ranks(), prompt=4.8e7, generation=1.2e7, requests=12_000)
    second = sglang_text(model, ranks(), prompt=4.8e7 + 9_600, generation=1.2e7 + 2_400, requests=12_002)
    return FieldState(
        id="sglang-dp8-pinned-15-of-16-per-rank",
        source="https://github.com/sgl-project/sglang/issues/30294",
        engine_version="SGLang of July 2026 (0.5.x DP labels)",
        deployment={
            "name": "glm5-dp8-h200",
            "engine": "sglang",
            "model": model,
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "data_parallel_size": 8,
            "max_num_seqs": 128,
            "max_model_len": 163_840,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 120, "requests_waiting": 8},
        must_propose=[("max_num_seqs", "increase")],
        must_never=[
            *KV_GROWING_TURNS,
            ("max_num_seqs", "decrease"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(_suggests("max_num_seqs", "increase", at_least=136), no_stall_claimed),
    )


# --- 4. llama.cpp: two agents re-process their whole prompt every turn on an 8-slot unified server ---------------


def llamacpp_gpt_oss_swa_reprocess() -> FieldState:
    """ggml-org/llama.cpp#17527 ("Eval bug: failed to restore kv cache on gpt-oss:120b with parallel processing",
    open, labels bug/performance/server): build 7157, an RTX 5060 Ti + Ryzen 9950X + 96 GB RAM, ``llama-server
    --gpt-oss-120b-default --ctx-size 0 --kv-unified --jinja … -ub 2048 -b 2048 --cpu-moe --n-gpu-layers 999 --prio
    -1 --parallel 8``; "two parallel agentic workflows: one via llama.vscode, another via codex. Both contexts are far
    from 64K (somewhere in 2xK each). Yet, llama-server falls back to full prompt re-processing "due to lack of cache
    data"", the slot having been "selected … by LCP similarity, sim_best = 0.901 (> 0.100 thold), f_keep = 0.823".

    Engine facts: ``--ctx-size 0`` takes the model's trained context (131,072 for gpt-oss), shared by the 8 slots with
    ``--kv-unified``; gpt-oss alternates sliding-window layers (128 tokens), and llama.cpp's SWA cache keeps only the
    last window of each sequence (ggml-org/llama.cpp#13194, "kv-cache : add SWA support"), so a
    prompt that diverges from the cached one before its end cannot be resumed from the cache: the server logs
    "forcing full prompt re-processing due to lack of cache data (likely due to SWA …)" and evaluates the whole
    prompt again. Arithmetic: two contexts of ~25,000 tokens hold ~50,000 of 131,072 cells (38 %); 2 of 8 slots are
    busy, nothing is deferred. At ~450 prompt tokens/s (experts on the CPU with ``--cpu-moe``) a 25,000-token prompt
    re-processed costs ~56 s of TTFT a turn — the cost is the cache miss, not a shortage. So no turn of the slots or
    the pool helps: must never propose more slots (6 idle), a bigger or lighter cache (``--ctx-size`` up, a q8_0
    cache, a memory budget: the cells are not full and the miss is the SWA layers' history), replicas (one second of
    history; each replica would miss the same), a restart (it serves), or a per-request cap below the agents'
    ~25,000 tokens (it would refuse them), or fewer slots than the 2 agents that run at once (one would queue behind
    the other's whole turn). The thread establishes no dial fix (open bug), so nothing is required.

    Chosen where the report is silent: the GPU (the 16 GB RTX 5060 Ti is not in the advisor's tables; the RTX 5090 of
    the same Blackwell generation stands in — the experts live in system RAM under ``--cpu-moe`` either way), the
    rates (~450 prompt and ~22 generated tokens/s), the window: agent A's re-processed 25,300-token prompt finishes
    (llama.cpp adds a prompt's tokens and seconds to its counters when the prompt is done), agent B's 700-token
    answer finishes and its next turn starts re-processing: 2 slots busy at both scrapes. Build 7157 exposes no KV
    gauges; the rows rendered are those every build since PR #9283 prints (whether b7157 also printed
    ``n_tokens_max`` is not established here, so it is left out). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    c1 = {"prompt": 3_200_000.0, "prompt_s": 7_100.0, "gen": 260_000.0, "gen_s": 11_800.0, "decodes": 300_000.0}
    c1 |= {"busy_avg": 1.9, "prompt_tps": 450.0, "gen_tps": 22.0}
    c2 = dict(c1, prompt=3_225_300.0, prompt_s=7_156.2, gen=260_700.0, gen_s=11_831.8, decodes=300_024.0)
    return FieldState(
        id="llamacpp-gpt-oss-swa-full-reprocess-two-of-eight-slots",
        source="https://github.com/ggml-org/llama.cpp/issues/17527",
        engine_version="llama.cpp b7157 (no KV gauges)",
        deployment={
            "name": "gpt-oss-120b-cpu-moe-np8",
            "engine": "llamacpp",
            "model": "openai/gpt-oss-120b",
            "gpu": "rtx5090",
            "max_model_len": 131_072,
            "ctx_size": 131_072,
            "parallel": 8,
            "kv_unified": True,
            "slo": SLO,
        },
        scrapes=[
            (
                _llamacpp(_llamacpp_rows(c1, busy=2, deferred=0, kv=None)),
                _llamacpp(_llamacpp_rows(c2, busy=2, deferred=0, kv=None)),
            )
        ],
        snapshot={"requests_running": 2, "requests_waiting": 0},
        must_never=[
            ("max_num_seqs", "increase"),
            ("kv_cache_memory_bytes", "increase"),
            ("gpu_memory_utilization", "increase"),
            ("kv_cache_dtype", None),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(_cap_at_least(25_000), _suggests("max_num_seqs", "decrease", at_least=2), no_stall_claimed),
    )


STATES = [
    sglang_nextn_default_cap_32(),
    sglang_four_requests_one_prefill_late(),
    sglang_dp8_pinned_one_below_cap(),
    llamacpp_gpt_oss_swa_reprocess(),
]

XFAIL: dict[str, str] = {
    "sglang-dp8-pinned-15-of-16-per-rank": (
        "no advice, for two reasons: seq_cap reads max_num_seqs as a per-rank cap (vLLM's and plain SGLang --dp-size "
        "workers'), so 128 x 8 ranks = 1,024 against 120 running, where SGLang with --enable-dp-attention divides "
        "--max-running-requests by dp_size (16 a rank; sgl-project/sglang#10868) and the deployment has no key for DP "
        "attention; and it fires only at running = cap, where SGLang's chunked prefill parks each rank one below "
        "(sglang#30294/#38118, PR #30295: the chunked request's slot counted twice, batch_is_full sticky), so the "
        "thread's workaround, --max-running-requests 128 -> 136 (+ dp_size), is not proposed"
    ),
}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
