"""Issue 16, kinds F and G: Gemma 4 sized as vLLM 0.21.0 lays it out (``model_executor/models/gemma4.py``,
``v1/core/kv_cache_utils.py``, ``v1/worker/gpu_model_runner.py``), read from its config.json as transformers'
``Gemma4TextConfig`` holds it (``models/gemma4/configuration_gemma4.py``). Before this the pass refused Gemma 4 by
name (a dense reading gave 35 layers of 256-wide KV).

Expected figures are hand arithmetic on the engine's rules and the published start-up log of the truth-table row
``gemma-4-e2b-l4-v0210`` (github.com/Phate334/llm-spelling-check, docs/v0.1.0/sample-data-flow-analysis-google-
gemma-4-e2b-2026-05-29.md: vLLM 0.21.0, L4, ``--max-model-len 8192 --gpu-memory-utilization 0.90 --enforce-eager
--language-model-only``; "Model loading took 8.89 GiB memory", "Available KV cache memory: 9.92 GiB", "GPU KV
cache size: 1,062,157 tokens", "Maximum concurrency for 8,192 tokens per request: 129.66x"), never from our code.

E2B (``tests/fixtures/truth_models/google__gemma-4-E2B.json``): 35 layers, full attention at 4, 9, … 34; the last
20 layers (15-34) share KV, so 15 keep it: 3 full (4, 9, 14) and 12 sliding. One KV head; sliding heads 256 wide,
full 512. bf16 pages of 16 tokens: sliding 2 × 16 × 256 × 2 = 16 KiB, full 2 × 16 × 512 × 2 = 32 KiB, so
``unify_kv_cache_spec_page_size`` doubles the sliding block to 32 tokens. Groups of min(3, 12) = 3 layers (12 ≥
1.5 × 3): 1 full and 4 sliding groups, a pool block 3 × 32 KiB = 96 KiB. One request of 8,192 tokens with 2,048
batched tokens holds 8,192 / 16 = 512 full blocks and 4 × (cdiv(511 + 2,048, 32) + 1) = 324 sliding ones: 836.
Check against the log: 129.66 × 836 × 96 KiB = 9.92 GiB, as printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.capacity.kv import CapacityInputs, vllm_capacity_pass
from advisor.capacity.kvlayout import hybrid_blocks_per_request, hybrid_kv_layout
from advisor.capacity.models import ModelArch, language_model_only_limits, without_unused_vision_tower
from advisor.cli import main
from advisor.errors import CapacityError, ConfigError

GIB = 1 << 30
KIB = 1 << 10
FIXTURE = Path(__file__).parents[1] / "fixtures" / "truth_models" / "google__gemma-4-E2B.json"
E2B_CONFIG: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
E2B = ModelArch.from_hf_config(E2B_CONFIG, "google/gemma-4-E2B")
L4_CUDA_TOTAL = 23034 * (1 << 20)  # "NVIDIA L4 23034 MiB", as the log states


def _inputs(model: ModelArch = E2B, **kw: Any) -> CapacityInputs:
    base: dict[str, Any] = {
        "gpu_memory_bytes": L4_CUDA_TOTAL,
        "engine_version": "0.21.0",
        "overhead_profile": "vllm-v1",
        "max_model_len": 8192,
        "max_num_batched_tokens": 2048,
        "enforce_eager": True,
    }
    base.update(kw)
    return CapacityInputs(model=model, **base)


def _text(**changes: Any) -> dict[str, Any]:
    """E2B's config with ``text_config`` keys changed (a value of None removes the key)."""
    text = {**E2B_CONFIG["text_config"], **changes}
    return {**E2B_CONFIG, "text_config": {k: v for k, v in text.items() if v is not None}}


def test_the_kv_shared_layers_keep_no_cache_and_the_full_layers_their_own_heads() -> None:
    assert (E2B.kv_shared_layers, E2B.kv_full_layers, E2B.kv_sliding_layers) == (20, 3, 12)
    assert (E2B.full_head_dim, E2B.full_kv_heads, E2B.head_dim) == (512, 1, 256)


