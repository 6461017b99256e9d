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
import json
from typing import Any, Final

from advisor import conventions as c
from advisor.capacity.deployment import (
    DeploymentSpec,
    ResolvedGPU,
    accounting_engine,
    deployment_inputs,
    resolve_deployment,
)
from advisor.capacity.engines import memory_overcommit
from advisor.capacity.hardware import fp8_kv_emulated
from advisor.capacity.kv import CapacityResult
from advisor.capacity.models import without_unused_vision_tower
from advisor.errors import CapacityError

__all__ = [
    "FIX_DIALS",
    "MAX_SUGGESTED_TP",
    "MAX_SUGGESTED_UTILIZATION",
    "MIN_SUGGESTED_MAX_NUM_SEQS",
    "TRIED",
    "fixes",
    "pool_refusal",
    "remedy",
    "tried_changes",
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
    f"--gpu-memory-utilization up to {MAX_SUGGESTED_UTILIZATION} (lower beside memory other processes hold)",
    f"a lower --max-num-seqs (down to {MIN_SUGGESTED_MAX_NUM_SEQS})",
    "--kv-cache-dtype fp8",
    "a shorter --max-model-len",
    "--quantization fp8 or awq",
    f"--tp up to {MAX_SUGGESTED_TP}",
)
"""The single changes :func:`fixes` tries for vLLM, smallest first (for the message when none fits)."""

VLLM_ONLY_TRIED: Final = 2
"""The first entries of :data:`TRIED` that only vLLM reads (its memory budget and its profile's batch): another
engine's refusal neither tries nor names them (breaker 31: a TensorRT-LLM refusal said it tried
``--gpu-memory-utilization``, which TensorRT-LLM does not read; a llama.cpp one suggested it)."""


LLAMACPP_KV_FIX: Final = "q8_0"
"""The cache type :func:`fixes` tries for llama.cpp in place of vLLM's ``fp8`` (llama.cpp has no FP8 cache)."""


def tried_changes(engine: str = "vllm") -> tuple[str, ...]:
    """The single changes :func:`fixes` tries for ``engine`` (an accounting engine name), smallest first: llama.cpp
    has no FP8 cache (``q8_0`` instead) and loads GGUF files, not FP8 or AWQ checkpoints."""
    if engine == "vllm":
        return TRIED
    if engine == "llamacpp":
        return (f"--kv-cache-dtype {LLAMACPP_KV_FIX}", "a shorter --max-model-len", TRIED[-1])
    return TRIED[VLLM_ONLY_TRIED:]


FIX_DIALS: Final[dict[str, str]] = {
    "--gpu-memory-utilization": c.DIAL_GPU_MEMORY_UTILIZATION,
    "--max-num-seqs": c.DIAL_MAX_NUM_SEQS,
    "--kv-cache-dtype": c.DIAL_KV_CACHE_DTYPE,
    "--max-model-len": c.DIAL_MAX_MODEL_LEN,
    "--quantization": c.DIAL_WEIGHT_QUANTIZATION,
    "--tp": c.DIAL_TENSOR_PARALLEL_SIZE,
}
"""``plan``'s flag of each fix → the advisor's dial (:data:`advisor.conventions.DIALS`), so that a platform can
say it in its own terms (:func:`advisor.platforms.platform_flag`). The pool flags are no dial (``None``)."""


def pool_refusal(result: CapacityResult) -> str | None:
    """Why vLLM refuses a pool that cannot hold one request of max-model-len tokens, or None when it holds one."""
    if result.max_concurrency >= 1:
        return None
    return (
        f"the KV pool ({result.kv_cache_tokens:,} tokens) cannot hold one request of max-model-len "
        f"{result.max_model_len:,}; vLLM refuses to start with this configuration"
    )


def remedy(found: list[dict[str, Any]], engine: str = "vllm") -> str:
    """What to change, from the fixes :func:`fixes` found and nothing else: "`--tp 2` or `--quantization fp8`
    fits", or, when none was found, that no single change tried fits (:func:`tried_changes` of ``engine``) — never
    a change that was not shown to fit."""
    if found:
        return " or ".join(f"`{f['change']}`" for f in found) + " fits"
    return (
        "no single change tried fits ("
        + ", ".join(tried_changes(engine))
        + "): combine changes, or use GPUs with more memory or more of them"
    )


