"""vLLM's LoRA serving dials (``--enable-lora`` and friends) in the capacity pass.

Expected bytes are hand arithmetic from the buffer shapes of ``create_lora_weights`` (``vllm/lora/layers.py``
0.6.6/0.8.5, ``vllm/lora/layers/*.py`` 0.10-0.21), written out per test; never a figure our code printed.
Shapes, per LoRA-able linear layer and slice, L = max_loras, r = rank:
    A (L, 1, r, in)  — column-parallel: whole in (r ÷ TP rows when fully sharded); row-parallel: in ÷ TP
    B (L, 1, out, r) — column-parallel: out ÷ TP; row-parallel: whole out (out ÷ TP when fully sharded)
Llama-3.1-8B: hidden 4,096, 32 q heads and 8 KV heads of 128, MLP 14,336, vocab 128,256, 32 layers, bf16.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.inprocess import run_cli

LLAMA_8B = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192"]

# Llama-3.1-8B, rank 16, one slot, TP 1, elements per layer:
#   qkv_proj  A 3 × 16 × 4,096 = 196,608    B (4,096 + 1,024 + 1,024) × 16 = 98,304
#   o_proj    A 16 × 4,096 = 65,536         B 4,096 × 16 = 65,536
#   gate_up   A 2 × 16 × 4,096 = 131,072    B 2 × 14,336 × 16 = 458,752
#   down      A 16 × 14,336 = 229,376       B 4,096 × 16 = 65,536
# = 1,310,720 elements × 32 layers × 2 B = 83,886,080 B
LINEAR_TP1 = 1_310_720 * 32 * 2
# embed_tokens (VocabParallelEmbeddingWithLoRA): A 128,256 × 16 + B 4,096 × 16; the LM head
# (LogitsProcessorWithLoRA): A 16 × 4,096 + B 128,256 × 16; both unsharded, × 2 B (vLLM ≥ 0.12, no extra vocab)
HEADS_NO_EXTRA = 2 * (128_256 * 16 + 4_096 * 16) * 2


def _plan(*args: str) -> dict[str, Any]:
    r = run_cli("plan", *LLAMA_8B, *args, "--json")
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_llama_8b_rank_16_one_slot_tp1_holds_the_stacked_a_b_buffers() -> None:
    out = _plan("--engine-version", "0.21.0", "--enable-lora")
    assert out["lora_bytes_per_gpu"] == LINEAR_TP1 + HEADS_NO_EXTRA == 92_356_608


def test_tp2_splits_column_parallel_b_and_row_parallel_a() -> None:
    # per layer at TP 2: qkv A 196,608, B (2,048 + 512 + 512) × 16 = 49,152; o A 16 × 2,048 = 32,768, B 65,536;
    # gate_up A 131,072, B 2 × 7,168 × 16 = 229,376; down A 16 × 7,168 = 114,688, B 65,536 → 884,736
    out = _plan("--engine-version", "0.21.0", "--enable-lora", "--tp", "2")
    assert out["lora_bytes_per_gpu"] == 884_736 * 32 * 2 + HEADS_NO_EXTRA == 65_093_632


def test_fully_sharded_loras_split_column_a_by_rank_and_row_b_by_output() -> None:
    # TP 2: qkv A 3 × 8 × 4,096 = 98,304; gate_up A 2 × 8 × 4,096 = 65,536; o and down B 2,048 × 16 = 32,768;
    # the rest as at TP 2 → 98,304 + 49,152 + 32,768 + 32,768 + 65,536 + 229,376 + 114,688 + 32,768 = 655,360
    out = _plan("--engine-version", "0.21.0", "--enable-lora", "--tp", "2", "--fully-sharded-loras")
    assert out["lora_bytes_per_gpu"] == 655_360 * 32 * 2 + HEADS_NO_EXTRA == 50_413_568


def test_max_loras_and_rank_scale_the_slots() -> None:
    out = _plan("--engine-version", "0.21.0", "--enable-lora", "--max-loras", "4", "--max-lora-rank", "64")
    assert out["lora_bytes_per_gpu"] == 4 * 4 * (LINEAR_TP1 + HEADS_NO_EXTRA)


def test_before_0_12_the_extra_vocabulary_adds_buffers_and_embedding_rows() -> None:
    """vLLM 0.8.5, lora_extra_vocab_size 256: embedding A (128,256 + 256) × 16, B 4,096 × 16, plus
    embeddings_tensors 256 × 4,096; LM head A 16 × 4,096, B ceil(128,512 ÷ 256) × 256 = 128,512 rows × 16, plus
    embeddings_tensors 256 × 4,096; and the model's embed_tokens grows by 256 × max_loras rows, the untied
    lm_head by 256 (llama.py lora_vocab / unpadded_vocab_size), 2 B each."""
    embed = (128_512 * 16 + 4_096 * 16) * 2 + 256 * 4_096 * 2
    head = (16 * 4_096 + 128_512 * 16) * 2 + 256 * 4_096 * 2
    rows = (256 + 256) * 4_096 * 2
    out = _plan("--engine-version", "0.8.5", "--enable-lora")
    assert out["lora_bytes_per_gpu"] == LINEAR_TP1 + embed + head + rows == 100_761_600


def test_qwen2_gets_lora_on_its_linear_layers_only() -> None:
    """Qwen2 names no embedding_modules (qwen2.py): no embedding or LM-head wrapper, no extra vocabulary.
    Qwen2.5-0.5B (hidden 896, 14 × 64 q, 2 × 64 kv, MLP 4,864, 24 layers), rank 16, TP 1, per layer:
    qkv 3 × 16 × 896 + 1,152 × 16, o 16 × 896 + 896 × 16, gate_up 2 × 16 × 896 + 9,728 × 16,
    down 16 × 4,864 + 896 × 16 = 366,592 elements."""
    r = run_cli(
        "plan",
        *("--model", "Qwen/Qwen2.5-0.5B", "--gpu", "H100-SXM", "--max-model-len", "4096"),
        *("--engine-version", "0.8.5", "--enable-lora", "--json"),
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["lora_bytes_per_gpu"] == 366_592 * 24 * 2


def test_the_slots_shrink_the_pool_as_weights_do() -> None:
    """V1 0.21 creates the slots inside load_model's DeviceMemoryProfiler: they are in "Model loading took"."""
    off = _plan("--engine-version", "0.21.0")
    on = _plan("--engine-version", "0.21.0", "--enable-lora")
    assert on["weights_bytes_per_gpu"] - off["weights_bytes_per_gpu"] == 92_356_608
    assert off["kv_pool_bytes_per_gpu"] - on["kv_pool_bytes_per_gpu"] == 92_356_608


