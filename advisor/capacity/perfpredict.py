"""The roofline's prediction of one published measurement (a row of :mod:`advisor.capacity.perfdata`).

:func:`row_setup` turns a row into the capacity inputs, the GPU and the batch the run ran at (or says why the row
cannot be predicted); :func:`predict` evaluates the row's metric with a set of efficiency factors
(:class:`~advisor.capacity.perf.PerfAssumptions`). ``bench/fit_perf.py`` fits the factors with it and
``tests/capacity/test_perf_calibration.py`` measures the held-out error with it. The physics, per request of
``I`` prompt and ``O`` output tokens at batch (concurrency) ``B``, mean decode context ``I + O/2``:

Serving (an HTTP server under a closed-loop load generator at concurrency ``B``; continuous batching)
    Each step decodes ``B`` sequences and admits, on average, ``B ÷ O`` new prompts (each request needs one
    prefill per ``O`` decode steps): a *mixed step* (:func:`~advisor.capacity.perf.mixed_step_seconds`).
    TPOT as benchmarks report it (mean inter-token time, first token excluded) is the mixed step with the
    ``B − 1`` other requests' prompts: ``mixed(B, (B − 1) ÷ O)``; a *median* inter-token latency (ITL p50)
    excludes the steps that carried a prefill, so it is the pure decode step ``step(B)``.
    TTFT = ``prefill_overhead`` + (``B > 1``: half a step in progress when the request arrives) + the mixed step
    that carries the prompt beside the ``B − 1`` running decodes (chunking of long prompts is not modelled).
    A request's life ``L = TTFT + (O − 1) × TPOT``; output tokens/s = ``B × O ÷ L`` (closed loop, Little's law);
    total tokens/s = ``B × (I + O) ÷ L``; tokens/s per user = ``1 ÷ TPOT``; end-to-end latency = ``L``.
    Open-loop runs (Poisson arrivals at λ requests/s, no fixed concurrency) run at the batch Little's law gives,
    ``B = λ × L(B)`` (solved by fixed-point iteration).

Static (an offline benchmark without a server)
    *Static batching* (gptSessionBenchmark, vLLM ``benchmark_latency.py``): the batch's prompts are prefilled in
    one pass, then ``O − 1`` decode steps: ``e2e = prefill_batch(B, I) + (O − 1) × step(B)``; output tokens/s
    ``= B × O ÷ e2e``; TTFT = the prefill pass.
    *In-flight batching* (``trtllm-bench``, vLLM ``benchmark_throughput.py``: all requests queued at once): in
    the steady state every step is ``mixed(B, B ÷ O)`` and yields ``B`` tokens: output tokens/s ``= B ÷
    mixed(B, B ÷ O)``.
    Static runs have no HTTP server, no detokenizer streaming and no request admission: the per-request
    ``prefill_overhead`` is 0 and the per-step overheads (fixed and per sequence) are the serving ones ×
    ``static_overhead_fraction``
    (fitted, bounded to [0, 1]: an offline loop cannot cost more per step than the same engine behind a server).

Batch of a saturation run (the row states none)
    * ``trtllm-bench`` (TensorRT-LLM static): its own engine setting, ``calc_engine_setting`` in
      ``tensorrt_llm/bench/build/tuning.py``: requests that fit ``0.95 × (GPU memory × GPUs − engine size)`` of
      KV at ``I + O`` tokens each, capped at 4,096; the runtime's guaranteed-no-evict scheduler holds ``I + O``
      per request.
    * vLLM / SGLang: the KV ceiling of the capacity pass (:func:`advisor.capacity.kv.capacity_pass` under the
      engine's own accounting) at the mean context ``I + O/2`` (blocks are allocated as tokens are generated),
      capped at vLLM's default ``--max-num-seqs`` (:func:`~advisor.capacity.profiles.vllm_default_max_num_seqs`)
      or SGLang's 4,096 (``--max-running-requests`` is derived from the pool; 4,096 assumed as its cap).
    * excluded: a saturation run that sends no more prompts than that batch (one wave, its duration set by the
      longest output of a length distribution the row does not give); attention-data-parallel + expert-parallel
      runs (``dp…ep…`` layouts: no tensor-parallel replica
      the roofline models), and rows whose model or GPU the catalog lacks a figure for (the reason is returned).

KV cache dtype: as the row states; a TensorRT-LLM row with FP8/FP4 weights and no stated KV dtype is read as FP8 KV
(NVIDIA's ModelOpt ``-FP8``/``-FP4`` checkpoints the pages name carry ``kv_cache_quant_algo: FP8``, which
TensorRT-LLM applies by default).

Engines: ``nim`` is read as ``trtllm`` (NIM 1.x serves its optimized profiles with TensorRT-LLM, as the rows'
notes state). GPU generation from vendor + CUDA compute capability (:func:`gpu_generation`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Final

from advisor.capacity.hardware import GPUSpec, get_gpu, gpu_generation
from advisor.capacity.inputs import ACCOUNTING_ENGINES, CapacityInputs
from advisor.capacity.kv import capacity_pass
from advisor.capacity.kvlayout import kv_bytes_per_token_per_gpu
from advisor.capacity.models import get_preset
from advisor.capacity.perf import (
    DEFAULT_ASSUMPTIONS,
    PerfAssumptions,
    decode_step_model,
    engine_family,
    mixed_step_seconds,
    prefill_batch_seconds,
)
from advisor.capacity.perfdata import Measurement
from advisor.capacity.profiles import vllm_default_max_num_seqs
from advisor.capacity.weights import weights_bytes_per_gpu
from advisor.errors import AdvisorError

__all__ = [
    "RowSetup",
    "predict",
    "row_setup",
    "static_assumptions",
]

TRTLLM_BENCH_KV_FRACTION: Final = 0.95
"""``kv_cache_gpu_mem_fraction`` default of ``calc_engine_setting`` (``tensorrt_llm/bench/build/tuning.py``)."""

TRTLLM_BENCH_MAX_BATCH: Final = 4096
"""``finetune_setting``'s cap on the max batch (``min(kv_cache_max_requests, 4096)``, same file)."""

