"""A breaker's cases against rule ``seq_cap`` and ``plan``'s ``tensor_parallel_nodes`` (2026-12-05), each asserting
the right behaviour; each failed on 9d002fb, the rule's first form: requests deferred for a LoRA slot or a remote KV
load counted as waiting for a slot, a stale configured cap read as the cap, a raise the engine cannot start (vLLM's
sampler warm-up at 36,000 sequences), the pool bound at running requests' size so far, a full pool predicted when
its size is unknown, a raise while measured TPOT misses, a mean usage hiding a hot replica, Dynamo's frontend
gauges read as one engine's slots, and one node reported for a part whose domain the catalog does not state."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from advisor import conventions as c
from advisor.rules.base import SLOTargets
from advisor.rules.goodput import GoodputRule
from advisor.rules.seq_cap import SeqCapRule
from advisor.rules.turns import turn
from tests.inprocess import run_cli
from tests.rules.helpers import ctx, ev, good, hist

POOL = 432_000


def _ev(running: float = 4, waiting: float = 6, usage: float | None = 0.1, cap: int = 4, **kw: Any) -> Any:
    dep_kw = {k: kw.pop(k) for k in ("engine", "slo") if k in kw}
    kw.setdefault("kv_capacity_tokens", POOL)
    return ev(
        dep=ctx(gpu="h100-sxm", max_num_seqs=cap, **dep_kw),
        requests_running=running,
        requests_waiting=waiting,
        kv_cache_usage_ratio=usage,
        **kw,
    )


# --- 1. waiting requests that do not wait for a slot ----------------------------------------------------------------


def test_requests_deferred_for_lora_or_remote_kv_are_not_waiting_for_a_slot() -> None:
    """vLLM >= 0.20 splits waiting by reason: ``deferred`` = the scheduler's ``skipped_waiting`` queue (a request
    skipped because ``max_loras`` adapters are already scheduled, or because the KV connector's lookup / remote-KV
    load is still in flight: vllm/v1/core/sched/scheduler.py, ``step_skipped_waiting.prepend_request``). Raising
    max_num_seqs admits none of them (max_loras / the transfer binds). kv_saturation and goodput already read
    ``ev.queues["waiting_capacity"]``; seq_cap reads the raw total and pages "raise max_num_seqs 4 -> 10"."""
    e = dataclasses.replace(_ev(), queues={"waiting_capacity": 0.0, "waiting_deferred": 6.0})
    assert SeqCapRule().fires(e).holds is not True
    assert SeqCapRule().propose(e) == []


def test_the_raise_is_sized_by_the_requests_waiting_for_capacity_only() -> None:
    """2 wait for capacity, 100 are deferred (LoRA budget): the slots needed are running + 2, not running + 102."""
    e = dataclasses.replace(_ev(waiting=102), queues={"waiting_capacity": 2.0, "waiting_deferred": 100.0})
    props = SeqCapRule().propose(e)
    assert all(p.suggested <= 4 + 2 for p in props), [p.suggested for p in props]


# --- 2. the stated cap is not the one the engine runs with ----------------------------------------------------------


def test_more_running_than_the_cap_means_the_configured_cap_is_not_what_runs() -> None:
    """vLLM never runs more than max_num_seqs per rank (``if num_running >= self.max_num_running_reqs: break``,
    vllm/v1/core/sched/scheduler.py). 100 running against a configured cap of 4 proves the config is stale (the
    engine runs with a larger cap, e.g. the 1024 default on H100). seq_cap still says "100 running at max_num_seqs 4"
    and proposes --max-num-seqs 105: applied, that LOWERS the real cap (1024 -> 105) while the queue was never a
    slot queue. Right: cannot tell (holds None), naming the contradiction."""
    e = _ev(running=100, waiting=5, usage=0.3, cap=4)
    assert SeqCapRule().fires(e).holds is not True
    assert SeqCapRule().propose(e) == []


# --- 3. the suggested value ------------------------------------------------------------------------------------------


def test_the_suggested_cap_is_one_the_engine_can_start_with() -> None:
    """No TPOT target (tpot None), a burst just admitted (0.01 % of the pool used by 4 running: 11 tokens each) and
    100,000 waiting: seq_cap proposes --max-num-seqs 36000. The capacity pass itself refuses that config
    (WontStartError: vLLM's sampler warm-up at 36,000 sequences takes 167.7 GiB on an 80 GiB H100) --
    ``turn()`` returns None and the rule silently falls back to ``shrink = 1.0``. The operator's engine would not
    start. Right: never propose a value whose capacity pass does not start (bound the raise by it)."""
    e = _ev(running=4, waiting=100_000, usage=0.0001, slo=SLOTargets(2.5, None, 0.9))
    (p,) = SeqCapRule().propose(e)
    assert turn(e.ctx.inputs, c.DIAL_MAX_NUM_SEQS, p.suggested) is not None, p.suggested


def test_the_pool_bound_uses_the_requests_final_size_not_their_size_so_far() -> None:
    """Running requests hold 10,800 tokens each now (10 % of 432,000 over 4), but finished requests average ~20,000
    tokens (prompt 21 + generation 400 tok/s over 0.021 req/s: long generations still growing). The rule bounds the
    raise by the pool at 10,800 tokens per request (~36 at 90 %), so at their final size the raised batch needs
    ~1.9x the pool: vLLM preempts (recompute) the newest requests -- the storm the bound claims to avoid.
    ``advisor.rules.common.observed_request_tokens`` (max of finished and running sizes) exists for this and is
    used by admission / pool_context. Right: at most floor(0.9 x 432,000 / 20,047) = 19."""
    e = _ev(
        running=4,
        waiting=100,
        usage=0.1,
        prompt_tokens_per_second=21.0,
        generation_tokens_per_second=400.0,
        requests_finished_per_second=0.021,
    )
    (p,) = SeqCapRule().propose(e)
    final = (21.0 + 400.0) / 0.021
    assert p.suggested <= math.floor(0.9 * POOL / final), p.suggested


def test_the_proposal_never_predicts_a_full_pool_when_the_pool_size_is_unknown() -> None:
    """kv_capacity_tokens unknown (e.g. a hybrid vLLM model without kv_cache_size_tokens): the pool bound is dropped,
    and the rule proposes 4 -> 342 (the TPOT knee) while predicting KV usage 0.1 -> 1.0 (uncapped: 8.55) in its own
    predicted_effect. The usage ratio alone bounds it: 4 running fill 10 %, so 90 % holds 36."""
    e = _ev(running=4, waiting=60_000, usage=0.1, kv_capacity_tokens=None)
    (p,) = SeqCapRule().propose(e)
    assert p.predicted_effect["kv_cache_usage_ratio"]["after"] <= 0.9, p.predicted_effect
    assert p.suggested <= 36, p.suggested


# --- 4. TPOT already breached: the raise contradicts goodput in the same incident ----------------------------------


def test_no_raise_while_the_measured_tpot_already_misses_its_target() -> None:
    """80 % of the window's requests miss the 100 ms TPOT target at a batch of 16. goodput_below_target diagnoses
    "TPOT misses its target at a small batch" and proposes fp8 / TP 2; seq_cap in the same evaluation proposes a
    LARGER batch (16 -> 26) predicting TPOT 13 ms -> 17 ms from the uncalibrated roofline, contradicting the
    measured TPOT. A larger decode batch only lengthens each step. Right: withhold the raise (or bound it at the
    current cap) while measured TPOT attainment is below target."""
    e = ev(
        dep=ctx(gpu="h100-sxm", max_num_seqs=16),
        requests_running=16,
        requests_waiting=10,
        kv_cache_usage_ratio=0.2,
        kv_capacity_tokens=POOL,
        goodput=good(0.9, 0.2),
        tpot_ok=0.2,
        ttft=hist((1.0, 100), total_sum=50.0),
        tpot=hist((0.1, 20), (1.0, 100), total_sum=30.0),
    )
    goodput = GoodputRule().propose(e)
    assert any("TPOT misses its target" in p.summary for p in goodput)  # the other rule's reading (passes today)
    assert [p for p in SeqCapRule().propose(e) if p.action == "increase"] == []


# --- 5. replicas: a mean pool hides the replica that holds the queue -----------------------------------------------


def test_a_mean_usage_does_not_hide_a_hot_replica() -> None:
    """Two replicas at cap 4 each (8 running), 6 waiting; replica A's pool is 80 % full, B's 10 % (mean 45 %, the
    window's max 80 %: ``combine_targets`` averages usage over replicas). seq_cap says the pool is 45 % full and
    "this replica's pool is mostly idle" -> raise to 7. On A, where the queue is, 80 % usage with 4 running holds
    only 4.5 at 90 %: the raise preempts there. Right: judge room on the hottest replica (kv_cache_usage_ratio_max)."""
    e = _ev(running=8, waiting=6, usage=0.45, replicas_up=2, kv_cache_usage_ratio_max=0.8)
    assert SeqCapRule().fires(e).holds is not True


# --- 6. Dynamo frontend numbers are not one engine's slots ---------------------------------------------------------


def test_dynamo_frontend_inflight_includes_its_queue_and_every_worker() -> None:
    """Dynamo's frontend ``inflight_requests`` counts from HTTP handler start to the response's end and
    ``queued_requests`` until the first token ("HTTP queue time is a subset of inflight time",
    lib/llm/src/http/service/metrics.rs): queued includes prefill and is counted inside inflight, and both span every
    worker behind the frontend. 64 inflight at a per-worker cap of 64 with 10 'queued' (in prefill) is not a slot
    queue; seq_cap raises to 74 (running + waiting double-counts the 10). Right: not judged from frontend gauges."""
    e = _ev(running=64, waiting=10, usage=0.2, cap=64, engine="dynamo")
    e = dataclasses.replace(e, ctx=dataclasses.replace(e.ctx, max_num_seqs_stated=True))
    assert SeqCapRule().fires(e).holds is not True


# --- 7. plan --json tensor_parallel_nodes for a part without the new columns ---------------------------------------


def _plan(*args: str) -> dict[str, Any]:
    r = run_cli("plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "8192", "--json", *args)
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_tp_nodes_is_unknown_for_a_part_whose_domain_is_not_stated() -> None:
    """``catalog gpus`` prints TP DOMAIN "not stated" for h100-pcie, yet ``plan --gpu h100-pcie --tp 16 --json``
    reports ``tensor_parallel_nodes: 1`` -- 16 PCIe H100s in one node, priced as one domain (no inter-node
    all-reduce latency). ``--gpu-memory-gib`` alone says None. Right: None (unknown) when the catalog does not state
    the domain and TP > 1 (or at least when TP exceeds the 8 GPUs a PCIe server holds)."""
    assert _plan("--gpu", "h100-pcie", "--tp", "16")["tensor_parallel_nodes"] is None