def verdict(refusal: str | None, found: list[dict[str, Any]], engine: str = "vllm") -> dict[str, Any]:
    """``plan --json``'s (and ``POST /api/v1/plan``'s) verdict keys: ``feasible`` (would the engine start),
    ``reason`` (why not — ``refusal``, the problem alone (:attr:`advisor.errors.WontStartError.problem`, or
    :func:`pool_refusal`), then :func:`remedy` of ``found`` for ``engine``; None when it would start) and
    ``fixes`` (:func:`fixes`; ``[]`` when it would start)."""
    reason = None if refusal is None else f"{refusal}; {remedy(found, engine)}"
    return {"feasible": refusal is None, "reason": reason, "fixes": found}


def _starts(spec: DeploymentSpec) -> CapacityResult | None:
    """The capacity result of ``spec`` when the engine would start with it (the pass accepts it and the pool holds
    one max-length request; on llama.cpp, whose pass sizes the cache in cells whatever the memory, the weights and
    the cells also fit the GPU: :func:`advisor.capacity.engines.memory_overcommit`), else None."""
    try:
        resolved = resolve_deployment(spec)
    except CapacityError:
        return None
    result = resolved.result
    others = resolved.inputs.gpu_memory_used_by_others_bytes
    if resolved.capacity.engine == "llamacpp" and memory_overcommit(result, others) is not None:
        # breaker 13: '--gpu-memory-utilization 0.91 fits' 129 GiB of weights on a 44 GiB L40S; breaker 31: with
        # the memory other processes hold left out, four "fixes" that each still overcommitted
        return None
    return result if result.max_concurrency >= 1 else None


def _resolves(spec: DeploymentSpec) -> CapacityResult | None:
    """The capacity result of ``spec``, or None where the pass refuses it (:class:`~advisor.errors.CapacityError`)."""
    try:
        return resolve_deployment(spec).result
    except CapacityError:
        return None


POOL_BYTES_STEP: Final = 1 << 20
"""A suggested ``--kv-cache-memory-bytes`` is a whole number of MiB (2²⁰ bytes)."""

_GIB: Final = 1 << 30


def _smallest(fits: Any, low: int, high: int) -> int | None:
    """The smallest integer ``n`` in ``[low, high]`` with ``fits(n)``, for a ``fits`` false below some point and
    true from it on (a bigger pool never holds fewer tokens); None when ``fits(high)`` is false."""
    if not fits(high):
        return None
    while low < high:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid + 1
    return low


