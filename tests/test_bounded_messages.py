"""A page of thousands of models gives short messages: lists are cut to the first 20 and say how many more."""

from __future__ import annotations

import pytest

from advisor.observe import observe

N = 3000


# running and waiting gauges (vllm/v1/metrics/loggers.py; sglang/srt/metrics/collector.py)
GAUGES = {
    "vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting"),
    "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs"),
}


def _page(engine: str) -> str:
    return "".join(f'{g}{{model_name="model-{i}"}} 3\n' for i in range(N) for g in GAUGES[engine])


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_missing_names_at_most_20_ignored_models_then_how_many_more(engine: str) -> None:
    obs = observe(_page(engine), engine, served_model="model-7")
    assert obs.snapshot is not None, obs.error_message
    ignored = [m for m in obs.snapshot.missing if "(ignored)" in m]
    assert ignored[0] == 'model_name="model-0" (ignored)'
    assert len(ignored) == 20
    assert f"{N - 1 - 20} more models ignored" in obs.snapshot.missing
    assert len("; ".join(obs.snapshot.missing)) < 4000


@pytest.mark.parametrize("served_model", [None, "nope"])
def test_served_model_not_found_names_20_models_and_how_many_more(served_model: str | None) -> None:
    obs = observe(_page("vllm"), "vllm", served_model=served_model, strict=True)
    assert obs.error_reason == "served_model_not_found"
    message = obs.error_message or ""
    assert "model-19," in message and "model-20," not in message
    assert f"… and {N - 20} more" in message
    assert len(message) < 1000


def test_the_pick_one_hint_is_bounded() -> None:
    hint = observe(_page("vllm"), "vllm", strict=False).hint() or ""
    assert f"… and {N - 20} more" in hint and len(hint) < 1000
