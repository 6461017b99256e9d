"""The engine flag (or config key) for each dial, per engine.

"Exact flag names vary by engine; the dials do not." A recommendation shows the change for the engine in
front of it. Sources, by engine:

* vLLM — ``vllm/engine/arg_utils.py`` (``EngineArgs.add_cli_args``) and docs.vllm.ai "Engine Arguments".
  ``--speculative-config`` (JSON) exists from 0.8 (PR #14434); ``disable_by_batch_size`` in it is ignored from
  0.10 and was removed (PR #35060), so the advice does not rely on it.
* SGLang — ``python/sglang/srt/server_args.py`` (``ServerArgs.add_cli_args``).
* TGI — ``launcher/src/main.rs`` (``Args``, v3.3.7) and docs "Text Generation Inference launcher arguments".
* TensorRT-LLM ``trtllm-serve`` — ``tensorrt_llm/commands/serve.py`` options; weight quantization is a
  checkpoint/engine-build choice (ModelOpt), not a serve flag. The Triton ``tensorrtllm`` backend serves a built
  engine: its batch, token budget, sequence length and TP are ``trtllm-build`` (and checkpoint) options.
* llama.cpp server — ``tools/server/README.md`` (``llama-server --help``); weight precision is the GGUF file.
* Dynamo — the frontend has no engine dials: they are set on the worker (its engine's flags).

Dials with no flag on an engine say what to change instead (a different checkpoint, a rebuild, the
orchestrator's replica count).
"""

from __future__ import annotations

from typing import Any, Final

from advisor import conventions as c

_REPLICAS = "scale to {value} replica(s) (e.g. kubectl scale deployment/<name> --replicas={value})"
_INSTANCE = "move to {value}"

_VLLM: dict[str, str] = {
    c.DIAL_MAX_NUM_SEQS: "--max-num-seqs {value}",
    c.DIAL_MAX_NUM_BATCHED_TOKENS: "--max-num-batched-tokens {value}",
    c.DIAL_GPU_MEMORY_UTILIZATION: "--gpu-memory-utilization {value}",
    c.DIAL_KV_CACHE_MEMORY_BYTES: "--kv-cache-memory-bytes {value}",
    c.DIAL_WEIGHT_QUANTIZATION: "--quantization {value}",
    c.DIAL_KV_CACHE_DTYPE: "--kv-cache-dtype {value}",
    c.DIAL_TENSOR_PARALLEL_SIZE: "--tensor-parallel-size {value}",
    c.DIAL_SPECULATIVE_DECODING: "--speculative-config '{value}'",
    c.DIAL_MAX_MODEL_LEN: "--max-model-len {value}",
    c.DIAL_CHUNKED_PREFILL: "--enable-chunked-prefill",
    c.DIAL_PREFIX_CACHING: "--enable-prefix-caching",
    # SchedulerConfig.policy "fcfs" | "priority" orders the waiting queue; neither holds back a request that does not
    # fit (vllm/config/scheduler.py): there is no whole-request admission flag to emit
    c.DIAL_ADMISSION_POLICY: (
        "vLLM has no whole-request admission flag (--scheduling-policy only orders the queue): lower --max-num-seqs "
        "to the requests the pool holds, or hold long requests back in a routing layer"
    ),
    c.DIAL_REPLICAS: _REPLICAS,
    c.DIAL_INSTANCE_TYPE: _INSTANCE,
}

