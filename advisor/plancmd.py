"""``capacity-advisor plan``: the capacity pass for one configuration, as a table or JSON; with ``--search``,
the cheapest deployments that meet a latency SLO (:mod:`advisor.capacity.search`)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Final

from advisor.argtypes import bounded_float, bounded_int, fraction_below_one, positive_float, version_arg
from advisor.capacity.kv import ACCOUNTING_ENGINES, SAMPLERS
from advisor.capacity.models import preset_kv_logs
from advisor.conventions import PLATFORMS
from advisor.errors import CapacityError, WontStartError

EXIT_ENGINE_REFUSES = 3
"""``plan``'s exit status when the configuration is valid but the engine would refuse to start with it (the
weights leave no room, or the KV pool cannot hold one max-length request): issue 19, acceptance 4; and
``plan --search``'s (clouds, ``--platform``, ``--own``, ``--compare-managed``, text or ``--json``) when no
configuration searched is feasible. 2 stays invalid input."""


_gib_or_zero = bounded_float(0, 16384, "a number of GiB")
"""GiB that may be 0 (vLLM ``--cpu-offload-gb``, ``Field(ge=0)``)."""


def _mm_limits(text: str) -> dict[str, int]:
    """An argparse type for vLLM's ``--limit-mm-per-prompt`` JSON (``'{"image": 0, "video": 0}'``): modality →
    items per prompt, each a whole number ≥ 0 (vLLM also takes per-modality option objects; their count is not read
    here)."""
    try:
        value = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not JSON: {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f'must be a JSON object such as {{"image": 0}}, got {text!r}')
    from advisor.capacity.models import mm_limit_problems

    counts = {str(k): (v.get("count", 1) if isinstance(v, dict) else v) for k, v in value.items()}
    problems = mm_limit_problems(counts)
    if problems:
        raise argparse.ArgumentTypeError("; ".join(problems))
    return {k: int(v) for k, v in counts.items()}


_cv = bounded_float(0, 100, "a coefficient of variation")
"""A coefficient of variation of the lengths (0 = every length equal)."""


def _env_flag(name: str) -> bool:
    """A vLLM boolean environment switch read as ``vllm/envs.py`` reads it (``bool(int(os.getenv(name, "1")))``):
    False only when set to an integer 0; unset, empty or not an integer counts as the default, on."""
    try:
        return bool(int(os.environ.get(name, "1") or "1"))
    except ValueError:
        return True


def _lora_settings(args: argparse.Namespace) -> Any:
    """vLLM's LoRA dials from ``--enable-lora`` and friends (None without ``--enable-lora``: vLLM builds no
    ``LoRAConfig`` then and the other dials do nothing); unset dials take vLLM's defaults."""
    from advisor.capacity.lora import DEFAULT_MAX_LORA_RANK, DEFAULT_MAX_LORAS, LoRASettings

    if not args.enable_lora:
        return None
    return LoRASettings(
        max_loras=DEFAULT_MAX_LORAS if args.max_loras is None else args.max_loras,
        max_lora_rank=DEFAULT_MAX_LORA_RANK if args.max_lora_rank is None else args.max_lora_rank,
        lora_extra_vocab_size=args.lora_extra_vocab_size,
        lora_dtype=args.lora_dtype or "auto",
        fully_sharded_loras=args.fully_sharded_loras,
    )


def _err(msg: str) -> None:
    print(f"capacity-advisor: {msg}", file=sys.stderr)


def _tensor_parallel_nodes(part: Any, tensor_parallel_size: int) -> int | None:
    """Nodes the TP group of ``part`` (a catalog :class:`~advisor.capacity.hardware.GPUSpec`, or None when the part
    is unknown) spans (:func:`advisor.capacity.hardware.tensor_parallel_nodes`: None when unknown); beyond one node,
    a note on stderr says the step prices its all-reduces over the network."""
    from advisor.capacity.hardware import tensor_parallel_nodes, tensor_parallel_span

    span = tensor_parallel_span(part, tensor_parallel_size)
    if span is not None:
        _err(f"note: {span}: the step prices its all-reduces over the network")
    return tensor_parallel_nodes(part, tensor_parallel_size)


def _fixed_pool_profile_check(args: argparse.Namespace, result: Any, memory: int) -> None:
    """With the pool fixed (``--kv-cache-memory-gib``/``-bytes``, ``--num-gpu-blocks-override``) vLLM still runs its
    memory profile first (``gpu_worker.py`` ``determine_available_memory``: "still need a profile run"), so the weights,
    the non-torch memory and the profile's activation peak must fit the GPU; a warning on stderr says when they do
    not (the engine runs out of memory in the profile, before the pool is allocated)."""
    from advisor.capacity.hardware import GIB

    fixed = args.num_gpu_blocks_override is not None or args.kv_cache_memory_bytes is not None
    fixed = fixed or getattr(args, "kv_cache_memory_gib", None) is not None
    activation = result.activation_peak_bytes_per_gpu
    if not fixed or activation is None:
        return
    profile = result.weights_bytes_per_gpu + (result.non_torch_bytes_per_gpu or 0) + activation
    if profile > memory:
        _err(
            f"warning: vLLM's memory profile runs before the fixed pool is allocated: weights "
            f"{result.weights_bytes_per_gpu / GIB:.2f} GiB + activation peak {activation / GIB:.2f} GiB (+ non-torch) "
            f"= {profile / GIB:.2f} GiB of the GPU's {memory / GIB:.2f} GiB: it runs out of memory at start-up"
        )


def _encoder_note(inputs: Any) -> None:
    """When vLLM's profile may run the vision encoder on a larger item than the pass counts
    (:attr:`advisor.capacity.encoder.EncoderProfile.unmodelled`), or a loaded tower's run is not counted at all
    (another tower, engine or generation), a note on stderr says so."""
    from advisor.capacity.encoder import encoder_profile

    profile = encoder_profile(inputs)
    if profile is not None and profile.unmodelled:
        _err(
            f"note: the vision encoder's profile counts one {profile.tokens_per_item:,}-token {profile.modality}; "
            + profile.unmodelled
        )
    elif profile is None and inputs.model.vision_parameters and inputs.engine == "vllm":
        _err(
            "note: the vision tower's weights are counted, its run in vLLM's start-up profile is not (sized for "
            "V1's Qwen-VL towers only): the engine's KV pool may be smaller by that run's activation peak; "
            "--language-model-only when no request carries images"
        )


def _encoder_rows(profile: Any, inputs: Any) -> list[tuple[str, str]]:
    """The human-readable row of ``plan``'s ``encoder_profile`` (none without one): the item profiled, the tower's
    peak against the language model's own (the activation peak is the larger), and the flag that drops the item."""
    from advisor.capacity.hardware import GIB
    from advisor.capacity.overhead import activation_peak_bytes

    if not profile:
        return []
    text_only = dataclasses.replace(inputs, model=dataclasses.replace(inputs.model, vision_modalities=()))
    language = max(activation_peak_bytes(text_only))
    peak = profile["peak_bytes_per_gpu"]
    sets = "sets the activation peak" if peak >= language else "stays below the language model's peak"
    drop = (
        "--limit-mm-per-prompt '{\"video\": 0}' profiles the largest image instead"
        if profile["modality"] == "video"
        else "--language-model-only drops the tower when no request carries images"
    )
    return [
        (
            "vision encoder profile",
            f"{profile['items']} × {profile['tokens_per_item']:,}-token {profile['modality']} through the tower: "
            f"{peak / GIB:.2f} GiB per GPU against the language model's {language / GIB:.2f} GiB, so it {sets}; "
            f"{drop}",
        )
    ]


def plan_engines() -> tuple[str, ...]:
    """The ``--engine`` choices: the engines whose KV accounting the capacity pass models
    (:data:`advisor.capacity.kv.ACCOUNTING_ENGINES`): ``("vllm", "sglang", "tgi", "trtllm", "llamacpp")``.

    Read from the capacity model, not from the engine catalog, so that ``plan`` does not import every engine
    adapter; ``tests/test_lazy_cli.py`` checks that each is a catalog engine id, in catalog order.
    """
    return tuple(ACCOUNTING_ENGINES)


