"""Issue 16, kind F: a Qwen-VL vision tower's run in vLLM V1's memory profile (``advisor.capacity.encoder``).

Before this the pass counted the tower's weights and nothing of its run: ``profile_run`` puts one image "of the
maximum feature size" (16,384 tokens, 65,536 patches) through the tower before the language model's dummy run, and
the engine sizes the KV cache after that peak. Expected figures come from published start-up logs and hand
arithmetic on the engine's rules, never from our code:

* Log A (github.com/tsailiming/openshift-ai-bootstrap/blob/535d75b682b4cf2e15eb8b5d6161c05302de1dcd/docs/demo/
  bring-your-own-model.md): Qwen2.5-VL-7B-Instruct on an L4, vLLM 0.9.0.1, ``max_model_len`` 2048, "Chunked prefill
  is enabled with max_num_batched_tokens=2048", "Model loading took 15.6271 GiB", "Encoder cache will be initialized
  with a budget of 16384 tokens, and profiled with 1 image items of the maximum feature size", "Available KV cache
  memory: 1.81 GiB", "GPU KV cache size: 33,824 tokens". The L4's CUDA total as vLLM prints it is 22.03 GiB
  ("Free memory on device (21.84/22.03 GiB)"), utilization the default 0.9: 22.03 × 0.9 − 15.6271 − 1.81 = 2.39 GiB
  outside weights and KV cache. The text-only pass left 0.86 GiB there (the pool came out 3.5 GiB, twice the log's).
* Log C (a vLLM 0.23.0 run on an A100-SXM4-80GB): "Encoder cache will be initialized with a budget of 114688
  tokens, and profiled with 1 video items of the maximum feature size" at "Using max model len 128000": 128,000 ÷
  16,384 = 7.8, so 7 whole temporal patches of the largest frame pair, 114,688 tokens.

The config below is Qwen2.5-VL-7B-Instruct's shape (its model card and config.json: 28 layers of 3,584, 28 heads, 4 KV
heads, intermediate 18,944, vocabulary 152,064; vision tower 32 blocks of 1,280, intermediate 3,420, 16 heads,
patch 14, merge 2, out 3,584), written here as our own fixture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.capacity.encoder import encoder_profile
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import ModelArch, language_model_only_limits, without_unused_vision_tower
from advisor.cli import main

GIB = 1 << 30
L4_CUDA_TOTAL_GIB = 22.03

QWEN25_VL_7B: dict[str, Any] = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "max_position_embeddings": 128000,
    "vocab_size": 152064,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vision_config": {
        "depth": 32,
        "hidden_act": "silu",
        "hidden_size": 1280,
        "intermediate_size": 3420,
        "num_heads": 16,
        "in_chans": 3,
        "out_hidden_size": 3584,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "spatial_patch_size": 14,
        "window_size": 112,
        "fullatt_block_indexes": [7, 15, 23, 31],
        "tokens_per_second": 2,
        "temporal_patch_size": 2,
    },
}
MODEL = ModelArch.from_hf_config(QWEN25_VL_7B, "Qwen/Qwen2.5-VL-7B-Instruct")


def _inputs(model: ModelArch = MODEL, **kw: Any) -> CapacityInputs:
    base: dict[str, Any] = {
        "gpu_memory_bytes": int(L4_CUDA_TOTAL_GIB * GIB),
        "engine_version": "0.9.0.1",
        "overhead_profile": "vllm-v1",
        "max_model_len": 2048,
        "max_num_batched_tokens": 2048,
    }
    base.update(kw)
    return CapacityInputs(model=model, **base)


def test_the_largest_image_goes_through_the_tower_at_fourteen_widths_a_patch() -> None:
    profile = encoder_profile(_inputs())
    assert profile is not None
    assert (profile.modality, profile.items, profile.tokens_per_item) == ("image", 1, 16_384)
    # 16,384 tokens × 4 patches × 14 widths × 1,280 × 2 bytes
    assert profile.peak_bytes == 16_384 * 4 * 14 * 1280 * 2
    assert profile.output_bytes == 16_384 * 3584 * 2  # kept in the encoder cache while the language model runs
    assert profile.unmodelled == ""


def test_log_a_outside_weights_and_kv_is_the_engine_s_within_a_quarter_gib(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN25_VL_7B), encoding="utf-8")
    argv = ["plan", "--model", str(path), "--gpu-memory-gib", str(L4_CUDA_TOTAL_GIB), "--engine-version", "0.9.0.1"]
    argv += ["--max-model-len", "2048", "--max-num-batched-tokens", "2048", "--json"]
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    plan = json.loads(out.getvalue())
    budget = L4_CUDA_TOTAL_GIB * 0.9 * GIB
    outside = budget - plan["weights_bytes_per_gpu"] - plan["kv_pool_bytes_per_gpu"]
    assert outside / GIB == pytest.approx(22.03 * 0.9 - 15.6271 - 1.81, abs=0.25)
    assert plan["encoder_profile"]["tokens_per_item"] == 16_384  # "a budget of 16384 tokens"
    assert plan["encoder_profile"]["items"] == 1  # "profiled with 1 image items"


def test_from_0_23_a_video_longer_than_the_image_is_profiled_as_log_c_says() -> None:
    profile = encoder_profile(_inputs(engine_version="0.23.0", max_model_len=128_000))
    assert profile is not None
    assert (profile.modality, profile.tokens_per_item) == ("video", 114_688)  # "a budget of 114688 tokens"
    # log C: ~15.5 GiB beside the 0.53 GiB CUDA-graph estimate (16.02 GiB outside weights and KV cache)
    assert profile.peak_bytes / GIB == pytest.approx(15.5, rel=0.05)


def test_with_video_off_the_image_is_profiled_at_any_length() -> None:
    model = without_unused_vision_tower(MODEL, {"video": 0})
    assert model.vision_modalities == ("image",)
    profile = encoder_profile(_inputs(model, engine_version="0.23.0", max_model_len=128_000))
    assert profile is not None and (profile.modality, profile.tokens_per_item) == ("image", 16_384)


def test_a_release_whose_video_rule_is_not_read_says_so_and_counts_the_image() -> None:
    profile = encoder_profile(_inputs(engine_version="0.19.0", max_model_len=65_536))
    assert profile is not None and profile.modality == "image"
    assert "video" in profile.unmodelled and '"video": 0' in profile.unmodelled


def test_a_larger_batch_budget_profiles_as_many_whole_images_as_fit() -> None:
    # encoder budget = max(max_num_batched_tokens, 16,384): 32,768 ÷ 16,384 = 2 images
    profile = encoder_profile(_inputs(max_num_batched_tokens=32_768))
    assert profile is not None and profile.items == 2


def test_tensor_parallel_ranks_split_the_tower_s_intermediates_only() -> None:
    one = encoder_profile(_inputs())
    two = encoder_profile(_inputs(tensor_parallel_size=2))
    assert one is not None and two is not None
    assert two.peak_bytes == 16_384 * 4 * (6 + 8 / 2) * 1280 * 2
    assert two.peak_bytes < one.peak_bytes


@pytest.mark.parametrize(
    "inputs",
    [
        _inputs(overhead_profile="vllm-v0", engine_version="0.6.6"),  # V0 profiles multimodal models otherwise
        _inputs(engine="sglang"),  # SGLang's pool is sized without this run
        _inputs(without_unused_vision_tower(MODEL, language_model_only_limits())),  # tower not loaded
    ],
    ids=["v0", "sglang", "language-model-only"],
)
def test_no_encoder_run_where_the_engine_has_none(inputs: CapacityInputs) -> None:
    assert encoder_profile(inputs) is None


def test_a_text_only_model_has_no_encoder_run() -> None:
    text = {k: v for k, v in QWEN25_VL_7B.items() if k != "vision_config"}
    text["model_type"], text["architectures"] = "qwen2", ["Qwen2ForCausalLM"]
    assert encoder_profile(_inputs(ModelArch.from_hf_config(text, "qwen2-7b"))) is None


def test_the_encoder_peak_raises_the_activation_term_of_the_pass() -> None:
    from advisor.capacity.overhead import activation_peak_bytes

    with_tower = max(activation_peak_bytes(_inputs()))
    without = max(activation_peak_bytes(_inputs(without_unused_vision_tower(MODEL, language_model_only_limits()))))
    assert with_tower == 16_384 * 4 * 14 * 1280 * 2  # the tower's peak is above the 2,048-token forward
    assert without < with_tower


def test_a_refusal_by_the_video_s_profile_names_it_not_the_batch(tmp_path: Path) -> None:
    """Log C: at utilization 0.22 the engine stopped ("Available KV cache memory: -14.28 GiB") after profiling one
    114,688-token video with 2,048 batched tokens; the cause is the video, and the remedy names the limit."""
    import contextlib
    import io

    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN25_VL_7B), encoding="utf-8")
    argv = ["plan", "--model", str(path), "--gpu-memory-gib", "79.15", "--engine-version", "0.23.0"]
    argv += ["--max-model-len", "128000", "--gpu-memory-utilization", "0.22", "--max-num-batched-tokens", "2048"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main([*argv, "--json"]) != 0
    said = err.getvalue()
    assert "114,688-token video" in said and "forward pass" not in said


# --- bad and edge inputs (a breaker's findings of 2026-12-06) ------------------------------------------------------


def _plan_out(argv: list[str]) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["plan", *argv])
        except SystemExit as exc:  # argparse
            code = int(exc.code or 2)
    return code, out.getvalue(), err.getvalue()


def test_image_off_keeps_the_preset_s_tower_and_profiles_the_video() -> None:
    """``{"image": 0}`` leaves video on: vLLM loads the tower and profiles a video item. The Qwen2-VL preset's text
    ``model_type`` is not the wrapper's, and the tower used to be dropped whole (weights and all)."""
    from advisor.modelfile import resolve_model

    preset = resolve_model("Qwen/Qwen2-VL-7B-Instruct", Path.cwd())
    kept = without_unused_vision_tower(preset, {"image": 0})
    assert kept.vision_parameters == preset.vision_parameters and kept.vision_modalities == ("video",)
    profile = encoder_profile(_inputs(kept, engine_version="0.23.0", max_model_len=32_768))
    assert profile is not None and (profile.modality, profile.tokens_per_item) == ("video", 32_768)