SGLANG_MAX_RUNNING: Final = 4096
"""Assumed cap on SGLang's running requests when the pool allows more (not from a source: an upper bound)."""

_STATIC_BATCHING = re.compile(r"gptSessionBenchmark|benchmark_latency|static[ -]batch", re.IGNORECASE)
_MEDIAN_ITL = re.compile(r"ITL p50|median inter-token latency", re.IGNORECASE)
_POISSON = re.compile(r"Poisson arrivals at ([0-9.]+) req/s")
_DP_EP = re.compile(r"\bdp\d+ep\d+\b", re.IGNORECASE)
_PROMPTS = re.compile(r"([0-9][0-9,]*) (?:ShareGPT )?prompts")

_PRECISION: Final = {
    "bf16": ("bfloat16", None),
    "fp16": ("float16", None),
    "fp8": ("auto", "fp8"),
    "fp4": ("auto", "nvfp4"),
    "int8": ("auto", "int8"),
    "int4": ("auto", "awq"),
}
"""Row ``weight_precision`` → (``--dtype``, ``--quantization``); a checkpoint already in that precision keeps
its own method (DeepSeek-R1's block FP8, gpt-oss's MXFP4)."""


@dataclass(frozen=True)
class RowSetup:
    """A measurement ready to predict (everything that does not depend on the efficiency factors).

    Attributes:
        row: the measurement.
        inputs: the replica's capacity inputs (model preset, TP, precision, KV dtype).
        gpu: the GPU spec.
        batch: sequences in flight (stated concurrency, or the saturation rule's; for an open-loop run the
            initial guess, solved again by :func:`predict`).
        batch_rule: how ``batch`` was decided (``stated``, ``trtllm-bench``, ``kv-ceiling``, ``poisson``).
        static_batching: a static-batch benchmark (prefill of the whole batch, then decode), not in-flight.
        median_itl: the TPOT figure is a median inter-token latency (steps without a prefill).
        arrival_rate: requests/s of an open-loop (Poisson) serving run, else None.
    """

    row: Measurement
    inputs: CapacityInputs
    gpu: GPUSpec
    batch: float
    batch_rule: str
    static_batching: bool
    median_itl: bool
    arrival_rate: float | None = None

    @property
    def engine(self) -> str:
        """The calibration engine (:func:`engine_family`)."""
        return engine_family(self.row.engine)

    @property
    def generation(self) -> str:
        """:func:`gpu_generation` of the GPU."""
        return gpu_generation(self.gpu)