def cmd_plan(args: argparse.Namespace) -> int:
    """Print the capacity pass for one configuration (or, with ``--search``, the dial search)."""
    if args.search:
        return _cmd_search(args)
    problem = _not_applicable(args)
    if problem is not None:
        _err(problem)
        return 2
    args.tp = 1 if args.tp is None else args.tp  # not given: vLLM's default (given matters to --search only)
    args.kv_cache_dtype = args.kv_cache_dtype or "auto"
    if args.max_model_len is None:
        _err("plan needs --max-model-len (or --search with the traffic and SLO flags)")
        return 2
    from advisor.capacity.deployment import DeploymentSpec, resolve_deployment, resolve_gpu
    from advisor.capacity.fixes import fixes, plan_batch_cap, pool_refusal, verdict
    from advisor.capacity.generation import USE_V1_ENV
    from advisor.capacity.hardware import GIB
    from advisor.capacity.kv import (
        CUDA_GRAPH_ESTIMATE_ENV,
        MLA_ALIGN_ENV,
        cpu_offload_bytes_per_gpu,
        cuda_graph_bytes_per_gpu,
        draft_weights_bytes_per_gpu,
        non_torch_bytes_per_gpu,
        nvls_bytes_per_gpu,
    )
    from advisor.capacity.lora import lora_counted

    ignored = _ignored_flags(args)
    if ignored:  # refused, not ignored (issue 19: a flag that does not apply is refused in every command)
        _err(
            f"{', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not apply to --engine {args.engine} "
            "(its accounting does not read it): drop it, or give the --engine that reads it"
        )
        return 2
    if args.engine == "llamacpp" and args.quantization not in (None, "gguf"):
        # llama.cpp loads GGUF files only (tools/server: --model is a .gguf): a GPTQ/AWQ/FP8 checkpoint is not
        # something it serves; sizing one anyway (breaker 31) gave AWQ's weights for an engine that cannot load them
        _err(
            f"--quantization {args.quantization} does not apply to --engine llamacpp (llama.cpp loads GGUF files "
            "only): give the file's type with --gguf-file-type (e.g. Q4_K_M)"
        )
        return 2
    both = args.parallel is not None and args.max_num_seqs is not None
    if args.engine == "llamacpp" and both and args.parallel != args.max_num_seqs:
        # check-config refuses the same pair (advisor.config); plan used --parallel silently (breaker 13)
        _err(
            f"--parallel {args.parallel} slots contradicts --max-num-seqs {args.max_num_seqs}; on llama.cpp both are "
            "--parallel (the concurrent requests): give one, or the same value"
        )
        return 2
    batched, seqs = args.max_num_batched_tokens, args.max_num_seqs
    if args.engine == "vllm" and batched is not None and seqs is not None and batched < seqs:
        from advisor.capacity.inputs import VLLM_BATCHED_BELOW_SEQS

        _err(VLLM_BATCHED_BELOW_SEQS.format(batched=batched, seqs=seqs))  # breaker 13: 'MEETS the SLO' at 1 token
        return 2
    if args.engine == "vllm" and not args.enable_lora:
        from advisor.capacity.lora import LORA_DIALS

        given = ["--" + n.replace("_", "-") for n in LORA_DIALS if getattr(args, n) not in (None, False)]
        if given:
            _err(
                f"{', '.join(given)} does nothing without --enable-lora (vLLM builds no LoRA config): "
                "add it or drop them"
            )
            return 2
    if args.gpu is None and args.gpu_memory_gib is None:
        _err("plan needs --gpu NAME or --gpu-memory-gib X")
        return 2
    if args.vllm_use_v1 is None and args.engine == "vllm":  # the flag, else vLLM's environment variable
        env_v1 = os.environ.get(USE_V1_ENV, "").strip()
        if env_v1 not in ("", "0", "1"):
            _err(
                f"{USE_V1_ENV}={env_v1!r}: vLLM reads it as an integer, 0 (V0) or 1 (V1); unset it or use --vllm-use-v1"
            )
            return 2
        args.vllm_use_v1 = env_v1 or None
    try:
        model = _model_as_served(args)
        stated = None if args.gpu_memory_gib is None else int(args.gpu_memory_gib * GIB)
        gpu = resolve_gpu(args.gpu, stated)  # the one resolver the daemon, the API and `simulate` use
        memory, identified = gpu.memory_bytes, gpu.identified
        if args.kv_cache_memory_gib is not None and args.kv_cache_memory_bytes is not None:
            _err("give --kv-cache-memory-gib or --kv-cache-memory-bytes, not both")
            return 2
        kv_override = args.kv_cache_memory_bytes
        if args.kv_cache_memory_gib is not None:
            kv_override = int(args.kv_cache_memory_gib * GIB)
        if kv_override is not None and kv_override > memory:
            _err(f"the KV cache memory ({kv_override / GIB:.2f} GiB) exceeds the GPU's {memory / GIB:.2f} GiB")
            return 2
        others = 0 if args.gpu_memory_used_by_others_gib is None else int(args.gpu_memory_used_by_others_gib * GIB)
        if others >= memory:
            _err(
                f"--gpu-memory-used-by-others-gib {args.gpu_memory_used_by_others_gib:g} leaves nothing of the GPU's "
                f"{memory / GIB:.2f} GiB"
            )
            return 2
        dspec = DeploymentSpec(
            engine=args.engine,
            model=model,
            gpu_memory_bytes=stated,
            gpu=args.gpu,
            tensor_parallel_size=args.tp,
            pipeline_parallel_size=args.pp,
            data_parallel_size=args.dp,
            enable_expert_parallel=args.enable_expert_parallel,
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_model_len=args.max_model_len,
            dtype=args.dtype,
            quantization=args.quantization,
            kv_cache_dtype=args.kv_cache_dtype,
            max_num_seqs=args.max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens,
            block_size=args.block_size,
            kv_cache_memory_bytes=kv_override,
            num_gpu_blocks_override=args.num_gpu_blocks_override,
            gpu_memory_used_by_others_bytes=others,
            engine_version=args.engine_version,
            enforce_eager=args.enforce_eager,
            enable_chunked_prefill=args.enable_chunked_prefill,
            num_scheduler_steps=args.num_scheduler_steps or 1,
            enable_prefix_caching=args.enable_prefix_caching,
            sampler=args.sampler,
            mem_fraction_static=args.mem_fraction_static,
            cuda_memory_fraction=args.cuda_memory_fraction,
            free_gpu_memory_fraction=args.kv_cache_free_gpu_memory_fraction,
            max_tokens=args.max_tokens,
            ctx_size=args.ctx_size,
            parallel=args.parallel,
            kv_unified=args.kv_unified,
            vllm_use_v1=None if args.vllm_use_v1 is None else args.vllm_use_v1 == "1",
            cpu_offload_bytes=int((args.cpu_offload_gb or 0) * GIB),
            speculative_config=args.speculative_config,
            lora=_lora_settings(args),
            mla_align_kv_cache=_env_flag(MLA_ALIGN_ENV),
            estimate_cuda_graphs=_env_flag(CUDA_GRAPH_ESTIMATE_ENV),
        )
        if args.engine != "vllm":
            return _plan_other_engine(args, dspec, gpu)
        allow_long = os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "").lower() in ("1", "true")
        if args.max_model_len > model.context_tokens and not allow_long:
            _err(
                f"--max-model-len {args.max_model_len:,} exceeds the model's context of "
                f"{model.context_tokens:,} tokens ({model.context_words}); vLLM refuses this unless "
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set (set it here too to plan it anyway)"
            )
            return 2
        if args.block_size is not None:
            from advisor.engines.vllm import BLOCK_SIZES as VLLM_BLOCK_SIZES  # imports every adapter: only here

            if args.block_size not in VLLM_BLOCK_SIZES:
                _err(f"--block-size {args.block_size}: vLLM takes {', '.join(map(str, VLLM_BLOCK_SIZES))}")
                return 2
        try:
            resolved = resolve_deployment(dspec)
        except WontStartError as exc:
            return _refuse_without_pass(args, dspec, gpu, exc.problem)
        inputs, result = resolved.inputs, resolved.result
        if args.sampler == "flashinfer" and gpu.part is not None and gpu.part.compute_capability is None:
            _err(f"note: --sampler flashinfer does not apply on {gpu.name} (FlashInfer is CUDA-only); vLLM sorts")
        profile = inputs.overhead_profile
        accounting = result.accounting
    except CapacityError as exc:
        _err(str(exc))
        return 2
    refusal = pool_refusal(result)
    moved = cpu_offload_bytes_per_gpu(inputs)
    if moved < inputs.cpu_offload_bytes:  # the budget outlasts the decoder layers: vLLM moves them all, no error
        _err(
            f"note: --cpu-offload-gb {args.cpu_offload_gb:g} exceeds the {moved / GIB:.2f} GiB of decoder-layer "
            f"weights on each GPU; vLLM offloads those and keeps the rest ({result.weights_bytes_per_gpu / GIB:.2f} "
            "GiB: embeddings, LM head, draft) on the GPU"
        )
    # an override the GPU cannot hold beside the weights is refused by the pass (exit 3, kv.vllm_capacity_pass)
    _fixed_pool_profile_check(args, result, memory)
    _encoder_note(inputs)
    out = result.as_dict()
    _gguf_inputs(out, args)
    plan_batch_cap(out, inputs.max_num_seqs, given=args.max_num_seqs is not None)
    out["gpu"] = gpu.name
    out["nvlink_sharp"] = gpu.nvlink_sharp  # unknown part: unknown, not false
    out["tensor_parallel_nodes"] = _tensor_parallel_nodes(gpu.part, inputs.tensor_parallel_size)
    kv_logs = preset_kv_logs(model.name)
    out["kv_checked_against_logs"] = None if kv_logs is None else list(kv_logs)
    found = [] if refusal is None else _fixes_on_platform(args.platform, fixes(dspec, gpu, _pool_flag(args)))
    out.update(verdict(refusal, found))
    if out["reason"] is not None:
        _err("refused: " + out["reason"])
    try:  # a refused configuration has no operating point: the engine would not start
        point = None if refusal is not None else _past_the_ceiling(args, inputs, gpu, result)
    except CapacityError as exc:
        _err(str(exc))
        return 2
    if point is not None:
        out.update(point.as_dict())
    on_platform = _on_platform(args, "vllm", result, inputs, point, gpu.name)
    if on_platform:
        out["platform"] = {"platform": args.platform, "settings": on_platform}
    done = 0 if refusal is None else EXIT_ENGINE_REFUSES
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
        return done
    gib = float(GIB)
    fixed = (
        f"--num-gpu-blocks-override {args.num_gpu_blocks_override}"
        if args.num_gpu_blocks_override is not None
        else (_pool_flag(args) if kv_override is not None else "")
    )
    non_torch = non_torch_bytes_per_gpu(inputs)
    nvls = nvls_bytes_per_gpu(inputs)
    from advisor.capacity.overhead import allreduce_fusion_non_torch_bytes

    fused = allreduce_fusion_non_torch_bytes(inputs) is not None
    runtime = (
        f"{non_torch / gib:.2f} GiB CUDA context and NCCL"
        + (" with FlashInfer's all-reduce fusion workspace" if fused else "")
        + (f", of which {nvls / gib:.2f} GiB NCCL NVLink SHARP buffers" if nvls else "")
    )
    graphs = cuda_graph_bytes_per_gpu(inputs)
    offloaded, draft = cpu_offload_bytes_per_gpu(inputs), draft_weights_bytes_per_gpu(inputs)
    weights_note = (f" (of which {draft / gib:.2f} GiB the speculative draft)" if draft else "") + (
        f" ({offloaded / gib:.2f} GiB more offloaded to CPU by --cpu-offload-gb)" if offloaded else ""
    )
    if result.lora_bytes_per_gpu:
        in_weights = inputs.lora is not None and lora_counted(inputs.engine_version, profile == "vllm-v0")
        weights_note += f" ({result.lora_bytes_per_gpu / gib:.2f} GiB LoRA slots" + (
            ", included)" if in_weights else ": allocated, but this release's budget does not count them)"
        )
    rows = [
        ("model", model.name),
        (
            "GPU",
            f"{gpu.name} × {args.tp * args.dp} (TP {args.tp}"
            + (f", DP {args.dp}: {result.kv_cache_blocks_per_rank:,} blocks per rank" if args.dp > 1 else "")
            + f"), {memory / gib:.2f} GiB each",
        ),
        *((("identified as", identified),) if identified else ()),
        ("accounting", f"{accounting.reason if accounting else profile} [{profile} start-up profile]"),
        ("gpu-memory-utilization", f"{inputs.gpu_memory_utilization}"),
        (
            "max-num-seqs",
            f"{inputs.max_num_seqs}" + ("" if args.max_num_seqs is not None else " (the engine's default here)"),
        ),
        ("weights per GPU", f"{result.weights_bytes_per_gpu / gib:.2f} GiB" + weights_note),
        (
            "overhead per GPU",
            f"{result.overhead_bytes_per_gpu / gib:.2f} GiB: activation peak "
            f"{(result.overhead_bytes_per_gpu - non_torch - graphs) / gib:.2f} GiB, {runtime}"
            + (f", CUDA-graph estimate {graphs / gib:.2f} GiB" if graphs else "")
            if not fixed
            else "not counted: the pool is fixed by " + fixed,
        ),
        *_encoder_rows(out.get("encoder_profile"), inputs),
        ("KV pool per GPU", f"{result.kv_pool_bytes_per_gpu / gib:.2f} GiB"),
        (
            "KV bytes per token",
            f"{result.kv_cache_bytes_per_token:,} (replica), {result.kv_cache_bytes_per_token_per_gpu:,} (per GPU)",
        ),
        ("KV blocks", f"{result.kv_cache_blocks:,} × {result.block_size} tokens"),
        ("KV tokens per replica", f"{result.kv_cache_tokens:,}"),
        ("max concurrency", f"{result.max_concurrency:.2f} sequences at max-model-len {result.max_model_len:,}"),
        *_kv_check_rows(model.name),
        *_verdict_rows(refusal, found, args.platform),
    ]
    _print_rows(rows, point)
    _platform_lines(args.platform, on_platform)
    return done


MAX_PEAK_TO_MEAN: Final = 1000.0
"""The largest ``--arrival-rate`` ÷ ``--mean-arrival-rate`` taken. At 1,000 the replicas sized for the peak would
be busy 0.1 % of the day (the peak lasting one 86-second burst a day); past that the self-hosted $/Mtok is a
figure of idleness, not of serving, and a mean such as 1e-300 req/s (one request in 10²⁹² years) only shows the
arithmetic overflowing."""


def _pool_flag(args: argparse.Namespace) -> str:
    """The flag that fixed the KV pool's bytes as it was typed: ``--kv-cache-memory-gib`` or
    ``--kv-cache-memory-bytes`` (vLLM's own flag; the default when neither was)."""
    return (
        "--kv-cache-memory-gib" if getattr(args, "kv_cache_memory_gib", None) is not None else "--kv-cache-memory-bytes"
    )


