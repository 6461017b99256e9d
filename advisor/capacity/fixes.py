"""Would vLLM start with a deployment, and if not, which single change makes it start.

vLLM refuses to start when the weights leave no room in its budget, when nothing is left for the KV cache
(``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory``), or when the KV pool cannot hold one request
of ``max_model_len`` tokens (``vllm/v1/core/kv_cache_utils.py`` ``check_enough_kv_cache_memory``: "To serve at
least one request with the models's max seq len …"). The first two are
:class:`~advisor.errors.WontStartError` from the capacity pass; the third is ``max_concurrency < 1``.

:func:`fixes` tries single changes, smallest first, each by re-running the capacity pass through the one
resolver (:func:`advisor.capacity.deployment.resolve_deployment`). vLLM's flags:
https://docs.vllm.ai/en/latest/configuration/engine_args.html.

Pure: the package's own tables, no I/O.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from advisor.capacity.deployment import DeploymentSpec, ResolvedGPU, deployment_inputs, resolve_deployment
from advisor.capacity.kv import CapacityResult
from advisor.errors import CapacityError

__all__ = [
    "MAX_SUGGESTED_TP",
    "MAX_SUGGESTED_UTILIZATION",
    "MIN_SUGGESTED_MAX_NUM_SEQS",
    "TRIED",
    "fixes",
    "pool_refusal",
    "verdict",
]

MAX_SUGGESTED_UTILIZATION: Final = 0.95
"""The highest ``--gpu-memory-utilization`` a refusal suggests: vLLM's default is 0.9
(https://docs.vllm.ai/en/latest/configuration/engine_args.html, ``--gpu-memory-utilization``); above 0.95 too
little is left for what the profile does not see (CUDA graphs, NCCL, fragmentation)."""

MIN_SUGGESTED_MAX_NUM_SEQS: Final = 32
"""The lowest ``--max-num-seqs`` a refusal suggests (halving from the engine's default 256 or 1,024)."""

MAX_SUGGESTED_TP: Final = 8
"""The largest ``--tp`` a refusal suggests: the GPUs of one 8-GPU node."""

CONTEXT_STEP: Final = 1024
"""A suggested ``--max-model-len`` is a multiple of this many tokens."""

TRIED: Final = (
    f"--gpu-memory-utilization up to {MAX_SUGGESTED_UTILIZATION}",
    f"a lower --max-num-seqs (down to {MIN_SUGGESTED_MAX_NUM_SEQS})",
    "--kv-cache-dtype fp8",
    "a shorter --max-model-len",
    "--quantization fp8 or awq",
    f"--tp up to {MAX_SUGGESTED_TP}",
)
"""The single changes :func:`fixes` tries, smallest first (for the message when none fits)."""


def pool_refusal(result: CapacityResult) -> str | None:
    """Why vLLM refuses a pool that cannot hold one request of max-model-len tokens, or None when it holds one."""
    if result.max_concurrency >= 1:
        return None
    return (
        f"the KV pool ({result.kv_cache_tokens:,} tokens) cannot hold one request of max-model-len "
        f"{result.max_model_len:,}; vLLM refuses to start with this configuration"
    )


def verdict(refusal: str | None, found: list[dict[str, Any]]) -> dict[str, Any]:
    """``plan --json``'s (and ``POST /api/v1/plan``'s) verdict keys: ``feasible`` (would the engine start),
    ``reason`` (why not; None when it would) and ``fixes`` (:func:`fixes`; ``[]`` when it would start)."""
    return {"feasible": refusal is None, "reason": refusal, "fixes": found}


def _starts(spec: DeploymentSpec) -> CapacityResult | None:
    """The capacity result of ``spec`` when vLLM would start with it (the pass accepts it and the pool holds one
    max-length request), else None."""
    try:
        result = resolve_deployment(spec).result
    except CapacityError:
        return None
    return result if result.max_concurrency >= 1 else None


def fixes(spec: DeploymentSpec, gpu: ResolvedGPU) -> list[dict[str, Any]]:
    """The single changes to a refused vLLM ``spec`` that make it start, smallest first: what keeps the GPUs and
    the checkpoint — a higher ``--gpu-memory-utilization`` (the lowest that fits, at most
    :data:`MAX_SUGGESTED_UTILIZATION`), a lower ``--max-num-seqs`` (halved until it fits, down to
    :data:`MIN_SUGGESTED_MAX_NUM_SEQS`: its sampler warm-up is part of the profile), ``--kv-cache-dtype fp8``, the
    longest shorter ``--max-model-len`` (a multiple of :data:`CONTEXT_STEP`) — then another checkpoint
    (``--quantization fp8``, on a part with an FP8 tensor rate as ``plan --search`` offers it, then ``awq``), then
    more GPUs (the smallest ``--tp`` up to :data:`MAX_SUGGESTED_TP`). The first two are not tried on a pool fixed by
    ``--kv-cache-memory-bytes`` or ``--num-gpu-blocks-override`` (they do not change it).

    Each is ``{"flag", "value", "change", "kv_cache_tokens", "max_concurrency"}``: ``change`` is the flag as
    typed, ``kv_cache_tokens`` the pool per replica with it, ``max_concurrency`` the max-length requests it holds.
    """
    found: list[dict[str, Any]] = []

    def tried(flag: str, value: Any, changed: DeploymentSpec) -> bool:
        result = _starts(changed)
        if result is None:
            return False
        found.append(
            {
                "flag": flag,
                "value": value,
                "change": f"{flag} {value}",
                "kv_cache_tokens": result.kv_cache_tokens,
                "max_concurrency": round(result.max_concurrency, 3),
            }
        )
        return True

    fixed_pool = spec.kv_cache_memory_bytes is not None or spec.num_gpu_blocks_override is not None
    if not fixed_pool:
        now = 0.9 if spec.gpu_memory_utilization is None else spec.gpu_memory_utilization
        for step in range(1, round((MAX_SUGGESTED_UTILIZATION - now) * 100) + 1):
            u = round(now + step / 100, 2)
            if tried("--gpu-memory-utilization", u, dataclasses.replace(spec, gpu_memory_utilization=u)):
                break
        try:
            seqs = deployment_inputs(spec).max_num_seqs  # the engine's default resolved
        except CapacityError:
            seqs = 0
        while seqs > MIN_SUGGESTED_MAX_NUM_SEQS:  # the largest halving that fits
            seqs //= 2
            if tried("--max-num-seqs", seqs, dataclasses.replace(spec, max_num_seqs=seqs)):
                break
    if spec.kv_cache_dtype == "auto":
        tried("--kv-cache-dtype", "fp8", dataclasses.replace(spec, kv_cache_dtype="fp8"))
    asked = spec.max_model_len or 0  # unset: the model's own context (not shortened here)
    lo, hi = 0, max(0, asked - 1) // CONTEXT_STEP  # multiples of the step below the asked length
    while lo < hi:  # the longest that fits (a shorter cap never shrinks the pool)
        mid = (lo + hi + 1) // 2
        if _starts(dataclasses.replace(spec, max_model_len=mid * CONTEXT_STEP)) is not None:
            lo = mid
        else:
            hi = mid - 1
    if lo:
        mml = lo * CONTEXT_STEP
        tried("--max-model-len", mml, dataclasses.replace(spec, max_model_len=mml))
    if spec.quantization is None:
        for q in ("fp8", "awq"):
            if q == "fp8" and (gpu.part is None or not gpu.part.fp8_flops):
                continue
            tried("--quantization", q, dataclasses.replace(spec, quantization=q))
    tp = spec.tensor_parallel_size * 2
    while tp <= MAX_SUGGESTED_TP:
        if tried("--tp", tp, dataclasses.replace(spec, tensor_parallel_size=tp)):
            break
        tp *= 2
    return found