def test_v0_0_7_does_not_count_the_slots() -> None:
    """0.7.3 V0 creates the slots after the weight profiler and memory_profiling counts torch memory only as the
    profile's increase: the pool is the one without LoRA (a 0.7.2 log with rank-32 slots prints non_torch
    0.05 GiB)."""
    off = _plan("--engine-version", "0.7.3")
    on = _plan("--engine-version", "0.7.3", "--enable-lora")
    assert on["lora_bytes_per_gpu"] > 0
    assert on["kv_pool_bytes_per_gpu"] == off["kv_pool_bytes_per_gpu"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--engine-version", "0.8.5", "--max-lora-rank", "1"), "max_lora_rank 1 is not one vLLM 0.8.5 accepts"),
        (("--engine-version", "0.7.3", "--max-lora-rank", "320"), "max_lora_rank 320 is not one vLLM 0.7.3"),
        (("--engine-version", "0.21.0", "--max-lora-rank", "24"), "max_lora_rank 24 is not one"),
        (
            (
                "--max-loras",
                "0",
            ),
            "max_loras must be ≥ 1",
        ),
        (("--engine-version", "0.21.0", "--lora-extra-vocab-size", "256"), "removed in 0.12"),
        (("--engine-version", "0.8.5", "--lora-extra-vocab-size", "0"), "lora_extra_vocab_size must be 256 or 512"),
        (("--engine-version", "0.21.0", "--lora-dtype", "int3"), "lora_dtype 'int3' unknown"),
    ],
)
def test_settings_vllm_refuses_are_refused(args: tuple[str, ...], says: str) -> None:
    r = run_cli("plan", *LLAMA_8B, "--enable-lora", *args)
    assert r.returncode == 2 and says in r.stderr, r.stderr


def test_rank_1_is_accepted_from_0_12() -> None:
    assert _plan("--engine-version", "0.21.0", "--enable-lora", "--max-lora-rank", "1")["lora_bytes_per_gpu"] > 0


def test_moe_models_are_refused_naming_the_reason() -> None:
    r = run_cli(
        "plan",
        *("--model", "Qwen/Qwen3-30B-A3B", "--gpu", "H100-SXM", "--max-model-len", "8192", "--enable-lora"),
    )
    assert r.returncode == 2 and "LoRA on MoE models is not modelled" in r.stderr, r.stderr


def test_other_engines_refuse_the_lora_flags() -> None:
    r = run_cli("plan", *LLAMA_8B, "--engine", "sglang", "--enable-lora", "--json")
    assert r.returncode == 2 and "--enable-lora does not apply to --engine sglang" in r.stderr  # issue 19
    assert json.loads(run_cli("plan", *LLAMA_8B, "--engine", "sglang", "--json").stdout)["lora_bytes_per_gpu"] is None


def _config(**keys: object) -> dict[str, object]:
    dep = {
        "name": "a",
        "engine": "vllm",
        "targets": ["http://x:8000/metrics"],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 1, "tpot_seconds": 0.1},
        **keys,
    }
    return {"deployments": [dep]}


def test_the_config_keys_reach_the_capacity_pass() -> None:
    from advisor.capacity.kv import capacity_pass
    from advisor.config import capacity_inputs, parse_config

    # no engine version in the config: the newest rules (no extra vocabulary, as 0.21.0)
    cfg = parse_config(_config(enable_lora=True, max_lora_rank=32, max_loras=2))
    result = capacity_pass(capacity_inputs(cfg.deployments[0]))
    assert result.as_dict()["lora_bytes_per_gpu"] == 2 * 2 * 92_356_608


@pytest.mark.parametrize(
    ("keys", "names"),
    [
        ({"engine": "sglang", "enable_lora": True}, "enable_lora: a setting of vllm"),
        ({"engine": "sglang", "max_lora_rank": 32}, "max_lora_rank: a setting of vllm"),
        ({"enable_lora": True, "max_loras": 0}, "max_loras: Input should be greater than or equal to 1"),
    ],
)
def test_bad_lora_config_keys_are_refused_naming_the_key(keys: dict[str, object], names: str) -> None:
    from advisor.config import parse_config
    from advisor.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        parse_config(_config(**keys))
    assert names in str(err.value)