def _fixes_on_platform(platform: str | None, found: list[dict[str, Any]], engine: str = "vllm") -> list[dict[str, Any]]:
    """``--platform P``: each fix also said in P's terms (:func:`advisor.platforms.platform_flag` on vLLM's own
    flag, :func:`advisor.engines.flags.flag_for`; a pool flag through :func:`advisor.platforms.engine_args_in_terms`),
    as ``platform_flag``, with ``flag_unavailable_reason`` (:data:`advisor.platforms.FLAG_REASON_KEY`) and
    ``platform_flag`` None where P does not offer it (Bedrock). Always: ``engine_flag``, the fix as vLLM's own flag
    (``plan --tp 2`` is ``--tensor-parallel-size 2`` to vLLM: a fresh user read this command's ``--tp`` as the
    engine's, 2026-12-06)."""
    from advisor.engines.flags import fix_engine_flags

    fix_engine_flags(found, engine)
    if platform is None:
        return found
    from advisor.platforms import FLAG_REASON_KEY, engine_args_in_terms, platform_flag

    for fix in found:
        if fix["dial"] is not None:
            flag, reason = platform_flag(platform, engine, fix["dial"], fix["value"], fix["engine_flag"])
        else:
            vllm_flag = fix["engine_flag"].split(" ", 1)[0]
            flag, reason = engine_args_in_terms(platform, engine, fix["engine_flag"], vllm_flag.lstrip("-"))
        fix["platform_flag"] = flag
        if flag is None:
            fix[FLAG_REASON_KEY] = reason
    return found


def _verdict_rows(
    refusal: str | None, fixes: list[dict[str, Any]], platform: str | None = None, engine: str = "vllm"
) -> list[tuple[str, str]]:
    """The plan table's verdict rows: none when the engine would start; else the refusal and what fits (and, with
    ``platform``, each fix in its terms: :func:`_fixes_on_platform`)."""
    from advisor.capacity.fixes import remedy

    if refusal is None:
        return []
    checked = " (each alone, the capacity pass re-run)" if len(fixes) > 1 else " (the capacity pass re-run with it)"
    said = remedy(fixes, engine) + (checked if fixes else "")
    rows = [("feasible", f"NO: {refusal}"), ("smallest fix", said)]
    if any(f.get("engine_flag") not in (None, f["change"]) for f in fixes):
        rows.append((f"  as {engine} flags", "; ".join(str(f["engine_flag"]) for f in fixes)))
    if platform is not None and fixes:
        from advisor.platforms import flag_text

        rows += [(f"  on {platform}", flag_text(f.get("platform_flag"), f)) for f in fixes]
    return rows


def _refuse_without_pass(args: argparse.Namespace, spec: Any, gpu: Any, reason: str) -> int:
    """``plan`` for a configuration the capacity pass refuses as the engine would (the weights leave no room, or
    nothing is left for the KV cache: :class:`~advisor.errors.WontStartError`): the refusal and its fixes
    (:func:`advisor.capacity.fixes.fixes`) as a table or JSON, exit :data:`EXIT_ENGINE_REFUSES`."""
    from advisor.capacity.deployment import accounting_engine
    from advisor.capacity.fixes import fixes, verdict

    engine = accounting_engine(spec.engine)
    found = _fixes_on_platform(args.platform, fixes(spec, gpu, _pool_flag(args)), engine)
    out = {"model": spec.model.name, "gpu": gpu.name, **verdict(reason, found, engine)}
    _err("refused: " + out["reason"])
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
        return EXIT_ENGINE_REFUSES
    rows = [
        ("model", spec.model.name),
        ("GPU", f"{gpu.name} × {args.tp * args.dp} (TP {args.tp})"),
        *_verdict_rows(reason, found, args.platform, engine),
    ]
    _print_rows(rows, None)
    return EXIT_ENGINE_REFUSES


def _on_platform(
    args: argparse.Namespace, engine: str, result: Any, inputs: Any, point: Any, gpu_name: str
) -> list[dict[str, Any]]:
    """``--platform``: this configuration as the platform takes it (:func:`advisor.platforms.configuration_in_terms`)
    — tensor parallelism, the context limit, vLLM's memory budget and batch cap, the replica count (the
    count the SLO needs under traffic, else ``--replicas`` or 1) and, on a platform renting its own instances
    (SageMaker, Vertex AI, Azure ML), the instance: the cheapest it sells with ``gpu_name`` × TP × PP × DP GPUs,
    at its own sourced price or ``unknown``; ``[]`` without ``--platform``."""
    if args.platform is None:
        return []
    from advisor import conventions as c
    from advisor.platforms import configuration_in_terms  # the engine flag tables: only with --platform

    settings: list[tuple[str, Any]] = [
        (c.DIAL_TENSOR_PARALLEL_SIZE, args.tp),
        (c.DIAL_MAX_MODEL_LEN, result.max_model_len),
    ]
    if engine == "vllm":
        settings += [
            (c.DIAL_GPU_MEMORY_UTILIZATION, inputs.gpu_memory_utilization),
            (c.DIAL_MAX_NUM_SEQS, inputs.max_num_seqs),
        ]
    needed = getattr(point, "replicas_needed", None) if point is not None else None
    settings.append((c.DIAL_REPLICAS, needed if needed is not None else (args.replicas or 1)))
    if args.platform in c.MANAGED_INSTANCE_PLATFORMS:
        settings.append((c.DIAL_INSTANCE_TYPE, gpu_name))
    return configuration_in_terms(args.platform, engine, settings, gpu_count=args.tp * args.pp * args.dp)


def _platform_lines(platform: str | None, rows: list[dict[str, Any]]) -> None:
    """Print ``--platform``'s rows under their own heading."""
    if platform is None:
        return
    from advisor.platforms import FLAG_REASON_KEY, PROFILES

    print(f"\non {PROFILES[platform].name} ({platform}):")
    width = max(len(r["dial"]) for r in rows)
    for r in rows:
        said = r["flag"] if r["flag"] is not None else f"not offered: {r[FLAG_REASON_KEY]}"
        print(f"  {r['dial'].ljust(width)}  {said}")


def _print_rows(rows: list[tuple[str, str]], point: Any) -> None:
    """The plan table: the capacity pass's rows, then, under traffic, the pass past the ceiling (its own
    heading, the verdict first), in one column width."""
    extra = [] if point is None else _point_rows(point)
    width = max(len(k) for k, _ in rows + extra)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    if point is not None:
        print(_point_heading(point))
        for k, v in extra:
            print(f"{k.ljust(width)}  {v}")


def _past_the_ceiling(args: argparse.Namespace, inputs: Any, gpu: Any, result: Any) -> Any:
    """The pass past the concurrency ceiling (:func:`advisor.capacity.operating.operating_point`, the engine
    model ``--search`` evaluates, with the efficiency factors of ``--engine`` on this GPU:
    :func:`advisor.capacity.perf.assumptions_for`), or None without traffic.

    Raises:
        CapacityError: the GPU has no catalog part (no bandwidth or FLOP/s to time a step), the pool cannot hold
            one typical request, or the workload is invalid.
    """
    if args.arrival_rate is None and args.concurrency is None:
        return None  # the KV pass alone: the roofline and queueing models stay unimported (tests/test_lazy_cli.py)
    from advisor.capacity.operating import operating_point
    from advisor.capacity.perf import assumptions_for
    from advisor.capacity.queueing import Workload

    load = "--arrival-rate" if args.arrival_rate is not None else "--concurrency"
    if gpu.part is None:
        raise CapacityError(
            f"{load} needs the GPU's memory bandwidth and tensor rate to time a step; {gpu.name} is not one catalog "
            "part: give --gpu NAME (capacity-advisor catalog gpus)"
        )
    _check_request_fits(args.prompt_tokens, args.output_tokens, result)
    workload = _with_cvs(
        Workload(
            arrival_rate=args.arrival_rate or 0.0, prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens
        ),
        args,
    )
    return operating_point(
        inputs,
        gpu.part,
        result,
        workload,
        _slo(args),
        replicas=args.replicas or 1,
        concurrency=args.concurrency,
        assumptions=assumptions_for(args.engine, gpu.part),
    )


def _check_request_fits(prompt: float, output: float, result: Any) -> None:
    """Refuse a typical request the engine itself refuses: ``prompt + output`` tokens above max-model-len (vLLM
    answers 400 "This model's maximum context length is L tokens. However, you requested …",
    ``vllm/entrypoints/openai/serving_engine.py`` ``_validate_prompt_and_tokenize``), or above the longest request
    one sequence holds when the engine caps it below that (``result.max_request_tokens``: a llama.cpp slot).

    Raises:
        CapacityError: naming ``--prompt-tokens``, ``--output-tokens`` and the limit's flag.
    """
    total = prompt + output
    if total > result.max_model_len:
        raise CapacityError(
            f"--prompt-tokens {prompt:g} + --output-tokens {output:g} = {total:,.0f} tokens exceed --max-model-len "
            f"{result.max_model_len:,}: the engine refuses such a request (a shorter request or a longer "
            "--max-model-len)"
        )
    slot = result.max_request_tokens
    if slot is not None and total > slot:
        raise CapacityError(
            f"--prompt-tokens {prompt:g} + --output-tokens {output:g} = {total:,.0f} tokens exceed the {slot:,}-token "
            "slot one request may hold (--ctx-size ÷ --parallel): the engine refuses such a request"
        )


def _time(seconds: float | None) -> str:
    """Seconds for a human: ms below 1 s, "unbounded" for an infinite wait."""
    if seconds is None or math.isinf(seconds):
        return "unbounded"
    return f"{seconds * 1e3:,.1f} ms" if seconds < 1 else f"{seconds:,.2f} s"


def _point_heading(op: Any) -> str:
    w = op.workload
    load = (
        f"{w.arrival_rate:g} req/s over {op.replicas} replica(s)"
        if op.mode == "arrival_rate"
        else f"{op.concurrency} concurrent users per replica (closed loop)"
    )
    return f"-- under load: {load}, {w.prompt_tokens:,g} prompt + {w.output_tokens:,g} output tokens --"


