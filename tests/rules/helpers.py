"""Shared builders for the per-rule table tests: evaluations with every field a rule reads, histograms, the
for-duration check through :class:`advisor.rules.lifecycle.Lifecycle`, and ``capacity-advisor plan --json``
through the CLI's entry point (:func:`tests.inprocess.run_cli`).

Hand-computed reference numbers used across the files (Llama-3.1-8B-Instruct, bf16, one H100-SXM, the
defaults of :func:`tests.factories.context`):

* H100-SXM memory 84,986,665,370 B (79.15 GiB); × 0.9 = 76,487,998,833 B may be used.
* weights 8,030,261,248 params × 2 B + rotary cache 131,072 × 128 × 2 B = 16,094,076,928 B.
* overhead max(forward 8,192 × 2 × (6 × 4,096 + 3 × 14,336) = 1,107,296,256,
  sampler 256 × 128,256 × 39 = 1,280,507,904) + non-torch int(0.13 GiB) 139,586,437 = 1,420,094,341 B.
* pool 76,487,998,833 − 16,094,076,928 − 1,420,094,341 = 58,973,827,564 B; blocks ⌊÷ (16 × 131,072)⌋ = 28,120;
  449,920 tokens; at max-model-len 8,192: 28,120 ÷ 512 = 54.921875 sequences.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from advisor.capacity.kv import CapacityInputs
from advisor.capacity.perf import DEFAULT_ASSUMPTIONS, PerfAssumptions
from advisor.domain import Histogram
from advisor.evaluate import running_context
from advisor.rules.base import DeploymentContext, Evaluation, Rule, SLOTargets
from advisor.rules.lifecycle import Lifecycle
from advisor.telemetry import FractionBelow, GoodputEstimate
from tests.factories import context, evaluation
from tests.inprocess import run_cli

T0 = 10_000.0
"""Start of every for-duration check (unix seconds)."""

H100_BYTES = 84_986_665_370
H100_POOL_TOKENS = 449_920
H100_MAX_CONCURRENCY = 28_120 / 512  # 54.921875
WEIGHTS_BF16 = 16_094_076_928
ROOFLINE = DEFAULT_ASSUMPTIONS
"""The plain roofline's factors (0.80 of peak HBM bandwidth, 0.60 of dense tensor peak, 0.70 of the per-direction
link, 10 µs per all-reduce, no overheads): a test whose docstring does the latency arithmetic by hand with these
pins its deployment's prior to them (``ctx(perf=ROOFLINE)``, :attr:`DeploymentContext.perf_assumptions`) instead of
the fitted factors :func:`advisor.capacity.perf.assumptions_for` returns."""


def ctx(
    replicas: int = 1,
    slo: SLOTargets | None = None,
    gpu: str | None = None,
    speculative: bool = False,
    engine: str = "vllm",
    perf: PerfAssumptions | None = None,
    **inputs: Any,
) -> DeploymentContext:
    """:func:`tests.factories.context` with an optional SLO, GPU, engine, speculation flag and latency prior
    (``perf``: the deployment's pinned efficiency factors, ``None`` = the published calibration)."""
    from advisor.capacity.hardware import get_gpu

    if gpu is not None:
        spec = get_gpu(gpu)
        inputs.setdefault("gpu_memory_bytes", spec.memory_bytes)
    base = context(replicas=replicas, **inputs)
    changes: dict[str, Any] = {"speculative_decoding": speculative, "engine": engine, "perf_assumptions": perf}
    if slo is not None:
        changes["slo"] = slo
    if gpu is not None:
        changes["gpu"] = get_gpu(gpu)
    return dataclasses.replace(base, **changes)


def ev(
    *,
    now: float = 1000.0,
    dep: DeploymentContext | None = None,
    goodput: GoodputEstimate | None = None,
    tpot_ok: float | None = None,
    capacity_model_error_ratio: float | None = None,
    engine_config: dict[str, str] | None = None,
    replicas_up: int = 1,
    kv_capacity_tokens: float | None = 432_000,
    **stats: Any,
) -> Evaluation:
    """:func:`tests.factories.evaluation` plus the fields that builder leaves at their defaults; an
    ``engine_config`` is applied as :func:`advisor.evaluate.evaluate_deployment` applies it (the reported dials in
    ``ctx``, the differences in ``config_drift``)."""
    base = evaluation(now=now, ctx=dep, replicas_up=replicas_up, kv_capacity_tokens=kv_capacity_tokens, **stats)
    running, drift, unmodelled = running_context(base.ctx, [engine_config] if engine_config else [])
    changes: dict[str, Any] = {
        "capacity_model_error_ratio": capacity_model_error_ratio,
        "engine_config": engine_config or {},
        "ctx": running,
        "config_drift": drift,
        "config_unmodelled": unmodelled,
    }
    if goodput is not None:
        changes["goodput"] = goodput
    if tpot_ok is not None:
        changes["tpot_ok"] = FractionBelow(tpot_ok, False, tpot_ok, tpot_ok, (0.0, 0.0))
    return dataclasses.replace(base, **changes)


def good(ttft: float | None, tpot: float | None) -> GoodputEstimate:
    """A goodput estimate from the two fractions (product under independence)."""
    ratio = None if ttft is None or tpot is None else ttft * tpot
    return GoodputEstimate(ratio, ratio, ratio, ttft, tpot)


def hist(*buckets: tuple[float, float], total_sum: float = 0.0) -> Histogram:
    """A cumulative histogram from ``(bound, cumulative count)`` pairs; ``+Inf`` is appended."""
    count = buckets[-1][1]
    return Histogram((*buckets, (float("inf"), count)), count, total_sum)


def requests(count: float) -> dict[str, Histogram]:
    """A TTFT histogram holding ``count`` observations (enough requests to judge goodput)."""
    return {"ttft": hist((1.0, count), total_sum=count * 0.5)}


def opens_after(rule: Rule, make: Callable[[float], Evaluation], held: float) -> bool:
    """Whether the rule opens anything when its fire side has held ``held`` seconds (first seen at T0)."""
    lc = Lifecycle([rule])
    assert lc.evaluate(make(T0)) == [] or rule.for_seconds() == 0
    return any(t.kind == "opened" for t in lc.evaluate(make(T0 + held)))


def plan_args(inputs: CapacityInputs, gpu: str) -> list[str]:
    """``capacity-advisor plan`` arguments describing ``inputs`` exactly (every flag explicit)."""
    args = [
        "plan",
        "--model",
        inputs.model.name,
        "--gpu",
        gpu,
        "--tp",
        str(inputs.tensor_parallel_size),
        "--gpu-memory-utilization",
        str(inputs.gpu_memory_utilization),
        "--max-model-len",
        str(inputs.effective_max_model_len),
        "--kv-cache-dtype",
        inputs.kv_cache_dtype,
        "--max-num-seqs",
        str(inputs.max_num_seqs),
        "--block-size",
        str(inputs.block_size),
        "--dtype",
        inputs.dtype,
        "--json",
    ]
    if inputs.quantization is not None:
        args += ["--quantization", inputs.quantization]
    if inputs.max_num_batched_tokens is not None:
        args += ["--max-num-batched-tokens", str(inputs.max_num_batched_tokens)]
    return args


def plan(args: list[str]) -> dict[str, Any]:
    """Run ``capacity-advisor`` with ``args`` (:func:`tests.inprocess.run_cli`) and parse its JSON."""
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def with_flag(args: list[str], flag: str, value: str) -> list[str]:
    """``args`` with ``flag`` set to ``value`` (replacing it when present)."""
    out = list(args)
    if flag in out:
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out
