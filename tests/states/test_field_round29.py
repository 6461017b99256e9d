"""Field states, round 29: expositions that say the load in more than one place — a gauge split over eight API-server
processes, a fleet whose replicas speak two engine versions mid-upgrade (two spellings of KV usage; a queue split by
reason on one pod and not on the other), and a hybrid model whose prefills queue behind a block-aligned budget while
every counter stands still — from four public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered through :class:`tests.states.VLLMEngine` (V1; the 0.11 label set for 2025 releases, the 0.33
set for 2026 ones), rewritten where the report's exposition differs from one process's (the multiprocess collector,
the 0.8 family names). The assertions come from the reports' numbers, the verdict each thread establishes and engine
facts, never from the advisor's output:

* ``vllm-0.11-api-server-count-8-kv-usage-one-pid-of-eight`` — ``--api-server-count 8``: prometheus_client's
  multiprocess collector serves ``vllm:kv_cache_usage_perc`` once per API-server process (``pid`` label), seven at
  0.0 and the one that receives the scheduler's stats at 0.653. The pool is 65 % used, not 8 % (the mean) or 523 %
  (the sum): the snapshot reads 0.653, and no turn that reads the pool as idle or overfull may come.
* ``vllm-mixed-fleet-0.8-and-0.18-kv-usage-two-names`` — a rolling upgrade half done: the old pod exposes
  ``vllm:gpu_cache_usage_perc`` (0.8 V1), the new one ``vllm:kv_cache_usage_perc`` (0.9+); "Anything pinned to the
  old names silently reads zero." Both pods are ~60 % used: the fleet's usage is both pods', never a pool turn,
  never replicas, never a restart.
* ``vllm-hybrid-gdn-align-2048-budget-prefills-serialize-running-1`` — a hybrid GDN model with Mamba ``align`` mode
  and the default 2,048-token budget under a 2,048-token block: 10.5K-token prompts prefill one at a time (6 steps
  of ~1.2 s), ``running=1`` with the rest of the burst waiting, token counters still between prefill completions.
  Never a restart (a block is written each step), never more sequences (one runs of 256), never a pool turn (under
  1 % of the pool is used), never replicas.
* ``vllm-mixed-fleet-0.14-rank-compiling-grammar-beside-0.28-pod`` — a rolling upgrade half done, DP 2 a pod: on the
  old pod (vLLM 0.14, no queue split by reason) rank 1 holds four requests whose deeply nested JSON schema xgrammar
  compiles "minutes-to-hours … not a deadlock — it does eventually finish", none running, its pool empty, while rank
  0 serves. On that pod alone the advisor cannot tell a compile from a wedge (its own reading: before 0.20 a rank's
  queue may wait on another stage); the new pod's split queue must not decide it for the old one. Never a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from tests.states import VLLMEngine, go_float
from tests.states.field import FieldState, round_tests
from tests.states.test_field_pools import vllm_dp_text
from tests.states.test_field_round3_others import _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all
from tests.states.test_field_round14 import _hybrid_pool

INTERACTIVE = {"ttft_seconds": 2.0, "tpot_seconds": 0.025, "target_ratio": 0.9}
"""An interactive chat SLO (25 ms a token): chosen where the reports state none."""


def _families_dropped(text: str, families: Iterable[str]) -> str:
    """``text`` without the named metric families (their ``# HELP``/``# TYPE`` lines and every sample of the family:
    bare, ``_total``, ``_bucket``, ``_count``, ``_sum``, ``_created``)."""
    names = set(families)
    suffixes = ("", "_total", "_bucket", "_count", "_sum", "_created")
    out = []
    for line in text.splitlines():
        token = line.split(" ", 3)[2] if line.startswith("# ") else line.split("{", 1)[0].split(" ", 1)[0]
        if any(token == f"{n}{s}" for n in names for s in suffixes):
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def _snapshot_close(key: str, expected: float, rel: float = 0.03) -> Any:
    """The snapshot's ``key`` is within ``rel`` of ``expected`` (a reading the row's arithmetic fixes)."""

    def check(result: dict[str, Any]) -> None:
        got = (result.get("snapshot") or {}).get(key)
        assert isinstance(got, int | float), f"snapshot {key} = {got!r}, expected ≈ {expected}"
        assert abs(got - expected) <= rel * expected, f"snapshot {key} = {got!r}, expected ≈ {expected}"

    return check


# --- 1. vLLM 0.11, --api-server-count 8: the KV gauge once per API-server process ----------------------------------


def _multiprocess(text: str, *, kv_usage: float, pids: Iterable[int], live: int) -> str:
    """One vLLM process's page as prometheus_client's ``MultiProcessCollector`` serves it for ``--api-server-count``
    > 1 (``PROMETHEUS_MULTIPROC_DIR``; vLLM's ``/metrics`` then mounts a fresh registry holding only that collector):
    no ``process_*`` families and no ``_created`` samples; counters and histograms summed over the processes (no
    ``pid``); gauges declared ``multiprocess_mode="mostrecent"`` (running, waiting, ``cache_config_info``) as one
    sample; ``vllm:kv_cache_usage_perc``, declared without a mode (``"all"``), once per process with a ``pid`` label —
    the process that records the scheduler's stats at ``kv_usage``, the others at the 0.0 they were created with."""
    out = []
    for line in text.splitlines():
        if line.startswith("process_start_time_seconds") or "process_start_time_seconds" in line.split(" ", 3)[:3]:
            continue
        if "_created" in line:
            continue
        if line.startswith("vllm:kv_cache_usage_perc{"):
            labels = line[len("vllm:kv_cache_usage_perc{") : line.index("}")]
            for pid in pids:
                value = kv_usage if pid == live else 0.0
                out.append(f'vllm:kv_cache_usage_perc{{{labels},pid="{pid}"}} {go_float(value)}')
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def vllm_api_servers_kv_gauge_per_pid() -> FieldState:
    """vllm-project/vllm#28792 ("[Metrics] Fix KV cache usage percent metric multiproc", merged November 2025): "The
    ``vllm:kv_cache_usage_perc`` Gauge metric is missing ``multiprocess_mode="mostrecent"`` and ends up returning
    ``vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-VL-8B-Instruct",pid="277"} 0.0`` …
    ``{…,pid="273"} 0.6530455880475035`` … (eight samples, pids 271–278, seven of them 0.0) "when
    ``--api-server-count`` is larger than 1. Note that the deprecated ``vllm:gpu_cache_usage_perc`` Gauge metric has
    ``multiprocess_mode="mostrecent"`` … I'm guessing it was dropped by mistake."

    Engine facts (``vllm/v1/metrics/loggers.py`` before the fix): ``PrometheusStatLogger`` declares
    ``vllm:num_requests_running`` and ``vllm:num_requests_waiting`` with ``multiprocess_mode="mostrecent"``,
    ``vllm:cache_config_info`` likewise (``log_metrics_info``), and ``vllm:kv_cache_usage_perc`` with no mode, which
    prometheus_client's multiprocess mode serves as ``"all"``: one sample per process that created the gauge, labelled
    ``pid``. Every API-server process creates it (each builds its stat loggers) and only the one that receives the
    engine core's scheduler stats sets it, so the page holds one live value and seven zeros. Counters and histograms
    are summed over the processes (each counts the requests it answered); the multiprocess collector writes no
    ``_created`` samples and vLLM's multiprocess registry holds no process collector (no
    ``process_start_time_seconds``). Arithmetic: Qwen3-VL-8B's language model keeps 36 layers × 2 × 8 KV heads × 128
    × 2 bytes = 144 KiB a token; an H100 at 0.9 leaves ~50.2 GiB beside ~15.3 GiB of weights: 365,328 tokens
    (22,833 blocks of 16, the capacity pass's figure for this deployment: an input here). 0.653 of it is ~238,600
    tokens: 48 running image-and-text chats of ~5,000 tokens. The mean over the eight samples would read 8.2 % (a pool
    almost idle), their sum 523 % (a pool five times over): either would turn a dial the live 65 % does not call for.
    So the snapshot's KV usage is 0.653, and must never: a pool turn either way (65 % with nothing waiting and
    nothing preempted: no saturation; a pool two-thirds full is not idle), fewer or more replicas, fewer sequences, a
    restart.

    Not asserted: any advice on the eight API servers themselves (the report is about the exposition).

    Chosen where the report is silent: one H100 SXM, ``gpu_memory_utilization`` 0.9, ``max_model_len`` 32,768 (the
    model's native 262,144 chosen down; the report names no flag but ``--api-server-count``); Qwen3-8B (the advisor's
    preset with Qwen3-VL-8B's text shapes: 36 layers, 8 KV heads of 128) stands in for the vision-language checkpoint,
    whose served name the engine prints. Before: 12,000 chats answered (~4,400 prompt tokens with the image, ~600
    generated at 20 ms, TTFT 0.3 s); 48 running, nothing waiting. The window: 8 finish, 8 are admitted, 48 streams
    decode 50 tokens each. vLLM 0.11.0 (the release before the fix) with the 0.11 label set. SLO: :data:`INTERACTIVE`.
    """
    served = "Qwen/Qwen3-VL-8B-Instruct"
    blocks = 22_833
    pids, live = range(271, 279), 273
    eng = VLLMEngine(model_name=served, num_gpu_blocks=blocks, max_model_len=32_768, gpu_memory_utilization=0.9)
    eng.finish(12_000, prompt=4_400, output=600, ttft=0.3, tpot=0.020, queue=0.01)
    eng.first_tokens([0.3] * 12_048)
    eng.prefill(12_048 * 4_400, cached=12_048 * 1_100)
    eng.decode(12_000 * 599 + 48 * 300, 0.020, steps=12_000 * 599 / 48, batch=48)
    eng.running, eng.waiting, eng.kv_usage = 48.0, 0.0, 0.6528
    first = _multiprocess(eng.render(), kv_usage=0.6528, pids=pids, live=live)
    # the window: 8 finish, 8 are admitted and prefilled, 48 streams decode 50 tokens each at 20 ms
    eng.finish(8, prompt=4_400, output=600, ttft=0.3, tpot=0.020, queue=0.01)
    eng.first_tokens([0.3] * 8)
    eng.prefill(8 * 4_400, cached=8 * 1_100)
    eng.decode(48 * 50, 0.020, steps=50, batch=48)
    eng.kv_usage = 0.653
    second = _multiprocess(eng.render(), kv_usage=0.6530455880475035, pids=pids, live=live)
    return FieldState(
        id="vllm-0.11-api-server-count-8-kv-usage-one-pid-of-eight",
        source="https://github.com/vllm-project/vllm/pull/28792",
        engine_version="vLLM 0.11.0, --api-server-count 8 (multiprocess exposition; 0.11 label set)",
        deployment={
            "name": "qwen3-vl-8b-asc8",
            "engine": "vllm",
            "engine_version": "0.11.0",
            "model": "Qwen/Qwen3-8B",
            "served_model": served,
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "slo": INTERACTIVE,
        },
        scrapes=[(first, second)],
        snapshot={
            "requests_running": 48,
            "requests_waiting": 0,
            "kv_cache_usage_ratio": 0.653,
            "kv_cache_capacity_tokens": blocks * 16,
        },
        must_never=[
            *POOL_TURNS,
            ("gpu_memory_utilization", "decrease"),
            ("kv_cache_memory_bytes", "decrease"),
            ("max_num_seqs", "decrease"),
            ("replicas", "decrease"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. a rolling upgrade half done: one pod spells KV usage the 0.8 way, the other the 0.9+ way ---------------------

_V08_DROPPED = ("vllm:inter_token_latency_seconds", "vllm:request_time_per_output_token_seconds")
"""Families of the 0.11 page that 0.8 V1 does not have: the inter-token histogram (0.11 renamed TPOT to it) and the
per-request TPOT."""
_V08_CACHE_LABELS_DROPPED = (
    "cpu_kvcache_space_bytes",
    "kv_cache_memory_bytes",
    "kv_sharing_fast_prefill",
    "mamba_cache_dtype",
    "mamba_page_size_padded",
    "mamba_ssm_cache_dtype",
    "swap_space_bytes",
)
"""``CacheConfig`` fields (``cache_config_info`` labels) added after 0.8."""


def _v08_page(eng: VLLMEngine) -> str:
    """The page of a vLLM 0.8.x V1 server: KV usage as ``vllm:gpu_cache_usage_perc`` (renamed
    ``vllm:kv_cache_usage_perc`` in 0.9, vllm-project/vllm#18354), the prefix-cache counters as
    ``vllm:gpu_prefix_cache_queries``/``_hits``, TPOT only as ``vllm:time_per_output_token_seconds``."""
    text = eng.render()
    for label in _V08_CACHE_LABELS_DROPPED:
        text = _label_dropped(text, "vllm:cache_config_info", label)
    text = _families_dropped(text, _V08_DROPPED)
    text = text.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    text = text.replace("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries")
    return text.replace("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits")


def _label_dropped(text: str, name: str, label: str) -> str:
    out = []
    for line in text.splitlines():
        if line.startswith(name + "{"):
            head, rest = line[len(name) + 1 :].split("}", 1)
            kept = [p for p in head.split('",') if not p.startswith(f"{label}=")]
            head = '",'.join(kept)
            if not head.endswith('"'):
                head += '"'
            line = f"{name}{{{head}}}{rest}"
        out.append(line)
    return "\n".join(out) + "\n"


def vllm_mixed_fleet_two_kv_names() -> FieldState:
    """ai.wmx.dev, "Operational gotchas" (an operator's lessons from running vLLM on GKE behind KEDA): "vLLM V1 renamed
    its metrics. Symptom. Dashboards go blank and KEDA triggers stop firing after a vLLM upgrade, with no error, just a
    metric that no longer exists. Cause. The vLLM V1 engine renamed core serving metrics: ``gpu_cache_usage_perc``
    became ``kv_cache_usage_perc``, and ``time_per_output_token_seconds`` became ``inter_token_latency_seconds``.
    Anything pinned to the old names silently reads zero. Fix. Pin dashboards, alerts, and KEDA Prometheus triggers to
    the V1 names … Treat a vLLM major bump as a metrics contract change, not just an image tag."

    Engine and platform facts: vLLM 0.8 V1 serves KV usage as ``vllm:gpu_cache_usage_perc`` and TPOT as
    ``vllm:time_per_output_token_seconds``; 0.9 renamed the first (vllm-project/vllm#18354, the old name hidden from
    0.11, vllm-project/vllm#27133), 0.11 added ``vllm:inter_token_latency_seconds`` and deprecated the TPOT family,
    which later releases drop (the 0.33 label set here). A Deployment's rolling update replaces pods one at a time, so
    for the length of a rollout some pods serve the old page and some the new one, behind one Service. Arithmetic:
    Llama-3.1-8B keeps 128 KiB a token; an H100 at 0.9 holds 420,624 tokens (26,289 blocks of 16, the capacity pass's
    figure for this deployment: an input here). Each pod runs ~60 chats of ~4,300 tokens held: 60 × 4,300 ÷ 420,624 = 61
    % (old pod), 58 × 4,300 ÷ 420,624 = 59 % (new pod); nothing waits, nothing is preempted. An advisor pinned to either
    name reads the other pod as 0 % — a fleet at 30 %, half of it idle. So the fleet's KV usage is both pods' (~0.60),
    both pods' running requests count, and must never: a pool turn (~60 % used, no queue, no preemption), fewer or more
    replicas (one second; and neither pod is idle), a restart (both decode).

    Not asserted: any advice about the upgrade itself (the report's fix is on the dashboards' side).

    Chosen where the report is silent: two pods of Llama-3.1-8B-Instruct on one H100 SXM each,
    ``gpu_memory_utilization`` 0.9, ``max_model_len`` 8,192, the same flags on both (only the image changes); the old
    pod on vLLM 0.8.5 (V1), the new on 0.18 (rendered with the 0.33 label set); chat traffic of ~3,500 prompt and ~800
    generated tokens at 22 ms a token, TTFT 0.2 s. The old pod up a day (20,000 answered), the new one ten minutes
    (900 answered). The old pod's page is the 0.11 page with the 0.8 names (families whose first release the row does
    not pin, such as the per-phase request times, are kept as 0.11 has them). The window: each pod finishes and admits
    3, its streams decode 45 tokens each. SLO:
    :data:`INTERACTIVE`.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    blocks = 26_289
    pool = blocks * 16
    now = time.time()

    def pod(version: str, started: float, served: int, running: float) -> VLLMEngine:
        eng = VLLMEngine(
            model_name=model,
            num_gpu_blocks=blocks,
            max_model_len=8_192,
            gpu_memory_utilization=0.9,
            version=version,
            started=started,
        )
        eng.finish(served, prompt=3_500, output=800, ttft=0.2, tpot=0.022, queue=0.01)
        eng.first_tokens([0.2] * (served + int(running)))
        eng.prefill((served + running) * 3_500, cached=(served + running) * 900)
        generated = served * 800 + running * 400
        eng.decode(generated, 0.022, steps=generated / running, batch=running)
        eng.running, eng.waiting, eng.kv_usage = running, 0.0, running * 4_300 / pool
        return eng

    def window(eng: VLLMEngine) -> None:
        eng.finish(3, prompt=3_500, output=800, ttft=0.2, tpot=0.022, queue=0.01)
        eng.first_tokens([0.2] * 3)
        eng.prefill(3 * 3_500, cached=3 * 900)
        eng.decode(eng.running * 45, 0.022, steps=45, batch=eng.running)
        eng.kv_usage = eng.running * 4_310 / pool

    # process starts in wall-clock time, as a real scrape states them (the engine's created is its start + 55 s)
    old = pod("0.11", now - 86_400.0, 20_000, 60.0)
    old_first = _v08_page(old)
    window(old)
    new = pod("0.33", now - 600.0, 900, 58.0)
    new_first = new.render()
    window(new)
    return FieldState(
        id="vllm-mixed-fleet-0.8-and-0.18-kv-usage-two-names",
        source="https://ai.wmx.dev/architecture/lessons/operational-gotchas",
        engine_version="vLLM 0.8.5 V1 (old pod) beside vLLM 0.18 (new pod, 0.33 label set), mid-rollout",
        deployment={
            "name": "llama31-8b-rollout",
            "engine": "vllm",
            "model": model,
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_192,
            "slo": INTERACTIVE,
        },
        scrapes=[(old_first, _v08_page(old)), (new_first, new.render())],
        snapshot={"requests_running": 118, "requests_waiting": 0, "kv_cache_capacity_tokens": 2 * pool},
        must_never=[
            *POOL_TURNS,
            ("gpu_memory_utilization", "decrease"),
            ("replicas", "decrease"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _snapshot_close("kv_cache_usage_ratio", 118 * 4_310 / (2 * pool))),
    )


# --- 3. a hybrid GDN model in Mamba align mode: the 2,048-token budget serializes 10.5K-token prefills ---------------


def vllm_hybrid_align_budget_serializes_prefills() -> FieldState:
    """vllm-project/vllm-ascend#16916 ("[Bug]: Hybrid GDN models (Qwen3.6-35B-A3B): long prefills serialize with
    default max_num_batched_tokens=2048 (<70GB branch) + mamba align mode", closed), the reporter's correction: "root
    cause is the default ``max_num_batched_tokens=2048``, not a platform scheduling difference … After instrumenting
    the scheduler I reproduced the **same** serialization on CUDA-class defaults. … On this hardware class the
    ``OPENAI_API_SERVER`` default of ``max_num_batched_tokens`` is **2048** (the ``< 70 GB`` else-branch default in
    ``EngineArgs._get_default_max_num_batched_tokens``, v0.28.0; A3's 64 GB chips and RTX 3090 both fall into it).
    With ~10.5k-token prompts: each prefill needs 6 chunks of exactly 2048 tokens (one full budget per engine step,
    ~1.2 s/step on A3), the next waiting request faces a leftover budget < ``block_size`` (2048), so
    ``_mamba_block_aligned_split`` returns 0 and the **waiting loop** ``break``\\ s … — head-of-line blocking for
    everything behind it, net effect: long prefills strictly serialize, ``running=1``, wall time ≈ sum of individual
    TTFTs."

    Engine facts: in Mamba ``align`` mode (prefix caching on a hybrid) a prefill chunk before the prompt's last block
    is cut to a multiple of the block (``_mamba_block_aligned_split``, ``vllm/v1/core/sched/scheduler.py``), so with
    the budget equal to one block, one request's chunk takes the whole step and the next request gets no tokens until
    that prefill is done. V1 counts a request's prompt tokens and observes its TTFT at its first token
    (``IterationStats.update_from_output``), so the middle chunks of a prefill move no token counter; each chunk
    allocates the next attention block, so ``kv_cache_usage_perc`` rises a block a step. Arithmetic: 10,500 tokens
    are 5 full blocks and a 260-token tail: 6 steps × 1.2 s ≈ 7.2 s a request; a burst of four finishes its prefills
    at ~7, ~15, ~22 and ~29 s (each short answer decodes in ~1 s between them). At the first scrape the burst's second
    request is mid-prefill (3 of 6 chunks written) and two wait; in the second one step lands: one more block, no
    prompt finished, nothing generated. The stand-in's pool is 1,505,280 tokens (735 blocks of 2,048): the running
    request holds a handful of them (its attention blocks and GDN state checkpoints; 3 → 4 rendered, 0.4 → 0.5 %),
    and the whole burst's prompts would be under 3 %. So must never:
    a restart (a block is written every step; the burst clears in ~30 s), more sequences (1 of 256 runs: the budget,
    not the cap, holds the queue), a pool turn (under 1 % used), replicas (one second; the queue is the scheduler's,
    per engine), a context cap below the 10.5K prompts.

    Not asserted: the budget raise itself (``max_num_batched_tokens`` up, the report's root cause) — in one second the
    engine shows a queue and a running prefill, not that the budget equals the block; a row that required it would
    hold the advisor to the report's diagnosis rather than its exposition.

    Chosen where the report is silent: the Atlas A3 die (64 GB) and Qwen3.6-35B-A3B are not in the advisor's tables:
    the A100 SXM 80GB stands in with ``gpu_memory_gib`` 64 (as round 18 does for Ascend), and Qwen3-Next-80B-A3B
    (the tables' hybrid GDN MoE with 3B active, the same 3:1 Gated-DeltaNet-to-attention layout) at TP 4; the pool is
    the capacity pass's for that stand-in (1,506,553 tokens) in blocks of the report's 2,048. ``max_model_len`` 32,768,
    ``max_num_seqs`` 256 (the default on that class). Before: 40 earlier bursts answered (160 requests of ~10,500
    prompt and ~24 generated tokens, TTFT 7–29 s, queued 0–22 s). vLLM 0.28.0 with the 0.33 label set. SLO: TTFT 30 s,
    TPOT 0.1 s (the report states none; document-sized prompts in bursts).
    """
    served = "Qwen/Qwen3-Next-80B-A3B-Instruct"
    block, blocks = 2_048, 735
    pool = block * blocks
    prompt, output = 10_500, 24
    eng = VLLMEngine(
        model_name=served,
        num_gpu_blocks=blocks,
        block_size=block,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    _hybrid_pool(eng, pool, 32_768, "auto")
    ttfts = (7.2, 14.8, 22.4, 30.0)
    for i, ttft in enumerate(ttfts):
        eng.finish(40, prompt=prompt, output=output, ttft=ttft, tpot=0.045, queue=ttft - 7.2 + 0.001 * (i + 1))
        eng.first_tokens([ttft] * 40)
    eng.first_tokens([7.2])  # the burst's first request, answered before the scrape
    eng.finish(1, prompt=prompt, output=output, ttft=7.2, tpot=0.045, queue=0.001)
    eng.prefill(161 * prompt)
    eng.decode(161 * output, 0.045, steps=161 * output, batch=1)
    # the burst's second request has 3 of its 6 chunks written; two wait
    eng.running, eng.waiting, eng.kv_usage = 1.0, 2.0, 3 / blocks
    first = eng.render()
    # the window: one step lands — the fourth chunk, one more block; no prefill completes, nothing is generated
    eng.kv_usage = 4 / blocks
    return FieldState(
        id="vllm-hybrid-gdn-align-2048-budget-prefills-serialize-running-1",
        source="https://github.com/vllm-project/vllm-ascend/issues/16916",
        engine_version="vllm(-ascend) 0.28.0, Mamba align mode (rendered with the 0.33 label set)",
        deployment={
            "name": "qwen-gdn-moe-align-a3x4",
            "engine": "vllm",
            "engine_version": "0.28.0",
            "model": served,
            "gpu": "a100-80gb",
            "gpu_memory_gib": 64.0,
            "tensor_parallel_size": 4,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "max_num_seqs": 256,
            "max_num_batched_tokens": 2_048,
            "slo": {"ttft_seconds": 30.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 2, "kv_cache_capacity_tokens": pool},
        must_never=[
            RESTART,
            ("max_num_seqs", "increase"),
            *POOL_TURNS,
            ("replicas", "increase"),
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(prompt + output)),
    )


# --- 4. a rolling upgrade half done, DP 2 a pod: the old pod's rank 1 compiles a grammar beside a 0.28 pod ----------


def vllm_mixed_fleet_rank_compiling_grammar() -> FieldState:
    """vllm-project/vllm#54003 ("[Bug]: JSON/GRAMMAR structured-output schema compilation has no timeout (regex does);
    deeply-nested schemas cause unbounded compile time", open): "vLLM guards **regex** compilation against
    pathological input with ``compile_regex_with_timeout`` (default 5s …). The **JSON / JSON_OBJECT / GRAMMAR /
    STRUCTURAL_TAG** paths in the xgrammar backend, however, compile with **no timeout at all**. Because xgrammar
    compilation of a JSON schema grows super-exponentially with ``oneOf`` nesting depth, a deeply-nested (but
    schema-valid) input can take minutes-to-hours to compile. To be precise: the compilation is not a deadlock — it
    does eventually finish — but there is **no upper bound and no timeout**, so for moderate nesting depths the
    compile time already far exceeds any realistic client timeout, and the request is unresponsive for the entire
    duration while nothing is logged." (code cited at v0.28.0, ``vllm/v1/structured_output/backend_xgrammar.py``).

    Engine facts: in V1 a structured-output request waits in its engine's ``waiting`` queue (``WAITING_FOR_FSM``)
    until its grammar compiles in the engine core's structured-output executor, and the scheduler skips it meanwhile
    (``vllm/v1/core/sched/scheduler.py``); before the queue was split by reason (vllm-project/vllm#38435, March 2026)
    such requests are plain ``num_requests_waiting``, and the advisor's own ``rank_wedged`` reading says so: "before
    0.20 vLLM's waiting count includes requests compiling a grammar or loading remote KV … a rank's queue may wait on
    another stage" — it answers unknown there. Each data-parallel engine core is its own process with its own
    compiled-grammar cache. vLLM 0.14's balancer sends a request to the engine with the lowest ``waiting × 4 +
    running`` and breaks ties towards engine 0 (vllm-project/vllm#47420 rotated that later). A Deployment's rolling
    update replaces pods one at a time: for its length old and new pods serve behind one Service. Arithmetic: the job
    ran at one request at a time first, every tie going to engine 0, so only rank 0 compiled the schema (minutes, once)
    and serves it from its cache; when the job raised its concurrency, rank 0's 24 running (score 24) sent the next
    arrivals to rank 1 (score 0), which began the same compile from a cold cache: its arrivals wait (3 → 4, score 12
    → 16 < 24, so the balancer keeps sending it the job's next ones), none runs, its pool is empty, its counters are
    still — for the compile's minutes, which end on their own. On the old pod alone that is the reading the advisor
    declines (unknown: the queue may wait on another stage). The new pod's two ranks (0.28, queue split by reason,
    both caches warm) change nothing about the old pod's queue. So must never: a restart (the compile finishes; a
    restart throws it away, aborts the four, and the next request of the job compiles from zero), a pool turn (9 %
    used where anything runs, 0 % on the compiling rank), more sequences or replicas (one second; rank 1 holds no
    sequence and waits on a CPU compile, not on slots).

    Not asserted: the compile timeout itself (the report's fix is in the engine).

    Chosen where the report is silent: the report names no model or GPU; Llama-3.1-8B-Instruct on two H100 SXM a pod
    (``--data-parallel-size 2``), ``gpu_memory_utilization`` 0.9, ``max_model_len`` 8,192 (420,624 tokens an engine,
    26,289 blocks of 16: the capacity pass's figure for this deployment, an input here); an extraction job whose every
    request carries the same deeply nested schema: ~1,500 prompt and ~300 JSON tokens at 22 ms, TTFT 0.2 s once
    compiled. Mid-rollout: the old pod on vLLM 0.14.0 (up a day; 5,000 chats on rank 0 and 4,000 on rank 1 before the
    job, then the job's 900 on rank 0), the new pod on 0.28.0 (up ten minutes, 300 of the job's requests a rank, 24
    running each). The window: on the old pod rank 0 finishes 2 (24 → 22 running, no arrival: the balancer sends the
    pod's one arrival to rank 1, 3 → 4); each new rank finishes and admits 2; every running stream decodes 45 tokens.
    The old pod rendered with the 0.11 label set, the new with the 0.33 set. SLO: :data:`INTERACTIVE`.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    blocks = 26_289
    pool = blocks * 16
    now = time.time()

    def engine(version: str, started: float, chats: int, jobs: int, running: float, waiting: float) -> VLLMEngine:
        eng = VLLMEngine(
            model_name=model,
            num_gpu_blocks=blocks,
            max_model_len=8_192,
            gpu_memory_utilization=0.9,
            version=version,
            started=started,
        )
        if chats:
            eng.finish(chats, prompt=1_200, output=400, ttft=0.2, tpot=0.02, queue=0.01)
        if jobs:
            eng.finish(jobs, prompt=1_500, output=300, ttft=0.2, tpot=0.022, queue=0.01)
        eng.first_tokens([0.2] * int(chats + jobs + running))
        eng.prefill(chats * 1_200 + (jobs + running) * 1_500)
        eng.decode(chats * 400 + jobs * 300 + running * 150, 0.021, steps=(chats * 400 + jobs * 300) / 24, batch=24)
        eng.running, eng.waiting, eng.kv_usage = running, waiting, running * 1_650 / pool
        return eng

    def serve(eng: VLLMEngine, finished: int, admitted: int) -> None:
        eng.finish(finished, prompt=1_500, output=300, ttft=0.2, tpot=0.022, queue=0.01)
        eng.first_tokens([0.2] * admitted)
        eng.prefill(admitted * 1_500)
        eng.decode(eng.running * 45, 0.022, steps=45, batch=eng.running)
        eng.running += admitted - finished
        eng.kv_usage = eng.running * 1_650 / pool

    old = [
        engine("0.11", now - 86_400.0, 5_000, 900, 24.0, 0.0),
        engine("0.11", now - 86_400.0, 4_000, 0, 0.0, 3.0),
    ]
    new = [engine("0.33", now - 600.0, 0, 300, 24.0, 0.0) for _ in range(2)]
    old_first, new_first = vllm_dp_text(old), vllm_dp_text(new)
    serve(old[0], 2, 0)
    old[1].waiting = 4.0
    for eng in new:
        serve(eng, 2, 2)
    return FieldState(
        id="vllm-mixed-fleet-0.14-rank-compiling-grammar-beside-0.28-pod",
        source="https://github.com/vllm-project/vllm/issues/54003",
        engine_version="vLLM 0.14.0 (old pod, 0.11 label set) beside vLLM 0.28.0 (new pod, 0.33 label set), DP 2 each",
        deployment={
            "name": "llama31-8b-dp2-rollout",
            "engine": "vllm",
            "model": model,
            "gpu": "h100-sxm",
            "data_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_192,
            "slo": INTERACTIVE,
        },
        scrapes=[(old_first, vllm_dp_text(old)), (new_first, vllm_dp_text(new))],
        snapshot={"requests_running": 22 + 48, "requests_waiting": 4, "kv_cache_capacity_tokens": 4 * pool},
        must_never=[
            RESTART,
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
        ],
    )


STATES = [
    vllm_api_servers_kv_gauge_per_pid(),
    vllm_mixed_fleet_two_kv_names(),
    vllm_hybrid_align_budget_serializes_prefills(),
    vllm_mixed_fleet_rank_compiling_grammar(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
