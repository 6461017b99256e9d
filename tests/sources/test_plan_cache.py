"""The selective parser's scan plan is keyed by what it depends on (the engine), not by the adapter instance.

Issue 15: every deployment has its own adapter, and ``keep=adapter.wants`` was a key per adapter; the cache holds
64 plans, so with 65 or more deployments every parse rebuilt its plan and scanned the page twice.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from advisor.engines import get_adapter
from advisor.observe import observe
from advisor.sources import selective_parser
from advisor.sources.exposition import parse_exposition, parse_exposition_full
from tests.states import VLLMEngine


def page() -> str:
    """A vLLM 0.33 page with one family no plan has seen yet (so the first parse must learn it)."""
    engine = VLLMEngine(
        model_name="m", num_gpu_blocks=1000, max_model_len=8192, gpu_memory_utilization=0.9, version="0.33"
    )
    engine.running, engine.waiting, engine.kv_usage = 3.0, 1.0, 0.25
    unseen = f"unseen_{uuid.uuid4().hex}"
    return engine.render() + f"# HELP {unseen} h\n# TYPE {unseen} gauge\n{unseen} 1.0\n"


@pytest.fixture
def learned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the plans built by learning new names (``_Plan.learn`` returning a plan)."""
    calls: list[int] = []
    real = selective_parser._Plan.learn

    def counting(self: Any, lines: list[str]) -> Any:
        plan = real(self, lines)
        if plan is not None:
            calls.append(1)
        return plan

    monkeypatch.setattr(selective_parser._Plan, "learn", counting)
    return calls


def test_adapters_of_one_engine_share_one_plan_beyond_the_cache_size(learned: list[int]) -> None:
    text = page()
    adapters = [get_adapter("vllm") for _ in range(100)]  # more deployments than the parser caches plans
    want = parse_exposition_full(text, adapters[0].wants)
    for _ in range(3):  # alternately, as the cycles of a fleet scrape them
        for adapter in adapters:
            assert parse_exposition(text, keep=adapter.wants) == want
    assert len(learned) == 1  # the first parse learned the page's names; the other 299 reused its plan
    assert adapters[0].wants == adapters[99].wants and hash(adapters[0].wants) == hash(adapters[99].wants)


def test_observe_with_many_adapters_builds_one_plan(learned: list[int]) -> None:
    text = page()
    adapters = [get_adapter("vllm") for _ in range(100)]
    for _ in range(2):
        for adapter in adapters:
            seen = observe(text, adapter)
            assert seen.snapshot is not None and seen.snapshot.requests_running == 3.0
    assert len(learned) == 1


def test_engines_do_not_share_plans() -> None:
    assert get_adapter("vllm").wants != get_adapter("sglang").wants
    sglang = get_adapter("sglang")
    text = page()
    kept = parse_exposition(text, keep=sglang.wants)
    assert kept == parse_exposition_full(text, sglang.wants)
    assert not any(name.startswith("vllm:") for name in kept)
