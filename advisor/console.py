"""The console lines of ``run`` and ``demo`` (stdout): one per recommendation transition, full
(:func:`advisor.service.format_transition`) or, with ``--compact``, short and under
:data:`advisor.logfmt.COMPACT_WIDTH` characters, e.g. (one line each)::

    [12:04:05] OPENED CRITICAL kv-saturated saturation: gpu_memory_utilization 0.5 → 0.9
        | --gpu-memory-utilization 0.9 | id 70ee11049246d6bc
    [12:04:40] RESOLVED kv-saturated saturation — KV usage 40.0% (resolves below 80%) | id 70ee11049246d6bc
 The id stays whole (``/api/v1/recommendations/<id>`` and acks take it); what does not
fit is cut with ``…``: first the reason or flag, then the problem and turn. The status page and
``/api/v1/recommendations`` hold the whole recommendation.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from advisor.logfmt import COMPACT_WIDTH, fit
from advisor.platforms import flag_text
from advisor.rules.lifecycle import Transition
from advisor.service import format_transition, pool_factor_needed


def compact_transition(t: Transition, width: int = COMPACT_WIDTH) -> str:
    """One transition as a line shorter than ``width`` characters: time, kind, severity (opened), deployment,
    problem, the turn (``dial current → suggested``), the reason (resolved) or flag (opened, updated), and the id.

    Raises:
        ValueError: ``width`` leaves no room for the time, kind and id (under 60 characters).
    """
    if width < 60:
        raise ValueError(f"width must be at least 60 characters for a transition line, got {width}")
    r = t.recommendation
    when = time.strftime("%H:%M:%S", time.localtime(r.resolved_at if t.kind == "resolved" else r.opened_at))
    problem = r.problem or r.rule
    # the short marker: the long one of the full line would crowd the flag out of 160 characters (breaker)
    short = "" if pool_factor_needed(r.evidence) is None else " (not enough alone)"
    turn = f"{r.dial} {r.current} → {r.suggested}{short}"
    tail = f" | id {r.id}"
    if t.kind == "resolved":
        head = f"[{when}] RESOLVED {r.deployment} {problem}"
        detail = f" — {t.reason or r.resolved_reason or 'the condition cleared'}"
    elif t.kind == "updated":
        head = f"[{when}] UPDATED {r.deployment} {problem}: now {turn}"
        detail = f" | {flag_text(r.flag, r.evidence)}"
    else:
        head = f"[{when}] OPENED {r.severity.upper()} {r.deployment} {problem}: {turn}"
        detail = f" | {flag_text(r.flag, r.evidence)}"
    room = width - 1 - len(tail)  # characters for head and detail together
    head = fit(head, min(room, len(head) + 1))
    detail = fit(detail, room - len(head) + 1) if room - len(head) >= 4 else ""
    return head + detail + tail


def transition_printer(compact: bool) -> Callable[[Transition], None]:
    """``on_transition`` for the console: prints each transition to stdout at once, full or :func:`compact_transition`
    (``--compact``)."""
    render = compact_transition if compact else format_transition

    def show(t: Transition) -> None:
        print(render(t), flush=True)

    return show