def _point_rows(op: Any) -> list[tuple[str, str]]:
    """The table rows of the pass past the ceiling, verdict first, every figure with its unit."""
    w = op.workload
    rows: list[tuple[str, str]] = []
    if op.slo is not None:
        slo = op.slo
        targets = f"TTFT ≤ {_time(slo.ttft_seconds)} and TPOT ≤ {_time(slo.tpot_seconds)}" + (
            f" for {slo.target_ratio:.0%} of requests" if op.mode == "arrival_rate" else ""
        )
        verdict = "MEETS" if op.meets_slo else "FAILS"
        missed = "" if not op.breached else "; missed: " + " and ".join(b.upper() for b in op.breached)
        if op.refused_ratio >= 0.0005:  # shown from 0.1 % (rounded): a lognormal tail is never exactly 0
            missed += f"; {op.refused_ratio:.1%} refused (prompt ≥ max-model-len)"
        rows.append(("verdict", f"{verdict} the SLO ({targets}): goodput {op.goodput_ratio:.1%} of requests{missed}"))
    rows.append(("binding constraint", f"{op.binding_constraint.replace('_', ' ')}: {op.binding_reason}"))
    if op.mode == "arrival_rate" and op.slo is not None:
        needed = (
            f"{op.replicas_needed} to meet the SLO (now {op.replicas})"
            if op.replicas_needed is not None
            else f"none meets the SLO: {op.unreachable}"
        )
        rows.append(("replicas needed", needed))
    per_engine = " per engine" if op.data_parallel_size > 1 else ""
    cap_why = "the KV ceiling" if op.kv_ceiling < op.max_num_seqs else "max-num-seqs"
    rows.append(
        (
            "batch run",
            f"{op.batch:,.1f} sequences{per_engine} (cap {op.batch_cap} = {cap_why}; max-num-seqs {op.max_num_seqs}, "
            f"KV ceiling {op.kv_ceiling} at {w.prompt_tokens + w.output_tokens:,g} tokens)",
        )
    )
    rows.append(
        (
            "utilization",
            f"{op.utilization:.0%} of a replica's capacity ({op.max_requests_per_second * op.data_parallel_size:,.3g} "
            "req/s with its batch full)" + ("; the queue grows without bound" if not op.stable else ""),
        )
    )
    for label, batch, step, tpot, rate in (
        ("decode at batch", op.batch, op.step_seconds, op.tpot_seconds_at_batch, op.decode_tokens_per_second),
        (
            "decode at ceiling",
            op.batch_cap,
            op.step_seconds_at_ceiling,
            op.tpot_seconds_at_ceiling,
            op.decode_tokens_per_second_at_ceiling,
        ),
    ):
        rows.append(
            (
                f"{label} {max(batch, 1.0):,.1f}",
                f"step {_time(step)}, TPOT {_time(tpot)} (with prefill's share), {rate:,.0f} tokens/s (decode alone)",
            )
        )
    bound = "compute-bound" if op.prefill.compute_bound else "memory-bound"
    rows.append(
        (
            "prefill",
            f"{_time(op.prefill.seconds)} for {w.prompt_tokens:,g} tokens ({bound}); "
            + (f"{op.prefill_share:.1%} of GPU time" if math.isfinite(op.prefill_share) else "saturated"),
        )
    )
    t, p = op.ttft, op.tpot
    waits = f"slot wait {_time(op.slot_wait_seconds)} + prefill wait {_time(op.prefill_wait_seconds)} + prefill"
    if op.request_overhead_seconds > 0:
        waits += f" + per-request overhead {_time(op.request_overhead_seconds)}"
    if math.isinf(t.mean):
        rows.append(("TTFT", "unbounded: the queue grows without end at this rate"))
    else:
        rows.append(
            ("TTFT", f"mean {_time(t.mean)}, p50 {_time(t.p50)}, p90 {_time(t.p90)}, p99 {_time(t.p99)} ({waits})")
        )
    rows.append(("TPOT", f"mean {_time(p.mean)}, p50 {_time(p.p50)}, p90 {_time(p.p90)}, p99 {_time(p.p99)}"))
    rows.append(
        (
            "output tokens/s",
            f"{op.output_tokens_per_second_per_replica:,.0f} per replica, {op.output_tokens_per_second_total:,.0f} "
            "total" + (" (capacity: the rest queue)" if not op.stable else ""),
        )
    )
    return rows


def _kv_check_rows(model_id: str) -> tuple[tuple[str, str], ...]:
    """The plan table's row saying whether a preset's KV figures are checked against published engine start-up
    logs (:func:`advisor.capacity.models.preset_kv_logs`); none for a config.json (not a preset)."""
    logs = preset_kv_logs(model_id)
    if logs is None:
        return ()
    if not logs:
        return (
            (
                "KV checked against",
                "no published start-up log of this preset yet: the figures follow the architecture's rules "
                "unchecked (docs/truth-table.md lists the checked ones)",
            ),
        )
    return (
        (
            "KV checked against",
            f"{len(logs)} published engine start-up log(s) of this model, vLLM's and SGLang's (docs/truth-table.md)",
        ),
    )


def _plan_other_engine(args: argparse.Namespace, dspec: Any, gpu: Any) -> int:
    """``plan --engine sglang|tgi|trtllm|llamacpp``: the engine's own KV accounting
    (:func:`advisor.capacity.deployment.resolve_deployment`, the resolver the daemon uses too), printed like the
    vLLM pass plus the engine's parameters and notes. A configuration that engine refuses to start
    (:class:`~advisor.errors.WontStartError`: the weights do not fit, no KV cache is left) is said as vLLM's is,
    with the fixes found by re-running that engine's pass (:func:`_refuse_without_pass`), exit 3."""
    from advisor.capacity.deployment import resolve_deployment
    from advisor.capacity.engines import memory_overcommit
    from advisor.capacity.hardware import GIB

    model = dspec.model
    try:
        resolved = resolve_deployment(dspec)
    except WontStartError as exc:
        return _refuse_without_pass(args, dspec, gpu, exc.problem)
    except CapacityError as exc:
        _err(str(exc))
        return 2
    cap, result = resolved.capacity, resolved.result
    memory, gpu_name = resolved.gpu.memory_bytes, resolved.gpu.name
    _encoder_note(resolved.inputs)
    if result.max_concurrency < 1 and cap.engine == "tgi":
        # TGI's router refuses to start when --max-total-tokens exceeds the max_batch_total_tokens its warm-up
        # inferred ("Not enough memory to handle `max_total_tokens`", backends/v3/src/lib.rs V3Error::NotEnoughMemory):
        # a refusal with its fixes, exit 3, as vLLM's (a fresh user's TGI plan exited 0 with a warning, 2026-12-06)
        return _refuse_without_pass(
            args,
            dspec,
            gpu,
            f"the KV cache ({result.kv_cache_tokens:,} tokens, TGI's max_batch_total_tokens) cannot hold one request "
            f'of --max-total-tokens {result.max_model_len:,}; TGI refuses to start ("Not enough memory to handle '
            '`max_total_tokens`")',
        )
    if cap.engine == "llamacpp" and result.weights_bytes_per_gpu > memory:
        # the weights alone exceed the GPU: llama.cpp fails at load with every layer offloaded, or (its automatic
        # fitting, on by default in late-2025 builds) keeps layers on the CPU at the CPU's speed, which this pass does
        # not model: no figure below would be the engine's (breaker 13: 129 GiB on 44 GiB printed an all-GPU TPOT,
        # exit 0)
        return _refuse_without_pass(
            args,
            dspec,
            gpu,
            f"the weights ({result.weights_bytes_per_gpu / GIB:.2f} GiB per GPU) alone exceed the GPU's "
            f"{memory / GIB:.2f} GiB: llama.cpp fails at load with every layer on the GPU, or keeps layers on the CPU "
            "(-ngl below the layer count, or its automatic fitting), whose speed this plan does not model",
        )
    over = memory_overcommit(result, resolved.inputs.gpu_memory_used_by_others_bytes)
    if cap.engine == "llamacpp" and over is not None:
        # the weights and the cells together: as the fixes judge it (capacity.fixes._starts), so a configuration the
        # fixes would not call fitting is not priced here either (breaker 14: TP 2 printed a TPOT, exit 0, where TP 1
        # was refused with '--tp 4 fits')
        return _refuse_without_pass(
            args, dspec, gpu, over + "; or llama.cpp's automatic fitting shrinks the context or keeps layers on the CPU"
        )
    if result.max_concurrency < 1:
        # llama.cpp's split slots: the pool may hold the request while one slot (--ctx-size ÷ --parallel) cannot
        slot = result.max_request_tokens
        where = (
            f"one slot ({slot:,} tokens: --ctx-size ÷ --parallel)"
            if slot is not None and slot < result.kv_cache_tokens
            else f"the KV cache ({result.kv_cache_tokens:,} tokens)"
        )
        _err(f"warning: {where} cannot hold one request of {result.max_model_len:,} tokens")
    out = result.as_dict()
    _gguf_inputs(out, args)
    out["gpu"] = gpu_name
    out["nvlink_sharp"] = resolved.gpu.nvlink_sharp
    out["tensor_parallel_nodes"] = _tensor_parallel_nodes(resolved.gpu.part, resolved.inputs.tensor_parallel_size)
    out["ignored_flags"] = []  # kept for readers of issue 17's JSON: such flags are refused now (issue 19)
    out["engine"] = cap.engine
    out["engine_parameters"] = dict(cap.parameters)
    out["engine_notes"] = list(cap.notes)
    kv_logs = preset_kv_logs(model.name)
    out["kv_checked_against_logs"] = None if kv_logs is None else list(kv_logs)
    inputs = resolved.inputs
    if "parallel" in cap.parameters:  # llama.cpp: its -np slots are the batch cap
        inputs = dataclasses.replace(inputs, max_num_seqs=int(cap.parameters["parallel"]))
    try:
        point = _past_the_ceiling(args, inputs, resolved.gpu, result)
    except CapacityError as exc:
        _err(str(exc))
        return 2
    if point is not None:
        out.update(point.as_dict())
    on_platform = _on_platform(args, cap.engine, result, inputs, point, gpu_name)
    if on_platform:
        out["platform"] = {"platform": args.platform, "settings": on_platform}
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    gib = float(GIB)
    params = ", ".join(f"{k} {v}" for k, v in cap.parameters.items())
    rows = [
        ("engine", f"{cap.engine} ({params})"),
        ("model", model.name),
        (
            "GPU",
            f"{gpu_name} × {args.tp * args.dp}"
            + (f" (DP {args.dp})" if args.dp > 1 else "")
            + f", {memory / gib:.2f} GiB each",
        ),
        ("weights per GPU", f"{result.weights_bytes_per_gpu / gib:.2f} GiB"),
        (
            "overhead per GPU",
            f"{result.overhead_bytes_per_gpu / gib:.2f} GiB (modelled warm-up and runtime)"
            if result.overhead_bytes_per_gpu
            else "not modelled (the engine sizes its KV cache without it; see the notes)",
        ),
        ("KV pool per GPU", f"{result.kv_pool_bytes_per_gpu / gib:.2f} GiB"),
        (
            "KV bytes per token",
            f"{result.kv_cache_bytes_per_token:,} (replica), {result.kv_cache_bytes_per_token_per_gpu:,} (per GPU)",
        ),
        ("KV blocks", f"{result.kv_cache_blocks:,} × {result.block_size} tokens"),
        ("KV tokens per replica", f"{result.kv_cache_tokens:,}"),
        ("max concurrency", f"{result.max_concurrency:.2f} sequences at max-model-len {result.max_model_len:,}"),
        # llama.cpp's pool is the --ctx-size asked for, not a profiled remainder: no start-up log checks it
        *(() if cap.engine == "llamacpp" else _kv_check_rows(model.name)),
    ]
    _print_rows(rows, point)
    _platform_lines(args.platform, on_platform)
    for note in cap.notes:
        print(f"note: {note}")
    return 0


_ENGINE_FLAGS: dict[str, frozenset[str]] = {
    "sglang": frozenset(
        {
            "mem_fraction_static",
            "engine_version",
            "block_size",
            "kv_cache_memory_gib",
            "kv_cache_memory_bytes",
            "max_num_seqs",
            "dp",
            "pp",
            "enable_expert_parallel",
        }
    ),
    "tgi": frozenset({"cuda_memory_fraction", "block_size", "max_num_batched_tokens", "max_num_seqs"}),
    "trtllm": frozenset(
        {
            "kv_cache_free_gpu_memory_fraction",
            "max_tokens",
            "block_size",
            "max_num_batched_tokens",
            "max_num_seqs",
            "dp",
            "pp",
            "enable_expert_parallel",
        }
    ),
    "llamacpp": frozenset({"ctx_size", "parallel", "kv_unified", "max_num_seqs", "kv_cache_dtype", "gguf_file_type"}),
}
"""The engine-specific flags each non-vLLM accounting reads (the shared ones — model, GPU, TP, dtype,
quantization, max-model-len — apply to all)."""