_SGLANG: dict[str, str] = {
    c.DIAL_MAX_NUM_SEQS: "--max-running-requests {value}",
    c.DIAL_MAX_NUM_BATCHED_TOKENS: "--chunked-prefill-size {value}",
    c.DIAL_GPU_MEMORY_UTILIZATION: "--mem-fraction-static {value}",
    c.DIAL_KV_CACHE_MEMORY_BYTES: (
        "SGLang has no byte budget for the pool: size it with --mem-fraction-static (or pin tokens with "
        "--max-total-tokens); vLLM-equivalent {value} bytes per GPU"
    ),
    c.DIAL_WEIGHT_QUANTIZATION: "--quantization {value}",
    c.DIAL_KV_CACHE_DTYPE: "--kv-cache-dtype {value}",
    c.DIAL_TENSOR_PARALLEL_SIZE: "--tp-size {value}",
    c.DIAL_SPECULATIVE_DECODING: "--speculative-algorithm NGRAM --speculative-num-draft-tokens {value}",
    c.DIAL_MAX_MODEL_LEN: "--context-length {value}",
    c.DIAL_CHUNKED_PREFILL: "--chunked-prefill-size {value}",
    c.DIAL_PREFIX_CACHING: "radix cache is on by default (remove --disable-radix-cache)",
    # server_args.py --schedule-conservativeness (default 1.0): "Increase this if you notice frequent request
    # retractions"; it scales new_token_ratio, the decode budget reserved per running request before admitting more
    c.DIAL_ADMISSION_POLICY: (
        "--schedule-conservativeness 1.3 (default 1.0: reserve more of the pool for running requests' remaining "
        "output before admitting new ones; SGLang's server arguments: raise it when requests are retracted often)"
    ),
    c.DIAL_REPLICAS: _REPLICAS,
    c.DIAL_INSTANCE_TYPE: _INSTANCE,
}

_TGI: dict[str, str] = {
    c.DIAL_MAX_NUM_SEQS: "--max-batch-size {value}",
    c.DIAL_MAX_NUM_BATCHED_TOKENS: "--max-batch-prefill-tokens {value}",
    c.DIAL_GPU_MEMORY_UTILIZATION: "--cuda-memory-fraction {value}",
    c.DIAL_KV_CACHE_MEMORY_BYTES: (
        "TGI has no byte budget for the pool: it sizes --max-batch-total-tokens from --cuda-memory-fraction; "
        "vLLM-equivalent {value} bytes per GPU"
    ),
    c.DIAL_WEIGHT_QUANTIZATION: "--quantize {value}",
    c.DIAL_KV_CACHE_DTYPE: "--kv-cache-dtype {value}",
    c.DIAL_TENSOR_PARALLEL_SIZE: "--num-shard {value}",
    c.DIAL_SPECULATIVE_DECODING: "--speculate {value}",
    c.DIAL_MAX_MODEL_LEN: "--max-total-tokens {value}",
    c.DIAL_CHUNKED_PREFILL: "chunked prefill is on by default in TGI 3.x (--max-batch-prefill-tokens sets the chunk)",
    c.DIAL_PREFIX_CACHING: "PREFIX_CACHING=1 (environment)",
    c.DIAL_ADMISSION_POLICY: (
        "TGI's router already admits whole requests against --max-batch-total-tokens; lower --max-total-tokens "
        "so that long requests cannot take the whole budget"
    ),
    c.DIAL_REPLICAS: _REPLICAS,
    c.DIAL_INSTANCE_TYPE: _INSTANCE,
}

_TRTLLM: dict[str, str] = {
    c.DIAL_MAX_NUM_SEQS: "--max_batch_size {value}",
    c.DIAL_MAX_NUM_BATCHED_TOKENS: "--max_num_tokens {value}",
    # the dial's value on TensorRT-LLM is this fraction itself (advisor.capacity.engines.memory_budget)
    c.DIAL_GPU_MEMORY_UTILIZATION: (
        "--kv_cache_free_gpu_memory_fraction {value} (a share of the memory the weights and activations leave)"
    ),
    c.DIAL_KV_CACHE_MEMORY_BYTES: (
        "kv_cache_config.max_tokens (--extra_llm_api_options YAML) pins the pool in tokens; vLLM-equivalent "
        "{value} bytes per GPU"
    ),
    c.DIAL_WEIGHT_QUANTIZATION: "serve a {value} checkpoint (quantize with TensorRT Model Optimizer)",
    c.DIAL_KV_CACHE_DTYPE: "kv_cache_config.dtype: {value} (--extra_llm_api_options YAML)",
    c.DIAL_TENSOR_PARALLEL_SIZE: "--tp_size {value}",
    c.DIAL_SPECULATIVE_DECODING: "speculative_config (--extra_llm_api_options YAML): {value}",
    c.DIAL_MAX_MODEL_LEN: "--max_seq_len {value}",
    c.DIAL_CHUNKED_PREFILL: "enable_chunked_prefill: true (--extra_llm_api_options YAML)",
    c.DIAL_PREFIX_CACHING: "kv_cache_config.enable_block_reuse: true (--extra_llm_api_options YAML)",
    c.DIAL_ADMISSION_POLICY: (
        "scheduler_config.capacity_scheduler_policy: GUARANTEED_NO_EVICT (--extra_llm_api_options YAML)"
    ),
    c.DIAL_REPLICAS: _REPLICAS,
    c.DIAL_INSTANCE_TYPE: _INSTANCE,
}

