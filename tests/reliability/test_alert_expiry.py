"""Issue 14, alert lifecycle: nothing the advisor fires stays firing forever. Against the daemon
(``capacity-advisor run`` in a subprocess) on loopback, a stand-in vLLM whose KV pool saturates, and recording
receivers:

* a webhook body's firing alert carries ``endsAt`` = its cycle + 4 × the receiver's ``resend_interval``, as
  Prometheus sets ``EndsAt = ValidUntil`` for Alertmanager (v2.42 ``rules/alerting.go`` ``sendAlerts``,
  ``rules/manager.go`` ``SendAlerts``), not Go's zero time; the resolved alert ends at its resolve time;
* a Slack receiver gets one message per transition, never a repeat, however long the incident stays open;
* a ``type: alertmanager`` receiver is re-sent every ``resend_interval`` while the incident is open, each time
  with the same alert (labels, ``id``) and the same idempotency key, ``endsAt`` moving on to the re-send + 4 ×
  ``resend_interval``; a real Alertmanager 0.25 holds it active, and once the advisor is SIGKILLed it resolves
  the alert by itself when the last ``endsAt`` passes and notifies its own webhook ``resolved``.

Intervals are short (scrape 0.5 s, resend 1–2 s) so each test takes seconds; bounds allow a cycle of jitter.
"""

from __future__ import annotations

import datetime
import itertools
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from advisor.standin import Phase, StandInEngine, StandInServer
from tests.conftest import REPO_ROOT, reply

pytestmark = pytest.mark.integration

StartServer = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]
ZERO_TIME = "0001-01-01T00:00:00Z"
ALERTNAME = "CapacityAdvisorRecommendation"
INTERVAL = 0.5
"""The daemon's scrape_interval (its evaluation cycle), seconds."""
SLACK = 2.0
"""Seconds a keep-alive's endsAt may stray from re-send + 4 × resend_interval: it counts from the last cycle (up
to a cycle and its work earlier), over the cycle gap when that is longer than resend_interval (a loaded box)."""
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")

# idle 2 s → KV pool saturated with a queue (kv_saturation fires after its 1 s `for`) → recovered (resolves)
RAMP = (
    Phase("idle", 2, 0.05, 2, 0, 1.0, 1000, 200, 0, 0.1, 0.02),
    Phase("saturated", 5, 0.99, 50, 40, 2.0, 1000, 200, 2.0, 0.4, 0.04),
    Phase("recovered", 10_000, 0.3, 20, 0, 2.0, 1000, 200, 0, 0.1, 0.02),
)
# the same, saturated for good: the incident stays open until the advisor dies
SATURATED = (RAMP[0], Phase("saturated", 10_000, 0.99, 50, 40, 2.0, 1000, 200, 2.0, 0.4, 0.04))


def unix(ts: str) -> float:
    """An RFC 3339 time as Go and the advisor write it (up to nanoseconds) → unix seconds.

    Raises:
        AssertionError: not such a time.
    """
    m = re.fullmatch(r"(.*?T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", ts)
    assert m is not None, ts
    base = datetime.datetime.fromisoformat(m.group(1) + m.group(3).replace("Z", "+00:00"))
    return base.timestamp() + (float("0." + m.group(2)) if m.group(2) else 0.0)


@dataclass(frozen=True)
class Post:
    """One request a recording receiver answered 200: when it arrived (unix seconds), headers and JSON body."""

    at: float
    headers: dict[str, str]
    body: Any