def test_video_alone_is_profiled_below_two_frame_pairs_of_context() -> None:
    model = without_unused_vision_tower(MODEL, {"image": 0})
    profile = encoder_profile(_inputs(model, engine_version="0.23.0", max_model_len=8192))
    assert profile is not None and (profile.modality, profile.tokens_per_item) == ("video", 16_384)


def test_the_stated_items_per_prompt_bound_the_dummy_batch() -> None:
    """MultiModalBudget: ``max(1, min(limit × max_num_seqs, encoder budget ÷ tokens per item))``: 8 × 1 = 8 images
    of 16,384 tokens in a 131,072-token budget."""
    model = without_unused_vision_tower(MODEL, {"image": 8, "video": 0})
    profile = encoder_profile(_inputs(model, max_num_batched_tokens=131_072, max_num_seqs=1))
    assert profile is not None and profile.items == 8
    model = without_unused_vision_tower(MODEL, {"image": 2, "video": 0})
    profile = encoder_profile(_inputs(model, max_num_batched_tokens=131_072, max_num_seqs=1))
    assert profile is not None and profile.items == 2


def test_a_qwen_vl_config_without_vision_config_loads_the_default_tower() -> None:
    """transformers' ``Qwen2_5_VLConfig`` builds its default vision config when the key is absent or null; vLLM
    loads that tower."""
    stripped = {k: v for k, v in QWEN25_VL_7B.items() if k != "vision_config"}
    empty = {**stripped, "vision_config": {}}
    for config in (stripped, {**stripped, "vision_config": None}):
        model = ModelArch.from_hf_config(config, "qwen25-vl")
        assert model.vision_parameters == ModelArch.from_hf_config(empty, "qwen25-vl").vision_parameters > 0