_LLAMACPP: dict[str, str] = {
    c.DIAL_MAX_NUM_SEQS: "--parallel {value}",
    c.DIAL_MAX_NUM_BATCHED_TOKENS: "--batch-size {value}",
    c.DIAL_GPU_MEMORY_UTILIZATION: (
        "llama.cpp has no memory-budget flag: size the cache with --ctx-size <tokens> and fewer --parallel slots"
    ),
    c.DIAL_KV_CACHE_MEMORY_BYTES: (
        "llama.cpp sizes the cache in tokens: --ctx-size <tokens> (vLLM-equivalent {value} bytes per GPU)"
    ),
    c.DIAL_WEIGHT_QUANTIZATION: "serve a {value} GGUF file (e.g. Q4_K_M)",
    c.DIAL_KV_CACHE_DTYPE: "--cache-type-k {value} --cache-type-v {value}",
    # llama.cpp's default --split-mode layer ("split layers and KV across GPUs", common/arg.cpp): how the capacity
    # pass and the step model read its GPU count (advisor.capacity.engines.llamacpp_capacity, perf.timed_inputs)
    c.DIAL_TENSOR_PARALLEL_SIZE: "--split-mode layer --tensor-split 1,1,… (layers and KV across {value} GPUs)",
    c.DIAL_SPECULATIVE_DECODING: "--model-draft <draft.gguf> --draft-max {value}",
    # a request is capped at one slot, --ctx-size ÷ --parallel (n_ctx_seq, src/llama-context.cpp): --ctx-size {value}
    # would shrink every slot, so the cap is said as the slot size it implies, never as --ctx-size alone
    c.DIAL_MAX_MODEL_LEN: (
        "a request is capped at one slot (--ctx-size ÷ --parallel): serve at most {value} tokens per request "
        "with --ctx-size = {value} × --parallel (or tell clients {value} is the limit)"
    ),
    c.DIAL_CHUNKED_PREFILL: "--ubatch-size {value}",
    c.DIAL_PREFIX_CACHING: "--cache-reuse {value}",
    c.DIAL_ADMISSION_POLICY: "no admission-policy flag; put a queueing proxy in front",
    c.DIAL_REPLICAS: _REPLICAS,
    c.DIAL_INSTANCE_TYPE: _INSTANCE,
}

_WORKER = "set on the Dynamo worker (its engine's flag for {dial}) to {value}"