_VLLM_ONLY = (
    "gpu_memory_utilization",
    "gguf_file_type",
    "mem_fraction_static",
    "cuda_memory_fraction",
    "kv_cache_free_gpu_memory_fraction",
    "ctx_size",
    "parallel",
    "max_num_batched_tokens",
    "block_size",
    "max_tokens",
    "kv_unified",
    "kv_cache_memory_gib",
    "kv_cache_memory_bytes",
    "num_gpu_blocks_override",
    "dp",
    "pp",
    "engine_version",
    "enforce_eager",
    "enable_chunked_prefill",
    "num_scheduler_steps",
    "enable_prefix_caching",
    "enable_expert_parallel",
    "sampler",
    "vllm_use_v1",
    "cpu_offload_gb",
    "speculative_config",
    "limit_mm_per_prompt",
    "language_model_only",
    "enable_lora",
    "max_loras",
    "max_lora_rank",
    "lora_extra_vocab_size",
    "lora_dtype",
    "fully_sharded_loras",
)


_NEGATABLE_FLAGS = frozenset({"enable_chunked_prefill", "enable_prefix_caching"})
"""``plan``'s vLLM flags with a ``--no-`` form (``argparse.BooleanOptionalAction``, default None): False is given."""

_NOT_VLLM = (
    "mem_fraction_static",
    "cuda_memory_fraction",
    "kv_cache_free_gpu_memory_fraction",
    "ctx_size",
    "parallel",
    "max_tokens",
    "kv_unified",
)
"""Flags of the other engines' accounting that vLLM does not read."""


def _model_as_served(args: argparse.Namespace) -> Any:
    """``--model`` resolved, without the encoder towers ``--language-model-only`` (every modality at 0) or
    ``--limit-mm-per-prompt`` zeros keep vLLM from loading: a :class:`~advisor.capacity.models.ModelArch`.

    Raises:
        CapacityError: the model cannot be resolved.
    """
    from advisor.capacity.deployment import LANGUAGE_MODEL_ONLY_ENGINES
    from advisor.capacity.models import language_model_only_limits, without_unused_vision_tower
    from advisor.modelfile import resolve_model

    text_only = args.language_model_only or args.engine in LANGUAGE_MODEL_ONLY_ENGINES
    limits = language_model_only_limits() if text_only else args.limit_mm_per_prompt
    model = without_unused_vision_tower(resolve_model(args.model, Path.cwd()), limits)
    return _as_gguf(model, args)


def _gguf_inputs(out: dict[str, Any], args: argparse.Namespace) -> None:
    """With ``--gguf-file-type``, ``out["inputs"]`` names the GGUF file type sized (``gguf_file_type``) and the
    weights' method as ``gguf``; without it ``out`` is unchanged (the API's plan has the same keys)."""
    file_type = getattr(args, "gguf_file_type", None)
    if file_type is None:
        return
    from advisor.capacity.gguf import GGUF_QUANTIZATION, file_type_name

    inputs = out.setdefault("inputs", {})
    inputs["gguf_file_type"] = file_type_name(file_type)
    inputs["quantization"] = GGUF_QUANTIZATION


def _as_gguf(model: Any, args: argparse.Namespace) -> Any:
    """``model`` as the GGUF file ``--gguf-file-type`` names, and ``args.quantization`` spelled ``gguf``
    (:func:`advisor.capacity.gguf.as_served`); unchanged without it. Raises :class:`CapacityError` as that does."""
    from advisor.capacity.gguf import as_served

    served, args.quantization = as_served(
        model,
        getattr(args, "gguf_file_type", None),
        args.quantization,
        names=("--gguf-file-type", "--quantization"),
    )
    return served


def _ignored_flags(args: argparse.Namespace) -> list[str]:
    """The flags given on the command line that ``--engine`` does not read, as ``--flag-name``."""
    if args.engine == "vllm":
        return ["--" + n.replace("_", "-") for n in _NOT_VLLM if getattr(args, n, None) not in (None, False)]
    uses = _ENGINE_FLAGS.get(args.engine, frozenset())
    ignored = []
    for name in _VLLM_ONLY:
        value = getattr(args, name, None)
        # identity, not equality: --cpu-offload-gb 0 and --no-enable-prefix-caching are given too (breaker 13: 0 and
        # False compared equal to the store_true default and passed silently); False is "not given" only for a
        # store_true flag
        given = value is not None and (value is not False or name in _NEGATABLE_FLAGS)
        given = given and not (name == "gpu_memory_utilization" and value == 0.9)
        given = given and not (name in ("dp", "pp") and value == 1)
        if given and name not in uses and not (name == "engine_version" and args.engine == "tgi"):
            ignored.append("--" + name.replace("_", "-"))
    return ignored


def add_plan_parser(sub: Any) -> None:
    """Register the ``plan`` sub-command on an argparse sub-parsers object."""
    plan = sub.add_parser(
        "plan",
        help="the capacity pass for one configuration",
        epilog=f"exit codes: 0 the pass ran (or the search found a feasible deployment); 2 invalid input, or a "
        f"flag this mode does not read; {EXIT_ENGINE_REFUSES} the engine would refuse to start with this "
        "configuration (feasible: false, with the single changes that fit), or --search found no feasible "
        "configuration (feasible: [], with the reason)",
    )
    plan.add_argument("--model", required=True, help="preset id or path to a config.json")
    plan.add_argument(
        "--gpu", help="GPU catalog name (H100-SXM, A100-80GB, L40S, …); with --search: search only this GPU"
    )
    plan.add_argument(
        "--gpu-memory-gib",
        type=positive_float(16384.0),
        help="GPU memory in GiB as CUDA reports it (overrides the catalog); without --gpu, a value that is exactly "
        "one catalog GPU's total (139.81 = H200 SXM) also stands for that GPU's interconnect",
    )
    plan.add_argument(
        "--tp",
        type=bounded_int(1, 512),
        default=None,
        help="tensor-parallel size (default 1; with --search: search only this one)",
    )
    plan.add_argument(
        "--gpu-memory-utilization",
        type=positive_float(1.0),
        default=None,
        help="vLLM's memory budget (default 0.9); SGLang and TGI take --mem-fraction-static / --cuda-memory-fraction",
    )
    plan.add_argument(
        "--max-model-len", type=bounded_int(1, 100_000_000), default=None, help="required without --search"
    )
    plan.add_argument("--dtype", default="auto")
    plan.add_argument(
        "--quantization", default=None, help="vLLM --quantization (with --search: search only these weights)"
    )
    plan.add_argument(
        "--gguf-file-type",
        default=None,
        metavar="TYPE",
        help="the GGUF file's type as llama-quantize names it (Q4_K_M, Q5_K_M, Q8_0 …): its weights, tensor by "
        "tensor (vLLM --quantization gguf; llama.cpp)",
    )
    plan.add_argument(
        "--kv-cache-dtype",
        default=None,
        help="vLLM --kv-cache-dtype (default auto; with --search: search only this one)",
    )
    plan.add_argument(
        "--max-num-seqs",
        type=bounded_int(1, 1_000_000),
        default=None,
        help="default: the engine's (256, or 1024 on big GPUs)",
    )
    plan.add_argument("--max-num-batched-tokens", type=bounded_int(1, 100_000_000), default=None)
    plan.add_argument(
        "--block-size", type=bounded_int(1, 1024), default=None, help="default 16 (64 for MLA on vLLM V1)"
    )
    plan.add_argument(
        "--kv-cache-memory-gib", type=positive_float(16384.0), default=None, help="per-GPU KV memory override, GiB"
    )
    plan.add_argument(
        "--num-gpu-blocks-override",
        type=bounded_int(1, 1_000_000_000),
        default=None,
        metavar="N",
        help="vLLM --num-gpu-blocks-override: the KV pool is exactly N blocks × --block-size tokens",
    )
    plan.add_argument(
        "--kv-cache-memory-bytes",
        type=bounded_int(1, 16384 * 2**30),
        default=None,
        metavar="BYTES",
        help="vLLM --kv-cache-memory-bytes: per-GPU KV memory, bytes (or --kv-cache-memory-gib)",
    )
    plan.add_argument(
        "--gpu-memory-used-by-others-gib",
        type=_gib_or_zero,  # 0: a measurement of none (a script that always passes it), as no flag
        default=None,
        metavar="GIB",
        help="memory other processes hold on each GPU (a shared GPU), GiB",
    )
    plan.add_argument("--engine", choices=plan_engines(), default="vllm")
    plan.add_argument(
        "--engine-version",
        type=version_arg,
        default=None,
        help="e.g. 0.6.6 (vLLM: V0 accounting before 0.8; SGLang: its default mem-fraction-static)",
    )
    plan.add_argument("--enforce-eager", action="store_true")
    plan.add_argument(
        "--enable-chunked-prefill",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="vLLM --enable-chunked-prefill / --no-enable-chunked-prefill (default: the engine's rule); without "
        "--max-num-batched-tokens, off makes the profile batch max(max-model-len, 2048) tokens (V0; V1 from 0.11.1)",
    )
    plan.add_argument(
        "--num-scheduler-steps",
        type=bounded_int(1, 1_000_000),
        default=None,
        help="vLLM V0 --num-scheduler-steps (multi-step scheduling, vLLM <= 0.10.0): above 1, vLLM 0.8.0-0.10.0 "
        "falls back to the V0 engine, and with chunked prefill the profile batch is max(max-model-len, 2048)",
    )
    plan.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="vLLM --enable-prefix-caching / --no-enable-prefix-caching (default: the engine's rule, off for hybrid "
        "models before 0.26); it sets a Mamba / Gated DeltaNet hybrid's cache mode (2 state pages per request in "
        "'align')",
    )
    plan.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default=None,
        help="vLLM's top-k/top-p sampler warm-up (default: the official image's: flashinfer on V1 0.8-0.11.0, "
        "else torch)",
    )
    plan.add_argument(
        "--vllm-use-v1",
        choices=("0", "1"),
        default=None,
        help="vLLM's VLLM_USE_V1 environment variable: force the V0 (0) or V1 (1) engine of vLLM 0.8-0.10 (1: an "
        "opt-in from 0.6.4; ignored before); unset, the engine's own rule (version, GPU compute capability, "
        "features) decides",
    )
    plan.add_argument(
        "--cpu-offload-gb",
        type=_gib_or_zero,
        default=None,
        metavar="GIB",
        help="vLLM --cpu-offload-gb: GiB of weights per GPU moved to CPU memory (whole parameters of the decoder "
        "layers, in load order)",
    )
    plan.add_argument(
        "--limit-mm-per-prompt",
        type=_mm_limits,
        default=None,
        metavar="JSON",
        help='vLLM --limit-mm-per-prompt, e.g. \'{"image": 0, "video": 0}\': with every modality of the vision '
        "tower at 0 vLLM does not load the tower, so its weights leave the budget; for a Qwen-VL tower a modality "
        'at 0 is not profiled either (\'{"video": 0}\' leaves the largest image: see "vision encoder profile"); '
        "other counts change nothing here",
    )
    plan.add_argument(
        "--language-model-only",
        action="store_true",
        default=None,
        help="vLLM --language-model-only: every modality limit at 0 (as --limit-mm-per-prompt with zeros), so a "
        "multimodal checkpoint's encoder towers are not loaded",
    )
    plan.add_argument(
        "--speculative-config",
        default=None,
        metavar="JSON",
        help='vLLM --speculative-config, e.g. \'{"method": "eagle", "num_speculative_tokens": 3}\': the draft\'s '
        "layers share the KV pool and its weights load on the GPU (eagle3 and draft models need "
        '"draft_parameters"/"draft_layers")',
    )
    lora = plan.add_argument_group("vLLM LoRA serving (adapter slots allocated at load)")
    lora.add_argument("--enable-lora", action="store_true", help="vLLM --enable-lora: allocate LoRA adapter slots")
    lora.add_argument("--max-loras", type=int, default=None, metavar="N", help="vLLM --max-loras (default 1)")
    lora.add_argument("--max-lora-rank", type=int, default=None, metavar="R", help="vLLM --max-lora-rank (default 16)")
    lora.add_argument(
        "--lora-extra-vocab-size",
        type=int,
        default=None,
        metavar="N",
        help="vLLM --lora-extra-vocab-size (vLLM < 0.12; default 256)",
    )
    lora.add_argument(
        "--lora-dtype", default=None, metavar="DTYPE", help="vLLM --lora-dtype (default auto: the model dtype)"
    )
    lora.add_argument("--fully-sharded-loras", action="store_true", help="vLLM --fully-sharded-loras")
    others = "|".join(e for e in plan_engines() if e != "vllm")
    engines = plan.add_argument_group(f"other engines (--engine {others})")
    engines.add_argument(
        "--mem-fraction-static", type=positive_float(1.0), default=None, help="SGLang (default: its GPU rule)"
    )
    engines.add_argument("--cuda-memory-fraction", type=positive_float(1.0), default=None, help="TGI (default 1.0)")
    engines.add_argument(
        "--kv-cache-free-gpu-memory-fraction", type=positive_float(1.0), default=None, help="TensorRT-LLM (0.9)"
    )
    engines.add_argument(
        "--ctx-size",
        type=bounded_int(1, 100_000_000),
        default=None,
        help="llama.cpp -c (default max-model-len × parallel)",
    )
    engines.add_argument(
        "--parallel",
        type=bounded_int(1, 65_536),
        default=None,
        help="llama.cpp -np slots (default --max-num-seqs or 1)",
    )
    engines.add_argument(
        "--max-tokens",
        type=bounded_int(1, 1_000_000_000),
        default=None,
        help="TensorRT-LLM kv_cache_config.max_tokens: caps the KV pool, tokens",
    )
    engines.add_argument(
        "--kv-unified", action="store_true", help="llama.cpp --kv-unified: the slots share the --ctx-size cells"
    )
    plan.add_argument("--pp", type=bounded_int(1, 1024), default=1, help="pipeline-parallel size")
    plan.add_argument(
        "--dp",
        "--data-parallel-size",
        dest="dp",
        type=bounded_int(1, 1024),
        default=1,
        help="data-parallel ranks behind the endpoint, each with its own KV pool (vLLM, SGLang, TensorRT-LLM)",
    )
    plan.add_argument("--enable-expert-parallel", action="store_true")
    plan.add_argument("--json", action="store_true")
    traffic = plan.add_argument_group(
        "traffic and SLO: the pass past the ceiling for this configuration (tokens/s, TTFT, TPOT, replicas, "
        "verdict), or the dial search with --search"
    )
    traffic.add_argument("--arrival-rate", type=positive_float(1e6), help="requests per second (Poisson)")
    traffic.add_argument(
        "--concurrency",
        type=bounded_int(1, 1_000_000),
        default=None,
        metavar="B",
        help="instead of --arrival-rate: B users per replica, each sending its next request when the last ends "
        "(a fixed-concurrency load test; no queueing model)",
    )
    traffic.add_argument("--prompt-tokens", type=positive_float(1e7), help="typical (mean) prompt length, tokens")
    traffic.add_argument("--output-tokens", type=positive_float(1e7), help="typical (mean) output length, tokens")
    traffic.add_argument(
        "--prompt-cv",
        type=_cv,
        default=None,
        metavar="CV",
        help="coefficient of variation of prompt lengths (default 0.5; 0 = all equal); with --arrival-rate",
    )
    traffic.add_argument(
        "--output-cv",
        type=_cv,
        default=None,
        metavar="CV",
        help="coefficient of variation of output lengths (default 1.0, exponential-like); with --arrival-rate",
    )
    traffic.add_argument(
        "--replicas",
        type=bounded_int(1, 100_000),
        default=None,
        help="replicas the --arrival-rate is spread over (default 1)",
    )
    plan.add_argument(
        "--platform",
        choices=PLATFORMS,
        default=None,
        help="also say this configuration in the platform's own terms (container args and replicas, a unit's "
        "ExecStart, SageMaker LMI OPTION_* variables, Vertex AI or Azure ML deployment fields; bedrock: none)",
    )
    traffic.add_argument("--ttft", type=positive_float(3600.0), help="TTFT target, seconds")
    traffic.add_argument("--tpot", type=positive_float(60.0), help="TPOT target, seconds")
    traffic.add_argument(
        "--target-ratio",
        type=fraction_below_one,
        default=None,
        help="fraction of requests meeting both targets (default 0.9)",
    )
    search = plan.add_argument_group("dial search (--search)")
    search.add_argument("--search", action="store_true", help="list the cheapest deployments meeting the SLO")
    search.add_argument(
        "--max-context", type=bounded_int(1, 100_000_000), default=None, help="worst-case prompt + output tokens"
    )
    search.add_argument("--cloud", choices=["aws", "azure", "gcp"], default=None, help="default: all three")
    search.add_argument(
        "--limit", type=bounded_int(1, 10_000), default=None, help="feasible deployments to list (default 10)"
    )
    search.add_argument("--plot", metavar="FILE.png", default=None, help="draw the frontier (needs matplotlib)")
    search.add_argument(
        "--own",
        type=_owned_gpus,
        action=_Once,
        default=None,
        metavar="GPU:COUNT",
        help="search the COUNT GPUs you already have (e.g. H100-SXM:8) instead of priced cloud instances: no "
        "price, ranked by the GPUs used, then the least changed model, then goodput and latency",
    )
    search.add_argument(
        "--compare-managed",
        action="store_true",
        default=None,
        help="also price the token-metered offers for the model (Bedrock on-demand, Azure AI Foundry serverless, "
        "Vertex AI MaaS; advisor/data/managed_token_offers.csv) for this demand, per million goodput tokens",
    )
    search.add_argument(
        "--mean-arrival-rate",
        type=positive_float(1e6),
        default=None,
        metavar="R",
        help="with --compare-managed: the mean requests/s over a day (default --arrival-rate, which the search "
        "sizes replicas for as the peak); self-hosted $/Mtok divides the peak's hourly price by the mean's tokens",
    )
    plan.set_defaults(func=cmd_plan)
    _FLAGS.clear()
    for action in plan._actions:
        # every command's own (advisor.cli.add_log_flags) are not plan's: no mode refuses them
        if action.option_strings and action.dest not in ("help", "log_level", "log_format"):
            _FLAGS[action.dest] = ("/".join(action.option_strings), action.default)


