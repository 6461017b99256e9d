"""``once --json`` through a loopback stand-in SGLang server whose ``sglang:swa_token_usage`` is ``+Inf``:
the output is strict JSON (no bare ``Infinity``/``NaN``), the swa pool's usage is unknown and named in
``missing``, and no rule is withheld on it. The page is SGLang 0.5.x's scheduler exposition
(tests/states ``SGLangEngine``, names from python/sglang/srt/metrics/collector.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.inprocess import run_cli
from tests.states import SGLangEngine, TwoScrapeServer


def _page(swa_usage: str) -> str:
    eng = SGLangEngine(
        model_name="google/gemma-3-27b-it", max_total_num_tokens=100_000, context_len=8192, swa_tokens=20_000
    )
    eng.g["num_running_reqs"] = 12.0
    eng.g["num_queue_reqs"] = 30.0
    eng.set_usage(full_used=30_000, swa_used=10_000)
    lines = eng.render().splitlines()
    out = [
        line.rsplit(" ", 1)[0] + " " + swa_usage if line.startswith("sglang:swa_token_usage{") else line
        for line in lines
    ]
    assert out != lines
    return "\n".join(out) + "\n"


@pytest.fixture
def inf_swa() -> Iterator[TwoScrapeServer]:
    srv = TwoScrapeServer(_page("+Inf"), _page("+Inf"))
    yield srv
    srv.stop()


def _strict(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_once_json_with_an_infinite_swa_usage_is_strict_json_and_withholds_nothing(
    inf_swa: TwoScrapeServer, tmp_path: Path
) -> None:
    cfg = tmp_path / "advisor.yaml"
    cfg.write_text(
        f"""
deployments:
  - name: swa
    engine: sglang
    targets: ["{inf_swa.url}"]
    model: google/gemma-3-27b-it
    gpu: H100-SXM
    max_model_len: 8192
    slo: {{ttft_seconds: 2.5, tpot_seconds: 0.1}}
"""
    )
    r = run_cli("once", "--config", str(cfg), "--interval", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    (d,) = _strict(r.stdout)["deployments"]
    snap = d["snapshot"]
    assert any(m.startswith("pool swa usage_ratio (value inf") for m in snap["missing"]), snap["missing"]
    assert "inf%" not in r.stdout
    assert "swa pool is saturated" not in r.stdout
