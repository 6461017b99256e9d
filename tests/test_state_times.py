"""A state file or outbox whose recommendation carries a time no notification can write (NaN, ±Inf, 1e20 s: a
damaged or hand-edited file) is refused when read, naming the field — not read and then failing every resolved
notification (its idempotency key rounds the time) and every API answer (RFC 3339) that shows it. Built from the
previous release's files (``tests/fixtures/previous_release``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from advisor.errors import StateError
from advisor.notify.outbox import Outbox
from advisor.state import load_state

PREVIOUS = Path(__file__).resolve().parent / "fixtures" / "previous_release"


@pytest.mark.parametrize("value", [math.nan, math.inf, 1e20, -1e30])
def test_a_state_file_with_an_unwritable_opening_time_is_refused_naming_it(tmp_path: Path, value: float) -> None:
    doc = json.loads((PREVIOUS / "state.json").read_text(encoding="utf-8"))
    doc["recommendations"][0]["opened_at_seconds"] = value
    p = tmp_path / "state.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(StateError, match="opened_at"):
        load_state(p)


@pytest.mark.parametrize("value", [math.nan, 1e20])
def test_an_outbox_with_an_unwritable_time_is_set_aside_naming_it(
    tmp_path: Path, value: float, caplog: pytest.LogCaptureFixture
) -> None:
    """A malformed entry makes the outbox corrupt: it is moved aside whole (kept, named with the field in an ERROR
    line) and the receiver starts empty, as any corrupt outbox is (breaker 24: one receiver's file stopped the
    daemon)."""
    doc = json.loads((PREVIOUS / "ops.outbox.json").read_text(encoding="utf-8"))
    doc["pending"][0]["recommendation"]["opened_at"] = value
    p = tmp_path / "ops.outbox.json"
    text = json.dumps(doc)
    p.write_text(text, encoding="utf-8")
    box = Outbox("ops", p)
    assert not box.pending and not p.exists()
    (aside,) = tmp_path.glob("ops.outbox.json.unreadable-*")
    assert aside.read_text(encoding="utf-8") == text
    assert any("opened_at" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")


def test_a_confidence_of_nan_is_refused_naming_it(tmp_path: Path) -> None:
    doc = json.loads((PREVIOUS / "state.json").read_text(encoding="utf-8"))
    doc["recommendations"][0]["confidence"] = math.nan
    p = tmp_path / "state.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(StateError, match="confidence"):
        load_state(p)


def test_the_previous_release_files_still_read() -> None:
    assert len(load_state(PREVIOUS / "state.json")) >= 1
    assert Outbox("ops", PREVIOUS / "ops.outbox.json").pending
