"""`plan --engine sglang|tgi|trtllm|llamacpp`: each engine's KV accounting, against hand-computed values.

Common inputs: Llama-3.1-8B-Instruct (config.json: 8,030,261,248 parameters, 32 layers, 8 KV heads, head_dim
128, max_position_embeddings 131,072, hidden 4,096, intermediate 14,336) in bf16 on an 80 GiB GPU.

    weights/GPU   = 8,030,261,248 × 2 + rotary cache 131,072 × 128 × 2   = 16,094,076,928 B
    KV per token  = 2 × 32 × 8 × 128 × 2                                 = 131,072 B
    total         = 80 × 2^30                                            = 85,899,345,920 B
    forward(T)    = T × 2 × (6 × 4,096 + 3 × 14,336) = T × 135,168 B      (OverheadModel forward term)
    runtime       = int(0.13 × 2^30)                                     = 139,586,437 B
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.capacity.engines import (
    EngineSettings,
    engine_capacity_pass,
    llamacpp_capacity,
    sglang_default_mem_fraction_static,
)
from advisor.capacity.kv import CapacityInputs
from advisor.cli import main
from advisor.config import resolve_model
from advisor.errors import CapacityError

GIB = 1 << 30
BASE = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-gib", "80", "--max-model-len", "8192"]
WEIGHTS = 8_030_261_248 * 2 + 131_072 * 128 * 2
TOTAL = 80 * GIB
RUNTIME = int(0.13 * GIB)


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["plan", *BASE, *args, "--json"]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_sglang_default_mem_fraction_static_follows_server_args() -> None:
    # 0.4.8-0.5.2 server_args.py: round((gpu_mem_MiB − reserved) / gpu_mem_MiB, 3), reserved by GPU class.
    old = "0.5.2"
    assert sglang_default_mem_fraction_static(80 * GIB, engine_version=old) == 0.875  # (81920 − 10·1024) / 81920
    assert sglang_default_mem_fraction_static(80 * GIB, tp=8, engine_version=old) == 0.831  # − 13.5·1024: 0.83125
    assert sglang_default_mem_fraction_static(24 * GIB, engine_version=old) == 0.879  # (24576 − 2.9·1024) / 24576
    assert sglang_default_mem_fraction_static(140 * GIB, tp=8, engine_version=old) == 0.886  # − 16·1024: 0.88571
    assert sglang_default_mem_fraction_static(192 * GIB, engine_version=old) == 0.833  # (196608 − 32768) / 196608


def test_sglang_default_mem_fraction_static_by_version() -> None:
    """Each rule of server_args.py at the wheel it was read from (ServerArgs.__post_init__ /
    _handle_gpu_memory_settings), on an 80 GiB (81,920 MiB) and a 140 GiB (143,360 MiB) device."""
    f = sglang_default_mem_fraction_static
    assert f(80 * GIB, tp=8, engine_version="0.3.6") == 0.82  # TP ≥ 8 was 0.82 before 0.4.0
    assert f(80 * GIB, tp=8, engine_version="0.4.3") == 0.81
    assert f(80 * GIB, tp=2, engine_version="0.4.3") == 0.87
    assert f(140 * GIB, engine_version="0.4.5") == 0.88  # TP only, whatever the memory
    assert f(80 * GIB, engine_version="0.4.6") == 0.88  # ≤ 81,920 MiB: the TP table
    assert f(140 * GIB, engine_version="0.4.6") == pytest.approx((143360 - 13 * 1024) / 143360)  # 0.9071
    # 0.4.7 above 96 GiB: min(0.88 + 48·1024 × 0.12 / 143360, (143360 − 18·1024) / 143360) = min(0.9211, 0.8714)
    assert f(140 * GIB, engine_version="0.4.7") == pytest.approx((143360 - 18 * 1024) / 143360)
    # ≥ 0.5.3: 512 + 1.5 × 8192 + 2 × 256 + 1024/8 = 13,440 MiB reserved: (81920 − 13440) / 81920 = 0.83594
    assert f(80 * GIB, engine_version="0.5.5") == 0.836
    assert f(80 * GIB) == 0.836  # no version: the newest rule
    # TP 8 on 140 GiB: 512 + 12288 + 2 × 512 + 1024 = 14,848 → (143360 − 14848) / 143360 = 0.89643
    assert f(140 * GIB, tp=8, engine_version="0.5.3") == 0.896
    # 24 GiB, TP 1: 512 + 1.5 × 2048 + 2 × 16 (0.5.3–0.5.4) or 2 × 24 (≥ 0.5.5) + 128
    assert f(24 * GIB, engine_version="0.5.4") == round((24576 - (512 + 3072 + 32 + 128)) / 24576, 3)  # 0.848
    assert f(24 * GIB, engine_version="0.5.5") == round((24576 - (512 + 3072 + 48 + 128)) / 24576, 3)  # 0.847


def test_sglang_max_total_num_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "--engine", "sglang")
    # newest default 0.836 (above) of the memory free before loading: 80 GiB − 0.5 GiB CUDA context
    free = TOTAL - GIB // 2  # 85,362,475,008
    rest = int(0.836 * free) - WEIGHTS  # 71,363,029,106 − 16,094,076,928 = 55,268,952,178
    assert rest == 55_268_952_178
    assert out["kv_cache_tokens"] == 421_668  # 55,268,952,178 // 131,072
    assert out["engine"] == "sglang"
    assert out["engine_parameters"] == {"mem_fraction_static": 0.836, "page_size": 1}


def test_sglang_given_fraction_and_page_size(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "--engine", "sglang", "--mem-fraction-static", "0.8", "--block-size", "64")
    # 0.8 × (80 − 0.5) GiB = 68,289,980,006 − 16,094,076,928 = 52,195,903,078 → 398,223 tokens → 398,208 (÷ 64 × 64)
    assert out["kv_cache_tokens"] == 398_208
    assert out["kv_cache_blocks"] == 6_222


def test_tgi_max_batch_total_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "--engine", "tgi")
    free = TOTAL - WEIGHTS - 4096 * 135_168 - RUNTIME  # = 69,112,034,427
    assert free == 69_112_034_427
    # × TGI_WIGGLE_ROOM 0.95 = 65,656,432,705 → // 131,072 (BLOCK_SIZE 1)
    assert out["kv_cache_tokens"] == 500_918
    assert out["block_size"] == 1


def test_tgi_memory_fraction_and_v2_block_size(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "--engine", "tgi", "--cuda-memory-fraction", "0.5", "--engine-version", "2.4.1")
    # free 69,112,034,427 − 0.5 × 85,899,345,920 = 26,162,361,467 × 0.95 = 24,854,243,393 → // (16 × 131,072)
    assert out["kv_cache_blocks"] == 11_851
    assert out["kv_cache_tokens"] == 11_851 * 16


def test_trtllm_free_gpu_memory_fraction(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "--engine", "trtllm")
    free = TOTAL - WEIGHTS - 8192 * 135_168 - RUNTIME  # = 68,558,386,299
    assert free == 68_558_386_299
    # × 0.9 = 61,702,547,669 → // (32 × 131,072 = 4,194,304) = 14,711 blocks
    assert out["kv_cache_blocks"] == 14_711
    assert out["kv_cache_tokens"] == 470_752


def test_trtllm_given_fraction_and_64_token_blocks(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "--engine", "trtllm", "--kv-cache-free-gpu-memory-fraction", "0.5", "--block-size", "64")
    # 68,558,386,299 × 0.5 = 34,279,193,149 → // (64 × 131,072 = 8,388,608) = 4,086 blocks
    assert out["kv_cache_blocks"] == 4_086
    assert out["kv_cache_tokens"] == 4_086 * 64


def test_llamacpp_pool_is_ctx_size_split_across_slots(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "--engine", "llamacpp", "--ctx-size", "32768", "--parallel", "4")
    assert out["kv_cache_tokens"] == 32_768
    assert out["kv_pool_bytes_per_gpu"] == 32_768 * 131_072  # 4 GiB, whatever the GPU memory
    assert out["max_concurrency"] == 4.0  # four 8,192-token slots hold 8,192-token requests
    notes = out["engine_notes"]
    assert isinstance(notes, list) and any("regardless of GPU memory" in n for n in notes)


def test_llamacpp_slot_shorter_than_max_model_len_and_q8_cache(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "--engine", "llamacpp", "--ctx-size", "16000", "--parallel", "4", "--kv-cache-dtype", "q8_0")
    assert out["kv_cache_tokens"] == 16_128  # padded up to a multiple of 256
    assert out["kv_pool_bytes_per_gpu"] == 16_128 * 2 * 32 * 8 * 128 * 34 // 32  # q8_0: 34 bytes per 32
    assert out["max_concurrency"] == 0.0  # 4,032-token slots refuse 8,192-token requests


def test_llamacpp_does_not_shrink_the_pool_on_a_small_gpu() -> None:
    inputs = CapacityInputs(
        model=resolve_model("meta-llama/Llama-3.1-8B-Instruct", Path.cwd()),
        gpu_memory_bytes=16 * GIB,
        max_model_len=8192,
    )
    cap = llamacpp_capacity(inputs, EngineSettings(ctx_size=131_072))
    assert cap.result.kv_cache_tokens == 131_072
    assert any("do NOT fit" in n for n in cap.notes)


def test_vllm_default_output_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys)
    assert "engine" not in out and "engine_notes" not in out
    assert out["kv_cache_bytes_per_token"] == 131_072


def test_unknown_engine_is_refused() -> None:
    inputs = CapacityInputs(model=resolve_model("meta-llama/Llama-3.1-8B-Instruct", Path.cwd()), gpu_memory_bytes=TOTAL)
    with pytest.raises(CapacityError):
        engine_capacity_pass("ollama", inputs)
