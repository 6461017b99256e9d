"""Log lines built from outside text (model labels, target errors, error bodies) stay one line each."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator

import pytest

from advisor.cli import _setup_logging

FORGED = 'a"b\nc 2026-01-01 00:00:00,000 ERROR advisor: forged\x1b]0;pwned\x07\r\u2028'


@pytest.fixture
def root_handlers() -> Iterator[None]:
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    yield
    root.handlers[:] = saved
    root.setLevel(level)


def _line(fmt: str, msg: str, *args: object) -> str:
    _setup_logging("info", fmt)
    formatter = logging.getLogger().handlers[0].formatter
    assert formatter is not None
    record = logging.LogRecord("advisor.service", logging.WARNING, __file__, 1, msg, args, None)
    return formatter.format(record)


@pytest.mark.usefixtures("root_handlers")
def test_a_text_log_line_escapes_control_characters_in_the_message_and_every_value() -> None:
    line = _line("text", "deployment=%s target %s: served_model %r matches none\n", "d", FORGED, FORGED)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\x07" not in line
    assert "\u2028" not in line
    assert line.count(" WARNING advisor.service: ") == 1
    assert 'a"b\\nc 2026-01-01 00:00:00,000 ERROR advisor: forged\\x1b]0;pwned\\x07\\r\\u2028' in line


@pytest.mark.usefixtures("root_handlers")
def test_a_json_log_line_stays_one_valid_object() -> None:
    line = _line("json", "target %s: %s", "t", FORGED)
    assert "\n" not in line
    assert json.loads(line)["msg"] == f"target t: {FORGED}"


@pytest.mark.usefixtures("root_handlers")
def test_a_traceback_escapes_the_outside_text_its_exceptions_quote() -> None:
    _setup_logging("info", "text")
    formatter = logging.getLogger().handlers[0].formatter
    assert formatter is not None
    try:
        try:
            raise KeyError(FORGED)
        except KeyError as inner:
            raise ValueError(f"bad page: {FORGED}") from inner
    except ValueError:
        record = logging.LogRecord("advisor.service", logging.ERROR, __file__, 1, "adapter failed", (), sys.exc_info())
    text = formatter.format(record)
    lines = text.splitlines()
    assert lines[0].endswith(" ERROR advisor.service: adapter failed")
    assert not any(ln.startswith("c 2026-01-01") for ln in lines), text  # no forged line, in either exception
    assert "\x1b" not in text and "\u2028" not in text
    assert any(ln.startswith('ValueError: bad page: a"b\\nc 2026-01-01') for ln in lines), text


@pytest.mark.usefixtures("root_handlers")
def test_a_json_lines_deployment_field_leaves_the_sentences_colon_out() -> None:
    # fresh-user walkthrough 2026-12-07: "deployment=llama8b-h100: the capacity pass predicts …" gave the field
    # "llama8b-h100:", and a log pipeline joining on deployment="llama8b-h100" matched nothing
    import json

    out = json.loads(_line("json", "deployment=%s: the capacity pass predicts +136%%", "llama8b-h100"))
    assert out["deployment"] == "llama8b-h100"
    out = json.loads(_line("json", "target=%s, deployment=%s; down", "http://10.0.0.1:8000/metrics", "d"))
    assert (out["target"], out["deployment"]) == ("http://10.0.0.1:8000/metrics", "d")