_TRITON_TRTLLM: dict[str, str] = {
    **_TRTLLM,
    # the Triton tensorrtllm backend runs a prebuilt engine: its batch, token budget and sequence length are
    # build-time limits (docs "Model Configuration": "the runtime batch size will be determined by the TRT-LLM
    # scheduler based on ... the engine build trtllm-build parameters (such max_num_tokens and max_batch_size)"),
    # trtllm-build's options in https://nvidia.github.io/TensorRT-LLM/commands/trtllm-build.html
    c.DIAL_MAX_NUM_SEQS: (
        "rebuild the engine with trtllm-build --max_batch_size {value} (a built engine's batch cannot exceed its "
        "build; Triton's triton_max_batch_size does not raise it)"
    ),
    c.DIAL_MAX_NUM_BATCHED_TOKENS: "rebuild the engine with trtllm-build --max_num_tokens {value}",
    c.DIAL_MAX_MODEL_LEN: "rebuild the engine with trtllm-build --max_seq_len {value}",
    # triton_backend docs/model_config.md: "kv_cache_free_gpu_mem_fraction" (default 0.9 of the free memory)
    c.DIAL_GPU_MEMORY_UTILIZATION: "kv_cache_free_gpu_mem_fraction:{value} in tensorrt_llm/config.pbtxt",
    # the other tensorrt_llm/config.pbtxt parameters of the same docs (the trtllm-serve YAML keys of _TRTLLM are not
    # read by the backend: breaker 21 saw "kv_cache_config.dtype … --extra_llm_api_options" on a Triton deployment)
    c.DIAL_KV_CACHE_MEMORY_BYTES: (
        "max_tokens_in_paged_kv_cache in tensorrt_llm/config.pbtxt pins the pool in tokens; vLLM-equivalent {value} "
        "bytes per GPU"
    ),
    c.DIAL_PREFIX_CACHING: "enable_kv_cache_reuse:true in tensorrt_llm/config.pbtxt",
    c.DIAL_CHUNKED_PREFILL: "enable_chunked_context:true in tensorrt_llm/config.pbtxt",
    # a built engine's KV dtype and weights are the checkpoint's: quantize (examples/quantization/quantize.py
    # --kv_cache_dtype / --qformat) and rebuild
    c.DIAL_KV_CACHE_DTYPE: (
        "quantize the checkpoint with --kv_cache_dtype {value} (TensorRT Model Optimizer) and rebuild the engine "
        "(trtllm-build)"
    ),
    c.DIAL_WEIGHT_QUANTIZATION: (
        "quantize the checkpoint to {value} (TensorRT Model Optimizer) and rebuild the engine (trtllm-build)"
    ),
    c.DIAL_TENSOR_PARALLEL_SIZE: "convert the checkpoint with --tp_size {value} and rebuild the engine (trtllm-build)",
    # triton_backend docs/model_config.md: batch_scheduler_policy max_utilization | guaranteed_no_evict (the default)
    c.DIAL_ADMISSION_POLICY: "batch_scheduler_policy:guaranteed_no_evict in tensorrt_llm/config.pbtxt",
    # the backend runs the speculation its engine was built for (trtllm-build --speculative_decoding_mode,
    # --max_draft_len); the LLM API's speculative_config YAML is trtllm-serve's, not read here. The turn is priced as a
    # draft-free speculation (no draft weights, no draft KV): lookahead decoding is the draft-free mode such an engine
    # builds with (a draft model, draft_tokens_external through tensorrt_llm_bls, would also cost its weights)
    # lookahead's draft buffer is max_draft_len ≥ (W + G)(N − 1) − 1 (TensorRT-LLM examples/lookahead): W = G = 4,
    # N = 3 → 15, up to N − 1 = 2 tokens beyond the step's own, the ~2.3 a step the turn is priced at (the dial's
    # value, a draft length for other engines, is not lookahead's buffer)
    c.DIAL_SPECULATIVE_DECODING: (
        "rebuild the engine with trtllm-build --speculative_decoding_mode lookahead_decoding --max_draft_len 15 and "
        "set lookahead window 4, n-gram size 3, verification set 4 in tensorrt_llm/config.pbtxt (draft-free)"
    ),
}

FLAGS: dict[str, dict[str, str]] = {
    "vllm": _VLLM,
    "sglang": _SGLANG,
    "tgi": _TGI,
    "triton-trtllm": _TRITON_TRTLLM,
    "trtllm": _TRTLLM,
    "llamacpp": _LLAMACPP,
}


_DRAFT_LENGTH: dict[str, str] = {
    # only the draft length changes: vLLM refuses a --speculative-config with num_speculative_tokens and no model for
    # a method that needs one ("num_speculative_tokens was provided but without speculative model",
    # vllm/config/speculative.py), so the flag names the key to change inside the config that runs
    "vllm": ('--speculative-config with "num_speculative_tokens": {value} (keep its method, model and other keys)'),
    "llamacpp": "--draft-max {value} (keep --model-draft)",
}
"""The change that shortens a running speculation's draft to ``value`` tokens, per engine whose draft length the
advisor sets (those that count accepted tokens by draft position)."""