@pytest.mark.parametrize("value", ["1280", 0, -1280, True, 1280.0])
def test_a_bad_vision_config_value_is_refused_naming_vision_config(value: object) -> None:
    from advisor.errors import CapacityError

    config = {**QWEN25_VL_7B, "vision_config": {**QWEN25_VL_7B["vision_config"], "hidden_size": value}}
    with pytest.raises(CapacityError, match=r"vision_config.*'hidden_size'"):
        ModelArch.from_hf_config(config, "qwen25-vl")


def test_qwen3_deepstack_indexes_default_when_null_and_are_checked_against_the_depth() -> None:
    from advisor.errors import CapacityError

    base = {**QWEN25_VL_7B, "model_type": "qwen3_vl", "architectures": ["Qwen3VLForConditionalGeneration"]}
    vision = {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "out_hidden_size": 3584}
    default = ModelArch.from_hf_config({**base, "vision_config": vision}, "q3").vision_parameters
    null = ModelArch.from_hf_config(
        {**base, "vision_config": {**vision, "deepstack_visual_indexes": None}}, "q3"
    ).vision_parameters
    three = ModelArch.from_hf_config(
        {**base, "vision_config": {**vision, "deepstack_visual_indexes": [8, 16, 24]}}, "q3"
    ).vision_parameters
    assert default == null == three
    for bad in ("abc", [40]):
        with pytest.raises(CapacityError, match="deepstack_visual_indexes"):
            ModelArch.from_hf_config({**base, "vision_config": {**vision, "deepstack_visual_indexes": bad}}, "q3")


