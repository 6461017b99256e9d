"""One replica number per deployment, stabilized before it reaches the advice. Pure: the caller passes ``now``.

The raw number (what the queueing model says the measured arrival rate needs) moves with every window; the
advice must not. :class:`ReplicaStabilizer` applies the rule of Kubernetes' HorizontalPodAutoscaler
``behavior`` (``pkg/controller/podautoscaler/horizontal.go``, ``stabilizeRecommendationWithBehaviors``):

* scale up only to the **lowest** raw recommendation of the scale-up window (default 60 s), so one spike
  never sizes the fleet;
* scale down only to the **highest** raw recommendation of the scale-down window (default 300 s, HPA's
  default), so a lull never shrinks it;
* otherwise keep the current count.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

DEFAULT_SCALE_UP_WINDOW_SECONDS = 60.0
"""Scale-up stabilization window (HPA's default is 0 s; 60 s keeps a momentary backlog from sizing replicas)."""
DEFAULT_SCALE_DOWN_WINDOW_SECONDS = 300.0
"""Scale-down stabilization window: HPA's default ``scaleDown.stabilizationWindowSeconds``."""


@dataclass
class _Series:
    points: deque[tuple[float, int]] = field(default_factory=deque)


class ReplicaStabilizer:
    """Raw replica recommendations per key (a deployment) → the stabilized count.

    ``observe(key, now, raw)`` records a raw recommendation (replicas, ≥ 1); ``value(key, now, current)`` is
    the count to advise given the deployment's ``current`` replicas. Not thread-safe: one loop owns it.

    Raises:
        ValueError: a window is negative or not finite.
    """

    def __init__(
        self,
        scale_up_window_seconds: float = DEFAULT_SCALE_UP_WINDOW_SECONDS,
        scale_down_window_seconds: float = DEFAULT_SCALE_DOWN_WINDOW_SECONDS,
    ) -> None:
        for name, v in (
            ("scale_up_window_seconds", scale_up_window_seconds),
            ("scale_down_window_seconds", scale_down_window_seconds),
        ):
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number ≥ 0, got {v!r}")
        self.up_window = scale_up_window_seconds
        self.down_window = scale_down_window_seconds
        self._series: dict[str, _Series] = {}

    def observe(self, key: str, now: float, raw: int) -> None:
        """Record one raw recommendation (clamped to ≥ 1) at ``now`` (unix s); older points beyond both
        windows are dropped."""
        s = self._series.setdefault(key, _Series())
        s.points.append((now, max(1, int(raw))))
        keep = max(self.up_window, self.down_window)
        while s.points and now - s.points[0][0] > keep:
            s.points.popleft()

    def value(self, key: str, now: float, current: int) -> int:
        """The stabilized count for ``key`` at ``now`` against ``current`` replicas; ``current`` when nothing
        was observed.

        Example: raw 13, 15, 13, 3 within 60 s and current 1 → 3 (the lowest of the scale-up window).
        """
        s = self._series.get(key)
        if s is None or not s.points:
            return current
        up = [r for t, r in s.points if now - t <= self.up_window] or [s.points[-1][1]]
        down = [r for t, r in s.points if now - t <= self.down_window] or [s.points[-1][1]]
        up_rec, down_rec = min(up), max(down)
        if current < up_rec:
            return up_rec
        if current > down_rec:
            return down_rec
        return current

    def forget(self, key: str) -> None:
        """Drop a key's points (the deployment left the config)."""
        self._series.pop(key, None)