def draft_length_flag(engine: str, value: int) -> str | None:
    """The change that sets a running speculation's draft length to ``value`` tokens on ``engine``, e.g.
    ``--draft-max 2 (keep --model-draft)``; ``None`` for an engine without one here."""
    template = _DRAFT_LENGTH.get(engine)
    return None if template is None else template.format(value=value)


_MTP: dict[str, str] = {
    # vllm/config/speculative.py: "mtp" loads the target checkpoint's own multi-token-prediction layers (the
    # per-model names such as deepseek_mtp are its older aliases, :func:`mtp_method`)
    "vllm": """--speculative-config '{{"method": "{method}", "num_speculative_tokens": {value}}}'""",
    # SGLang's DeepSeek guide ("Multi-token Prediction"): the NextN layer runs as an EAGLE draft of one step
    "sglang": (
        "--speculative-algorithm EAGLE --speculative-num-steps {value} --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens {draft_tokens}"
    ),
    # tensorrt_llm/llmapi/llm_args.py MTPDecodingConfig
    "trtllm": (
        "speculative_config: {{decoding_type: MTP, num_nextn_predict_layers: {value}}} (--extra_llm_api_options YAML)"
    ),
}
"""The change that turns on speculation of ``value`` draft tokens from the checkpoint's own multi-token-prediction
layers (DeepSeek-V3/R1's NextN layer, GLM-4.5's, Qwen3-Next's), per engine that loads them."""


SPECULATION_SINCE: Final[dict[str, tuple[int, ...]]] = {"tgi": (1, 3, 0)}
"""First release of an engine that can speculate, where its early releases cannot: TGI's ``--speculate`` (n-gram,
Medusa) arrived in v1.3.0 (commit 9ecfa16b, "Speculative (#1308)", December 2023; the v1.2.0 launcher has no such
flag and refuses it). Engines not listed: every release the advisor reads can."""


def speculation_available(engine: str, version: tuple[int, ...] | None) -> bool:
    """Whether ``engine`` at ``version`` (``None``: unknown, taken as current) can speculate
    (:data:`SPECULATION_SINCE`)."""
    since = SPECULATION_SINCE.get(engine)
    return since is None or version is None or version >= since


VLLM_MTP_UNIFIED_SINCE: Final = (0, 11)
"""vLLM release whose speculative config takes the one method name ``mtp`` for every checkpoint's MTP layers
(vllm-project/vllm#25232, merged 2025-09, "consolidates them into one 'mtp' method"); before it, one name per model."""

VLLM_SPECULATIVE_CONFIG_SINCE: Final = (0, 8)
"""vLLM release from which speculation is set by ``--speculative-config '{json}'`` (before: ``--speculative-model``,
``--num-speculative-tokens``; the MTP layers of 0.7.3 were turned on by those, vllm-project/vllm#12755)."""

VLLM_MTP_METHOD_BEFORE: Final = {
    "deepseek_v3": "deepseek_mtp",
    "deepseek_v32": "deepseek_mtp",
    "qwen3_next": "qwen3_next_mtp",
    "mimo": "mimo_mtp",
    "ernie4_5_moe": "ernie_mtp",
    "glm4_moe": "glm4_moe_mtp",
}
"""vLLM's per-model MTP method before :data:`VLLM_MTP_UNIFIED_SINCE`, by ``config.json`` ``model_type`` (the
names #25232 folded into ``mtp``; ``deepseek_mtp`` from #12755, 0.7.3)."""


VLLM_DEEPSEEK_MTP_SINCE: Final = (0, 7, 3)
"""vLLM release whose V0 speculative decoding reads DeepSeek-V3/R1's MTP layer from the checkpoint
(vllm-project/vllm#12755: "Add ``--num-speculative-tokens 1`` for DeepSeek V3/R1", merged 2025-02)."""


