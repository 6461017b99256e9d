"""``source: scrape``: the advisor's clock stepping back (an NTP correction of a clock that ran ahead, a VM
restored) or forward, while it scrapes two targets of one vLLM deployment on loopback (adversarial review, h15).

Each scrape is stamped with the advisor's clock, so a step back leaves every point held "in the future" of the
new clock. The policy is the Prometheus source's (``tests/test_prometheus_target_faults.py``, 4): a step back
larger than one scrape interval is logged once, with its size; the window is judged on the points scraped since;
staleness, frozen-engine detection, rates and counter resets read right afterwards. A step forward empties the
window: the targets read ``stale`` ("no sample in the window") until a new scrape, then the window holds that
scrape alone, and no counter is misread. A rule pending across a step either way, or across a stalled loop (no
cycle for longer than 3 intervals + 5 s), restarts its for-duration at the evaluation after it: it opens after
its ``for`` of evaluations that saw it hold, neither an hour early nor an hour late.

The engine is a :class:`tests.states.VLLMEngine` whose page a loopback server (``tests.conftest.http_server``)
serves at both targets' paths (a path in :attr:`Rig.down` answers 503); it generates :data:`TOKENS` tokens between
scrapes, :data:`RATE` tokens per second. The service's clock is driven by the test; nothing sleeps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import pytest

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.results import DeploymentResult
from advisor.service import Service
from tests.conftest import reply
from tests.reliability.iso_support import deployment
from tests.states import VLLMEngine

pytestmark = pytest.mark.integration

T0 = 1_800_000_000.0
INTERVAL = 15.0
WINDOW = 300.0
TOKENS = 1500.0
RATE = TOKENS / INTERVAL  # 100 generation tokens per second
PATHS = ("/a/metrics", "/b/metrics")


@dataclass
class Rig:
    """The service, its clock, the engine, the page its targets serve and the paths that answer 503."""

    svc: Service
    now: list[float]
    engine: VLLMEngine
    base: str
    page: bytes = b""
    down: set[str] = field(default_factory=set)

    @property
    def urls(self) -> list[str]:
        return [self.base + p for p in PATHS]

    def serve(self, h: BaseHTTPRequestHandler) -> None:
        if h.path in self.down:
            reply(h, 503, b"down for the test\n")
        else:
            reply(h, 200, self.page, "text/plain; version=0.0.4")

    def cycle(self, *, tokens: float = TOKENS) -> DeploymentResult:
        """One interval passes on the advisor's clock: the engine generates ``tokens``, both targets are scraped
        and the deployment is evaluated."""
        self.now[0] += INTERVAL
        if tokens:
            self.engine.decode(tokens, 0.02)
        self.page = self.engine.render().encode()
        self.svc.scrape_once()
        return self.evaluate()

    def evaluate(self) -> DeploymentResult:
        (result,) = self.svc.evaluate_once().deployments
        return result

    def stamps(self, url: str) -> list[float]:
        return [p.timestamp for p in self.svc.tracker.history("a", url)]


@pytest.fixture
def rig(http_server: Callable[[Callable[[BaseHTTPRequestHandler], None]], str]) -> Iterator[Rig]:
    engine = VLLMEngine(
        model_name="meta-llama/Llama-3.1-8B-Instruct",
        num_gpu_blocks=2000,
        max_model_len=8192,
        gpu_memory_utilization=0.9,
    )
    engine.running = 4.0
    serving: list[Rig] = []
    base = http_server(lambda h: serving[0].serve(h))
    cfg = parse_config(
        {
            "scrape_interval": f"{INTERVAL:.0f}s",
            "evaluation_window": f"{WINDOW:.0f}s",
            "deployments": [deployment("a", [base + p for p in PATHS])],
        }
    )
    now = [T0]
    _, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics, clock=lambda: now[0])
    serving.append(Rig(svc, now, engine, base, engine.render().encode()))
    try:
        yield serving[0]
    finally:
        svc.close()


def _said(caplog: pytest.LogCaptureFixture, words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if words in r.getMessage()]


@pytest.mark.parametrize("back", [3600.0, 60.0], ids=["an-hour-beyond-the-window", "a-minute-within-the-window"])
def test_a_step_back_is_said_once_and_the_window_is_judged_on_the_scrapes_since(
    rig: Rig, back: float, caplog: pytest.LogCaptureFixture
) -> None:
    """25 scrapes, then the clock steps back and 6 more. Before: nothing was logged, the points held stayed "in
    the future" of the clock, out of time order; an hour back, each new point was thinned away against them
    (the window held one sample and no rate for the hour), a minute back, the window's rate mixed the two clocks
    (121 tokens/s for 100). Now: one warning with the step's size, the points from before the step are gone, and
    the window covers exactly the scrapes since, at the engine's rate, with no counter reset."""
    for _ in range(25):
        rig.cycle()
    stepped_at = rig.now[0] - back + INTERVAL  # the first scrape after the step is stamped here
    rig.now[0] -= back
    with caplog.at_level(logging.WARNING, logger="advisor.service"):
        results = [rig.cycle() for _ in range(6)]
    for url in rig.urls:
        stamps = rig.stamps(url)
        assert stamps == sorted(stamps) and stamps[0] >= stepped_at and stamps[-1] == rig.now[0], (url, stamps)
    rates = [r.evaluation.stats.generation_tokens_per_second if r.evaluation.stats else None for r in results]
    # from the second scrape since, every window reads the engine's rate (two targets, one engine's page each)
    assert rates[1:] == [pytest.approx(2 * RATE)] * 5, rates
    last = results[-1]
    stats = last.evaluation.stats
    assert last.state == "fresh", last.target_states
    assert stats is not None and stats.span_seconds == pytest.approx(5 * INTERVAL)  # the six scrapes since, no more
    assert all(r.evaluation.stats is not None and r.evaluation.stats.counter_resets == 0 for r in results)
    said = _said(caplog, "stepped back")
    # measured against the newest point held: the clock moved one interval between it and the first scrape after
    assert len(said) == 1 and f"stepped back {back - INTERVAL:,.0f} s" in said[0], said
    assert "deployment=a" in said[0]


