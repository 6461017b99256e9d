"""``capacity-advisor plan``: the capacity pass for one configuration, as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from advisor.argtypes import positive_float
from advisor.errors import CapacityError


def _err(msg: str) -> None:
    print(f"capacity-advisor: {msg}", file=sys.stderr)


def cmd_plan(args: argparse.Namespace) -> int:
    """Print the capacity pass for one configuration."""
    from advisor.capacity.hardware import get_gpu
    from advisor.capacity.kv import (
        CapacityInputs,
        capacity_pass,
        profile_for_version,
        vllm_default_block_size,
        vllm_default_max_num_seqs,
    )
    from advisor.config import GIB, resolve_model

    try:
        model = resolve_model(args.model, Path.cwd())
        if args.gpu_memory_gib is not None:
            memory = int(args.gpu_memory_gib * GIB)
            gpu_name = args.gpu or f"{args.gpu_memory_gib:g} GiB"
        elif args.gpu is not None:
            spec = get_gpu(args.gpu)
            memory = spec.memory_bytes
            gpu_name = spec.name
        else:
            _err("plan needs --gpu NAME or --gpu-memory-gib X")
            return 2
        if args.engine != "vllm":
            _err(f"--engine {args.engine}: only vllm accounting is implemented so far")
            return 2
        profile = profile_for_version(args.engine_version)
        max_num_seqs = args.max_num_seqs
        if max_num_seqs is None:
            max_num_seqs = vllm_default_max_num_seqs(args.engine_version, memory, gpu_name)
        block_size = args.block_size
        if block_size is None:
            block_size = vllm_default_block_size(model, args.engine_version)
        kv_override = None if args.kv_cache_memory_gib is None else int(args.kv_cache_memory_gib * GIB)
        inputs = CapacityInputs(
            model=model,
            gpu_memory_bytes=memory,
            tensor_parallel_size=args.tp,
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_model_len=args.max_model_len,
            dtype=args.dtype,
            quantization=args.quantization,
            kv_cache_dtype=args.kv_cache_dtype,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens,
            block_size=block_size,
            kv_cache_memory_bytes=kv_override,
            overhead_profile=profile,
            engine_version=args.engine_version,
            enforce_eager=args.enforce_eager,
            pipeline_parallel_size=args.pp,
            enable_expert_parallel=args.enable_expert_parallel,
        )
        result = capacity_pass(inputs)
    except CapacityError as exc:
        _err(str(exc))
        return 2
    out = result.as_dict()
    out["gpu"] = gpu_name
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    gib = float(GIB)
    rows = [
        ("model", model.name),
        ("GPU", f"{gpu_name} × {args.tp} (TP {args.tp}), {memory / gib:.2f} GiB each"),
        ("gpu-memory-utilization", f"{args.gpu_memory_utilization}"),
        ("weights per GPU", f"{result.weights_bytes_per_gpu / gib:.2f} GiB"),
        ("overhead per GPU", f"{result.overhead_bytes_per_gpu / gib:.2f} GiB (activations, CUDA graphs, runtime)"),
        ("KV pool per GPU", f"{result.kv_pool_bytes_per_gpu / gib:.2f} GiB"),
        (
            "KV bytes per token",
            f"{result.kv_cache_bytes_per_token:,} (replica), {result.kv_cache_bytes_per_token_per_gpu:,} (per GPU)",
        ),
        ("KV blocks", f"{result.kv_cache_blocks:,} × {result.block_size} tokens"),
        ("KV tokens per replica", f"{result.kv_cache_tokens:,}"),
        ("max concurrency", f"{result.max_concurrency:.2f} sequences at max-model-len {result.max_model_len:,}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    return 0


def add_plan_parser(sub: Any) -> None:
    """Register the ``plan`` sub-command on an argparse sub-parsers object."""
    plan = sub.add_parser("plan", help="the capacity pass for one configuration")
    plan.add_argument("--model", required=True, help="preset id or path to a config.json")
    plan.add_argument("--gpu", help="GPU catalog name (H100-SXM, A100-80GB, L40S, …)")
    plan.add_argument(
        "--gpu-memory-gib", type=positive_float(16384.0), help="GPU memory in GiB (overrides the catalog)"
    )
    plan.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    plan.add_argument("--gpu-memory-utilization", type=positive_float(1.0), default=0.9)
    plan.add_argument("--max-model-len", type=int, required=True)
    plan.add_argument("--dtype", default="auto")
    plan.add_argument("--quantization", default=None)
    plan.add_argument("--kv-cache-dtype", default="auto")
    plan.add_argument("--max-num-seqs", type=int, default=None, help="default: the engine's (256, or 1024 on big GPUs)")
    plan.add_argument("--max-num-batched-tokens", type=int, default=None)
    plan.add_argument("--block-size", type=int, default=None, help="default 16 (64 for MLA on vLLM V1)")
    plan.add_argument(
        "--kv-cache-memory-gib", type=positive_float(16384.0), default=None, help="per-GPU KV memory override, GiB"
    )
    plan.add_argument("--engine", choices=["vllm", "sglang", "tgi", "trtllm", "llamacpp"], default="vllm")
    plan.add_argument("--engine-version", default=None, help="e.g. 0.6.6 (V0 accounting before 0.8)")
    plan.add_argument("--enforce-eager", action="store_true")
    plan.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    plan.add_argument("--enable-expert-parallel", action="store_true")
    plan.add_argument("--json", action="store_true")
    plan.set_defaults(func=cmd_plan)
