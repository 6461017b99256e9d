"""The engine flag for each dial.

"Exact flag names vary by engine; the dials do not." This table gives the command-line change an
operator makes for a dial turn. vLLM flags are from ``vllm/engine/arg_utils.py`` (``EngineArgs``,
``add_cli_args``) and the serving docs (docs.vllm.ai, "Engine Arguments"); they have been stable
across 0.6–0.33 for the dials below.
"""

from __future__ import annotations

from typing import Any

from advisor import conventions as c

_VLLM: dict[str, str] = {
    c.DIAL_MAX_NUM_SEQS: "--max-num-seqs {value}",
    c.DIAL_MAX_NUM_BATCHED_TOKENS: "--max-num-batched-tokens {value}",
    c.DIAL_GPU_MEMORY_UTILIZATION: "--gpu-memory-utilization {value}",
    c.DIAL_WEIGHT_QUANTIZATION: "--quantization {value}",
    c.DIAL_KV_CACHE_DTYPE: "--kv-cache-dtype {value}",
    c.DIAL_TENSOR_PARALLEL_SIZE: "--tensor-parallel-size {value}",
    c.DIAL_SPECULATIVE_DECODING: "--speculative-config '{value}'",
    c.DIAL_MAX_MODEL_LEN: "--max-model-len {value}",
    c.DIAL_CHUNKED_PREFILL: "--enable-chunked-prefill",
    c.DIAL_PREFIX_CACHING: "--enable-prefix-caching",
    c.DIAL_REPLICAS: "scale to {value} replicas (e.g. kubectl scale deployment/<name> --replicas={value})",
    c.DIAL_INSTANCE_TYPE: "move to instance type {value}",
}

FLAGS: dict[str, dict[str, str]] = {"vllm": _VLLM}


def flag_for(engine: str, dial: str, value: Any) -> str:
    """The exact change for ``dial`` set to ``value`` on ``engine``, e.g. ``--max-model-len 16384``.

    Raises:
        KeyError: the engine or the dial has no entry (a programming error: every dial is in the table).
    """
    template = FLAGS[engine][dial]
    return template.format(value=value)