def test_e2b_lays_out_the_pages_and_blocks_as_vllm_0_21_does() -> None:
    inputs = _inputs()
    layout = hybrid_kv_layout(inputs)
    assert layout is not None
    assert (layout.group_size, layout.full_groups, layout.sliding_groups) == (3, 1, 4)
    assert (layout.page_bytes, layout.full_block_size, layout.sliding_block_size) == (32 * KIB, 16, 32)
    assert hybrid_blocks_per_request(inputs, layout, 8192) == 512 + 4 * (-(-(511 + 2048) // 32) + 1) == 836


def test_with_the_logged_kv_memory_e2b_holds_the_logged_concurrency() -> None:
    # 9.92 GiB (printed to 0.01) of 96 KiB blocks, 836 per request: 129.54x-129.67x; the log prints 129.66x
    result = vllm_capacity_pass(_inputs(kv_cache_memory_bytes=int(9.92 * GIB)))
    assert 9.915 * GIB / (96 * KIB) // 1 / 836 <= result.max_concurrency <= 9.925 * GIB / (96 * KIB) / 836
    assert result.kv_cache_tokens == int(result.max_concurrency * 8192)  # 0.21: concurrency × max-model-len


def test_e2b_weights_are_the_logged_model_load() -> None:
    # language model only: embeddings 262,144 × 1,536 (tied) + PLE table 262,144 × 35 × 256 + its projection
    # 1,536 × 8,960 + per-layer gate and projection 35 × 2 × 1,536 × 256 + attention 28 × 7,077,888 (sliding:
    # q, o 2 × 1,536 × 8 × 256, k, v 2 × 1,536 × 256) + 7 × 14,155,776 (full: 512-wide heads) + MLPs 15 × 3 × 1,536 ×
    # 6,144 + 20 × 2 × that (double wide) + norms; two rope caches of 131,072 × (256 + 512) bf16
    body = 402_653_184 + 2_348_810_240 + 13_762_560 + 27_525_120 + 28 * 7_077_888 + 7 * 14_155_776
    body += 15 * 28_311_552 + 20 * 2 * 28_311_552
    assert 0.999 < E2B.num_parameters / body < 1.001  # norms are the rest
    weights = vllm_capacity_pass(_inputs()).weights_bytes_per_gpu / GIB
    assert weights == pytest.approx(8.89, rel=0.01)  # "Model loading took 8.89 GiB memory"


def test_a_text_config_without_the_gemma4_keys_takes_transformers_defaults() -> None:
    # Gemma4TextConfig: global_head_dim 512 (kwargs.pop default), layer_types 5 sliding : 1 full with the last forced
    # to full attention, hidden_size_per_layer_input 256 (PLE on), num_kv_shared_layers 0, attention_k_eq_v false
    bare = _text(
        global_head_dim=None,
        layer_types=None,
        hidden_size_per_layer_input=None,
        vocab_size_per_layer_input=None,
        num_kv_shared_layers=None,
        use_double_wide_mlp=None,
        num_hidden_layers=8,
    )
    m = ModelArch.from_hf_config(bare, "bare")
    assert m.full_head_dim == 512
    assert (m.full_attention_layers, m.sliding_window_layers) == (2, 6)  # layer 5 by the pattern, 7 forced
    assert (m.per_layer_input_size, m.per_layer_vocab_size) == (256, 262_144)
    assert m.kv_shared_layers == 0 and not m.double_wide_mlp


def test_k_eq_v_full_layers_cache_the_global_kv_heads_and_get_the_larger_block() -> None:
    # gemma-4-31B-style: 16 KV heads of 256 on sliding layers, attention_k_eq_v with 4 global KV heads of 512:
    # pages 2 × 16 × 16 × 256 × 2 = 256 KiB (sliding) and 2 × 16 × 4 × 512 × 2 = 128 KiB (full) → full block 32
    cfg = _text(
        num_key_value_heads=16,
        num_attention_heads=32,
        attention_k_eq_v=True,
        num_global_key_value_heads=4,
        num_kv_shared_layers=0,
        hidden_size_per_layer_input=0,
    )
    m = ModelArch.from_hf_config(cfg, "k_eq_v")
    assert (m.full_kv_heads, m.num_kv_heads) == (4, 16)
    layout = hybrid_kv_layout(_inputs(m))
    assert layout is not None
    assert (layout.page_bytes, layout.full_block_size, layout.sliding_block_size) == (256 * KIB, 32, 16)
    assert m.per_layer_input_size == 0


def test_gemma4_moe_is_refused_naming_the_key() -> None:
    with pytest.raises(CapacityError, match="enable_moe_block"):
        ModelArch.from_hf_config(_text(enable_moe_block=True, num_experts=128, top_k_experts=8), "moe")


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        pytest.param({"engine_version": "0.18.0"}, "no Gemma 4", id="before-gemma4"),
        pytest.param({"disable_hybrid_kv_cache_manager": True}, "hybrid KV cache manager", id="manager-off"),
        pytest.param({"pipeline_parallel_size": 2}, "pipeline", id="shared-kv-across-stages"),
    ],
)
def test_gemma4_outside_the_hybrid_manager_is_refused_not_sized_as_dense(kw: dict[str, Any], why: str) -> None:
    with pytest.raises(CapacityError, match=why):
        vllm_capacity_pass(_inputs(**kw))


