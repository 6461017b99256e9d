"""The engine flag for each dial, checked against each engine's source (citations in docs/flags.md).

Passing tests pin flags verified against the source; strict xfails are flags the source shows to be wrong for
the value the rules pass (reported to the lead; advisor/rules/flags.py is not changed here).
"""

from __future__ import annotations

import json

import pytest

from advisor import conventions as c
from advisor.rules.flags import FLAGS, flag_for
from advisor.rules.speculative import SpeculativeRule
from tests.rules.helpers import ctx, ev, hist


@pytest.mark.parametrize(
    ("engine", "dial", "value", "flag"),
    [
        # vLLM vllm/engine/arg_utils.py (EngineArgs.add_cli_args)
        ("vllm", c.DIAL_MAX_NUM_SEQS, 216, "--max-num-seqs 216"),
        ("vllm", c.DIAL_MAX_NUM_BATCHED_TOKENS, 8192, "--max-num-batched-tokens 8192"),
        ("vllm", c.DIAL_GPU_MEMORY_UTILIZATION, 0.95, "--gpu-memory-utilization 0.95"),
        ("vllm", c.DIAL_WEIGHT_QUANTIZATION, "fp8", "--quantization fp8"),
        ("vllm", c.DIAL_KV_CACHE_DTYPE, "fp8", "--kv-cache-dtype fp8"),
        ("vllm", c.DIAL_TENSOR_PARALLEL_SIZE, 2, "--tensor-parallel-size 2"),
        ("vllm", c.DIAL_MAX_MODEL_LEN, 75776, "--max-model-len 75776"),
        # SGLang python/sglang/srt/server_args.py (ServerArgs fields → flags)
        ("sglang", c.DIAL_MAX_NUM_SEQS, 64, "--max-running-requests 64"),
        ("sglang", c.DIAL_GPU_MEMORY_UTILIZATION, 0.85, "--mem-fraction-static 0.85"),
        ("sglang", c.DIAL_TENSOR_PARALLEL_SIZE, 2, "--tp-size 2"),
        ("sglang", c.DIAL_MAX_MODEL_LEN, 32768, "--context-length 32768"),
        ("sglang", c.DIAL_WEIGHT_QUANTIZATION, "fp8", "--quantization fp8"),
        # TGI launcher/src/main.rs (Args), v3.3.7
        ("tgi", c.DIAL_TENSOR_PARALLEL_SIZE, 2, "--num-shard 2"),
        ("tgi", c.DIAL_MAX_MODEL_LEN, 8192, "--max-total-tokens 8192"),
        ("tgi", c.DIAL_GPU_MEMORY_UTILIZATION, 0.9, "--cuda-memory-fraction 0.9"),
        ("tgi", c.DIAL_WEIGHT_QUANTIZATION, "fp8", "--quantize fp8"),
        ("tgi", c.DIAL_MAX_NUM_BATCHED_TOKENS, 4096, "--max-batch-prefill-tokens 4096"),
        # TensorRT-LLM trtllm-serve (tensorrt_llm/commands/serve.py)
        ("trtllm", c.DIAL_MAX_NUM_SEQS, 64, "--max_batch_size 64"),
        ("trtllm", c.DIAL_TENSOR_PARALLEL_SIZE, 2, "--tp_size 2"),
        ("trtllm", c.DIAL_MAX_MODEL_LEN, 8192, "--max_seq_len 8192"),
        (
            "trtllm",
            c.DIAL_GPU_MEMORY_UTILIZATION,
            0.9,
            "--kv_cache_free_gpu_memory_fraction 0.9 (a share of the memory the weights and activations leave)",
        ),
        # triton_backend docs/model_config.md, tensorrt_llm/config.pbtxt parameters
        (
            "triton-trtllm",
            c.DIAL_GPU_MEMORY_UTILIZATION,
            0.9,
            "kv_cache_free_gpu_mem_fraction:0.9 in tensorrt_llm/config.pbtxt",
        ),
        # Triton tensorrtllm backend: a built engine's limits are trtllm-build options
        (
            "triton-trtllm",
            c.DIAL_MAX_NUM_SEQS,
            64,
            "rebuild the engine with trtllm-build --max_batch_size 64 (a built engine's batch cannot exceed its "
            "build; Triton's triton_max_batch_size does not raise it)",
        ),
        ("triton-trtllm", c.DIAL_MAX_MODEL_LEN, 8192, "rebuild the engine with trtllm-build --max_seq_len 8192"),
        # breaker 21: trtllm-serve's --extra_llm_api_options keys were inherited; the backend reads config.pbtxt
        ("triton-trtllm", c.DIAL_PREFIX_CACHING, True, "enable_kv_cache_reuse:true in tensorrt_llm/config.pbtxt"),
        ("triton-trtllm", c.DIAL_CHUNKED_PREFILL, 8192, "enable_chunked_context:true in tensorrt_llm/config.pbtxt"),
        (
            "triton-trtllm",
            c.DIAL_KV_CACHE_DTYPE,
            "fp8",
            "quantize the checkpoint with --kv_cache_dtype fp8 (TensorRT Model Optimizer) and rebuild the engine "
            "(trtllm-build)",
        ),
        # llama.cpp tools/server/README.md
        ("llamacpp", c.DIAL_MAX_NUM_SEQS, 4, "--parallel 4"),
    ],
)
def test_verified_flags(engine: str, dial: str, value: object, flag: str) -> None:
    assert flag_for(engine, dial, value) == flag


