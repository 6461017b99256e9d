"""A restart between opening and resolving keeps the open recommendation without re-sending it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from advisor.config import parse_config
from advisor.domain import Recommendation
from advisor.errors import StateError
from advisor.exporter import make_registry
from advisor.rules.lifecycle import Transition
from advisor.service import Service
from advisor.standin import Phase, StandInEngine, StandInServer
from advisor.state import load_state, save_state
from tests.conftest import Receiver

SATURATED = Phase("saturated", 4, 0.99, 50, 30, 2.0, 1000, 200, 2.0, 0.3, 0.03)
RECOVERED = Phase("recovered", 10_000, 0.2, 10, 0, 2.0, 1000, 200, 0, 0.1, 0.02)


def _service(url: str, state: Path, hook: str, transitions: list[Transition]) -> Service:
    data: dict[str, Any] = {
        "scrape_interval": "0.5s",
        "evaluation_window": "2s",
        "state_file": str(state),
        "deployments": [
            {
                "name": "chat-8b",
                "targets": [url],
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "gpu": "H100-SXM",
                "max_model_len": 8192,
                "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
            }
        ],
        "receivers": [{"name": "ops", "url": hook, "backoff_seconds": "0.1s"}],
        "rules": {"kv_saturation": {"for": "0.5s"}, "resolve_for": "1s"},
    }
    _, collector, metrics = make_registry()
    return Service(parse_config(data), collector, metrics, on_transition=transitions.append)


def test_restart_keeps_the_open_recommendation_and_resolves_it_once(tmp_path: Path, webhook_receiver: Receiver) -> None:
    srv = StandInServer(StandInEngine(phases=(SATURATED, RECOVERED), speed=1.0, num_gpu_blocks=1000))
    srv.start_background()
    state = tmp_path / "state.json"
    try:
        first: list[Transition] = []
        a = _service(srv.url(), state, webhook_receiver.url, first)
        for _ in range(4):
            a.run_once()
            time.sleep(0.4)
        a.close()
        opened = [t.recommendation for t in first if t.kind == "opened"]
        assert opened, "the saturated phase should open a recommendation"
        assert {r.id for r in load_state(state)} == {r.id for r in opened}

        second: list[Transition] = []
        b = _service(srv.url(), state, webhook_receiver.url, second)  # the restart
        assert {r.id for r in b.lifecycle.open_recommendations()} == {r.id for r in opened}
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not any(t.kind == "resolved" for t in second):
            b.run_once()
            time.sleep(0.4)
        b.close()
    finally:
        srv.shutdown()
        srv.server_close()
    assert [t.kind for t in second if t.kind == "opened"] == []  # never re-fired
    resolved = [t.recommendation for t in second if t.kind == "resolved"]
    assert {r.id for r in resolved} == {r.id for r in opened}
    firing_keys = [
        a["fingerprint"] for body in webhook_receiver.bodies for a in body["alerts"] if a["status"] == "firing"
    ]
    assert sorted(firing_keys) == sorted(r.id for r in opened)  # each sent once, before the restart
    assert load_state(state) == []


def test_a_state_file_of_another_version_is_a_clear_error(tmp_path: Path) -> None:
    f = tmp_path / "state.json"
    f.write_text(json.dumps({"version": 99, "recommendations": []}))
    with pytest.raises(StateError, match="version 99; this advisor reads version 1"):
        load_state(f)
    f.write_text("{not json")
    with pytest.raises(StateError, match="not JSON"):
        load_state(f)


def one_recommendation() -> Recommendation:
    """An open recommendation with every field set."""
    return Recommendation(
        id="0123456789abcdef",
        deployment="d",
        rule="kv_saturation",
        dial="kv_cache_dtype",
        action="set",
        current="auto",
        suggested="fp8",
        flag="--kv-cache-dtype fp8",
        severity="warning",
        confidence=0.7,
        summary="s",
        description="d",
        runbook="r",
        opened_at=1234.5,
        predicted_effect={"kv_cache_tokens": {"before": 1, "after": 2}},
        evidence={"window_seconds": 60.0},
    )


def test_state_is_written_atomically_and_round_trips(tmp_path: Path) -> None:
    rec = one_recommendation()
    f = tmp_path / "state.json"
    save_state(f, [rec], now=2000.0)
    assert load_state(f) == [rec]
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left behind


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"[" * 100_000 + b"]" * 100_000, "nested too deeply"), (b"\xff\xfe{}", "not UTF-8")],
    ids=["absurdly nested JSON", "not UTF-8"],
)
def test_a_hostile_state_file_is_a_clear_error(tmp_path: Path, content: bytes, message: str) -> None:
    f = tmp_path / "state.json"
    f.write_bytes(content)
    with pytest.raises(StateError, match=message):
        load_state(f)


def test_an_empty_state_file_is_a_fresh_start_and_a_garbled_one_still_refused(tmp_path: Path) -> None:
    """Breaker 20: a state file created empty (config management, ``touch``) stopped start-up with "not JSON
    (Expecting value at line 1)"; nothing was ever written there, so it reads as no state, and the first save writes
    it. A file with anything else in it is still refused, never overwritten (it may hold open incidents)."""
    from advisor.errors import StateError
    from advisor.state import load_notifying, load_state

    empty = tmp_path / "state.json"
    for text in ("", "\n  \n"):
        empty.write_text(text, encoding="utf-8")
        assert load_state(empty) == [] and load_notifying(empty) == []
    empty.write_text("{", encoding="utf-8")
    with pytest.raises(StateError, match="not JSON"):
        load_state(empty)


def test_a_bom_is_read_through_and_a_nul_filled_file_is_named_with_the_way_out(tmp_path: Path) -> None:
    """Breaker 21: a state file saved by an editor with a UTF-8 BOM stopped start-up ("Unexpected UTF-8 BOM"), its
    open incidents unread; a file of NUL bytes (a write cut short by a crash) read "not JSON (Expecting value at line
    1)" with no way forward. The BOM is read through, keeping the incident; the NUL file is named as what it is,
    with the way out, and still refused, never overwritten."""
    rec = one_recommendation()
    f = tmp_path / "state.json"
    save_state(f, [rec], now=2000.0)
    f.write_bytes(b"\xef\xbb\xbf" + f.read_bytes())
    assert load_state(f) == [rec]
    f.write_bytes(b"\0" * 4096)
    with pytest.raises(StateError, match=r"only NUL bytes.*move it aside to start fresh"):
        load_state(f)
    assert f.read_bytes() == b"\0" * 4096