def test_its_towers_are_refused_until_every_modality_of_each_is_off() -> None:
    with_towers = {**E2B_CONFIG, "vision_config": {"hidden_size": 768}, "audio_config": {"hidden_size": 1024}}
    model = ModelArch.from_hf_config(with_towers, "towers")
    assert model.unsized_towers == ("vision", "audio")
    only_images_off = without_unused_vision_tower(model, {"image": 0, "video": 0})
    assert only_images_off.unsized_towers == ("audio",)
    assert without_unused_vision_tower(model, language_model_only_limits()).unsized_towers == ()


def _plan(tmp_path: Path, config: dict[str, Any], *extra: str) -> list[str]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    argv = ["plan", "--model", str(path), "--gpu", "l4", "--engine-version", "0.21.0", "--max-model-len", "8192"]
    return [*argv, "--enforce-eager", *extra, "--json"]


def test_plan_refuses_a_gemma4_with_towers_on_and_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with_towers = {**E2B_CONFIG, "vision_config": {"hidden_size": 768}}
    assert main(_plan(tmp_path, with_towers)) != 0
    err = capsys.readouterr().err
    assert "vision tower" in err and "--language-model-only" in err


def test_plan_answers_gemma4_served_language_model_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the truth-table row's command: before Gemma 4 was modelled plan refused it by name
    with_towers = {**E2B_CONFIG, "vision_config": {"hidden_size": 768}, "audio_config": {"hidden_size": 1024}}
    assert main(_plan(tmp_path, with_towers, "--language-model-only")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kv_cache_tokens"] == pytest.approx(1_062_157, rel=0.03)


def test_plan_refuses_gemma4_on_an_engine_whose_accounting_of_it_is_not_modelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(E2B_CONFIG), encoding="utf-8")
    argv = ["plan", "--engine", "sglang", "--model", str(path), "--gpu", "l4", "--max-model-len", "8192", "--json"]
    assert main(argv) != 0
    assert "sglang" in capsys.readouterr().err


def test_a_configured_deployment_serving_it_language_model_only_is_sized(tmp_path: Path) -> None:
    # the daemon's config states what `vllm serve --language-model-only` does; without it the towers refuse the pass
    from advisor.capacity.deployment import resolve_deployment
    from advisor.config import deployment_spec, parse_config

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**E2B_CONFIG, "vision_config": {"hidden_size": 768}}), encoding="utf-8")
    dep = {
        "name": "gemma4",
        "engine": "vllm",
        "targets": ["http://127.0.0.1:9/metrics"],
        "model": str(path),
        "gpu": "l4",
        "engine_version": "0.21.0",
        "max_model_len": 8192,
        "enforce_eager": True,
        "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.1},
    }
    served = parse_config({"deployments": [{**dep, "language_model_only": True}]}).deployments[0]
    assert resolve_deployment(deployment_spec(served)).result.kv_cache_tokens == pytest.approx(1_062_157, rel=0.03)
    with pytest.raises(ConfigError, match="language_model_only: true"):  # check-config names the deployment
        parse_config({"deployments": [dep]})


