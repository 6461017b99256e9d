"""A template rule module: copy it into your own package to write a third-party rule.

Register the factory under the ``advisor.rules`` entry-point group in your package's ``pyproject.toml``::

    [project.entry-points."advisor.rules"]
    my_rule = "my_package.my_rule:make_rule"

The advisor calls ``make_rule(settings)`` with ``rules.plugins.my_rule`` from its config (``{}`` if absent)
and evaluates the returned object after its built-in rules. Keep it pure: read the
:class:`~advisor.rules.base.Evaluation`, return values, never perform I/O or read the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.rules.base import Condition, Evaluation, Proposal


class TemplateRule:
    """Fires when more than ``max_waiting`` requests wait; proposes nothing (fill in ``propose``)."""

    id = "template_waiting"
    supersedes: tuple[str, ...] = ()

    def __init__(self, max_waiting: float = 100, for_seconds: float = 60):
        """``max_waiting``: requests; ``for_seconds``: how long the condition must hold."""
        self.max_waiting = max_waiting
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold before recommendations open."""
        return self._for

    def fires(self, ev: Evaluation) -> Condition:
        """True / False, or None with the reason when the data cannot tell."""
        if ev.stats is None or ev.stats.requests_waiting is None:
            return Condition(None, "waiting requests unknown")
        return Condition(ev.stats.requests_waiting > self.max_waiting, f"{ev.stats.requests_waiting:.0f} waiting")

    def clears(self, ev: Evaluation) -> Condition:
        """The clear side: stricter than ``not fires`` so that a value at the threshold does not flap."""
        if ev.stats is None or ev.stats.requests_waiting is None:
            return Condition(None, "waiting requests unknown")
        return Condition(ev.stats.requests_waiting < self.max_waiting / 2, f"{ev.stats.requests_waiting:.0f} waiting")

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Dial turns with predicted effects (see advisor.rules.common for the capacity-pass helpers)."""
        return []


def make_rule(settings: Mapping[str, Any]) -> TemplateRule:
    """The entry-point factory."""
    return TemplateRule(float(settings.get("max_waiting", 100)), float(settings.get("for_seconds", 60)))
