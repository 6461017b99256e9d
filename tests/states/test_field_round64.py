"""Field states, round 64: llama.cpp ``llama-server`` with MTP drafting on four unified slots, where the operator's
measured sweep found two slots faster for every concurrent load (and the two-slot server the right place to stop),
and SGLang at its default memory fraction under precise prefix-cache routing, where raising ``--mem-fraction-static``
to 0.9 restored sub-second TTFT at the peak rates — from two public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine prints them: llama.cpp through :func:`tests.states.test_field_round32.
_llamacpp_2026` (``to_metrics()`` of 2026: no labels, no KV gauges) with the rows of
:func:`tests.states.test_field_round53._llamacpp_rows` and the ``spec_decode_*`` counters of
:func:`tests.states.test_field_round54._llamacpp_spec_rows`; SGLang through :class:`tests.states.SGLangEngine` (the
0.5.x scheduler and tokenizer families, as round 12a renders the same fleet in the same month). The assertions come
from the reports' numbers and the verdict each thread establishes, never from the advisor's output:

* ``llamacpp-r9700-mtp-4-unified-slots-4-concurrent-parallel-2-measured-better`` — Tanguille/cluster#3261: a live
  sweep on the shared R9700, ``kv-unified`` and MTP drafting: "MTP on, parallel=4 | 39.0 | 25.2 | 23.7 | 10.9"
  against "MTP on, parallel=2 | 36.5 | 26.8 | 25.0 | 19.8" (single / 2-concurrent aggregate / 4-concurrent
  aggregate / 4-concurrent per request, tokens/s); merged ``parallel=2``. The four-slot page under four sessions:
  must propose fewer slots (not below the two the sweep chose); never more slots, replicas, a memory-budget turn or
  a restart.
* ``llamacpp-r9700-mtp-2-unified-slots-2-concurrent-measured-sweet-spot`` — the same sweep's chosen cell: two
  slots with MTP under two sessions, "best 2-concurrent aggregate" (26.8 against 25.2 at four slots and 26.9 with
  MTP off at four), keeping "the ~1.5x single-session MTP speedup (37 vs 24)". Never drafting off (no gain at two
  sessions, −34 % for one), never more slots, replicas, a memory-budget turn or a restart.
* ``sglang-qwen3-32b-tp2-precise-prefix-routing-default-mem-fraction-peak-ttft`` — llm-d/llm-d#1887: "By tuning
  SGLang's memory allocation (``--mem-fraction-static=0.9``), we unlocked drastically better performance under high
  load, maintaining stable, sub-second TTFT … even at peak request rates where it previously degraded. Prior to this
  change, the default usage was coming out to be around 0.82"; the guide's earlier run (llm-d/llm-d#1643, the same
  default) "significantly worse than vllm for qps 40+". A pod at a peak rate with the default fraction, its pool
  full and prefixes re-prefilled, requests queued: must propose a larger memory fraction; never more running
  requests, a KV byte budget, replicas or a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import json

from tests.states import SGLangEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round5 import _all, _suggests
from tests.states.test_field_round32 import _llamacpp_2026
from tests.states.test_field_round53 import QWEN3_30B_A3B_2507_CONFIG, _llamacpp_rows
from tests.states.test_field_round54 import _llamacpp_spec_rows

# --- llama.cpp: the R9700 sweep of Tanguille/cluster#3261 ------------------------------------------------------------

OUT_TOKENS = 512.0
"""Chosen: tokens answered per benchmark request (the PR does not state its prompts or lengths)."""
PROMPT_TOKENS = 1_000.0
"""Chosen: tokens per benchmark prompt."""
ACCEPT_BY_POS = (0.55, 0.37, 0.28)
"""Chosen: MTP acceptance by draft position (``--spec-draft-n-max 3``): 1.2 accepted a draft, 2.2 tokens a
draft+verify round (the PR gives only the single-session speedup, ~1.5× against plain decoding)."""
ROUNDS_PER_REQUEST = round(OUT_TOKENS / (1 + sum(ACCEPT_BY_POS)))
"""Draft+verify rounds one request takes (233)."""


def _r9700_page(
    *, done: int, gen_s: float, prompts: int, decodes: float, busy_slot_steps: float, busy: int
) -> str:  # fmt: skip
    """One ``/metrics`` page of the R9700 server: ``done`` benchmark requests completed (llama-server moves its token
    and speculative counters when a slot's task completes), ``prompts`` prompts processed, ``decodes``
    ``llama_decode`` calls holding ``busy_slot_steps`` busy slots in all, ``busy`` slots busy now."""
    rows = _llamacpp_rows(
        prompt=prompts * PROMPT_TOKENS,
        cached=0.0,
        prompt_s=prompts * 0.5,
        gen=done * OUT_TOKENS,
        gen_s=gen_s,
        decodes=decodes,
        longest=PROMPT_TOKENS + OUT_TOKENS,
        busy=float(busy),
        deferred=0.0,
        per_decode=busy_slot_steps / decodes,
    )
    drafts = float(done * ROUNDS_PER_REQUEST)
    accepted = [drafts * p for p in ACCEPT_BY_POS]
    return _llamacpp_2026(rows) + _llamacpp_spec_rows(drafts, 3 * drafts, accepted)


def _r9700_deployment(name: str, parallel: int) -> dict[str, object]:
    """The cluster's llama-server as #3257–#3261 describe it: one 256K unified pool (``kv-unified``), MTP drafting,
    ``parallel`` slots. Stand-ins (the model as round 59 for the same cluster): Qwen3-30B-A3B-Instruct-2507 as a Q4_K_M
    GGUF with an MTP draft; the card is the R9700's 32 GB as ROCm reports such a card (~32,624 MiB, ``gpu_memory_gib``
    31.86: not in the advisor's GPU table, so no other part's speed is assumed — round 59's 31.4 GiB resolves to the
    RTX 5090's entry)."""
    return {
        "name": name,
        "engine": "llamacpp",
        "model": "qwen3-30b-a3b-instruct-2507/config.json",
        "served_model": "qwen3-30b-a3b-mtp",
        "gguf_file_type": "Q4_K_M",
        "gpu_memory_gib": 31.86,
        "max_model_len": 262_144,
        "ctx_size": 262_144,
        "parallel": parallel,
        "kv_unified": True,
        "speculative_decoding": True,
        "slo": {"ttft_seconds": 30.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
    }


R9700_FILES = {"qwen3-30b-a3b-instruct-2507/config.json": json.dumps(QWEN3_30B_A3B_2507_CONFIG, indent=2)}


# --- 1. llama.cpp, four MTP slots under four sessions: two slots measured better -------------------------------------


def llamacpp_r9700_mtp_four_slots_four_sessions() -> FieldState:
    """Tanguille/cluster#3261 ("perf(llama-server): parallel=2 — measured sweet spot with MTP", merged, June 2026):
    "Live config sweep on the shared R9700 (median of multiple runs, under real media-transcode contention) across
    MTP on/off and parallel 2/4: | config | single TG | 2-conc agg | 4-conc agg | 4-conc per-req | | MTP on,
    parallel=4 | 39.0 | 25.2 | 23.7 | 10.9 | | MTP off, parallel=4 | 24.3 | 26.9 | **28.2** | 14.5 | | **MTP on,
    parallel=2** | 36.5 | **26.8** | 25.0 | **19.8** |"; "``parallel=2`` + MTP is the all-rounder: keeps the ~1.5x
    single-session MTP speedup (37 vs 24), best 2-concurrent aggregate, and ~2x better 4-concurrent per-request
    latency than parallel=4 (it queues excess instead of letting 4 requests thrash speculation)"; "kv-unified
    retained (full 256K for a lone session)". The merged change is one dial: ``parallel`` 4 → 2.

    The state is the BEFORE cell under its worst load: MTP on, four unified slots, four sessions at once. Measured
    against the merged two slots: 4-concurrent aggregate 23.7 → 25.0 tokens/s, per request 10.9 → 19.8, 2-concurrent
    aggregate 25.2 → 26.8; the single session gives up 39.0 → 36.5. What the page shows: four slots busy, each
    drafting and verifying on its own (``spec_decode_*``), 23.7 / 4 ≈ 5.9 tokens/s a slot (169 ms a token), nothing
    deferred, the 262,144-cell pool far from full. Must propose fewer slots, and not fewer than the two the sweep
    measured and merged (one slot was not measured). Must never: more slots (the measured direction is the other
    way), replicas (one second of history; each would thrash the same way), a memory-budget turn (llama.cpp's pool is
    ``--ctx-size``, already unified and not short), a restart (tokens flow); no stall.

    Not asserted: turning MTP off — the sweep's other measured improvement for four sessions (28.2 aggregate) at a
    34 % single-session cost the operator declined; neither required nor forbidden. Nor the 4-concurrent per-request
    figures (the benchmark's own per-request measure; the page shows per-slot generation time).

    Conflict noted: round 59's ``llamacpp-4-unified-slots-mtp-4-concurrent-10.8-vs-33-tps-single`` (the same cluster's
    #3258, earlier the same day) forbids ``("max_num_seqs", "decrease")`` on the same kind of page because #3258 and
    #3260 kept ``parallel=4``; #3261 is the operator's later measurement that reverses that.

    Chosen where the report is silent: the model and card (:func:`_r9700_deployment`); prompts of 1,000 tokens, 512
    out; acceptance (:data:`ACCEPT_BY_POS`). The server restarted for this cell of the sweep; before the window it has
    run three single-session requests (39.0 tokens/s: 13.1 s of generation each), three 2-concurrent rounds (six
    requests at 25.2 / 2 = 12.6 tokens/s: 40.6 s each) and two 4-concurrent rounds (eight at 5.93: 86.4 s each), and
    the third 4-concurrent round is ~230 rounds into its requests. The window: one of the four completes (its 512
    tokens and its drafts are counted), three slots stay busy, three draft+verify rounds run (2.7 a second at 8.8
    tokens a round over four slots). llama.cpp of June 2026 exposition. SLO: TTFT 30 s, TPOT 0.1 s (10 tokens/s a
    session; the operator's own concern is per-request speed).
    """
    r = ROUNDS_PER_REQUEST
    gen_s = 3 * OUT_TOKENS / 39.0 + 6 * OUT_TOKENS / 12.6 + 8 * OUT_TOKENS / (23.7 / 4)
    decodes = 3.0 * r + 3 * r + 2 * r + 230
    busy_steps = 3.0 * r * 1 + 3 * r * 2 + (2 * r + 230) * 4
    first = _r9700_page(done=17, gen_s=gen_s, prompts=21, decodes=decodes, busy_slot_steps=busy_steps, busy=4)
    second = _r9700_page(
        done=18, gen_s=gen_s + OUT_TOKENS / (23.7 / 4), prompts=21, decodes=decodes + 3,
        busy_slot_steps=busy_steps + 3 * 4, busy=3,
    )  # fmt: skip
    return FieldState(
        id="llamacpp-r9700-mtp-4-unified-slots-4-concurrent-parallel-2-measured-better",
        source="https://github.com/Tanguille/cluster/pull/3261",
        engine_version="llama.cpp of June 2026 (no KV gauges; spec_decode counters)",
        deployment=_r9700_deployment("cluster-llama-server-mtp-parallel-4", 4),
        scrapes=[(first, second)],
        files=R9700_FILES,
        snapshot={"requests_waiting": 0},
        must_propose=[("max_num_seqs", "decrease")],
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            ("gpu_memory_utilization", "increase"),
            RESTART,
        ],
        extra_check=_all(_suggests("max_num_seqs", "decrease", at_least=2), no_stall_claimed),
    )


# --- 2. llama.cpp, two MTP slots under two sessions: the sweep's chosen cell ----------------------------------------


def llamacpp_r9700_mtp_two_slots_two_sessions() -> FieldState:
    """Tanguille/cluster#3261 (as above): the merged cell, "**MTP on, parallel=2** | 36.5 | **26.8** | 25.0 |
    **19.8**", against "MTP off, parallel=4 | 24.3 | 26.9 | **28.2** | 14.5" and "MTP on, parallel=4 | 39.0 | 25.2 |
    23.7 | 10.9"; "a bad trade for mostly-1-2-session use" (dropping MTP: "at a 34% single-session cost").

    The state is the AFTER cell under the load the operator tunes for: two slots, MTP on, two sessions at once,
    26.8 tokens/s together (13.4 a slot, 75 ms a token). Measured against the turns a page might tempt: drafting off
    gives two sessions 26.9 (no gain) and one session 24.3 instead of 36.5 (−34 %); more slots (four, with MTP) give
    two sessions 25.2 (worse) and four sessions 10.9 a request instead of 19.8. Must never: speculation off, more
    slots, replicas (one second), a memory-budget turn (the unified 262,144-cell pool is nearly empty), a restart
    (tokens flow); no stall.

    Not asserted: no advice at all — one slot was not measured (two sessions would then take turns at ~36.5 tokens/s
    for the box, one of them waiting a whole answer), and the card and model are stand-ins, so a smaller-GPU verdict
    cannot be refuted by the report. A longer or shorter draft was not measured either.

    Chosen where the report is silent: as the first row; the server restarted for this cell; before the window three
    single-session requests (36.5 tokens/s: 14.0 s each) and two 2-concurrent rounds (four requests at 13.4: 38.2 s
    each), the third round ~230 rounds in. The window: one of the two completes, one slot stays busy, six rounds run
    (6.1 a second at 4.4 tokens a round over two slots). llama.cpp of June 2026 exposition. SLO: as the first row.
    """
    r = ROUNDS_PER_REQUEST
    gen_s = 3 * OUT_TOKENS / 36.5 + 4 * OUT_TOKENS / (26.8 / 2)
    decodes = 3.0 * r + 2 * r + 230
    busy_steps = 3.0 * r * 1 + (2 * r + 230) * 2
    first = _r9700_page(done=7, gen_s=gen_s, prompts=9, decodes=decodes, busy_slot_steps=busy_steps, busy=2)
    second = _r9700_page(
        done=8, gen_s=gen_s + OUT_TOKENS / (26.8 / 2), prompts=9, decodes=decodes + 6,
        busy_slot_steps=busy_steps + 6 * 2, busy=1,
    )  # fmt: skip
    return FieldState(
        id="llamacpp-r9700-mtp-2-unified-slots-2-concurrent-measured-sweet-spot",
        source="https://github.com/Tanguille/cluster/pull/3261",
        engine_version="llama.cpp of June 2026 (no KV gauges; spec_decode counters)",
        deployment=_r9700_deployment("cluster-llama-server-mtp-parallel-2", 2),
        scrapes=[(first, second)],
        files=R9700_FILES,
        snapshot={"requests_waiting": 0},
        must_never=[
            ("speculative_decoding", "disable"),
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            ("gpu_memory_utilization", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 3. SGLang: a precise-prefix-routed pod at the default memory fraction, at a peak rate ---------------------------


def sglang_precise_prefix_default_mem_fraction() -> FieldState:
    """llm-d/llm-d#1887 ("[SGLang] Update the well-lit path guide for precise prefix cache aware routing with optimal
    config and updated benchmark numbers", merged, June 2026): "This PR updates the precise prefix cache routing guide
    for SGLang with significantly improved benchmark results and includes the configuration tuning that enabled these
    gains. By tuning SGLang's memory allocation ( --mem-fraction-static=0.9 ), we unlocked drastically better
    performance under high load, maintaining stable, sub-second TTFT (Time to First Token) even at peak request rates
    where it previously degraded. Prior to this change, the default usage was coming out to be around 0.82 percent."
    The guide's first SGLang run (llm-d/llm-d#1643, the same default): routed TTFT mean 0.21–1.05 s up to rate 30
    (0.759 s at 30), and "the sglang results is significantly worse than vllm for qps 40+". The fleet (the same
    author's llm-d/llm-d#1921 and #1840, the same week): 8 pods of Qwen3-32B at TP 2 on 16 H100s; SGLang computes the
    default fraction from the card (0.828 for this pairing, sgl-project/sglang#29092).

    The state is the BEFORE condition at a peak rate: one pod at the default fraction, rate 40 of the ladder (5
    requests a second to it). The router keeps each prefix group on one pod, so the pod's pool must hold its groups'
    prefixes and its running requests; at 0.82 it cannot: the pool is full (0.99 used, nothing evictable), prefixes
    are evicted and re-prefilled (the prefix hit rate falls to 0.55 against the ~0.83 the shared 6,000 of 7,200
    prompt tokens allow), and 35 requests wait; TTFT ~7 s. The measured fix is one dial, the memory fraction 0.82 →
    0.9: must propose a larger fraction (above the 0.82 it runs). Must never: more running requests (the pool, not
    the count, is full), a KV byte budget (SGLang has none), replicas (one second of history), a restart (it serves);
    no stall.

    Not asserted: an upper bound for the fraction (this PR gives none; #1840 on the same fleet saw OOM above 0.92 — a
    different report); the TTFT after the turn (a page of the before condition cannot show it).

    Chosen where the report is silent: the guide's workload is not quoted — the optimized-baseline workload of the
    same fleet (#1840: 6,000-token shared system prompt + 1,200-token question, 1,000 tokens out; ~360 out per
    request at this rate) stands in; the pool 286,720 tokens at the default (as round 12a renders the same pod); 1,500
    requests answered before, 150 running, 35 queued; TTFT ~7 s (queue ~6.4 s), ~48 ms a token. The window: 5
    requests finish (the tokenizer's prompt and generation counters move as a request finishes: 5 × 7,200 and
    5 × 360), 5 arrive, ~1,750 tokens decoded. SGLang of June 2026 (the 0.5.13 line of #1921) rendered with the 0.5.x
    exposition of :class:`tests.states.SGLangEngine` (``max_total_num_tokens`` since sgl-project/sglang#14256, the
    ``kv_*_tokens`` gauges since #22726 in 0.5.11; the renderer prints no ``cached_tokens_total`` and no token-count
    histograms, so the hit rate is read from the ``cache_hit_rate`` gauge only). SLO: TTFT 1 s (the PR's
    "sub-second" target), TPOT 0.1 s.
    """
    pool = 286_720
    eng = SGLangEngine(model_name="Qwen/Qwen3-32B", max_total_num_tokens=pool, context_len=40_960, swa_tokens=0)

    def gauges(running: float, queue: float, used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = running, queue
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["kv_evictable_tokens"] = 0.0
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 4)
        eng.g["gen_throughput"] = 1_750.0
        eng.g["cache_hit_rate"] = 0.55

    eng.finish(1_500, prompt=7_200, output=360, ttft=7.0, tpot=0.048, queue=6.4)
    eng.prompt["true"] = 1_500 * 7_200.0  # the whole prompt, cached or not, counted when the request finishes
    eng.generation["true"] = 1_500 * 360.0
    eng.itl.observe(0.048, 1_500 * 359 + 150 * 180)
    gauges(150.0, 35.0, 284_300.0)
    first = eng.render()
    eng.finish(5, prompt=7_200, output=360, ttft=7.4, tpot=0.048, queue=6.8)
    eng.prompt["true"] += 5 * 7_200.0
    eng.generation["true"] += 5 * 360.0
    eng.itl.observe(0.048, 1_750)
    gauges(150.0, 35.0, 284_500.0)
    return FieldState(
        id="sglang-qwen3-32b-tp2-precise-prefix-routing-default-mem-fraction-peak-ttft",
        source="https://github.com/llm-d/llm-d/pull/1887",
        engine_version="SGLang of June 2026 (0.5.13 line; 0.5.x exposition)",
        deployment={
            "name": "qwen3-32b-sglang-precise-prefix-pod",
            "engine": "sglang",
            "model": "Qwen/Qwen3-32B",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 2,
            "mem_fraction_static": 0.82,
            "max_model_len": 40_960,
            "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 150, "requests_waiting": 35, "kv_cache_capacity_tokens": pool},
        must_propose=[("gpu_memory_utilization", "increase")],
        must_never=[
            ("kv_cache_memory_bytes", None),
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(_suggests("gpu_memory_utilization", "increase", at_least=0.83), no_stall_claimed),
    )


STATES = [
    llamacpp_r9700_mtp_four_slots_four_sessions(),
    llamacpp_r9700_mtp_two_slots_two_sessions(),
    sglang_precise_prefix_default_mem_fraction(),
]

XFAIL: dict[str, str] = {
    "llamacpp-r9700-mtp-4-unified-slots-4-concurrent-parallel-2-measured-better": (
        "missing advice, no rule turns --parallel down for slots that each draft and verify: "
        "advisor/rules/speculative.py SpeculativeRule._reading/measure only ever turn the draft (off or shorter) and "
        "here cannot run ('running requests or TPOT unknown': measure() and _per_token() need ev.ctx.gpu, None for "
        "this card (gpu_memory_gib 31.86 matches no catalog part), and llama.cpp has no TPOT histogram, so tpot_ok "
        "is None although the page's tokens_predicted_seconds_total gives 169 ms a token against the 0.1 s target), "
        "while "
        "advisor/rules/seq_cap.py SeqCapRule._reading proposes fewer llama.cpp slots only for short cells or context "
        "('3 of 4 slot(s) busy, nothing deferred' -> inactive). Got: no advice. Right: max_num_seqs (--parallel) "
        "4 -> 2, the operator's measured fix (4 sessions 10.9 -> 19.8 tokens/s a request, 23.7 -> 25.0 together; "
        "2 sessions 25.2 -> 26.8); round 59's row on #3258 no longer forbids fewer slots (this sweep, a day "
        "later, measured them faster)"
    ),
}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