@dataclass
class Recorder:
    """A receiver on loopback that answers 200 and keeps every POST."""

    url: str = ""
    posts: list[Post] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> list[Post]:
        with self.lock:
            return list(self.posts)

    def wait(self, pred: Callable[[list[Post]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self.snapshot()):
                return True
            time.sleep(0.05)
        return pred(self.snapshot())


def recorder(http_server: StartServer, path: str) -> Recorder:
    """A :class:`Recorder` whose URL is the server's base + ``path``."""
    rec = Recorder()

    def handle(h: BaseHTTPRequestHandler) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length", "0")))
        post = Post(time.time(), dict(h.headers.items()), json.loads(raw) if raw else None)
        with rec.lock:
            rec.posts.append(post)
        reply(h, 200, b"{}", "application/json")

    rec.url = http_server(handle) + path
    return rec


class FromFirstScrape:
    """A stand-in's clock (``time.monotonic``) that stands at 0 until the stand-in is first scraped.

    :class:`~advisor.standin.StandInEngine` reads its clock once when created and once per scrape. Counting from
    creation, a loaded machine that takes seconds to start the daemon would play the 5 s saturated phase of
    :data:`RAMP` before the first scrape (the webhook then never fires); counting from the first scrape, the
    daemon sees every phase whatever its start-up took."""

    def __init__(self) -> None:
        self._t0: float | None = None
        self._created = False

    def __call__(self) -> float:
        if not self._created:  # the engine's own start
            self._created = True
            return 0.0
        if self._t0 is None:
            self._t0 = time.monotonic()
        return time.monotonic() - self._t0


@pytest.fixture
def standin_factory() -> Iterator[Callable[[tuple[Phase, ...]], StandInServer]]:
    """Stand-in vLLMs playing ``phases`` from their first scrape (:class:`FromFirstScrape`)."""
    servers: list[StandInServer] = []

    def start(phases: tuple[Phase, ...]) -> StandInServer:
        srv = StandInServer(StandInEngine(phases=phases, speed=1.0, num_gpu_blocks=1000, clock=FromFirstScrape()))
        srv.start_background()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


@dataclass
class Daemon:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def start_daemon(tmp_path: Path, target: str, receivers: list[dict[str, Any]], **extra: Any) -> Daemon:
    """``capacity-advisor run`` on a free loopback port with one vLLM deployment on ``target`` (``extra``: more
    top-level config keys); its log goes to a file (a pipe nobody reads would fill and block it)."""
    cfg = {
        "scrape_interval": f"{INTERVAL}s",
        "evaluation_window": "2s",
        "deployments": [
            {
                "name": "chat-8b",
                "engine": "vllm",
                "targets": [target],
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "gpu": "H100-SXM",
                "max_model_len": 8192,
                "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.5},
            }
        ],
        "receivers": receivers,
        "rules": {"kv_saturation": {"for": "1s"}, "resolve_for": "1s"},
        **extra,
    }
    path = tmp_path / "advisor.yaml"
    path.write_text(yaml.safe_dump(cfg))
    log = tmp_path / "advisor.log"
    log.unlink(missing_ok=True)  # a restart: this run's log only
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "advisor.cli", "run", "--config", str(path), "--listen", "127.0.0.1:0"],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = re.search(r"serving (http://\S+)/metrics", log.read_text(errors="replace"))
        if m:
            return Daemon(proc, m.group(1), log)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    stop(proc)
    pytest.fail(f"the daemon did not start:\n{log.read_text(errors='replace')[-3000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def webhook_alerts(posts: list[Post]) -> list[tuple[Post, dict[str, Any]]]:
    """Every alert of every webhook body, with the POST that carried it."""
    return [(p, a) for p in posts for a in p.body["alerts"]]


def slack_transition(post: Post) -> tuple[str, str]:
    """``(recommendation id, FIRING|RESOLVED)`` of one Slack message (its context names the recommendation)."""
    status = "RESOLVED" if post.body["text"].startswith("[RESOLVED]") else "FIRING"
    context = post.body["blocks"][-1]["elements"][0]["text"]
    m = re.search(r"recommendation `([^`]+)`", context)
    assert m is not None, context
    return m.group(1), status


def test_webhook_alerts_end_four_resend_intervals_ahead_and_slack_is_sent_once_per_transition(
    http_server: StartServer, standin_factory: Callable[[tuple[Phase, ...]], StandInServer], tmp_path: Path
) -> None:
    """endsAt of a firing webhook alert = its cycle + 4 × resend_interval (2 s here: 8 s), never the zero time;
    resolved = the resolve time. The Slack receiver, given a resend_interval too, posts each transition once
    while the incident stays open for about 10 cycles, and after it resolves."""
    hook = recorder(http_server, "/hook")
    slack = recorder(http_server, "/services/T000/B000/XXXX")
    standin = standin_factory(RAMP)
    daemon = start_daemon(
        tmp_path,
        standin.url(),
        [
            {"name": "ops", "type": "webhook", "url": hook.url, "resend_interval": "2s"},
            {"name": "chat", "type": "slack", "url": slack.url, "resend_interval": "0.5s"},
        ],
    )
    try:
        # CapacityAdvisorNotificationsLost uses increase(), which cannot see a series born at 1: every receiver's
        # failed and dropped series are there from 0 before anything is lost
        metrics = requests.get(daemon.url + "/metrics", timeout=5).text
        for receiver in ("ops", "chat"):
            for outcome in ("failed", "dropped"):
                line = f'advisor_notifications_total{{outcome="{outcome}",receiver="{receiver}"}} 0.0'
                assert line in metrics.splitlines(), line

        def resolved(posts: list[Post]) -> bool:
            return any(a["status"] == "resolved" for _, a in webhook_alerts(posts))

        assert hook.wait(resolved, 40), daemon.tail()
        time.sleep(6 * INTERVAL)  # more cycles: a repeat would show now
    finally:
        stop(daemon.proc)

    alerts = webhook_alerts(hook.snapshot())
    firing = [(p, a) for p, a in alerts if a["status"] == "firing"]
    ended = [(p, a) for p, a in alerts if a["status"] == "resolved"]
    assert firing and ended
    for post, a in firing:
        assert a["endsAt"] != ZERO_TIME
        ahead = unix(a["endsAt"]) - post.at  # accepted in a cycle at most moments before it arrived
        assert 8.0 - 3.0 <= ahead <= 8.0 + 0.05, (a["endsAt"], post.at)  # ± a cycle and delivery on a loaded box
        assert unix(a["endsAt"]) > unix(a["startsAt"])
    opened = {a["fingerprint"]: unix(a["startsAt"]) for _, a in firing}
    for post, a in ended:
        end = unix(a["endsAt"])
        assert opened[a["fingerprint"]] < end <= post.at  # the resolve time: after it opened, before it arrived

    transitions = {(a["fingerprint"], a["status"]) for _, a in alerts}
    messages = [slack_transition(p) for p in slack.snapshot()]
    assert sorted(messages) == sorted((i, s.upper()) for i, s in transitions)  # each once, no repeat


@dataclass
class Alertmanager:
    url: str
    log: Path


@pytest.fixture
def alertmanager(tmp_path: Path, http_server: StartServer) -> Iterator[tuple[Alertmanager, Recorder]]:
    """A real Alertmanager on loopback (group_wait/group_interval 1 s, clustering off) whose route sends to a
    recording webhook with send_resolved; yields it and that webhook."""
    if ALERTMANAGER is None:
        pytest.skip("prometheus-alertmanager is not installed (scripts/install-system-deps)")
    out_hook = recorder(http_server, "/am-hook")
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        f"""
route:
  receiver: hook
  group_by: [deployment]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: "{out_hook.url}"
        send_resolved: true
"""
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "alertmanager.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                ALERTMANAGER,
                f"--config.file={config}",
                f"--storage.path={tmp_path / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                pytest.fail(f"alertmanager exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if requests.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"alertmanager not ready in 20 s:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        yield Alertmanager(url, log), out_hook
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _active(am: Alertmanager) -> dict[str, dict[str, Any]]:
    """The advisor's alerts Alertmanager holds unresolved (``GET /api/v2/alerts``), by their ``id`` label."""
    alerts = requests.get(f"{am.url}/api/v2/alerts", params={"filter": f'alertname="{ALERTNAME}"'}, timeout=5).json()
    return {a["labels"]["id"]: a for a in alerts}


def test_alertmanager_alerts_are_kept_alive_with_the_same_id_and_key_and_expire_once_the_advisor_dies(
    http_server: StartServer,
    standin_factory: Callable[[tuple[Phase, ...]], StandInServer],
    alertmanager: tuple[Alertmanager, Recorder],
    tmp_path: Path,
) -> None:
    am, am_hook = alertmanager
    stand_in_am = recorder(http_server, "")  # records what the advisor POSTs to /api/v2/alerts
    standin = standin_factory(SATURATED)
    resend = 1.0
    daemon = start_daemon(
        tmp_path,
        standin.url(),
        [
            {"name": "am", "type": "alertmanager", "url": am.url, "resend_interval": f"{resend}s"},
            {"name": "rec", "type": "alertmanager", "url": stand_in_am.url, "resend_interval": f"{resend}s"},
        ],
    )
    try:

        def posts_of(posts: list[Post]) -> dict[str, list[tuple[Post, dict[str, Any]]]]:
            out: dict[str, list[tuple[Post, dict[str, Any]]]] = {}
            for p in posts:
                for a in p.body:
                    out.setdefault(a["labels"]["id"], []).append((p, a))
            return out

        # the opening, then at least three keep-alives of it
        assert stand_in_am.wait(lambda ps: any(len(v) >= 4 for v in posts_of(ps).values()), 40), daemon.tail()
        assert daemon.proc.poll() is None
        active = _active(am)
        assert active, am.log.read_text()[-2000:]
        for alert in active.values():
            assert alert["status"]["state"] == "active"
            # ahead of now, by at most 4 × resend (+ slack for a cycle gap longer than resend on a loaded box)
            assert 0 < unix(alert["endsAt"]) - time.time() <= 4 * resend + SLACK
        daemon.proc.send_signal(signal.SIGKILL)  # dies with its alerts open: no resolution will ever be sent
        daemon.proc.wait(10)
        killed_at = time.time()
        final = _active(am)  # nothing re-sends them now: what Alertmanager holds is the last word
    finally:
        stop(daemon.proc)

    sent = posts_of(stand_in_am.snapshot())
    for rec_id, seen in sent.items():
        assert len(seen) >= 2
        first = seen[0][1]
        for post, a in seen:
            assert a["labels"] == first["labels"] and a["labels"]["id"] == rec_id  # the same alert
            assert a["annotations"]["idempotency_key"] == first["annotations"]["idempotency_key"]
            assert a["startsAt"] == first["startsAt"]
            ahead = unix(a["endsAt"]) - post.at  # = the re-send + 4 × resend_interval
            assert 4 * resend - SLACK <= ahead <= 4 * resend + SLACK, (a["endsAt"], post.at)
        gaps = [b.at - a.at for (a, _), (b, _) in itertools.pairwise(seen)]
        assert max(gaps[1:], default=resend) < 4 * resend  # re-sent before the last endsAt ran out
    assert set(sent) == set(active) == set(final)  # still active right after the kill: endsAt is ahead
    last_ends = {rec_id: unix(a["endsAt"]) for rec_id, a in final.items()}
    for end in last_ends.values():
        assert killed_at < end <= killed_at + 4 * resend + SLACK  # the last keep-alive's: about 4 × resend ahead

    # Alertmanager resolves each alert by itself once its last endsAt has passed, and says so to its webhook
    def resolved_by_alertmanager(posts: list[Post]) -> bool:
        done = {a["labels"]["id"] for p in posts for a in p.body["alerts"] if a["status"] == "resolved"}
        return set(last_ends) <= done

    assert am_hook.wait(resolved_by_alertmanager, max(last_ends.values()) - time.time() + 15), am.log.read_text()[
        -2000:
    ]
    assert _active(am) == {}
    for p in am_hook.snapshot():
        for a in p.body["alerts"]:
            if a["status"] == "resolved":
                rec_id = a["labels"]["id"]
                assert unix(a["endsAt"]) == pytest.approx(last_ends[rec_id], abs=0.01)  # expired at its endsAt
                assert unix(a["endsAt"]) <= p.at  # resolved once it had passed, not before


def test_alertmanager_alerts_expire_when_the_evaluation_stops_though_the_process_lives(
    http_server: StartServer, alertmanager: tuple[Alertmanager, Recorder]
) -> None:
    """Keep-alives carry what evaluation vouched for, as Prometheus's: ``endsAt`` = the last cycle + 4 ×
    max(resend_interval, cycle gap). Cycles run every 0.25 s, then stop (a hung evaluation loop) while the
    notifier's threads go on re-sending: Alertmanager resolves the alert 2 s after the last cycle instead of
    holding it firing as long as the process lives."""
    from advisor.notify.config import ReceiverConfig
    from advisor.notify.notifier import build_notifier
    from tests.notify.conftest import rec

    am, am_hook = alertmanager
    stand_in_am = recorder(http_server, "")
    resend = 0.5
    cfgs = [
        ReceiverConfig.model_validate({"name": n, "type": "alertmanager", "url": u, "resend_interval": resend})
        for n, u in (("am", am.url), ("rec", stand_in_am.url))
    ]
    notifier = build_notifier(cfgs, None, None)
    r = rec(3, opened_at=time.time() - 10)
    try:
        cycles = [time.time()]
        notifier.submit_cycle([("opened", r)])
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:  # the evaluation loop, one cycle every 0.25 s
            time.sleep(0.25)
            cycles.append(time.time())
            notifier.submit_cycle([])
        last_cycle = cycles[-1]
        assert r.id in _active(am), am.log.read_text()[-2000:]
        # Prometheus's bound: last cycle + 4 × max(resend_interval, cycle gap); the gap as measured here (the
        # shorter of the last two, 0.25 s on an idle box: resend_interval rules)
        gap = min(cycles[-1] - cycles[-2], cycles[-2] - cycles[-3])
        bound = last_cycle + 4 * max(resend, gap)

        # the loop stops; the workers do not: Alertmanager resolves the alert by itself at last cycle + 2 s
        assert am_hook.wait(
            lambda ps: any(
                a["status"] == "resolved" for p in ps for a in p.body["alerts"] if a["labels"]["id"] == r.id
            ),
            15,
        ), am.log.read_text()[-2000:]
        assert r.id not in _active(am)
        assert all(w._thread.is_alive() for w in notifier.workers)
        assert stand_in_am.wait(lambda ps: any(p.at > bound + 0.2 for p in ps), 5)  # keep-alives go on
        late = [p for p in stand_in_am.snapshot() if p.at > bound + 0.2]
        for p in late:
            for a in p.body:  # the same alert, vouched until the last cycle's bound only
                assert a["labels"]["id"] == r.id
                assert unix(a["endsAt"]) == pytest.approx(bound, abs=0.05) and bound < p.at
    finally:
        notifier.close(2)
    (end,) = {unix(a["endsAt"]) for p in am_hook.snapshot() for a in p.body["alerts"] if a["status"] == "resolved"}
    assert end == pytest.approx(bound, abs=0.05)  # expired at the bound of the last cycle


def test_alerts_restored_from_the_state_file_are_kept_alive_after_a_restart_without_an_outbox(
    http_server: StartServer, standin_factory: Callable[[tuple[Phase, ...]], StandInServer], tmp_path: Path
) -> None:
    """Without ``outbox_dir`` a restarted advisor holds no record of what it sent; its open incidents come back
    from the state file and are still firing. Each cycle hands the open set to the Alertmanager receiver, which
    keeps every one alive (the same alert, id and idempotency key as before the restart) instead of letting
    Alertmanager expire alerts the advisor still holds open."""
    stand_in_am = recorder(http_server, "")
    standin = standin_factory(SATURATED)
    receivers = [{"name": "am", "type": "alertmanager", "url": stand_in_am.url, "resend_interval": "1s"}]
    state = {"state_file": str(tmp_path / "state.json")}

    def alerts(posts: list[Post]) -> list[tuple[Post, dict[str, Any]]]:
        return [(p, a) for p in posts for a in p.body]

    daemon = start_daemon(tmp_path, standin.url(), receivers, **state)
    try:
        assert stand_in_am.wait(lambda ps: len(alerts(ps)) >= 2, 40), daemon.tail()  # opened, then a keep-alive
    finally:
        stop(daemon.proc)  # SIGTERM: the open incidents are in the state file
    before = {a["labels"]["id"]: a for _, a in alerts(stand_in_am.snapshot())}
    restarted_at = time.time()

    daemon = start_daemon(tmp_path, standin.url(), receivers, **state)
    try:

        def kept_alive(posts: list[Post]) -> bool:
            after = [a for p, a in alerts(posts) if p.at > restarted_at]
            return all(sum(a["labels"]["id"] == i for a in after) >= 2 for i in before)

        assert stand_in_am.wait(kept_alive, 20), daemon.tail()
    finally:
        stop(daemon.proc)
    for post, a in alerts(stand_in_am.snapshot()):
        if post.at > restarted_at:
            first = before[a["labels"]["id"]]  # no new incident: the one that fired before the restart
            assert a["labels"] == first["labels"] and a["startsAt"] == first["startsAt"]
            assert a["annotations"]["idempotency_key"] == first["annotations"]["idempotency_key"]
            assert 0 < unix(a["endsAt"]) - post.at <= 4 + SLACK