def _pool_fix(spec: DeploymentSpec, gpu: ResolvedGPU, pool_flag: str) -> dict[str, Any] | None:
    """The value of the flag that fixes the pool (``--num-gpu-blocks-override``, or ``--kv-cache-memory-bytes`` /
    ``--kv-cache-memory-gib`` as ``pool_flag`` says was typed) that makes vLLM start, within the GPU: the weights
    and that pool at most its memory (as ``plan`` warns, vLLM fails to allocate more at start-up); None when none
    does. A pool too small to hold one request gets the smallest such value; a byte budget too large to sit beside
    the weights gets the pool the deployment's utilization budget gives without it (whole MiB: what vLLM's profile
    leaves after activations and CUDA graphs), not a pool cut to what one request needs (Llama-3.1-8B on an H100,
    80 GB asked: the 0.9 budget's 51.35 GiB, not 1 GiB). Beside memory other processes hold, within what they leave."""
    memory = gpu.memory_bytes - spec.gpu_memory_used_by_others_bytes

    def within(changed: DeploymentSpec) -> CapacityResult | None:
        result = _starts(changed)
        if result is None or result.weights_bytes_per_gpu + result.kv_pool_bytes_per_gpu > memory:
            return None
        return result

    if spec.num_gpu_blocks_override is not None:
        flag = "--num-gpu-blocks-override"
        one = _resolves(dataclasses.replace(spec, num_gpu_blocks_override=1))  # one block beside weights that fit
        if one is None:
            return None
        per_block = max(1, one.kv_pool_bytes_per_gpu)
        most = max(spec.num_gpu_blocks_override, (memory - one.weights_bytes_per_gpu) // per_block)
        n: int | None
        too_many = _resolves(spec) is None  # the pass refuses blocks the GPU cannot hold beside the weights
        budget = _starts(dataclasses.replace(spec, num_gpu_blocks_override=None)) if too_many else None
        if budget is not None:
            # too many blocks to allocate beside the weights (the pass refuses them): the count the utilization
            # budget profiles instead
            n = budget.kv_pool_bytes_per_gpu // per_block
            if n < 1 or within(dataclasses.replace(spec, num_gpu_blocks_override=n)) is None:
                n = None
        else:
            n = _smallest(
                lambda b: _starts(dataclasses.replace(spec, num_gpu_blocks_override=b)) is not None,
                spec.num_gpu_blocks_override,
                most,
            )
        value: Any = n
        changed = None if n is None else dataclasses.replace(spec, num_gpu_blocks_override=n)
    else:
        flag = pool_flag
        try:  # the pool may take what the weights leave (a larger one does not start: the capacity pass refuses it)
            weights = resolve_deployment(
                dataclasses.replace(spec, kv_cache_memory_bytes=POOL_BYTES_STEP)
            ).result.weights_bytes_per_gpu
        except CapacityError:
            return None
        room = max(1, (memory - weights) // POOL_BYTES_STEP)
        pinned = spec.kv_cache_memory_bytes
        mib: int | None
        if pinned is not None and pinned > room * POOL_BYTES_STEP:  # too large: what the utilization budget gives
            budget = _starts(dataclasses.replace(spec, kv_cache_memory_bytes=None))
            mib = None if budget is None else budget.kv_pool_bytes_per_gpu // POOL_BYTES_STEP
            if (
                mib is not None
                and _starts(dataclasses.replace(spec, kv_cache_memory_bytes=mib * POOL_BYTES_STEP)) is None
            ):
                mib = None
        else:
            mib = _smallest(
                lambda m: _starts(dataclasses.replace(spec, kv_cache_memory_bytes=m * POOL_BYTES_STEP)) is not None,
                1,
                room,
            )
        if mib is None:
            return None
        pool = mib * POOL_BYTES_STEP
        if flag == "--kv-cache-memory-gib":  # in hundredths of a GiB, rounded up
            hundredths = -(-pool * 100 // _GIB)
            value, pool = hundredths / 100, hundredths * _GIB // 100
        else:
            value = pool
        changed = dataclasses.replace(spec, kv_cache_memory_bytes=pool)
    result = None if changed is None else within(changed)
    if result is None:
        return None
    return {
        "dial": None,
        "flag": flag,
        "value": value,
        "change": f"{flag} {value}",
        "kv_cache_tokens": result.kv_cache_tokens,
        "max_concurrency": round(result.max_concurrency, 3),
    }


def _video_off(spec: DeploymentSpec) -> tuple[dict[str, int], DeploymentSpec] | None:
    """``--limit-mm-per-prompt`` with the video at 0 (the counts already stated kept: vLLM replaces the whole
    mapping) and the deployment with it, for a model whose tower profiles videos; None otherwise."""
    model = spec.model
    if "video" not in model.vision_modalities or not model.vision_tower_width:
        return None
    limits = {**dict(model.vision_item_limits), "video": 0}
    return limits, dataclasses.replace(spec, model=without_unused_vision_tower(model, limits))


def fixes(spec: DeploymentSpec, gpu: ResolvedGPU, pool_flag: str = "--kv-cache-memory-bytes") -> list[dict[str, Any]]:
    """The single changes to a refused vLLM ``spec`` that make it start, smallest first: what keeps the GPUs and
    the checkpoint — a higher ``--gpu-memory-utilization`` (the lowest that fits, at most
    :data:`MAX_SUGGESTED_UTILIZATION`; with memory held by other processes and no higher one fitting, the highest
    lower one that passes the start-up free-memory check), a lower ``--max-num-seqs`` (halved until it fits, down to
    :data:`MIN_SUGGESTED_MAX_NUM_SEQS`: its sampler warm-up is part of the profile), ``--kv-cache-dtype fp8``, the
    longest shorter ``--max-model-len`` (a multiple of :data:`CONTEXT_STEP`) — then another checkpoint
    (``--quantization fp8``, on a part with an FP8 tensor rate as ``plan --search`` offers it, then ``awq``), then
    more GPUs (the smallest ``--tp`` up to :data:`MAX_SUGGESTED_TP`). On a pool fixed by
    ``--kv-cache-memory-bytes`` (``pool_flag``: the flag as typed, ``--kv-cache-memory-gib`` too) or
    ``--num-gpu-blocks-override`` the first fix is that flag's smallest value that starts within the GPU, and the
    first two are not tried (they do not change the pool).

    Each is ``{"dial", "flag", "value", "change", "kv_cache_tokens", "max_concurrency"}``: ``dial`` the advisor's
    dial (:data:`FIX_DIALS`; None for a pool flag), ``change`` is the flag as typed, ``kv_cache_tokens`` the
    pool per replica with it, ``max_concurrency`` the max-length requests it holds.
    """
    found: list[dict[str, Any]] = []

    def tried(flag: str, value: Any, changed: DeploymentSpec, shown: str | None = None) -> bool:
        result = _starts(changed)
        if result is None:
            return False
        found.append(
            {
                "dial": FIX_DIALS.get(flag),  # a flag of no dial (--limit-mm-per-prompt): None, as a pool flag
                "flag": flag,
                "value": value,
                "change": f"{flag} {shown if shown is not None else value}",
                "kv_cache_tokens": result.kv_cache_tokens,
                "max_concurrency": round(result.max_concurrency, 3),
            }
        )
        return True

    fixed_pool = spec.kv_cache_memory_bytes is not None or spec.num_gpu_blocks_override is not None
    now = 0.9 if spec.gpu_memory_utilization is None else spec.gpu_memory_utilization
    engine = accounting_engine(spec.engine)
    vllm, llamacpp = engine == "vllm", engine == "llamacpp"
    raised = not vllm  # the memory budget and the profile's batch are vLLM's (tried_changes)
    if fixed_pool:
        pool = _pool_fix(spec, gpu, pool_flag)
        if pool is not None:
            found.append(pool)
    elif vllm:
        for step in range(1, round((MAX_SUGGESTED_UTILIZATION - now) * 100) + 1):
            u = round(now + step / 100, 2)
            if tried("--gpu-memory-utilization", u, dataclasses.replace(spec, gpu_memory_utilization=u)):
                raised = True
                break
    if not raised and spec.gpu_memory_used_by_others_bytes:
        # memory other processes hold fails the start-up free-memory check (kv.vllm_capacity_pass), a fixed pool
        # too: a budget within what they leave starts — the highest such, in hundredths (breaker 31: "no single
        # change fits" where 0.87 did)
        for step in range(1, round(now * 100)):
            u = round(now - step / 100, 2)
            if tried("--gpu-memory-utilization", u, dataclasses.replace(spec, gpu_memory_utilization=u)):
                break
    if vllm and not fixed_pool:
        try:
            seqs = deployment_inputs(spec).max_num_seqs  # the engine's default resolved
        except CapacityError:
            seqs = 0
        while seqs > MIN_SUGGESTED_MAX_NUM_SEQS:  # the largest halving that fits
            seqs //= 2
            if tried("--max-num-seqs", seqs, dataclasses.replace(spec, max_num_seqs=seqs)):
                break
    if llamacpp and spec.kv_cache_dtype in ("auto", "f16", "float16", "bf16", "bfloat16"):
        # llama.cpp's cache types (--cache-type-k/-v): q8_0 halves a 16-bit cache; it has no fp8
        tried("--kv-cache-dtype", LLAMACPP_KV_FIX, dataclasses.replace(spec, kv_cache_dtype=LLAMACPP_KV_FIX))
    elif not llamacpp and spec.kv_cache_dtype == "auto" and not fp8_kv_emulated(gpu.part):
        # no FP8 on the AMD part: half the speed
        tried("--kv-cache-dtype", "fp8", dataclasses.replace(spec, kv_cache_dtype="fp8"))
    video_off = _video_off(spec)
    if video_off is not None:  # the profile's largest video, not the batch (advisor.capacity.encoder)
        limits, changed = video_off
        value = json.dumps(limits)
        tried("--limit-mm-per-prompt", value, changed, shown=f"'{value}'")
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
    if spec.quantization is None and not llamacpp:  # llama.cpp loads GGUF files, not these checkpoints
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


def plan_batch_cap(out: dict[str, Any], max_num_seqs: int, *, given: bool) -> None:
    """``plan --json``'s (and ``POST /api/v1/plan``'s) ``inputs.max_num_seqs`` and ``inputs.max_num_seqs_given``: the
    batch cap the capacity pass took, which moves the pool (vLLM's sampler warm-up is sized by it), and whether it
    was given or is the engine's default (a fresh user saw ``kv_cache_tokens`` change with ``--max-num-seqs`` while
    the JSON did not say which cap the default run assumed, 2026-12-06). ``out``: a result's ``as_dict()``."""
    out["inputs"]["max_num_seqs"] = max_num_seqs
    out["inputs"]["max_num_seqs_given"] = given
