"""Issue 19, "Console and logs": what the daemon writes to a terminal.

* A cycle longer than its interval is one line, ``cycle took 1.0 s > scrape_interval 0.5 s; skipped 2``, in place
  of APScheduler's "maximum number of running instances reached" per skip; its length is exported
  (``advisor_cycle_duration_seconds``).
* Every stderr line of a run has the one ``--log-format`` (text or json), third-party loggers (urllib3) and the
  HTTP server's own errors included; the run ends with a ``stopped (SIGTERM)`` line.
* ``--compact`` keeps every console line of the demo (stdout and stderr) under 160 characters.
* The demo's stand-in engines print no traceback when a client hangs up mid-request.
* The log handler writes to the ``sys.stderr`` of each record, not to a stream closed since it was configured.

Timing: nothing here bounds wall-clock time; the long cycle is held until the scheduler has counted two skipped
run times (cycles counted, not seconds).
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from advisor.cli import _setup_logging
from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.logfmt import COMPACT_WIDTH
from advisor.scheduler import run_daemon
from advisor.service import Service
from advisor.sim.scenarios import DEMO_SCENARIOS
from advisor.sim.server import start_fleet
from advisor.standin import Phase, StandInEngine, StandInServer
from tests.conftest import REPO_ROOT

TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: ")
"""A text log line: ``logging``'s asctime, the level, the logger, the message (advisor.logfmt.TEXT_FORMAT)."""


@pytest.fixture
def engine() -> Iterator[StandInServer]:
    phase = Phase("steady", 10_000, 0.5, 8, 0, 3.0, 1500, 300, 1.0, 0.5, 0.05)
    srv = StandInServer(StandInEngine(phases=(phase,), speed=1.0, num_gpu_blocks=2000))
    srv.start_background()
    yield srv
    srv.shutdown()
    srv.server_close()


def _config(url: str, interval: str) -> dict[str, Any]:
    return {
        "scrape_interval": interval,
        "evaluation_window": "5s",
        "deployments": [
            {
                "name": "chat-8b",
                "engine": "vllm",
                "targets": [url],
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "gpu": "H100-SXM",
                "max_model_len": 8192,
                "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
            }
        ],
    }


def _reset(port: int, data: bytes) -> None:
    """Connect to ``port``, send ``data`` and hang up with a reset (SO_LINGER 0), reading nothing."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(data)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


@pytest.mark.integration
def test_a_cycle_longer_than_its_interval_is_one_line_and_its_duration_is_exported(
    engine: StandInServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The second cycle holds its scrape until APScheduler has skipped two run times (0.5 s interval): the cycle
    took at least one interval more than the interval, so exactly one warning ``cycle took X s > scrape_interval
    0.5 s; skipped 2`` with X > 0.5, no APScheduler skip notice, ``advisor_cycles_skipped_total`` 2 and
    ``advisor_cycle_duration_seconds`` above the interval. On main APScheduler warned once per skip and nothing
    said how long the cycle took."""
    caplog.set_level(logging.INFO)
    cfg = parse_config(_config(engine.url(), "0.5s"))
    registry, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics)
    skipped = lambda: registry.get_sample_value("advisor_cycles_skipped_total") or 0.0  # noqa: E731
    scrape = svc.scrape_once
    cycles = [0]
    durations: list[float] = []
    stop = threading.Event()

    def slow_second_scrape(budget: float | None = None) -> None:
        cycles[0] += 1
        if cycles[0] == 2:  # hold this cycle until two run times have been skipped (counted, not timed)
            deadline = time.monotonic() + 60
            while skipped() < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        elif cycles[0] == 3:
            durations.append(registry.get_sample_value("advisor_cycle_duration_seconds") or 0.0)
        elif cycles[0] >= 5:
            stop.set()
        scrape(budget)

    svc.scrape_once = slow_second_scrape  # type: ignore[method-assign]
    thread = threading.Thread(
        target=run_daemon, args=(svc, registry, "127.0.0.1:0"), kwargs={"stop_event": stop}, daemon=True
    )
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "the daemon did not stop"
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "maximum number of running instances" in m or "was missed by" in m]
    long = [m for m in messages if m.startswith("cycle took")]
    assert len(long) == 1, messages
    m = re.fullmatch(r"cycle took (\d+\.\d) s > scrape_interval 0\.5 s; skipped (\d+)", long[0])
    assert m, long[0]
    assert float(m.group(1)) >= 0.5 and m.group(2) == "2", long[0]
    assert skipped() == 2
    (held,) = durations  # the second cycle's, read at the start of the third
    assert held > 0.5, held
    assert messages[-1].startswith("stopped (stop requested) after "), messages[-3:]


