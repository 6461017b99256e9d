"""Published serving measurements the roofline (:mod:`advisor.capacity.perf`) is calibrated against (issue 17).

``advisor/data/perf_measurements.csv`` holds one measurement per row, each linked to where it is published
(TensorRT-LLM's performance overview, NVIDIA NIM benchmark pages, vLLM/SGLang posts, MLPerf Inference results,
AMD's MI300X docs, papers' tables). Columns (:data:`MEASUREMENT_FIELDS`):

``id``
    unique slug.
``source``
    the page the figure is read from (exact URL); the hold-out split hashes it (:func:`held_out`).
``quote``
    the table row / sentence the figure comes from, verbatim (trimmed).
``engine``, ``engine_version``
    ``vllm``, ``sglang``, ``trtllm``, ``tgi``, … and its version as the source states it ("" when it does not).
``setting``
    ``serving`` (an HTTP server under a load generator: queueing, scheduling and detokenizing included) or
    ``static`` (an offline batch benchmark without a server, e.g. ``trtllm-bench`` throughput, vLLM's
    ``benchmark_throughput.py``/``benchmark_latency.py``, MLPerf Offline): static runs measure the engine
    without the server's per-step CPU work and run above serving stacks, so the fit treats them apart.
``model``
    a preset id of ``advisor/data/models.json`` (or a ``tests/fixtures/...`` config path).
``gpu``, ``gpu_count``, ``tp``
    catalog key of ``advisor/data/gpus.csv``; GPUs per replica; tensor-parallel size.
``weight_precision``, ``kv_cache_dtype``
    ``bf16``/``fp16``/``fp8``/``fp4``/``int4`` (as the source states); ``auto`` when not stated.
``concurrency``
    requests in flight (serving) or batch size (static); for a throughput run at "max" batch, the engine's
    batch as stated, else empty.
``input_tokens``, ``output_tokens``
    per request.
``metric``, ``value``
    one of :data:`METRICS` and its value in that metric's unit.
``notes``
    anything the reader needs (e.g. speculative decoding off, chunked prefill, inferred inputs).

The hold-out third is fixed by a hash of the source URL (:func:`held_out`), decided before any fit, so the
reported error is on measurements the fit never saw.
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from typing import Final

from advisor.capacity.data import read_data
from advisor.errors import CapacityError

__all__ = ["MEASUREMENT_FIELDS", "METRICS", "SETTINGS", "Measurement", "held_out", "measurements"]

MEASUREMENT_FIELDS: Final = (
    "id",
    "source",
    "quote",
    "engine",
    "engine_version",
    "setting",
    "model",
    "gpu",
    "gpu_count",
    "tp",
    "weight_precision",
    "kv_cache_dtype",
    "concurrency",
    "input_tokens",
    "output_tokens",
    "metric",
    "value",
    "notes",
)
"""The columns of ``advisor/data/perf_measurements.csv``, in order."""

METRICS: Final = {
    "output_tokens_per_second": "output tokens/s of the whole replica (all requests)",
    "output_tokens_per_second_per_user": "output tokens/s one request sees (1 ÷ TPOT)",
    "total_tokens_per_second": "input + output tokens/s of the replica",
    "tpot_seconds": "time per output token (mean inter-token latency), seconds",
    "ttft_seconds": "time to first token, seconds",
    "e2e_latency_seconds": "end-to-end request latency, seconds",
}
"""The measured quantities a row may give, with their units."""

SETTINGS: Final = ("serving", "static")
"""How a row was measured (see the module docstring)."""


def held_out(source: str) -> bool:
    """Whether the measurements of ``source`` (a URL) are held out of the fit: the first third of the SHA-256 of
    the URL's UTF-8 bytes (``int(sha256) mod 3 == 0``). A page's rows are all in or all out, so a table can't leak
    into its own test."""
    return int(hashlib.sha256(source.strip().encode("utf-8")).hexdigest(), 16) % 3 == 0


@dataclass(frozen=True)
class Measurement:
    """One published measurement (a row of ``perf_measurements.csv``; units per :data:`METRICS`)."""

    id: str
    source: str
    quote: str
    engine: str
    engine_version: str
    setting: str
    model: str
    gpu: str
    gpu_count: int
    tp: int
    weight_precision: str
    kv_cache_dtype: str
    concurrency: int | None
    input_tokens: int
    output_tokens: int
    metric: str
    value: float
    notes: str

    @property
    def held_out(self) -> bool:
        """:func:`held_out` of :attr:`source`."""
        return held_out(self.source)


def _row(raw: dict[str, str], line: int) -> Measurement:
    def need(key: str) -> str:
        value = (raw.get(key) or "").strip()
        if not value:
            raise CapacityError(f"perf_measurements.csv line {line}: {key} is empty")
        return value

    def integer(key: str, optional: bool = False) -> int | None:
        text = (raw.get(key) or "").strip()
        if not text and optional:
            return None
        try:
            value = int(text)
        except ValueError:
            raise CapacityError(f"perf_measurements.csv line {line}: {key} is not an integer: {text!r}") from None
        if value < 1:
            raise CapacityError(f"perf_measurements.csv line {line}: {key} must be ≥ 1, got {value}")
        return value

    metric, setting = need("metric"), need("setting")
    if metric not in METRICS:
        raise CapacityError(f"perf_measurements.csv line {line}: metric {metric!r} is not one of {', '.join(METRICS)}")
    if setting not in SETTINGS:
        raise CapacityError(f"perf_measurements.csv line {line}: setting {setting!r} is not serving or static")
    try:
        value = float(need("value"))
    except ValueError:
        raise CapacityError(f"perf_measurements.csv line {line}: value is not a number: {raw['value']!r}") from None
    if not value > 0:
        raise CapacityError(f"perf_measurements.csv line {line}: value must be > 0, got {value}")
    return Measurement(
        id=need("id"),
        source=need("source"),
        quote=need("quote"),
        engine=need("engine"),
        engine_version=(raw.get("engine_version") or "").strip(),
        setting=setting,
        model=need("model"),
        gpu=need("gpu"),
        gpu_count=integer("gpu_count") or 1,
        tp=integer("tp") or 1,
        weight_precision=need("weight_precision"),
        kv_cache_dtype=(raw.get("kv_cache_dtype") or "auto").strip() or "auto",
        concurrency=integer("concurrency", optional=True),
        input_tokens=integer("input_tokens") or 1,
        output_tokens=integer("output_tokens") or 1,
        metric=metric,
        value=value,
        notes=(raw.get("notes") or "").strip(),
    )


def measurements(text: str | None = None) -> list[Measurement]:
    """The rows of ``advisor/data/perf_measurements.csv`` (or of ``text`` in that format), validated.

    Raises:
        CapacityError: a missing column, an empty required field, a number that is not one, an unknown metric or
            setting, or a duplicate id (the message names the line and the field).
    """
    reader = csv.DictReader(io.StringIO(read_data("perf_measurements.csv") if text is None else text))
    missing = [f for f in MEASUREMENT_FIELDS if f not in (reader.fieldnames or [])]
    if missing:
        raise CapacityError(f"perf_measurements.csv: missing columns {', '.join(missing)}")
    rows: list[Measurement] = []
    seen: set[str] = set()
    for line, raw in enumerate(reader, start=2):
        row = _row(raw, line)
        if row.id in seen:
            raise CapacityError(f"perf_measurements.csv line {line}: duplicate id {row.id!r}")
        seen.add(row.id)
        rows.append(row)
    return rows