_FLAGS: dict[str, tuple[str, Any]] = {}
"""``plan``'s options, dest → (the long flag, its default), read off the parser so that no flag is missed when
one mode refuses the flags of another."""


def _given(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(dest, flag) of every ``plan`` option given a value other than its default."""
    return [(dest, flag) for dest, (flag, default) in _FLAGS.items() if getattr(args, dest, default) != default]


class _Once(argparse.Action):
    """Store an option (default None) given at most once: a repeat is refused (argparse would keep the last
    silently)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(
                f"{option} given twice: give it once (one kind of owned GPU is searched; run the search once per kind)"
            )
        setattr(namespace, self.dest, values)


def _owned_gpus(text: str) -> tuple[str, int]:
    """An argparse type for ``--own GPU:COUNT``: (the catalog key, a whole count of GPUs from 1 to 4,096)."""
    from advisor.capacity.hardware import get_gpu

    name, sep, count = text.rpartition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected GPU:COUNT such as H100-SXM:8, got {text!r}")
    if not (count.isascii() and count.isdigit()):  # int() also reads '٣' and ' 3 ', '+3', '1_0'
        raise argparse.ArgumentTypeError(f"COUNT must be a whole number of GPUs in ASCII digits, got {count!r}")
    n = int(count)
    if not 1 <= n <= 4096:
        raise argparse.ArgumentTypeError(f"COUNT must be between 1 and 4,096 GPUs, got {n}")
    try:
        return get_gpu(name).key, n
    except CapacityError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _Progress:
    """A progress bar on stderr, drawn only once the search has run for more than a second."""

    def __init__(self, stream: Any = None, delay: float = 1.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.monotonic()
        self.delay = delay
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        if time.monotonic() - self.start < self.delay or total <= 0:
            return
        width = 30
        filled = min(width, round(width * done / total))
        self.stream.write(f"\rsearching [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def _fmt_seconds(v: float) -> str:
    if math.isinf(v):
        return "inf"
    return f"{v * 1e3:.0f} ms" if v < 1 else f"{v:.2f} s"


def _with_cvs(workload: Any, args: argparse.Namespace) -> Any:
    """``workload`` (a :class:`~advisor.capacity.queueing.Workload`) with ``--prompt-cv``/``--output-cv`` where
    given; the workload's own defaults hold otherwise."""
    if args.prompt_cv is not None:
        workload = dataclasses.replace(workload, prompt_cv=args.prompt_cv)
    if args.output_cv is not None:
        workload = dataclasses.replace(workload, output_cv=args.output_cv)
    return workload


def _slo(args: argparse.Namespace) -> Any:
    """The SLO of ``--ttft``/``--tpot``/``--target-ratio`` (:class:`~advisor.capacity.queueing.SLO`, whose
    default target ratio holds without ``--target-ratio``), or None without the targets."""
    from advisor.capacity.queueing import SLO

    if args.ttft is None or args.tpot is None:
        return None
    if args.target_ratio is None:
        return SLO(ttft_seconds=args.ttft, tpot_seconds=args.tpot)
    return SLO(ttft_seconds=args.ttft, tpot_seconds=args.tpot, target_ratio=args.target_ratio)


_SEARCH_ONLY = ("max_context", "cloud", "limit", "plot", "compare_managed", "mean_arrival_rate", "own")
"""Flags only ``--search`` reads."""


def _not_applicable(args: argparse.Namespace) -> str | None:
    """Why a traffic, SLO or search flag given to ``plan`` for one configuration does not apply (it is refused,
    not ignored: issue 17, issue 19), naming the flag; None when every flag given applies.

    The pass past the ceiling needs a load — ``--arrival-rate`` (open loop) or ``--concurrency`` (closed loop),
    not both — and the typical lengths ``--prompt-tokens`` and ``--output-tokens``. The SLO is both targets
    ``--ttft`` and ``--tpot``; ``--target-ratio``, ``--prompt-cv``, ``--output-cv`` and ``--replicas`` are read by
    the queueing model of an arrival stream only (the closed loop has no queue: its latencies are
    deterministic)."""
    for name in _SEARCH_ONLY:
        if getattr(args, name) is not None:
            return f"--{name.replace('_', '-')} applies to --search only"
    rate, users = args.arrival_rate is not None, args.concurrency is not None
    if rate and users:
        return "give --arrival-rate (an open stream of requests) or --concurrency (a closed loop of users), not both"
    load = "--arrival-rate" if rate else "--concurrency"
    if rate or users:
        missing = [
            f
            for f, v in (("--prompt-tokens", args.prompt_tokens), ("--output-tokens", args.output_tokens))
            if v is None
        ]
        if missing:
            return f"{load} needs {' and '.join(missing)} (the typical lengths)"
    for flag, value in (
        ("--prompt-tokens", args.prompt_tokens),
        ("--output-tokens", args.output_tokens),
        ("--ttft", args.ttft),
        ("--tpot", args.tpot),
    ):
        if value is not None and not (rate or users):
            return (
                f"{flag} needs traffic: --arrival-rate (requests/s) or --concurrency, with --prompt-tokens and "
                "--output-tokens"
            )
    if (args.ttft is None) != (args.tpot is None):
        given, other = ("--ttft", "--tpot") if args.ttft is not None else ("--tpot", "--ttft")
        return f"{given} needs {other} too (the SLO is both targets)"
    for flag, value in (
        ("--target-ratio", args.target_ratio),
        ("--prompt-cv", args.prompt_cv),
        ("--output-cv", args.output_cv),
        ("--replicas", args.replicas),
    ):
        if value is None:
            continue
        if not rate:
            return f"{flag} applies to an --arrival-rate (the queueing model)" + (
                "; --concurrency is a closed loop without a queue" if users else ""
            )
        if flag == "--target-ratio" and args.ttft is None:
            return "--target-ratio needs the SLO targets --ttft and --tpot"
    return None  # --target-ratio is a fraction in (0, 1) by its argparse type (argtypes.fraction_below_one)


_SEARCH_READS = frozenset(
    {
        "model",
        "gpu",
        "tp",
        "quantization",
        "kv_cache_dtype",
        "max_model_len",
        "max_num_seqs",
        "gpu_memory_utilization",
        "arrival_rate",
        "prompt_tokens",
        "output_tokens",
        "prompt_cv",
        "output_cv",
        "ttft",
        "tpot",
        "target_ratio",
        "search",
        "max_context",
        "cloud",
        "limit",
        "plot",
        "compare_managed",
        "mean_arrival_rate",
        "own",
        "json",
        "platform",
        "language_model_only",
        "limit_mm_per_prompt",
    }
)
"""The ``plan`` options ``--search`` reads; every other one given is refused (issue 19: not ignored)."""

_RESTRICTS = (
    ("gpu", "--gpu"),
    ("tp", "--tp"),
    ("quantization", "--quantization"),
    ("kv_cache_dtype", "--kv-cache-dtype"),
    ("max_model_len", "--max-model-len"),
    ("max_num_seqs", "--max-num-seqs"),
)
"""The one-configuration flags ``--search`` takes as restrictions of its space (one value each)."""


def _search_refusal(args: argparse.Namespace) -> str | None:
    """Why a flag given to ``plan --search`` does not apply (refused, not ignored), naming it; None when all
    apply."""
    for flag, value in (("--concurrency", args.concurrency), ("--replicas", args.replicas)):
        if value is not None:
            return f"{flag} does not apply to --search (it sizes the replicas itself, for an --arrival-rate)"
    for dest, flag in _given(args):
        if dest not in _SEARCH_READS:
            return (
                f"{flag} does not apply to --search: it searches vLLM deployments over "
                + ", ".join(f for _, f in _RESTRICTS)
                + " and --gpu-memory-utilization (give any of them to restrict it); the other dials stay at vLLM's "
                "defaults (plan without --search takes them)"
            )
    if args.own is not None:
        for flag, value in (
            ("--gpu", args.gpu),
            ("--cloud", args.cloud),
            ("--platform", args.platform),
            ("--compare-managed", args.compare_managed),
        ):
            if value is not None:
                why = "--own names the GPU" if flag == "--gpu" else "owned GPUs have no price to compare or look up"
                return f"{flag} does not apply with --own ({why})"
    return None


def _search_value_refusal(args: argparse.Namespace) -> str | None:
    """Why a value given to ``plan --search`` can run no configuration, naming its flag, before any is tried (exit
    2, not every configuration rejected and exit 0): an unknown ``--kv-cache-dtype``
    (:func:`advisor.capacity.precision.kv_bytes_per_element`'s names) or ``--quantization``
    (:func:`advisor.capacity.precision.weight_bytes_per_param`'s), or a ``--max-model-len`` below the worst-case
    request (``--max-context``, else ``--prompt-tokens`` + ``--output-tokens``: vLLM refuses a longer request,
    https://docs.vllm.ai/en/latest/configuration/engine_args.html ``--max-model-len``). None when all can run."""
    from advisor.capacity.precision import kv_bytes_per_element, weight_bytes_per_param

    try:
        if args.kv_cache_dtype is not None:
            kv_bytes_per_element(args.kv_cache_dtype, "bfloat16")
    except CapacityError as exc:
        return f"--kv-cache-dtype: {exc}"
    try:
        if args.quantization is not None and args.quantization.lower() != "none":
            weight_bytes_per_param("auto", args.quantization, "bfloat16")
    except CapacityError as exc:
        return f"--quantization: {exc}"
    from advisor.capacity.queueing import Workload

    least = args.prompt_tokens + args.output_tokens
    if args.max_context is not None and args.max_context < least:  # the flag's name, not the model's field (breaker 26)
        return (
            f"--max-context {args.max_context:,} is below --prompt-tokens + --output-tokens ({least:,g}): the "
            "worst-case request is at least the typical one; give at least that, or drop it"
        )
    worst = Workload(
        arrival_rate=args.arrival_rate,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        max_context_tokens=args.max_context,
    ).worst_context_tokens
    if args.max_model_len is not None and args.max_model_len < worst:
        return (
            f"--max-model-len {args.max_model_len:,} is below the worst-case request of {worst:,} tokens "
            f"({'--max-context' if args.max_context is not None else '--prompt-tokens + --output-tokens'}): vLLM "
            "refuses a request longer than max-model-len; give at least that, or drop it to search the default"
        )
    return None


def _search_space(args: argparse.Namespace) -> Any:
    """The search space (:class:`advisor.capacity.search.SearchSpace`) restricted by what was given: ``--gpu``
    (or ``--own``'s GPU), ``--tp``, ``--quantization``, ``--kv-cache-dtype``, ``--max-model-len``,
    ``--max-num-seqs`` (one value each) and ``--gpu-memory-utilization`` (held fixed).

    Raises:
        CapacityError: an unknown ``--gpu``.
    """
    from advisor.capacity.hardware import get_gpu
    from advisor.capacity.search import SearchSpace

    space = SearchSpace()
    changes: dict[str, Any] = {}
    if args.own is not None:
        changes["gpu_keys"] = (args.own[0],)
    elif args.gpu is not None:
        changes["gpu_keys"] = (get_gpu(args.gpu).key,)
    if args.tp is not None:
        changes["tensor_parallel_sizes"] = (args.tp,)
    if args.quantization is not None:
        changes["weight_precisions"] = (None if args.quantization.lower() == "none" else args.quantization,)
    if args.kv_cache_dtype is not None:
        changes["kv_cache_dtypes"] = (args.kv_cache_dtype,)
    if args.max_model_len is not None:
        changes["max_model_lens"] = (args.max_model_len,)
    if args.max_num_seqs is not None:
        changes["max_num_seqs"] = (args.max_num_seqs,)
    if args.gpu_memory_utilization is not None:
        changes["gpu_memory_utilization"] = args.gpu_memory_utilization
    return dataclasses.replace(space, **changes)


def _nothing_to_search(args: argparse.Namespace) -> str:
    """Why a restricted search had no configuration at all, naming the restrictions."""
    given = [f"{flag} {getattr(args, dest)}" for dest, flag in _RESTRICTS if getattr(args, dest) is not None]
    where = (
        "the GPUs you own"
        if args.own is not None
        else (
            f"{args.platform}'s priced instances"
            if args.platform
            else "priced instances" + ("" if args.cloud is None else f" on {args.cloud}")
        )
    )
    hint = "" if args.own is not None else "; --own GPU:COUNT searches GPUs you already have"
    return (
        f"nothing to search: no configuration of {where} matches {' '.join(given) or 'the search'} (the GPU on no "
        f"such instance, a TP above its GPU count, or fp8 weights on a GPU without FP8){hint}"
    )


def _cmd_search(args: argparse.Namespace) -> int:
    from advisor.capacity.engines import refuse_unsized_towers
    from advisor.capacity.queueing import Workload
    from advisor.capacity.search import (
        CLOSE_LATENCY_MISS,
        CLOSE_PRICE_FACTOR,
        DEFAULT_LIMIT,
        owned_host,
        search_deployments,
    )

    missing = [
        flag
        for flag, value in (
            ("--arrival-rate", args.arrival_rate),
            ("--prompt-tokens", args.prompt_tokens),
            ("--output-tokens", args.output_tokens),
            ("--ttft", args.ttft),
            ("--tpot", args.tpot),
        )
        if value is None
    ]
    if missing:
        _err(f"plan --search needs {', '.join(missing)}")
        return 2
    refused = _search_refusal(args)
    if refused:
        _err(refused)
        return 2
    if args.mean_arrival_rate is not None and not args.compare_managed:
        _err("--mean-arrival-rate applies to --compare-managed only (it prices the self-hosted tokens at the mean)")
        return 2
    if args.mean_arrival_rate is not None and not (args.mean_arrival_rate * MAX_PEAK_TO_MEAN >= args.arrival_rate):
        _err(
            f"--mean-arrival-rate {args.mean_arrival_rate:.3g}: --arrival-rate {args.arrival_rate:g} (the peak) is "
            f"more than {MAX_PEAK_TO_MEAN:g}× it; give a mean of at least {args.arrival_rate / MAX_PEAK_TO_MEAN:g} "
            "req/s (replicas sized for such a peak would idle nearly all day: price that with --arrival-rate nearer "
            "the mean)"
        )
        return 2
    if args.mean_arrival_rate is not None and args.mean_arrival_rate > args.arrival_rate:
        _err(
            f"--mean-arrival-rate {args.mean_arrival_rate:g} exceeds --arrival-rate {args.arrival_rate:g} (the peak "
            "the replicas are sized for)"
        )
        return 2
    refused = _search_value_refusal(args)
    if refused:
        _err(refused)
        return 2
    hosts, refused = _platform_hosts(args)
    if refused:
        _err(refused)
        return 2
    if args.own is not None:
        hosts = [owned_host(*args.own)]
    progress = _Progress()
    try:
        model = _model_as_served(args)
        refuse_unsized_towers(model)  # every candidate would fail on them: say why once
        space = _search_space(args)
        workload = _with_cvs(
            Workload(
                arrival_rate=args.arrival_rate,
                prompt_tokens=args.prompt_tokens,
                output_tokens=args.output_tokens,
                max_context_tokens=args.max_context,
            ),
            args,
        )
        slo = _slo(args)
        assert slo is not None
        limit = DEFAULT_LIMIT if args.limit is None else args.limit
        result = search_deployments(
            model, workload, slo, cloud=args.cloud, instances=hosts, space=space, limit=limit, progress=progress
        )
    except CapacityError as exc:
        progress.close()
        _err(str(exc))
        return 2
    progress.close()
    if result.configurations == 0:
        _err(_nothing_to_search(args))
        return 2
    if args.plot:
        _plot(result.frontier, args.plot)
    managed = _managed(args, model.name, result) if args.compare_managed else None
    owned = args.own is not None
    done = 0 if result.feasible else EXIT_ENGINE_REFUSES  # a script tells "none" apart, as plain plan's refusal
    if args.json:
        out = result.as_dict()
        if managed is not None:
            out.update(managed)
        out["model"] = model.name
        if args.platform is not None:
            out["platform"] = args.platform
        if owned:
            out["owned"] = {"gpu": args.own[0], "count": args.own[1]}
        out["workload"] = {
            "arrival_rate": workload.arrival_rate,
            "prompt_tokens": workload.prompt_tokens,
            "output_tokens": workload.output_tokens,
            "max_context_tokens": workload.worst_context_tokens,
        }
        out["slo"] = {
            "ttft_seconds": slo.ttft_seconds,
            "tpot_seconds": slo.tpot_seconds,
            "target_ratio": slo.target_ratio,
        }
        print(json.dumps(out, indent=2, sort_keys=True))
        return done
    gpus_word = "GPU" if owned and args.own[1] == 1 else "GPUs"
    print(
        f"{model.name}: {workload.arrival_rate:g} req/s, {workload.prompt_tokens:g} prompt + "
        f"{workload.output_tokens:g} output tokens (worst case {workload.worst_context_tokens:,}); SLO TTFT ≤ "
        f"{slo.ttft_seconds:g} s and TPOT ≤ {slo.tpot_seconds * 1e3:g} ms for {slo.target_ratio:.0%} of requests"
        f"{'' if args.cloud is None else ' on ' + args.cloud.upper()}"
        f"{'' if hosts is None or owned else ' at ' + str(args.platform) + ' instance prices'}"
        f"{'' if not owned else f' on the {args.own[1]} {args.own[0].upper()} {gpus_word} owned'}"
    )
    print(
        f"{result.configurations} configurations: {result.cannot_run}, {result.pruned} pruned by cost bound, "
        f"{result.evaluated} evaluated against the SLO"
    )
    if not result.feasible:
        print(result.reason)
    else:
        mixed = args.cloud is None and not owned
        header = (
            *(("cloud",) if mixed else ()),
            "instance",
            "GPUs",
            "n",
            "TP",
            "weights",
            "KV",
            "seqs",
            "repl",
            "$/h",
            "$/Mtok",
            "TTFT p90",
            "TPOT p90",
            "goodput",
        )
        rows = [header]
        for c in result.feasible:
            p = c.prediction
            rows.append(
                (
                    *((c.instance.cloud,) if mixed else ()),
                    c.instance.name,
                    f"{c.instance.whole_gpus}×{c.config.gpu_key.upper()}",
                    str(c.instances),
                    str(c.config.tensor_parallel_size),
                    c.config.weights_label,
                    c.config.kv_cache_dtype,
                    str(c.config.max_num_seqs),
                    str(c.replicas),
                    "owned" if c.hourly_cost_usd is None else f"{c.hourly_cost_usd:.2f}",
                    "owned"
                    if c.cost_per_million_goodput_tokens_usd is None
                    else f"{c.cost_per_million_goodput_tokens_usd:.2f}",
                    _fmt_seconds(p.ttft_p90_seconds),
                    _fmt_seconds(p.tpot_p90_seconds),
                    f"{p.goodput_ratio:.1%}",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        for r in rows:
            print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
        lens = sorted({c.config.max_model_len for c in result.feasible})
        legend = (
            "GPUs: the GPUs in one instance; n: instances; TP: GPUs per replica; repl: replicas; seqs: "
            "--max-num-seqs; weights: the checkpoint's own precision or a quantized one (needs that checkpoint); "
            + (
                "$/h, $/Mtok: owned GPUs have no price here, so the rows are ranked by the GPUs used (TP × "
                "repl), then the least changed model (the checkpoint's weights before fp8 before awq, an auto KV "
                "cache before fp8: every row meets the SLO), then goodput, TPOT p90 and TTFT p90; "
                if owned
                else "$/Mtok: USD per million output tokens of requests that meet the SLO; "
            )
            + "every row runs --max-model-len "
            + ", ".join(f"{n:,}" for n in lens)
        )
        print(textwrap.fill(legend, width=110))
        if owned:
            pass
        elif hosts is None:
            sources = {(c.instance.cloud, c.instance.price_region, c.instance.price_as_of) for c in result.feasible}
            print(
                "prices: on-demand USD/h, "
                + "; ".join(f"{cloud} {region} as of {when}" for cloud, region, when in sorted(sources))
            )
        else:
            cited = {(c.instance.price_region, c.instance.price_as_of, c.instance.source) for c in result.feasible}
            print(
                f"prices: {args.platform}'s own on-demand USD/h (not the VM's), "
                + "; ".join(f"{region} as of {when}, source {url}" for region, when, url in sorted(cited))
            )
    miss = f"{CLOSE_LATENCY_MISS - 1:.0%}"
    if result.rejected:
        near = all(r.close for r in result.rejected)
        print(
            textwrap.fill(
                "best rejected: "
                + (
                    f"the configurations that came close — they run and miss a latency target by at most {miss} at "
                    "batch 1" + ("" if owned else f", from at most {CLOSE_PRICE_FACTOR:g}× the cheapest price above")
                    if near
                    else "none came close, so the nearest misses are listed"
                )
                + (
                    ""
                    if owned
                    else ". (from $X/h) is a lower bound on its cost: the replicas stability alone needs, each on the "
                    "cheapest instance holding one"
                ),
                width=110,
            )
        )
        for rej in result.rejected:
            cfg = rej.config
            where = f"owned {cfg.gpu_key.upper()}" if owned else f"{rej.instance} ({cfg.gpu_key.upper()})"
            bound = "" if owned else f" (from ${rej.lower_bound_hourly_cost_usd:.2f}/h)"  # owned: no price, said once
            print(
                f"  {where} TP{cfg.tensor_parallel_size} {cfg.weights_label}/{cfg.kv_cache_dtype} seqs "
                f"{cfg.max_num_seqs}{bound}: {rej.reason}"
            )
    else:
        print(f"best rejected: none came close (none that runs misses a latency target by at most {miss})")
    if managed is not None:
        _print_managed(managed)
    return done


def _platform_hosts(args: argparse.Namespace) -> tuple[list[Any] | None, str | None]:
    """``plan --search --platform P``: the instances to search and their prices — ``(None, None)`` for the raw
    VMs of ``instances.csv`` (no platform, Kubernetes, systemd); a managed platform's own sourced instances at its
    own prices (:func:`advisor.capacity.managed.managed_instances`); or ``(None, why)`` when there is nothing to
    price with (Bedrock rents no instances; a managed platform with no sourced price: unknown, not the VM's)."""
    from advisor import conventions as c

    platform = args.platform
    if platform is None or (platform not in c.MANAGED_INSTANCE_PLATFORMS and platform != "bedrock"):
        return None, None
    if platform == "bedrock":
        return None, "--platform bedrock: Bedrock rents no instances to search (a buy option, priced per token)"
    from advisor.capacity.managed import managed_instances

    clouds = sorted({r.raw.cloud for r in managed_instances(platform)})  # the clouds its instances run on
    if args.cloud is not None and clouds and args.cloud not in clouds:
        return None, (
            f"--platform {platform} runs on {' and '.join(c.upper() for c in clouds)} (its instances are "
            f"{', '.join(clouds)} instances), not --cloud {args.cloud}: drop one of them"
        )
    rows = [r.as_instance() for r in managed_instances(platform, priced_only=True)]
    if not rows:
        return None, (
            f"--platform {platform}: no {platform} instance has a sourced price in advisor/data/managed_instances.csv; "
            "its prices are unknown (the raw VM prices are not its prices)"
        )
    return rows, None


def _managed(args: argparse.Namespace, model: str, result: Any) -> dict[str, Any]:
    """The ``--compare-managed`` figures (:mod:`advisor.capacity.token_offers`): the JSON keys ``managed_offers``,
    ``managed_offers_note`` (None unless no offer is known), ``self_hosted_usd_per_million_tokens`` (the cheapest
    listed configuration's, at the mean; None without one) and ``managed_demand``.

    The search sizes for ``--arrival-rate`` (the peak); ``--mean-arrival-rate`` (default: the same) is the mean."""
    from advisor.capacity.token_offers import (
        NO_OFFER_NOTE,
        Demand,
        offers_for,
        priced,
        providers_without_offer,
        self_hosted_usd_per_million,
    )

    mean = args.mean_arrival_rate if args.mean_arrival_rate is not None else args.arrival_rate
    demand = Demand.from_rate(mean, args.prompt_tokens, args.output_tokens, args.arrival_rate / mean)
    found = offers_for(model)
    costs = priced(found, demand)
    self_hosted = None
    if result.feasible:
        best = result.feasible[0]
        self_hosted = self_hosted_usd_per_million(
            best.hourly_cost_usd, best.prediction.goodput_tokens_per_second, demand.peak_to_mean
        )
    return {
        "managed_offers": [c.as_dict() for c in costs],
        "managed_offers_note": None if found else NO_OFFER_NOTE.format(model=model),
        "managed_providers_without_offer": providers_without_offer(model),
        "self_hosted_usd_per_million_tokens": None if self_hosted is None else round(self_hosted, 4),
        "managed_demand": {
            "input_tokens_per_minute": demand.input_tokens_per_minute,
            "output_tokens_per_minute": demand.output_tokens_per_minute,
            "requests_per_minute": demand.requests_per_minute,
            "peak_to_mean": demand.peak_to_mean,
        },
    }


def _print_managed(managed: dict[str, Any]) -> None:
    """The ``--compare-managed`` table: each offer's prices, its cost per million goodput tokens at this demand
    and its source."""
    d = managed["managed_demand"]
    own = managed["self_hosted_usd_per_million_tokens"]
    print(
        f"host or buy, at a mean of {d['input_tokens_per_minute']:,.0f} input + {d['output_tokens_per_minute']:,.0f} "
        f"output tokens/min ({d['requests_per_minute']:,.0f} requests/min, peak ÷ mean {d['peak_to_mean']:.2g}): "
        "self-hosted (cheapest above) " + ("unknown" if own is None else f"${own:.2f}") + " per million goodput tokens"
    )
    if managed["managed_offers_note"] is not None:
        print(managed["managed_offers_note"])
        return

    def money(v: float | None) -> str:
        return "unknown" if v is None else f"{v:.2f}"

    rows = [("provider", "offer", "model id", "$/M in", "$/M out", "$/Mtok", "price as of", "source")]
    for o in managed["managed_offers"]:
        rows.append(
            (
                o["provider"],
                o["offer"],
                o["provider_model_id"],
                money(o["input_usd_per_million_tokens"]),
                money(o["output_usd_per_million_tokens"]),
                money(o["usd_per_million_goodput_tokens"]),
                o["price_as_of"],
                o["price_source"],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    if managed["managed_providers_without_offer"]:
        print("no offer known from " + ", ".join(managed["managed_providers_without_offer"]))
    print(
        textwrap.fill(
            "$/Mtok: USD per million output tokens with the input tokens that come with them (token-metered: every "
            "output token counted as goodput, the provider's latency not modelled; self-hosted: the peak's hourly "
            "price over the mean's goodput tokens). Notes per offer: --json, or advisor/data/managed_token_offers.csv",
            width=110,
        )
    )


def _plot(frontier: list[tuple[float, float, str]], path: str) -> None:
    """Goodput tokens/s per GPU against TPOT p90 of every feasible configuration, with the Pareto frontier."""
    try:
        matplotlib: Any = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        plt: Any = importlib.import_module("matplotlib.pyplot")
    except ImportError:
        _err("--plot needs matplotlib (pip install matplotlib); skipped")
        return
    if not frontier:
        _err("--plot: no feasible configuration to draw; skipped")
        return
    xs = [f[0] for f in frontier]
    ys = [f[1] * 1e3 for f in frontier]
    pareto = sorted(frontier, key=lambda f: -f[0])
    front: list[tuple[float, float]] = []
    best = math.inf
    for x, y, _ in pareto:
        if y < best:
            front.append((x, y * 1e3))
            best = y
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.scatter(xs, ys, s=12, alpha=0.5, label="feasible configurations")
    ax.plot([f[0] for f in front], [f[1] for f in front], color="black", label="frontier")
    ax.set_xlabel("goodput tokens/s per GPU")
    ax.set_ylabel("TPOT p90 (ms)")
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        _err(f"--plot: cannot write {path!r}: {exc.strerror or exc}")
    plt.close(fig)