@pytest.mark.integration
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_every_stderr_line_of_a_run_has_the_log_format_and_sigterm_ends_with_stopped(
    engine: StandInServer, tmp_path: Path, fmt: str
) -> None:
    """``--log-level debug run``: the advisor's lines and a client that resets its
    connection to the advisor mid-request (on main: ``Exception occurred during processing of request`` and a raw
    traceback) — every stderr line is one log line of ``--log-format``; SIGTERM ends with ``stopped (SIGTERM)``."""
    cfg = tmp_path / "advisor.yaml"
    cfg.write_text(json.dumps(_config(engine.url(), "0.5s")))
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "advisor.cli", "--log-level", "debug", "--log-format", fmt, "run"),
            *("--config", str(cfg), "--listen", "127.0.0.1:0"),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        lines.extend(proc.stderr)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        url = None
        deadline = time.monotonic() + 30
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            m = re.search(r"serving (http://[^\s\"]+)/metrics", "".join(lines))
            url = m.group(1) if m else None
            time.sleep(0.05)
        assert url, "".join(lines)
        port = int(url.rsplit(":", 1)[1])
        for _ in range(5):
            _reset(port, b"GET /metr")  # the request line half sent, then a reset
            _reset(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        cycles = 0.0
        while cycles < 3 and time.monotonic() < deadline + 30:  # three cycles, counted
            text = requests.get(url + "/metrics", timeout=5).text
            m = re.search(r"^advisor_cycle_last_success_timestamp_seconds (\S+)", text, re.M)
            cycles += 1 if m and float(m.group(1)) > 0 else 0
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
    assert lines
    loggers = set()
    for line in lines:
        if fmt == "json":
            record = json.loads(line)
            assert {"ts", "level", "logger", "msg"} <= set(record), line
            loggers.add(record["logger"])
        else:
            m = TEXT_LINE.match(line)
            assert m, line
            loggers.add(line.split(" ", 4)[3].rstrip(":"))
    # the standard library server's hang-ups (socketserver's handle_error, a raw traceback on main), same format
    assert "advisor.hangups" in loggers, loggers
    last = json.loads(lines[-1])["msg"] if fmt == "json" else lines[-1]
    assert re.search(r"stopped \(SIGTERM\) after \d+ cycle\(s\)$", last.rstrip()), lines[-3:]


@pytest.mark.integration
def test_compact_demo_lines_stay_under_160_characters_and_sigterm_says_stopped() -> None:
    """``demo --compact`` at 20× until the ramp's saturation has opened and resolved (its states: idle, saturated,
    recovered; the other scenarios open theirs), then SIGTERM: every stdout and stderr line is under 160
    characters (the full lines reach 380: engine lists, OPENED with why/effect/flag), and both streams say
    stopped. On main ``--compact`` did not exist (exit 2)."""
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "advisor.cli", "demo", "--compact", "--listen", "127.0.0.1:0"),
            *("--duration", "0", "--speed", "20"),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    out: list[str] = []
    err: list[str] = []

    def pump(stream: Any, into: list[str]) -> None:
        into.extend(stream)

    readers = [
        threading.Thread(target=pump, args=(proc.stdout, out), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, err), daemon=True),
    ]
    for r in readers:
        r.start()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not any("RESOLVED demo-chat-8b" in line for line in out):
            assert proc.poll() is None, "".join(out + err)
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for r in readers:
            r.join(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert any(" OPENED " in line for line in out), "".join(out)
    assert any("RESOLVED demo-chat-8b" in line for line in out), "".join(out)
    long = [line for line in out + err if len(line.rstrip("\n")) >= COMPACT_WIDTH]
    assert not long, long
    assert out[-1].startswith("capacity-advisor demo: stopped;"), out[-3:]
    assert re.search(r"stopped \(SIGTERM\) after \d+ cycle\(s\)$", err[-1].rstrip()), err[-3:]


@pytest.mark.integration
def test_stand_in_engines_print_no_traceback_when_a_client_hangs_up(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Clients that send a request and reset the connection before reading (or halfway through the request line),
    against the demo fleet's replica server and the stand-in engine: nothing on stderr, nothing logged above debug,
    and each hang-up seen (logged at debug by advisor.hangups). On main socketserver printed ``Exception occurred
    during processing of request`` and a ``BrokenPipeError``/``ConnectionResetError`` traceback for each."""
    caplog.set_level(logging.DEBUG, logger="advisor.hangups")
    standin = StandInServer(StandInEngine(speed=1.0))
    standin.start_background()
    try:
        with start_fleet(DEMO_SCENARIOS[:1], speed=1.0) as fleet:
            ports = [int(url.split(":")[2].split("/")[0]) for _, url in fleet.targets] + [standin.server_address[1]]
            for port in ports:
                for _ in range(10):
                    _reset(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                    _reset(port, b"GET /metr")
                # the server is still answering (and has finished with the hang-ups it was handling)
                assert requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 200
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and len(caplog.records) < len(ports):
                time.sleep(0.05)
    finally:
        standin.shutdown()
        standin.server_close()
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err
    assert not [r for r in caplog.records if r.levelno > logging.DEBUG], caplog.records
    assert len({r.getMessage() for r in caplog.records if "hung up" in r.getMessage()}) >= len(ports)


def test_the_log_handler_writes_to_the_stderr_of_each_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI configures logging while ``sys.stderr`` is one stream (pytest's capture of a test), which is then
    closed and replaced: a later record goes to the new ``sys.stderr``. On main the handler kept the first stream
    and every later record printed "--- Logging error --- … ValueError: I/O operation on closed file" instead."""
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    _setup_logging("info", "text")
    first.close()
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    logging.getLogger("advisor.test").warning("after the swap")
    text = second.getvalue()
    assert "Logging error" not in text, text
    assert TEXT_LINE.match(text) and text.rstrip().endswith("advisor.test: after the swap"), text


def _rec(deployment: str) -> Any:
    """The notify tests' recommendation (tests/notify/conftest.py), turned: ``kv_cache_dtype`` auto → fp8."""
    from tests.notify.conftest import BASE

    return dataclasses.replace(
        BASE,
        id="3ec50bdbf032fe23",
        deployment=deployment,
        dial="kv_cache_dtype",
        action="set",
        current="auto",
        suggested="fp8",
        flag="--kv-cache-dtype fp8",
        resolved_at=BASE.opened_at + 60,
        problem="saturation",
    )


@pytest.mark.parametrize("kind", ["opened", "updated", "resolved"])
@pytest.mark.parametrize("name_len", [8, 120, 400])
def test_a_compact_transition_is_under_160_characters_and_keeps_its_id(kind: str, name_len: int) -> None:
    """Whatever the deployment name's length (8, 120, 400 characters) and the reason's (300), the compact line is
    under 160 characters and ends with the whole id (what ``/api/v1/recommendations/<id>`` and acks take); a short
    one is not cut."""
    from advisor.console import compact_transition
    from advisor.rules.lifecycle import Transition

    line = compact_transition(Transition(kind, _rec("d" * name_len), reason="KV usage 97%, " * 20))
    assert len(line) < COMPACT_WIDTH, (len(line), line)
    assert line.endswith(" | id 3ec50bdbf032fe23"), line
    if name_len == 8 and kind == "opened":
        assert "OPENED WARNING dddddddd saturation: kv_cache_dtype auto → fp8 | --kv-cache-dtype fp8" in line, line


def test_compact_text_log_lines_are_one_line_under_160_characters() -> None:
    """A 500-character message with a traceback: one line under 160, cut with ``…``; the exception reduced to
    ``(Type: message)`` when the line has room (a short message)."""
    from advisor.logfmt import TextFormatter

    fmt = TextFormatter(compact=True)
    try:
        raise ValueError("bad page\nforged line")
    except ValueError:
        exc_info = sys.exc_info()
    long = logging.LogRecord("advisor.x", logging.ERROR, __file__, 1, "x" * 500, None, exc_info)
    short = logging.LogRecord("advisor.x", logging.ERROR, __file__, 1, "scrape failed", None, exc_info)
    out_long, out_short = fmt.format(long), fmt.format(short)
    assert "\n" not in out_long and len(out_long) == COMPACT_WIDTH - 1 and out_long.endswith("…"), out_long
    assert out_short.endswith("ERROR advisor.x: scrape failed (ValueError: bad page\\nforged line)"), out_short


def test_a_turn_that_is_not_enough_alone_says_so_on_its_console_line() -> None:
    """A fresh user read "OPENED … kv_cache_dtype auto → fp8" as the whole fix while the description said "Alone it
    is not enough: holding the current demand needs ×2.52" (the 50-running, 80-waiting pool of the notify tests):
    both console lines, full and compact, carry it beside the turn; a sufficient turn's lines do not."""
    from advisor.console import compact_transition
    from advisor.rules.lifecycle import Transition
    from advisor.service import format_transition

    short = dataclasses.replace(_rec("chat-8b"), evidence={**_rec("chat-8b").evidence, "pool_factor_needed": 2.52})
    for kind in ("opened", "updated"):
        full = format_transition(Transition(kind, short))
        assert "kv_cache_dtype auto → fp8 (alone not enough: the pool must grow ×2.52)" in full, full
        # compact: a short marker, and the flag still fits beside it (breaker: the long one crowded it out)
        line = compact_transition(Transition(kind, short))
        assert "kv_cache_dtype auto → fp8 (not enough alone) | --kv-cache-dtype fp8 | id" in line, line
        assert len(line) < COMPACT_WIDTH
    for line in (
        format_transition(Transition("opened", _rec("chat-8b"))),
        compact_transition(Transition("opened", _rec("chat-8b"))),
    ):
        assert "alone not enough" not in line


def test_a_turn_not_enough_alone_names_the_alternative_that_closes_the_gap() -> None:
    """A fresh user (2026-12-06) saw "gpu_memory_utilization 0.5 → 0.9 (alone not enough: ×3.21)" while "replicas
    1 → 2 … closes the gap" ranked 4th and was printed nowhere but in --json: the console line names the
    best-ranked alternative that closes the gap; none is named beside a turn that is enough, or when none closes it."""
    from advisor.rules.lifecycle import Transition
    from advisor.service import format_transition

    alts = (
        {"rule": "kv_saturation", "dial": "kv_cache_dtype", "current": "auto", "suggested": "fp8", "sufficient": False},
        {"rule": "queue_growth", "dial": "replicas", "current": 1, "suggested": 2, "sufficient": True},
        {"rule": "goodput_below_target", "dial": "replicas", "current": 1, "suggested": 3, "sufficient": True},
    )
    base = _rec("chat-8b")
    short = dataclasses.replace(base, evidence={**base.evidence, "pool_factor_needed": 3.21}, alternatives=alts)
    line = format_transition(Transition("opened", short))
    assert "(alone not enough: the pool must grow ×3.21) — [queue_growth] replicas 1 → 2 closes the gap" in line, line
    assert "closes the gap" not in format_transition(Transition("opened", dataclasses.replace(base, alternatives=alts)))
    none = dataclasses.replace(short, alternatives=alts[:1])
    assert "closes the gap" not in format_transition(Transition("updated", none))


def test_the_flag_of_the_turn_that_closes_the_gap_is_on_the_line_after_the_partial_ones() -> None:
    """A walkthrough (2026-12-07) copied the one flag the OPENED line showed — the suggested turn's, which the same
    line says is not enough alone — past "tensor_parallel_size 1 → 2 closes the gap": the line now gives that turn's
    flag too; a turn that is enough keeps its one flag."""
    from advisor.rules.lifecycle import Transition
    from advisor.service import format_transition

    alts = (
        {"rule": "kv_saturation", "dial": "kv_cache_dtype", "current": "auto", "suggested": "fp8", "sufficient": False,
         "flag": "--kv-cache-dtype fp8"},
        {"rule": "kv_saturation", "dial": "tensor_parallel_size", "current": 1, "suggested": 2, "sufficient": True,
         "flag": "--tensor-parallel-size 2"},
    )  # fmt: skip
    base = dataclasses.replace(_rec("chat-8b"), flag="--gpu-memory-utilization 0.9")
    short = dataclasses.replace(base, evidence={**base.evidence, "pool_factor_needed": 2.4}, alternatives=alts)
    line = format_transition(Transition("opened", short))
    assert "| flag: --gpu-memory-utilization 0.9; closes the gap: --tensor-parallel-size 2 |" in line, line
    enough = format_transition(Transition("opened", dataclasses.replace(base, alternatives=alts)))
    assert "| flag: --gpu-memory-utilization 0.9 |" in enough, enough
