"""``runbook_base_url``: every notification carries it to chat and paging systems, so it never holds credentials."""

from __future__ import annotations

import pytest

from advisor.config import parse_config
from advisor.errors import ConfigError

_DEP = {
    "name": "chat",
    "engine": "vllm",
    "targets": ["http://127.0.0.1:9/metrics"],
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "gpu": "H100-SXM",
    "max_model_len": 8192,
    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
}


@pytest.mark.parametrize("url", ["https://bob:hunter2@wiki.internal/runbook", "https://bob@wiki.internal/rb"])
def test_a_runbook_url_with_credentials_is_refused_without_echoing_them(url: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [_DEP], "runbook_base_url": url}, source="test")
    text = str(err.value)
    assert "runbook_base_url" in text and "credentials" in text
    assert "hunter2" not in text


def test_an_internal_wiki_runbook_is_kept() -> None:
    cfg = parse_config({"deployments": [_DEP], "runbook_base_url": "https://wiki.internal/llm/runbook"}, source="t")
    assert cfg.runbook_base_url == "https://wiki.internal/llm/runbook"