def _inputs(row: Measurement, gpu: GPUSpec) -> CapacityInputs:
    model = get_preset(row.model)
    if row.weight_precision not in _PRECISION:
        raise AdvisorError(f"weight precision {row.weight_precision!r} has no mapping")
    dtype, quantization = _PRECISION[row.weight_precision]
    own = model.checkpoint_quantization
    if quantization is not None and own is not None and (own == quantization or own.startswith(quantization[:3])):
        quantization = None  # the checkpoint's own method (block fp8, mxfp4)
    if row.weight_precision == "fp4" and own == "mxfp4":
        quantization = None
    kv = "fp8" if row.kv_cache_dtype.startswith("fp8") else "auto"
    engine = engine_family(row.engine)
    if engine == "trtllm" and kv == "auto" and row.weight_precision in ("fp8", "fp4"):
        kv = "fp8"  # NVIDIA's ModelOpt FP8/FP4 checkpoints set kv_cache_quant_algo FP8 (hf_quant_config.json)
    return CapacityInputs(
        model=model,
        gpu_memory_bytes=gpu.memory_bytes,
        tensor_parallel_size=row.tp,
        max_model_len=row.input_tokens + row.output_tokens,
        dtype=dtype,
        quantization=quantization,
        kv_cache_dtype=kv,
        compute_capability=gpu.compute_capability,
        engine=engine if engine in ACCOUNTING_ENGINES else "vllm",
        engine_version=row.engine_version or None,
    )


def _saturation_batch(row: Measurement, inputs: CapacityInputs, gpu: GPUSpec) -> tuple[float, str]:
    i, o = row.input_tokens, row.output_tokens
    engine = engine_family(row.engine)
    if engine == "trtllm":
        gpus = inputs.tensor_parallel_size
        engine_bytes = weights_bytes_per_gpu(inputs) * gpus
        kv_per_token = kv_bytes_per_token_per_gpu(inputs) * gpus
        free = gpu.memory_bytes * gpus - engine_bytes
        requests = TRTLLM_BENCH_KV_FRACTION * free / (kv_per_token * (i + o))
        return max(1.0, min(float(TRTLLM_BENCH_MAX_BATCH), requests)), "trtllm-bench"
    pool = capacity_pass(inputs).kv_cache_tokens
    ceiling = pool / (i + o / 2)
    if engine == "sglang":
        cap = float(SGLANG_MAX_RUNNING)
    else:
        cap = float(vllm_default_max_num_seqs(row.engine_version or None, gpu.memory_bytes, gpu.name))
    return max(1.0, min(cap, ceiling)), "kv-ceiling"


def row_setup(row: Measurement) -> RowSetup | str:
    """The :class:`RowSetup` of ``row``, or the reason it cannot be predicted (a string)."""
    notes = row.notes
    if _DP_EP.search(row.id) or "enable_attention_dp true" in notes:
        return "attention data-parallel + expert-parallel layout: no tensor-parallel replica to model"
    try:
        gpu = get_gpu(row.gpu)
        inputs = _inputs(row, gpu)
    except AdvisorError as exc:
        return f"no model: {exc}"
    if row.gpu_count != row.tp:
        return f"{row.gpu_count} GPUs at TP {row.tp}: pipeline/data parallel layouts are not modelled"
    poisson = _POISSON.search(notes)
    arrival: float | None = None
    if row.concurrency is not None:
        batch, rule = float(row.concurrency), "stated"
    elif poisson and row.setting == "serving":
        arrival = float(poisson.group(1))
        batch, rule = arrival, "poisson"
    else:
        try:
            batch, rule = _saturation_batch(row, inputs, gpu)
        except AdvisorError as exc:
            return f"no KV ceiling: {exc}"
        sent = _PROMPTS.search(notes)
        if sent and float(sent.group(1).replace(",", "")) <= batch:
            return (
                f"saturation run of {sent.group(1)} prompts ≤ the batch ({batch:.0f}): one wave whose length is set by "
                "the longest output, not a steady state"
            )
    return RowSetup(
        row=row,
        inputs=inputs,
        gpu=gpu,
        batch=batch,
        batch_rule=rule,
        static_batching=bool(_STATIC_BATCHING.search(notes)) and row.setting == "static",
        median_itl=bool(_MEDIAN_ITL.search(notes)),
        arrival_rate=arrival,
    )


