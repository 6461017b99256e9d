"""Issue 14: an Alertmanager keep-alive's ``endsAt`` counts from the last evaluation cycle, as Prometheus's
``ValidUntil = ts + 4 × max(resendDelay, interval)`` (v2.42 ``rules/alerting.go`` ``AlertingRule.sendAlerts``)
counts from its last evaluation: a loop that stops lets the alerts expire, a loop that runs slow for good widens
the bound, one stall that ended does not. (The whole path against a real Alertmanager:
tests/reliability/test_alert_expiry.py.)"""

from __future__ import annotations

from advisor.notify.config import ReceiverConfig
from advisor.notify.notifier import build_notifier
from tests.notify.conftest import Hook

T0 = 1_790_000_000.0


def test_keep_alives_end_four_resend_intervals_after_the_last_cycle_allowing_for_a_slow_loop(hook: Hook) -> None:
    now = [T0]
    cfg = ReceiverConfig.model_validate({"name": "am", "type": "alertmanager", "url": hook.url, "resend_interval": 60})
    notifier = build_notifier([cfg], None, None, clock=lambda: now[0])
    (worker,) = notifier.workers
    try:
        assert worker._valid_until(60.0) == T0 + 240  # start-up vouches for what it restored

        def cycle_at(t: float) -> None:
            now[0] = t
            notifier.submit_cycle([])  # a cycle with no transitions still vouches

        cycle_at(T0 + 15)
        cycle_at(T0 + 30)
        assert worker._valid_until(60.0) == T0 + 30 + 240
        now[0] = T0 + 900  # the loop stopped: the clock moves on, the bound does not
        assert worker._valid_until(60.0) == T0 + 30 + 240

        cycle_at(T0 + 930)  # it resumes after one stall of 900 s: the stall does not widen the bound
        assert worker._valid_until(60.0) == T0 + 930 + 240
        cycle_at(T0 + 1030)  # now every cycle takes 100 s (> resend_interval): 4 × 100 s
        cycle_at(T0 + 1130)
        assert worker._valid_until(60.0) == T0 + 1130 + 400
        assert hook.count() == 0  # nothing was active: nothing sent
    finally:
        notifier.close(1)
