"""``capacity-advisor catalog``: tables with a header row, and the names suggested for an unknown model (issue 19,
"Catalog")."""

from __future__ import annotations

import re

import pytest

from advisor.capacity.models import get_preset
from advisor.errors import UnknownModelError
from tests.inprocess import run_cli


def _cells(lines: list[str]) -> list[dict[str, str]]:
    """Each row's cells keyed by the header's names (columns are 2+ spaces apart; only the last may be empty)."""
    names = re.split(r"\s{2,}", lines[0].strip())
    return [dict(zip(names, re.split(r"\s{2,}", line.strip()), strict=False)) for line in lines[1:]]


def test_the_model_catalog_has_a_header_and_its_columns_read_under_it() -> None:
    """Llama-3.1-8B-Instruct as its config.json and model card publish it
    (https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct): 8.03 B parameters, 32 layers, 8 KV heads,
    max_position_embeddings 131,072."""
    r = run_cli("catalog", "models")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["MODEL", "PARAMETERS", "LAYERS", "KV", "HEADS", "CONTEXT", "(tokens)"]
    row = next(x for x in _cells(lines) if x["MODEL"] == "meta-llama/Llama-3.1-8B-Instruct")
    assert row == {
        "MODEL": "meta-llama/Llama-3.1-8B-Instruct",
        "PARAMETERS": "8.03 B",
        "LAYERS": "32",
        "KV HEADS": "8",
        "CONTEXT (tokens)": "131,072",
    }
    # every number ends at its header's right edge
    edge = lines[0].index("LAYERS") + len("LAYERS")
    assert all(line[edge - 1].isdigit() and line[edge : edge + 1] in (" ", "") for line in lines[1:])


def test_the_gpu_catalog_has_a_header() -> None:
    """H100 SXM: 3.35 TB/s of memory bandwidth (NVIDIA H100 datasheet), with NVLink SHARP (third-generation
    NVSwitch)."""
    r = run_cli("catalog", "gpus")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["GPU", "NAME", "MEMORY", "BANDWIDTH", "TP", "DOMAIN", "NVLINK", "SHARP"]
    cells = {x["GPU"]: x for x in _cells(lines)}
    row = cells["h100-sxm"]
    assert row["BANDWIDTH"] == "3.35 TB/s"
    assert row.get("NVLINK SHARP") == "NVLink SHARP"
    # HGX H100: eight GPUs per NVSwitch domain; GB200 NVL72: 72; a PCIe part states none
    assert (row["TP DOMAIN"], cells["gb200"]["TP DOMAIN"], cells["l40s"]["TP DOMAIN"]) == (
        "8 GPUs",
        "72 GPUs",
        "not stated",
    )


def _suggested(query: str) -> list[str]:
    with pytest.raises(UnknownModelError) as err:
        get_preset(query)
    hint = re.search(r"did you mean (.*?)\? ", str(err.value))
    assert hint is not None, str(err.value)
    return re.findall(r"'([^']+)'", hint.group(1))


def test_llama_70b_suggests_the_llama_3_70b_models_first() -> None:
    """Issue 19: ``--model llama-70b`` suggested 'Llama-2-70b-hf' and 'Llama-2-7b-hf'. The ids holding every word
    come first: those named after the query's first word (``Llama-…``), newest version first, then the others
    (``DeepSeek-R1-Distill-Llama-70B``)."""
    assert _suggested("llama-70b") == [
        "meta-llama/Llama-3.3-70B-Instruct",
        "meta-llama/Llama-3.1-70B-Instruct",
        "meta-llama/Llama-2-70b-hf",
        "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
    ]
    assert _suggested("qwen-7b")[0] == "Qwen/Qwen2.5-7B-Instruct"
    assert _suggested("meta-llama/Llama-3.1-8B-Instuct")[0] == "meta-llama/Llama-3.1-8B-Instruct"  # a typo