def test_gemma4_31b_tokens_print_about_ten_times_more_from_0_21_on_the_same_cache(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # vllm-project/vllm#43308 (cyankiwi/gemma-4-31B-it-AWQ-4bit, A100 80GB, --gpu-memory-utilization 0.9, same
    # args): "v0.20.0 ~55k tokens", "v0.21.0 ~525k tokens", "Total available KV cache memory remained constant (~50
    # GB)". The layout is the same in both (0.20.0's gemma4.py already shares KV and unify_kv_cache_spec_page_size is
    # unchanged); 0.20 prints num_blocks // 6 groups × 16, 0.21 concurrency × max-model-len: 262,144 × 6 ÷ (16 ×
    # (8,192 + 5 × (cdiv(1,023 + batched, 16) + 1))) = 8.9× at 8,192 batched tokens, 10.7× at 2,048.
    config = Path(__file__).parents[1] / "fixtures" / "truth_models" / "google__gemma-4-31B-it.json"
    tokens = {}
    for version in ("0.20.0", "0.21.0"):
        argv = ["plan", "--model", str(config), "--gpu", "a100-80gb", "--engine-version", version, "--json"]
        argv += ["--max-model-len", "262144", "--quantization", "awq", "--language-model-only"]
        assert main([*argv, "--kv-cache-memory-gib", str(50e9 / GIB)]) == 0
        tokens[version] = json.loads(capsys.readouterr().out)["kv_cache_tokens"]
    assert 45_000 <= tokens["0.20.0"] <= 60_000
    assert 420_000 <= tokens["0.21.0"] <= 580_000
    assert 8 <= tokens["0.21.0"] / tokens["0.20.0"] <= 11


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        pytest.param({"layer_types": ["chunked_attention"] * 35}, "layer_types", id="unknown-kind"),
        pytest.param({"layer_types": ["sliding_attention "] + ["full_attention"] * 34}, "layer_types", id="typo"),
        pytest.param({"layer_types": []}, "layer_types", id="empty"),
        pytest.param({"layer_types": ["full_attention"] * 35}, "layer_types", id="no-sliding-layer"),
        pytest.param({"sliding_window": 0}, "sliding_window", id="no-window"),
    ],
)
def test_a_malformed_gemma4_text_config_is_refused_naming_the_key(changes: dict[str, Any], key: str) -> None:
    # breaker 2026-12-04: an unknown or misspelt kind was sized as full attention, an empty list reported as the
    # rewritten ['full_attention'], a zero window blamed on num_kv_shared_layers
    with pytest.raises(CapacityError, match=key):
        ModelArch.from_hf_config(_text(**changes), "bad")


def test_a_gemma4_wrapper_is_read_as_gemma4_whatever_its_parts_say() -> None:
    # Gemma4Config builds text_config as Gemma4TextConfig whatever model_type it states; without text_config
    # transformers builds a default model, not the one whose keys sit at the top level
    relabelled = ModelArch.from_hf_config(_text(model_type="gemma3_text"), "relabelled")
    assert (relabelled.kv_shared_layers, relabelled.full_head_dim) == (20, 512)
    flat = {**E2B_CONFIG["text_config"], "model_type": "gemma4"}
    with pytest.raises(CapacityError, match="text_config"):
        ModelArch.from_hf_config(flat, "flat")
    empty_tower = ModelArch.from_hf_config({**E2B_CONFIG, "vision_config": {}}, "empty")
    assert empty_tower.unsized_towers == ("vision",)  # transformers builds the default tower from {}


def test_an_unstated_version_prints_tokens_as_the_current_release_does() -> None:
    # README: "Unset: the current release's rules"; 0.21+ prints concurrency × max-model-len
    result = vllm_capacity_pass(_inputs(engine_version=None, kv_cache_memory_bytes=int(9.92 * GIB)))
    assert result.kv_cache_tokens == int(result.max_concurrency * 8192)


def test_search_names_the_towers_once_and_takes_language_model_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # breaker 2026-12-04: with its towers on every candidate failed and the search said only "all 1176 cannot run";
    # --language-model-only was refused with --search, so there was no way on
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**E2B_CONFIG, "vision_config": {"hidden_size": 768}}), encoding="utf-8")
    argv = ["plan", "--search", "--model", str(path), "--arrival-rate", "1", "--prompt-tokens", "500"]
    argv += ["--output-tokens", "100", "--ttft", "2", "--tpot", "0.1", "--gpu", "l4", "--json"]
    assert main(argv) == 2
    assert "--language-model-only" in capsys.readouterr().err
    assert main([*argv, "--language-model-only"]) == 0
    assert json.loads(capsys.readouterr().out)["feasible"]