def test_an_unknown_modality_key_is_refused_by_name() -> None:
    code, _, err = _plan_out(
        ["--model", "Qwen/Qwen2-VL-7B-Instruct", "--gpu", "A100-80GB", "--limit-mm-per-prompt", '{"Image": 0}']
    )
    assert code == 2 and "'Image'" in err and "lowercase" in err


def test_a_tower_whose_run_is_not_sized_is_said_on_stderr() -> None:
    code, _, err = _plan_out(
        ["--model", "google/gemma-3-4b-it", "--gpu", "L4", "--engine-version", "0.19.0", "--max-model-len", "8192"]
    )
    assert code == 0 and "its run in vLLM's start-up profile is not" in err
    code, _, err = _plan_out(
        ["--model", "google/gemma-3-4b-it", "--gpu", "L4", "--max-model-len", "8192", "--language-model-only"]
    )
    assert code == 0 and "vision tower" not in err


def test_a_fixed_pool_still_needs_the_profile_to_fit(tmp_path: Path) -> None:
    """vLLM runs its memory profile before allocating a fixed pool: 15.5 GiB of weights + an ~8.8 GiB video profile
    do not fit an L4 whatever the pool."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN25_VL_7B), encoding="utf-8")
    argv = ["--model", str(path), "--gpu", "L4", "--max-model-len", "65536", "--engine-version", "0.23.0"]
    _, _, err = _plan_out([*argv, "--kv-cache-memory-gib", "4"])
    assert "runs out of memory at start-up" in err


def test_a_refusal_by_the_video_offers_the_video_off_limit_as_a_fix(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN25_VL_7B), encoding="utf-8")
    argv = ["--model", str(path), "--gpu-memory-gib", "23", "--max-model-len", "32768", "--engine-version", "0.23.0"]
    code, out, _ = _plan_out([*argv, "--json"])
    assert code == 3
    changes = [f["change"] for f in json.loads(out)["fixes"]]
    assert "--limit-mm-per-prompt '{\"video\": 0}'" in changes
    code, _, _ = _plan_out([*argv, "--limit-mm-per-prompt", '{"video": 0}', "--json"])
    assert code == 0  # the fix offered does start


def test_vision_heads_that_tp_does_not_divide_are_refused_naming_the_key() -> None:
    """vLLM's Qwen-VL vision attention splits its heads over the TP ranks (``dist_utils.divide(num_heads,
    tp_size)`` asserts): 16 heads at TP 32 do not load, whatever the language model's heads allow."""
    from advisor.errors import CapacityError

    wide = {**QWEN25_VL_7B, "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 8192}
    model = ModelArch.from_hf_config(wide, "qwen25-vl-wide")
    with pytest.raises(CapacityError, match=r"vision_config\.num_heads"):
        _inputs(model, tensor_parallel_size=32)
    _inputs(model, tensor_parallel_size=16)  # 16 heads over 16 ranks: loads
    text_only = without_unused_vision_tower(model, language_model_only_limits())
    _inputs(text_only, tensor_parallel_size=32)  # no tower, no vision heads to split


def test_a_deployment_states_the_limits_as_vllm_takes_them(tmp_path: Path) -> None:
    """``limit_mm_per_prompt`` in a deployment sizes the pool as ``plan --limit-mm-per-prompt`` does; a bad key or
    count is refused naming the key."""
    from pydantic import ValidationError

    from advisor.capacity.deployment import resolve_deployment
    from advisor.config import Deployment, deployment_spec

    base = {
        "name": "vl",
        "model": "Qwen/Qwen2-VL-7B-Instruct",
        "gpu": "A100-80GB",
        "max_model_len": 32768,
        "engine_version": "0.23.0",
        "targets": ["http://127.0.0.1:9/metrics"],
        "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.1},
    }
    video_off = resolve_deployment(
        deployment_spec(Deployment.model_validate({**base, "limit_mm_per_prompt": {"video": 0}}))
    ).result
    default = resolve_deployment(deployment_spec(Deployment.model_validate(base))).result
    # plan at 0.23: the 32,768-token video's 4.38 GiB against the image's 2.19 GiB
    assert (video_off.kv_pool_bytes_per_gpu - default.kv_pool_bytes_per_gpu) / GIB == pytest.approx(2.19, abs=0.05)
    for bad, key in (({"Video": 0}, "'Video'"), ({"video": -1}, "video"), ({"image": True}, "image")):
        with pytest.raises(ValidationError, match=key):
            Deployment.model_validate({**base, "limit_mm_per_prompt": bad})