def test_after_a_step_back_a_frozen_engine_reads_stale_and_a_silent_one_goes_stale(rig: Rig) -> None:
    """The engine freezes as the clock steps back an hour: 4 requests running, the token counters still. Before:
    the points from the clock's future sat in the frozen check's span (it measured from one of them to the newest
    scrape: a negative span), so the engine was never frozen and the deployment read ``fresh`` for the hour. Now
    the frozen check sees the scrapes since the step and, after ``frozen_after`` (60 s), says so. Then the scrapes
    stop: 10 intervals later the targets are stale with their true age (not fresh, as points from the future
    would have them)."""
    for _ in range(25):
        rig.cycle()
    rig.now[0] -= 3600.0
    results = [rig.cycle(tokens=0.0) for _ in range(6)]  # 75 s of scrapes of a frozen engine
    assert results[0].state == "fresh"  # one sample since the step: nothing to judge frozen on yet
    assert results[-1].state == "stale", results[-1].target_states
    assert all(s == "stale" and why.startswith("frozen: 4 requests running") for s, why in results[-1].target_states)
    rig.now[0] += 10 * INTERVAL
    late = rig.evaluate()
    assert late.target_states == (("stale", "no new sample for 150s"),) * 2


def test_a_step_back_with_no_scrape_since_is_said_when_a_target_next_answers(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """The clock steps back an hour while target b is down (503): the step is noticed at the next scrape of a,
    said once, and b's points from the clock's future go with a's (before, b held them, and took them back into
    its window when it answered again). When b answers again its window starts there, with no second warning."""
    b = rig.urls[1]
    for _ in range(25):
        rig.cycle()
    rig.down.add(PATHS[1])
    rig.now[0] -= 3600.0
    with caplog.at_level(logging.WARNING, logger="advisor.service"):
        for _ in range(3):
            during = rig.cycle()
        assert rig.stamps(b) == []
        assert during.target_states[0] == ("fresh", "ok")
        assert during.target_states[1][0] == "unavailable"
        rig.down.clear()
        back = rig.now[0] + INTERVAL
        after = [rig.cycle() for _ in range(3)]
    assert len(_said(caplog, "stepped back")) == 1, _said(caplog, "stepped back")
    assert rig.stamps(b)[0] == back and rig.stamps(b) == sorted(rig.stamps(b))
    assert after[-1].state == "fresh", after[-1].target_states


def test_a_step_forward_reads_stale_until_a_scrape_and_then_judges_the_window_on_it(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """The clock steps forward an hour between cycles. Evaluated before the next scrape, every sample has left
    the window: the targets are stale, "no sample in the window" (before: ``unavailable``, "last scrape failed: no
    data yet", and the deployment "no target answered" — both answered every scrape). The next scrape is the
    window's only point: fresh, its rates unknown (not zero, not an hour's worth of tokens over a second), no
    counter read as reset, nothing recommended; the scrape after reads the engine's rate. A step forward is no
    step back: nothing is said of one."""
    for _ in range(25):
        rig.cycle()
    rig.now[0] += 3600.0
    before = rig.evaluate()
    assert before.state == "stale"
    assert before.target_states == (("stale", "no sample in the window"),) * 2
    assert not before.recommendations
    first = rig.cycle()
    stats = first.evaluation.stats
    assert first.state == "fresh" and stats is not None
    assert stats.samples == 2  # one point per target: the window since the step
    assert stats.generation_tokens_per_second is None and stats.counter_resets == 0
    assert not first.recommendations
    second = rig.cycle()
    assert second.evaluation.stats is not None
    assert second.evaluation.stats.generation_tokens_per_second == pytest.approx(2 * RATE)
    assert not second.recommendations
    assert not _said(caplog, "stepped back")


FOR = 60.0
"""kv_saturation's default for-duration (config ``rules.kv_saturation.for``), seconds."""


def _saturate(rig: Rig) -> None:
    """The pool fills with requests waiting: kv_saturation holds from the next scrape (20 running, so no few
    long requests hold the pool and ``admission_thrash`` does not; a steady queue, so ``queue_growth`` does not)."""
    rig.engine.running, rig.engine.waiting, rig.engine.kv_usage = 20.0, 5.0, 0.95


def _kv_status(result: DeploymentResult) -> tuple[str, str]:
    (status,) = [s for s in result.rule_statuses if s.rule == "kv_saturation"]
    return status.state, status.reason


def _until_opened(rig: Rig, cycles: int) -> tuple[list[DeploymentResult], float | None]:
    """Up to ``cycles`` cycles, stopping at the one the saturation incident opens at; its ``opened_at``."""
    results: list[DeploymentResult] = []
    for _ in range(cycles):
        results.append(rig.cycle())
        if results[-1].recommendations:
            return results, results[-1].recommendations[0].opened_at
    return results, None


@pytest.mark.parametrize("jump", [3600.0, -3600.0], ids=["forward-an-hour", "back-an-hour"])
def test_a_clock_step_restarts_a_pending_for_duration_on_the_evaluations_since(
    rig: Rig, jump: float, caplog: pytest.LogCaptureFixture
) -> None:
    """kv_saturation (for 60 s) has held for 15 s when the clock steps an hour. Before: forward, the next cycle
    found it held for 3,615 s and opened it on the one scrape the window held, after ~30 s of real saturation;
    back, it sat at "pending (for -3585s of 60s)" and would have opened an hour late. Now the evaluation after
    the step cannot vouch for the time between (it is not one interval after the one before): the pending
    condition's clock restarts there, so the incident opens after 60 s of evaluations that saw it hold, no
    earlier and no later; this is said once, with the step's size."""
    for _ in range(5):
        rig.cycle()
    _saturate(rig)
    rig.cycle()
    state, reason = _kv_status(rig.cycle())
    assert state == "pending" and reason.endswith("(for 15s of 60s)"), reason
    last_before = rig.now[0]
    rig.now[0] += jump
    first_after = rig.now[0] + INTERVAL
    with caplog.at_level(logging.INFO, logger="advisor.service"):
        results, opened_at = _until_opened(rig, 10)
    assert opened_at == first_after + FOR, [(r.evaluation.now, _kv_status(r)) for r in results]
    # pending from the first evaluation after the step, never for a negative time nor for the hour
    assert [_kv_status(r)[1].rsplit("(for ", 1)[-1] for r in results[:-1]] == [
        f"{held:.0f}s of 60s)" for held in (0.0, 15.0, 30.0, 45.0)
    ]
    said = _said(caplog, "for-durations")
    assert len(said) == 1, said
    gap = first_after - last_before
    assert f"{abs(gap):,.0f} s" in said[0] and "kv_saturation" in said[0] and "deployment=a" in said[0], said


def test_evaluations_one_interval_apart_keep_the_for_duration_running(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """The same saturation with no step: the incident opens 60 s after the condition was first seen (the
    restart is for gaps alone) and nothing about a restart is said."""
    for _ in range(5):
        rig.cycle()
    _saturate(rig)
    first = rig.now[0] + INTERVAL
    with caplog.at_level(logging.INFO, logger="advisor.service"):
        _, opened_at = _until_opened(rig, 10)
    assert opened_at == first + FOR
    assert not _said(caplog, "for-durations")


def test_a_stalled_loop_restarts_a_pending_for_duration_but_keeps_an_open_incident(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """No cycle runs for 5 minutes (a stalled loop, a suspended VM; /healthz would fail after 3 intervals + 5 s)
    while kv_saturation is pending: the next cycle cannot vouch that the pool stayed full meanwhile, so the
    for-duration restarts there. An incident already open stays open across the same gap (same id, nothing
    re-notified); each gap is said once, and the second names only what was still pending (not the active
    kv_saturation)."""
    for _ in range(5):
        rig.cycle()
    _saturate(rig)
    rig.cycle()
    rig.cycle()
    rig.now[0] += 300.0
    first_after = rig.now[0] + INTERVAL
    with caplog.at_level(logging.INFO, logger="advisor.service"):
        _, opened_at = _until_opened(rig, 10)
        assert opened_at == first_after + FOR
        (rec,) = rig.svc.tracker.lifecycle.open_recommendations("a")
        rig.now[0] += 300.0
        after = rig.cycle()
    assert [r.id for r in after.recommendations] == [rec.id]
    assert _kv_status(after)[0] == "firing"
    said = _said(caplog, "for-durations")
    assert len(said) == 2 and "no evaluation for 315 s" in said[0] and "kv_saturation (pending 15 s)" in said[0]
    assert "kv_saturation" not in said[1], said
