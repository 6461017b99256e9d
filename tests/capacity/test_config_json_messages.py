"""What a refused config.json is told (bad-input tester): the message names the file given (not ``<its folder>:
config.json``) and the key at fault; a ``torch_dtype`` or ``quantization_config.quant_method`` the pass cannot read is
refused when the file is read, naming both, and "None" is no quantization to list; a GPTQ/AWQ group size that does
not divide a layer's input suggests a smaller tensor_parallel_size only when there is one that loads it.

Expected widths are hand arithmetic from the Llama-3.1-8B shape below (hidden 4096, 32 heads of 128, intermediate
14336).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.errors import CapacityError
from advisor.modelfile import resolve_model
from tests.inprocess import CliRun, run_cli

LLAMA_8B: dict[str, Any] = {  # Llama-3.1-8B's published config.json (tests/fixtures/hf_configs, its _source)
    k: v
    for k, v in json.loads(
        (Path(__file__).parents[1] / "fixtures" / "hf_configs" / "meta-llama__Meta-Llama-3.1-8B.json").read_text()
    ).items()
    if k != "_source"
}
DTYPES = "bfloat16, float, float16, float32, half"  # vLLM's --dtype names (model_config.py _STR_DTYPE_TO_TORCH_DTYPE)


def _write(tmp_path: Path, config: dict[str, Any], name: str = "other.json") -> Path:
    folder = tmp_path / "mymodel"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _refusal(path: Path) -> str:
    with pytest.raises(CapacityError) as err:
        resolve_model(str(path))
    return str(err.value)


def _plan(path: Path, *args: str) -> CliRun:
    return run_cli("plan", "--model", str(path), "--gpu", "H100-SXM", "--max-model-len", "8192", *args)


def test_a_missing_key_names_the_file_not_its_folder(tmp_path: Path) -> None:
    path = _write(tmp_path, {k: v for k, v in LLAMA_8B.items() if k != "hidden_size"})
    message = _refusal(path)
    assert message == f"{path} has no 'hidden_size' (needed for the capacity pass)"
    assert "mymodel: config.json" not in message


def test_a_bad_value_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = _write(tmp_path, {**LLAMA_8B, "num_hidden_layers": -1})
    assert _refusal(path) == f"{path} key 'num_hidden_layers' must be a positive integer, got -1"


def test_the_cli_names_the_file_it_was_given(tmp_path: Path) -> None:
    path = _write(tmp_path, {k: v for k, v in LLAMA_8B.items() if k != "hidden_size"})
    r = _plan(path)
    assert r.returncode == 2
    assert f"{path} has no 'hidden_size'" in r.stderr
    assert "mymodel: config.json" not in r.stderr


def test_a_torch_dtype_vllm_does_not_load_is_refused_naming_the_file_and_the_key(tmp_path: Path) -> None:
    path = _write(tmp_path, {**LLAMA_8B, "torch_dtype": "float8_weird"})
    assert _refusal(path) == f"{path}: torch_dtype 'float8_weird' is not a dtype vLLM loads; known: {DTYPES}"
    r = _plan(path)
    assert r.returncode == 2
    assert f"{path}: torch_dtype 'float8_weird'" in r.stderr
    assert "unknown model dtype" not in r.stderr


def test_a_text_config_dtype_is_named_with_its_scope(tmp_path: Path) -> None:
    text = {k: v for k, v in LLAMA_8B.items() if k not in ("architectures", "torch_dtype")}
    config = {"model_type": "llava", "text_config": {**text, "torch_dtype": "int3"}}
    path = _write(tmp_path, config)
    assert _refusal(path) == f"{path}: text_config.torch_dtype 'int3' is not a dtype vLLM loads; known: {DTYPES}"


def test_a_torch_prefixed_dtype_still_loads(tmp_path: Path) -> None:
    model = resolve_model(str(_write(tmp_path, {**LLAMA_8B, "torch_dtype": "torch.float16"})))
    assert model.torch_dtype == "torch.float16"  # resolve_dtype reads it as float16


def test_an_unknown_quant_method_is_refused_naming_the_file_and_the_key_and_no_none(tmp_path: Path) -> None:
    path = _write(tmp_path, {**LLAMA_8B, "quantization_config": {"quant_method": "superquant"}})
    message = _refusal(path)
    assert message.startswith(f"{path}: quantization_config.quant_method 'superquant' is not a method")
    assert "known: awq, " in message
    assert "None" not in message
    r = _plan(path)
    assert r.returncode == 2
    assert "quantization_config.quant_method 'superquant'" in r.stderr
    assert "None" not in r.stderr


def test_an_unknown_quantization_flag_lists_no_none() -> None:
    r = run_cli(
        "plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--quantization", "x"
    )
    assert r.returncode == 2
    assert "unknown quantization 'x'; known: awq, " in r.stderr
    assert "None" not in r.stderr


def _awq(group: int) -> dict[str, Any]:
    return {**LLAMA_8B, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": group}}


def test_a_group_size_no_tp_mends_suggests_no_smaller_tp_at_tp_1(tmp_path: Path) -> None:
    # 4096 = 40 × 100 + 96: the hidden size (every TP's q/k/v/gate/up input) is no multiple of 100
    r = _plan(_write(tmp_path, _awq(100)))
    assert r.returncode == 2
    assert "does not divide hidden_size 4096" in r.stderr and "at TP=1" in r.stderr
    assert "smaller tensor_parallel_size" not in r.stderr and "or smaller" not in r.stderr
    assert "no tensor_parallel_size loads it" in r.stderr


def test_a_group_size_no_tp_mends_suggests_no_smaller_tp_at_tp_2(tmp_path: Path) -> None:
    r = _plan(_write(tmp_path, _awq(100)), "--tp", "2")
    assert r.returncode == 2
    assert "at TP=2" in r.stderr and "no tensor_parallel_size loads it" in r.stderr
    assert "or smaller" not in r.stderr


def test_a_group_size_a_smaller_tp_mends_names_that_tp(tmp_path: Path) -> None:
    # group 1024 at TP 4: down_proj input 14336 ÷ 4 = 3584 = 3 × 1024 + 512 → refused; at TP 2: 7168 = 7 × 1024,
    # o_proj 4096 ÷ 2 = 2048 = 2 × 1024, hidden 4096 = 4 × 1024 → loads (TP 3 does not split 32 heads)
    path = _write(tmp_path, _awq(1024))
    r = _plan(path, "--tp", "4")
    assert r.returncode == 2
    assert "does not divide down_proj input (intermediate_size ÷ TP) 3584 at TP=4" in r.stderr
    assert "use tensor_parallel_size 2 or smaller" in r.stderr
    assert _plan(path, "--tp", "2").returncode == 0