def static_assumptions(assumptions: PerfAssumptions, static_overhead_fraction: float) -> PerfAssumptions:
    """The factors a static (serverless) run sees: no per-request overhead, the per-step and per-sequence step
    overheads scaled by ``static_overhead_fraction`` (0–1)."""
    return dataclasses.replace(
        assumptions,
        step_overhead_seconds=assumptions.step_overhead_seconds * static_overhead_fraction,
        step_overhead_per_seq_seconds=assumptions.step_overhead_per_seq_seconds * static_overhead_fraction,
        prefill_overhead_seconds=0.0,
    )


def _serving(setup: RowSetup, a: PerfAssumptions, batch: float) -> dict[str, float]:
    inputs, gpu = setup.inputs, setup.gpu
    i, o = float(setup.row.input_tokens), float(setup.row.output_tokens)
    ctx = i + o / 2
    b = max(1.0, batch)
    step = decode_step_model(inputs, gpu, ctx, a)
    others = b - 1.0
    tpot = step(b) if setup.median_itl else mixed_step_seconds(inputs, gpu, b, ctx, others / o, i, a)
    carry = mixed_step_seconds(inputs, gpu, others, ctx, 1.0 + others / o, i, a)
    wait = 0.5 * mixed_step_seconds(inputs, gpu, others, ctx, others / o, i, a) if others > 0 else 0.0
    ttft = a.prefill_overhead_seconds + wait + carry
    mean_tpot = tpot if not setup.median_itl else mixed_step_seconds(inputs, gpu, b, ctx, others / o, i, a)
    life = ttft + (o - 1.0) * mean_tpot
    return {
        "tpot_seconds": tpot,
        "ttft_seconds": ttft,
        "e2e_latency_seconds": life,
        "output_tokens_per_second": b * o / life,
        "total_tokens_per_second": b * (i + o) / life,
        "output_tokens_per_second_per_user": 1.0 / tpot,
    }


def _static(setup: RowSetup, a: PerfAssumptions) -> dict[str, float]:
    inputs, gpu = setup.inputs, setup.gpu
    i, o = float(setup.row.input_tokens), float(setup.row.output_tokens)
    ctx = i + o / 2
    b = max(1.0, setup.batch)
    step = decode_step_model(inputs, gpu, ctx, a)(b)
    if setup.static_batching or (setup.batch_rule == "stated" and b == 1):
        prefill = prefill_batch_seconds(inputs, gpu, i, b, a)
        e2e = prefill + (o - 1.0) * step
        return {
            "tpot_seconds": step,
            "ttft_seconds": prefill,
            "e2e_latency_seconds": e2e,
            "output_tokens_per_second": b * o / e2e,
            "total_tokens_per_second": b * (i + o) / e2e,
            "output_tokens_per_second_per_user": 1.0 / step,
        }
    mixed = mixed_step_seconds(inputs, gpu, b, ctx, b / o, i, a)
    prefill = prefill_batch_seconds(inputs, gpu, i, 1.0, a)
    return {
        "tpot_seconds": mixed,
        "ttft_seconds": prefill,
        "e2e_latency_seconds": prefill + (o - 1.0) * mixed,
        "output_tokens_per_second": b / mixed,
        "total_tokens_per_second": b * (i + o) / o / mixed,
        "output_tokens_per_second_per_user": 1.0 / mixed,
    }


def predict(
    setup: RowSetup,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
    static_overhead_fraction: float = 1.0,
) -> float:
    """The model's value of ``setup.row.metric`` (in that metric's unit, :data:`~advisor.capacity.perfdata.METRICS`)
    with ``assumptions`` as a serving deployment's factors; static rows see :func:`static_assumptions`.

    Raises:
        CapacityError: the GPU lacks a figure the roofline needs (e.g. no dense BF16 rate).
    """
    metric = setup.row.metric
    if setup.row.setting == "static":
        return _static(setup, static_assumptions(assumptions, static_overhead_fraction))[metric]
    batch = setup.batch
    if setup.arrival_rate is not None:  # open loop: B = λ × L(B)
        for _ in range(30):
            life = _serving(setup, assumptions, batch)["e2e_latency_seconds"]
            new = max(1.0, setup.arrival_rate * life)
            if math.isclose(new, batch, rel_tol=1e-4):
                break
            batch = 0.5 * (batch + new)
    return _serving(setup, assumptions, batch)[metric]
