"""Whether a real engine's own speed held still between two calibration windows: the truth an online calibration is
judged against, read from the engine's page by the test (never from the advisor).

The calibration tests (``tests/e2e/calibration_vllm.py``, ``tests/e2e/test_calibration_llamacpp.py``) judge a
one-step-ahead error: the model fitted on the windows before predicts this window's TPOT. When the engine's own TPOT
moves between two windows — a neighbour on the 2 shared cores starts or stops — that error measures the neighbour,
not the fit. Seen under the loaded suite (issue 19: ``bench/suite_under_load.py``, two busy processes beside the
suite's other worker): llama.cpp's own TPOT went 0.35 → 0.60 → 0.29 → 0.50 ms over four 36 s windows, and every
window's error was the previous window's change. A window is judged only when the engine's TPOT moved by less than
:data:`STEADY_LOG_CHANGE` since the window before.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

STEADY_LOG_CHANGE = 0.2
"""Largest change of ``ln`` of the engine's own mean TPOT between two windows for the second to be judged (a 22 %
move: the CPU engines' step moves by 15–20 % between windows on 2 shared cores with nothing else running, so an
unloaded run is always judged; the loaded moves seen were 0.53–0.74)."""


@dataclass
class WindowTruth:
    """The engine's own mean TPOT per calibration window, from two of its counters read at each window's update:
    seconds (a histogram's ``_sum`` or llama.cpp's generation-time total) and tokens (its ``_count`` or tokens
    total). ``read(seconds, tokens)`` at the load's start, then at each new calibration update."""

    marks: list[tuple[float, float]] = field(default_factory=list)
    what: str = "TPOT"
    """What the ratio is, for messages: the mean TPOT, or a prefill's mean time (``TTFT less queue time``)."""

    def read(self, seconds: float, tokens: float) -> None:
        """Record the counters' values now (cumulative: seconds, tokens)."""
        self.marks.append((seconds, tokens))

    def tpot(self) -> list[float | None]:
        """Mean TPOT (seconds) between consecutive reads; ``None`` where no token was counted."""
        return [(s1 - s0) / (n1 - n0) if n1 > n0 else None for (s0, n0), (s1, n1) in itertools.pairwise(self.marks)]

    def unsteady(self) -> str | None:
        """Why the last window cannot be judged (the engine's own TPOT moved by :data:`STEADY_LOG_CHANGE` or more
        since the window before, or one of them is unknown), or ``None`` when it can."""
        t = self.tpot()
        if len(t) < 2:
            return None  # the first window is never the judged one
        before, last = t[-2], t[-1]
        if before is None or last is None:
            return f"the engine counted nothing for its {self.what} in a window ({before}, {last})"
        if abs(math.log(last / before)) >= STEADY_LOG_CHANGE:
            return (
                f"the engine's own {self.what} moved {before * 1e3:.3f} → {last * 1e3:.3f} ms between the last two "
                "windows"
            )
        return None

    def shown(self) -> str:
        """The per-window TPOT, ms, for messages."""
        return ", ".join("?" if v is None else f"{v * 1e3:.3f}" for v in self.tpot())