def mtp_speculation(
    engine: str, draft_tokens: int, model_type: str = "", version: tuple[int, ...] | None = None
) -> tuple[str, str] | None:
    """(method, change) that drafts ``draft_tokens`` tokens with the checkpoint's own MTP layers on ``engine``, e.g.
    ``("mtp", "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'")``; the method is
    vLLM's name (:func:`mtp_method`), ``mtp`` elsewhere. ``None`` for an engine that does not load them here (TGI,
    llama.cpp) or a vLLM release without a way to load this ``model_type``'s. Before
    :data:`VLLM_SPECULATIVE_CONFIG_SINCE` vLLM takes the draft length alone (``--num-speculative-tokens``; DeepSeek
    only, from :data:`VLLM_DEEPSEEK_MTP_SINCE`). ``version``: the engine's release (``None`` = current)."""
    template = _MTP.get(engine)
    method = mtp_method(model_type, version) if engine == "vllm" else "mtp"
    if template is None or method is None:
        return None
    if engine == "vllm" and version is not None and version < VLLM_SPECULATIVE_CONFIG_SINCE:
        return (
            method,
            f"--num-speculative-tokens {draft_tokens} (this release loads the checkpoint's MTP layer as the draft)",
        )
    return method, template.format(value=draft_tokens, draft_tokens=draft_tokens + 1, method=method)


def vllm_legacy_ngram_flag(version: tuple[int, ...] | None, tokens: int) -> str | None:
    """vLLM's n-gram speculation flags before :data:`VLLM_SPECULATIVE_CONFIG_SINCE` (``--speculative-model '[ngram]'
    --num-speculative-tokens N --ngram-prompt-lookup-max 4``, removed by vllm-project/vllm#15466), or ``None`` for
    a release that takes ``--speculative-config`` (or an unknown one)."""
    if version is None or version >= VLLM_SPECULATIVE_CONFIG_SINCE:
        return None
    return f"--speculative-model '[ngram]' --num-speculative-tokens {tokens} --ngram-prompt-lookup-max 4"


def mtp_method(model_type: str, version: tuple[int, ...] | None) -> str | None:
    """vLLM's speculative ``method`` for a checkpoint's own MTP layers: ``mtp`` from :data:`VLLM_MTP_UNIFIED_SINCE`
    (or with the version unknown), the per-model name before it (:data:`VLLM_MTP_METHOD_BEFORE`; before
    :data:`VLLM_SPECULATIVE_CONFIG_SINCE`, DeepSeek's from :data:`VLLM_DEEPSEEK_MTP_SINCE` only), ``None`` for a
    ``model_type`` that release had no way to load."""
    if version is None or version >= VLLM_MTP_UNIFIED_SINCE:
        return "mtp"
    if version < VLLM_SPECULATIVE_CONFIG_SINCE:
        deepseek = version >= VLLM_DEEPSEEK_MTP_SINCE and model_type in ("deepseek_v3", "deepseek_v32")
        return "deepseek_mtp" if deepseek else None
    return VLLM_MTP_METHOD_BEFORE.get(model_type)


_TOKEN_PIN: dict[str, str] = {
    # TensorRT-LLM sizes the pool as the smaller of free_gpu_memory_fraction's memory and kv_cache_config.max_tokens
    # (tensorrt_llm/llmapi/llm_args.py KvCacheConfig: "Both free_gpu_memory_fraction and max_tokens are set ... The
    # smaller value will be used"); the Triton backend's config.pbtxt names it max_tokens_in_paged_kv_cache
    # (triton_backend docs "Model Configuration")
    "trtllm": (
        "remove kv_cache_config.max_tokens (--extra_llm_api_options YAML): free_gpu_memory_fraction then sizes the "
        "pool, ~{value:,} tokens; or raise it to {value:,}"
    ),
    "triton-trtllm": (
        "remove max_tokens_in_paged_kv_cache from tensorrt_llm/config.pbtxt: kv_cache_free_gpu_mem_fraction then "
        "sizes the pool, ~{value:,} tokens; or raise it to {value:,}"
    ),
}
"""The change that lifts a pool pinned in tokens to ``value`` tokens, per engine whose pool has a token cap beside
its memory fraction."""


def token_pin_flag(engine: str, value: int) -> str | None:
    """The change that lifts ``engine``'s token cap on the KV pool to ``value`` tokens (what its memory fraction
    gives), e.g. ``remove max_tokens_in_paged_kv_cache …``; ``None`` for an engine without such a cap here."""
    template = _TOKEN_PIN.get(engine)
    return None if template is None else template.format(value=value)