def test_every_dial_has_a_flag_on_every_engine() -> None:
    for engine, table in FLAGS.items():
        assert set(table) == set(c.DIALS), engine


def test_an_engine_without_a_table_names_the_worker() -> None:
    assert flag_for("dynamo", c.DIAL_MAX_NUM_SEQS, 8).startswith("set on the Dynamo worker")
    assert flag_for("dynamo", c.DIAL_REPLICAS, 3).startswith("scale to 3 replica(s)")


def test_an_unknown_dial_is_a_programming_error() -> None:
    with pytest.raises(KeyError):
        flag_for("vllm", "no_such_dial", 1)


def test_tgi_kv_cache_dtype_uses_a_value_the_launcher_accepts() -> None:
    assert flag_for("tgi", c.DIAL_KV_CACHE_DTYPE, "fp8") == "--kv-cache-dtype fp8_e4m3fn"


def test_sglang_kv_cache_dtype_uses_a_value_the_server_accepts() -> None:
    assert flag_for("sglang", c.DIAL_KV_CACHE_DTYPE, "fp8") == "--kv-cache-dtype fp8_e4m3"


def test_llamacpp_kv_cache_dtype_maps_fp8_to_a_ggml_type() -> None:
    assert "fp8" not in flag_for("llamacpp", c.DIAL_KV_CACHE_DTYPE, "fp8")


def test_llamacpp_budget_flag_does_not_put_a_fraction_into_ctx_size() -> None:
    assert "--ctx-size 0.95" not in flag_for("llamacpp", c.DIAL_GPU_MEMORY_UTILIZATION, 0.95)


def test_admission_policy_values_are_valid_per_engine() -> None:
    assert "priority" not in flag_for("tgi", c.DIAL_ADMISSION_POLICY, "priority")
    assert "priority" not in flag_for("trtllm", c.DIAL_ADMISSION_POLICY, "priority")


def _enable_speculation(engine: str) -> str:
    tpot = hist((0.05, 0), (0.1, 100), total_sum=7.5)
    (p,) = SpeculativeRule().propose(ev(dep=ctx(engine=engine), requests_running=2, tpot_ok=0.5, tpot=tpot))
    return p.flag


def test_vllm_speculation_uses_the_speculative_config_json() -> None:
    flag = _enable_speculation("vllm")
    assert flag.startswith("--speculative-config '")
    config = json.loads(flag.removeprefix("--speculative-config '").removesuffix("'"))
    assert config["method"] == "ngram" and config["num_speculative_tokens"] == 4 and config["prompt_lookup_max"] == 4


def test_vllm_speculation_does_not_rely_on_disable_by_batch_size() -> None:
    assert "disable_by_batch_size" not in _enable_speculation("vllm")


def test_tgi_speculation_passes_a_token_count() -> None:
    assert _enable_speculation("tgi") == "--speculate 4"


def test_triton_speculation_rebuilds_the_engine_not_the_llm_api_yaml() -> None:
    # the Triton tensorrtllm backend runs a built engine: speculation is a trtllm-build mode and draft length, not
    # trtllm-serve's --extra_llm_api_options speculative_config (which it does not read)
    flag = flag_for("triton-trtllm", c.DIAL_SPECULATIVE_DECODING, 4)
    assert "--extra_llm_api_options" not in flag
    # and draft-free, as the turn is priced (no draft weights): lookahead decoding, not an external draft engine
    assert "trtllm-build --speculative_decoding_mode lookahead_decoding --max_draft_len 15" in flag
    # the buffer holds the stated window: (W + G)(N − 1) − 1 = (4 + 4)(3 − 1) − 1 = 15
    assert "lookahead window 4, n-gram size 3, verification set 4" in flag
