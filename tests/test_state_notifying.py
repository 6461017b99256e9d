"""The state file's write-ahead record of the transitions being notified (issue 14, crash window): written in
the same atomic write as the open set, kept by the other sections' writers, cleared by the next write, and a
transition that resolved keeps its ``resolved_at`` and ``resolved_reason`` (so a re-submission after a crash
has the same idempotency key and says the same)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from advisor.errors import StateError
from advisor.state import load_notifying, load_state, save_section, save_state
from tests.notify.conftest import BASE

OPEN = dataclasses.replace(BASE, id="aaaaaaaaaaaaaaaa", opened_at=1_790_000_000.25)
GONE = dataclasses.replace(BASE, id="bbbbbbbbbbbbbbbb", resolved_at=1_790_000_100.5, resolved_reason="removed")


def test_the_open_set_and_the_transitions_being_notified_are_one_write(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(path, [OPEN], 1_790_000_200.0, [("opened", OPEN), ("resolved", GONE)])
    assert [r.id for r in load_state(path)] == [OPEN.id]
    got = load_notifying(path)
    assert [(k, r.id) for k, r in got] == [("opened", OPEN.id), ("resolved", GONE.id)]
    assert got[0][1].opened_at == OPEN.opened_at
    assert (got[1][1].resolved_at, got[1][1].resolved_reason) == (GONE.resolved_at, "removed")
    save_section(path, "acks", {"x": 1}, 1_790_000_201.0)  # another section's writer keeps the record
    assert len(load_notifying(path)) == 2
    save_state(path, [OPEN], 1_790_000_202.0)  # the outbox holds them: cleared
    assert load_notifying(path) == []
    assert json.loads(path.read_text())["acks"] == {"x": 1}


def test_a_file_without_the_record_reads_as_nothing_being_notified(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    assert load_notifying(path) == []
    path.write_text(json.dumps({"version": 1, "saved_at": 0, "recommendations": []}))
    assert load_notifying(path) == []
    with pytest.raises(ValueError):
        save_section(path, "notifying", [], 0.0)  # reserved: only save_state writes it


def test_a_malformed_record_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"version": 1, "recommendations": [], "notifying": [{"kind": "opened"}]}))
    with pytest.raises(StateError, match="malformed notifying entry"):
        load_notifying(path)