_KV_DTYPE_VALUES: dict[str, dict[str, str]] = {
    # the dial's engine-neutral "fp8" in each engine's own vocabulary (sources as in the module docstring)
    "sglang": {"fp8": "fp8_e4m3"},
    "tgi": {"fp8": "fp8_e4m3fn"},
    "llamacpp": {"fp8": "q8_0"},  # no fp8 cache in llama.cpp: 8-bit integer is the nearest (ggml type)
}

_KV_DTYPE_VALUES_BEFORE: dict[str, tuple[tuple[int, ...], dict[str, str]]] = {
    # SGLang's --kv-cache-dtype took only auto and fp8_e5m2 until sgl-project/sglang PR #2786 ("Support FP8 E4M3 KV
    # Cache", merged 2025-01-08, in the 0.4.2 release): an older server refuses fp8_e4m3 and does not start
    # (field-state round 75, sglang PR #1204 on 0.2.14); fp8_e5m2 is taken by every release since
    "sglang": ((0, 4, 2), {"fp8": "fp8_e5m2"}),
}
"""Per engine, the release from which :data:`_KV_DTYPE_VALUES` holds, and the spelling before it."""


def flag_for(engine: str, dial: str, value: Any, engine_version: str | None = None) -> str:
    """The exact change for ``dial`` set to ``value`` on ``engine``, e.g. ``--max-model-len 16384``; a KV-cache
    dtype spelled as ``engine_version`` (the deployment's, ``None``: the current releases') takes it.

    Engines without their own table (Dynamo's frontend) get a sentence naming where the dial lives.

    Raises:
        KeyError: ``dial`` is not a dial id (a programming error: every dial is in every table).
    """
    if dial not in c.DIALS:
        raise KeyError(dial)
    if dial == c.DIAL_KV_CACHE_DTYPE:
        value = _kv_dtype_value(engine, str(value), engine_version) or value
    table = FLAGS.get(engine)
    if table is None:
        if dial in (c.DIAL_REPLICAS, c.DIAL_INSTANCE_TYPE):
            return (_REPLICAS if dial == c.DIAL_REPLICAS else _INSTANCE).format(value=value)
        return _WORKER.format(dial=dial, value=value)
    return table[dial].format(value=value)


def _kv_dtype_value(engine: str, value: str, engine_version: str | None) -> str | None:
    """``value`` (``fp8``) in ``engine``'s own spelling at ``engine_version``; ``None``: the engine spells it so."""
    from advisor.capacity.generation import parse_version

    before = _KV_DTYPE_VALUES_BEFORE.get(engine)
    version = parse_version(engine_version)
    if before is not None and version is not None and version < before[0] and value in before[1]:
        return before[1][value]
    return _KV_DTYPE_VALUES.get(engine, {}).get(value)


def fix_engine_flags(found: list[dict[str, Any]], engine: str = "vllm") -> list[dict[str, Any]]:
    """Each refusal fix of :func:`advisor.capacity.fixes.fixes` (``plan``'s own flags: ``--tp 2``,
    ``--kv-cache-memory-gib 12.5``) with ``engine_flag``, the same change as ``engine``'s own flag (vLLM
    ``--tensor-parallel-size 2``, ``--kv-cache-memory-bytes 13421772800``; TGI ``--num-shard 2``): ``plan`` and
    ``POST /api/v1/plan`` say both (a fresh user took ``plan``'s ``--tp`` for the engine's, 2026-12-06). ``engine``:
    the accounting engine id. ``found`` is changed in place and returned."""
    from advisor.capacity.hardware import GIB

    for fix in found:
        if fix["dial"] is not None:
            fix["engine_flag"] = flag_for(engine, fix["dial"], fix["value"])
        elif fix["flag"] == "--kv-cache-memory-gib":  # vLLM takes bytes only: the GiB flag is plan's
            fix["engine_flag"] = f"--kv-cache-memory-bytes {int(fix['value'] * GIB)}"
        else:
            fix["engine_flag"] = fix["change"]
    return found
