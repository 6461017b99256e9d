"""The per-request length histograms' ``_sum`` and ``_count`` (``EngineSnapshot.request_prompt_tokens_sum`` …): vLLM
``vllm:request_prompt_tokens`` / ``vllm:request_generation_tokens`` and TGI ``tgi_request_input_length`` /
``tgi_request_generated_tokens``, summed over data-parallel ranks; unknown, never 0, where a page lacks them or gives
a value no histogram can have."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from advisor.domain import EngineSnapshot
from advisor.engines import get_adapter
from advisor.sources.exposition import parse_exposition

SHARED = Path(os.environ.get("ADVISOR_SHARED_DIR") or Path(__file__).resolve().parents[2].parent / "shared")

FIELDS = (
    "request_prompt_tokens_sum",
    "request_prompt_tokens_count",
    "request_generation_tokens_sum",
    "request_generation_tokens_count",
)


def _read(engine: str, text: str) -> EngineSnapshot:
    adapter = get_adapter(engine)
    return adapter.snapshot(parse_exposition(text, adapter.wants))


def _vllm(values: dict[str, tuple[float, float]]) -> str:
    """Two DP ranks' pages in vLLM V1's shape: ``{engine="0"|"1", model_name="m"}``; ``values`` maps
    ``prompt``/``generation`` → (rank 0, rank 1) sums, and ``prompt_count``/``generation_count`` likewise."""
    lines = [
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0",model_name="m"} 1.0',
        'vllm:num_requests_running{engine="1",model_name="m"} 2.0',
    ]
    for kind in ("prompt", "generation"):
        lines.append(f"# TYPE vllm:request_{kind}_tokens histogram")
        for rank in (0, 1):
            labels = f'engine="{rank}",model_name="m"'
            count = values[f"{kind}_count"][rank]
            lines += [
                f'vllm:request_{kind}_tokens_bucket{{{labels},le="+Inf"}} {count}',
                f"vllm:request_{kind}_tokens_count{{{labels}}} {count}",
                f"vllm:request_{kind}_tokens_sum{{{labels}}} {values[kind][rank]}",
            ]
    return "\n".join(lines) + "\n"


def test_vllm_sums_the_ranks() -> None:
    snap = _read(
        "vllm",
        _vllm(
            {
                "prompt": (12_000.0, 30_000.0),
                "prompt_count": (4.0, 6.0),
                "generation": (800.0, 1_200.0),
                "generation_count": (4.0, 6.0),
            }
        ),
    )
    assert snap.request_prompt_tokens_sum == 42_000.0
    assert snap.request_prompt_tokens_count == 10.0
    assert snap.request_generation_tokens_sum == 2_000.0
    assert snap.request_generation_tokens_count == 10.0


@pytest.mark.parametrize("bad", ["NaN", "-5", "+Inf"])
def test_a_value_no_histogram_can_have_is_unknown(bad: str) -> None:
    text = _vllm(
        {"prompt": (1.0, 2.0), "prompt_count": (1.0, 1.0), "generation": (1.0, 1.0), "generation_count": (1.0, 1.0)}
    ).replace(
        'vllm:request_prompt_tokens_sum{engine="1",model_name="m"} 2.0',
        f'vllm:request_prompt_tokens_sum{{engine="1",model_name="m"}} {bad}',
    )
    snap = _read("vllm", text)
    assert snap.request_prompt_tokens_sum is None
    assert snap.request_prompt_tokens_count == 2.0


def test_a_page_without_them_leaves_them_unknown() -> None:
    snap = _read("vllm", '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 1.0\n')
    assert all(getattr(snap, f) is None for f in FIELDS)


def test_tgi_reads_input_length_and_generated_tokens() -> None:
    text = "\n".join(
        [
            "# TYPE tgi_batch_current_size gauge",
            "tgi_batch_current_size 3",
            "# TYPE tgi_request_input_length histogram",
            'tgi_request_input_length_bucket{le="+Inf"} 400',
            "tgi_request_input_length_sum 2400000",
            "tgi_request_input_length_count 400",
            "# TYPE tgi_request_generated_tokens histogram",
            'tgi_request_generated_tokens_bucket{le="+Inf"} 390',
            "tgi_request_generated_tokens_sum 468000",
            "tgi_request_generated_tokens_count 390",
        ]
    )
    snap = _read("tgi", text + "\n")
    assert (snap.request_prompt_tokens_sum, snap.request_prompt_tokens_count) == (2_400_000.0, 400.0)
    assert (snap.request_generation_tokens_sum, snap.request_generation_tokens_count) == (468_000.0, 390.0)


def test_a_real_vllm_capture_matches_its_own_lines() -> None:
    """vLLM 0.33's page (``../shared/engine-metrics``): each field equals the page's one unlabelled-by-rank line, read
    here with a regular expression instead of the adapter."""
    path = SHARED / "engine-metrics" / "vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom"
    if not path.is_file():
        pytest.skip(f"../shared absent: {path} is not a file")
    text = path.read_text()
    snap = _read("vllm", text)
    for field, sample in zip(
        FIELDS,
        (
            "request_prompt_tokens_sum",
            "request_prompt_tokens_count",
            "request_generation_tokens_sum",
            "request_generation_tokens_count",
        ),
        strict=True,
    ):
        values = [float(v) for v in re.findall(rf"^vllm:{sample}\{{[^}}]*\}} (\S+)$", text, re.M)]
        assert values, sample
        assert getattr(snap, field) == pytest.approx(sum(values))
