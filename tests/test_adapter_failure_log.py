"""An adapter failure is logged with its traceback once per target and error, then at DEBUG (breaker 24).

A page that broke the adapter broke it on every scrape, and each scrape logged its whole traceback: 17,826 log lines
in 12 s at a 2 s interval for one target, burying every other line. The target's state (``parse_error``, "adapter
error: …") says it while it lasts; the log says it once. The failure is forced by replacing the module's ``observe``
(the page parser has no known input left that raises)."""

from __future__ import annotations

import logging

import pytest

from advisor import collect
from advisor.collect import CollectJob, observe_page
from advisor.sources.scrape import ScrapeResult


def _raise(*_args: object, **_kw: object) -> object:
    raise RecursionError("maximum recursion depth exceeded")


def test_one_traceback_per_target_and_error(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(collect, "observe", _raise)
    monkeypatch.setattr(collect, "_ADAPTER_FAILURES_LOGGED", set())
    jobs = [
        CollectJob("chat", f"http://127.0.0.1:{port}/metrics", "vllm", None, None, 1.0, 1.0, 1 << 20, 0, 0)
        for port in (8001, 8002)
    ]
    page = ScrapeResult("http://127.0.0.1/metrics", True, "vllm:num_requests_running 1\n", None, None, 0.01, 200)
    caplog.set_level(logging.DEBUG, logger="advisor.collect")
    for _ in range(5):
        for job in jobs:
            got = observe_page(job, page)
            assert not got.ok and got.error_message == "adapter error: RecursionError"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and all(r.exc_info for r in errors)  # one per target
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG and "again" in r.getMessage()]) == 8
