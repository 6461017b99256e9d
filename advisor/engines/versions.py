"""Version hints: what the metric names an engine exposes say about its release. Pure.

Engines do not export their version on ``/metrics``; the names they register do change with releases
(the rename timelines in ``../shared/reference/engine-metrics-catalog.md`` §1.5 and §11). Each hint names
the evidence, so an operator can check it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from advisor.domain import Sample
from advisor.engines.catalog import entry

_VLLM_RULES: tuple[tuple[str, str], ...] = (
    ("vllm:kv_cache_usage_perc", "vLLM ≥ 0.9 (has vllm:kv_cache_usage_perc)"),
    ("vllm:request_time_per_output_token_seconds_count", "vLLM ≥ 0.11 (per-request TPOT histogram)"),
    ("vllm:num_requests_waiting_by_reason", "vLLM ≥ 0.20 (waiting split by reason)"),
    ("vllm:num_requests_swapped", "vLLM V0 engine (num_requests_swapped)"),
)
_SGLANG_RULES: tuple[tuple[str, str], ...] = (
    ("sglang:full_token_usage", "SGLang ≥ 0.5 (full_token_usage)"),
    ("sglang:num_retracted_requests_total", "SGLang ≥ 0.5 (cumulative retractions)"),
    ("sglang:func_latency_seconds_count", "SGLang ≈ 0.3–0.4.0 (func_latency_seconds)"),
)


def version_hints(engine: str | None, exposition: Mapping[str, Sequence[Sample]] | Collection[str]) -> list[str]:
    """Hints about the engine's release from the sample names (and ``cache_config_info`` labels).

    Example: an exposition with ``vllm:gpu_cache_usage_perc`` and no ``vllm:kv_cache_usage_perc`` →
    ``["vLLM < 0.9 or V0 (only the old vllm:gpu_cache_usage_perc)"]``. A page whose gauges carry Triton's
    ``model`` label instead of vLLM's ``model_name`` (``triton-inference-server/vllm_backend``
    ``src/utils/metrics.py``) is hinted as the Triton vLLM backend, never dated by its missing ``engine`` label.
    """
    names = set(exposition)
    hints: list[str] = []
    if engine == "vllm":
        hints += [hint for name, hint in _VLLM_RULES if name in names]
        if "vllm:gpu_cache_usage_perc" in names and "vllm:kv_cache_usage_perc" not in names:
            hints.append("vLLM < 0.9 or V0 (only the old vllm:gpu_cache_usage_perc)")
        if isinstance(exposition, Mapping):
            info = exposition.get("vllm:cache_config_info", ())
            if any("kv_cache_size_tokens" in s.labels for s in info):
                hints.append(
                    "vLLM after 0.20.2, 0.32 or later (cache_config_info has kv_cache_size_tokens: vllm PR #42206)"
                )
            gauges = exposition.get("vllm:num_requests_running", ())
            native, *reexport = entry("vllm").labels["model"]  # model_name; Triton's model (vllm.py)
            if (
                gauges
                and not any(native in s.labels for s in gauges)
                and any(label in s.labels for s in gauges for label in reexport)
            ):
                # Triton's vLLM backend re-exports with its own labels: the absent engine label dates nothing
                hints.append("Triton vLLM backend (model/version labels)")
            elif gauges and not any("engine" in s.labels for s in gauges):
                hints.append("vLLM 0.7.x V1 or V0 (no engine label)")
    elif engine == "sglang":
        canon = {n.replace("sglang_", "sglang:", 1) if n.startswith("sglang_") else n for n in names}
        hints += [hint for name, hint in _SGLANG_RULES if name in canon]
        if any(n.startswith("sglang_") for n in names):
            hints.append("sglang_ prefix: scraped through a relabelling layer or an older multiprocess exporter")
    elif engine == "llamacpp" and "llamacpp:kv_cache_usage_ratio" in names:
        hints.append("llama.cpp before May 2025 (KV metrics, removed by PR #13660)")
    elif engine == "triton-trtllm" and any(n.endswith("_statistics") for n in names):
        hints.append("Triton TensorRT-LLM backend before Dec 2023 (*_statistics names)")
    return hints
