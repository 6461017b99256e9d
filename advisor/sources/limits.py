"""Per-target bounds on what one page may cost: ``sample_limit`` and ``label_limit``, as Prometheus has them.

Prometheus (``scrape/scrape.go``) fails a scrape whose page holds more than ``sample_limit`` samples, or a series
with more than ``label_limit`` labels, and marks the target down (``up 0``); ``0`` means no limit. Here the check
runs on the raw body *before* it is decoded or parsed, so a page over a limit never costs per-series objects:

* **samples** = the page's lines that are not comments (``#``); a blank line counts too (the text format has
  none: ``prometheus_client`` writes none), which keeps the count two ``bytes.count`` calls. That counts
  every family, read or not, because every line is what a parse may walk (with ``engine: auto`` every sample is
  built) and what bounds a page's cost; Prometheus counts after relabeling, and the advisor relabels nothing. The
  body is counted one 1 MiB window at a time (``bytes.count`` in C, no copy) and the count stops in the first
  window that passes the limit.
* **labels** = the labels of each series the advisor *reads* (the samples the parse kept: an adapter's families,
  or every family while ``engine: auto`` has not detected the engine yet), checked on the parsed samples
  (:func:`over_label_limit`, ~50 ns a sample). A family the adapter skips is never built into series, so its
  labels cost nothing; a regex over every line would cost ~5 ms per MiB on every page, more than the parse.

Cost on a 15 MiB page of 170,000 series (``bench/limits.py``): the count stops in the window that passes the
limit (a few MiB counted, ~10 ms); a page under the limit pays one ``bytes.count`` pass (~1 ms per MiB).
"""

from __future__ import annotations

from typing import Final

from advisor.domain import Exposition
from advisor.redact import outside_text

DEFAULT_SAMPLE_LIMIT: Final = 50_000
"""Samples one page may hold (config ``scrape.sample_limit``). A busy vLLM with data-parallel ranks exposes ~5,000
(every histogram bucket is a sample), so ten times that leaves room for any engine and stops a runaway exporter."""

DEFAULT_LABEL_LIMIT: Final = 64
"""Labels one series may carry (config ``scrape.label_limit``); engines use at most ~10 (vLLM's
``cache_config_info`` has the most)."""

_WINDOW: Final = 1 << 20
"""Bytes counted at a time before the sample count is compared with the limit."""


def count_samples(body: bytes, stop_above: int = 0) -> tuple[int, int]:
    """Sample lines of ``body`` (lines not starting with ``#``), and how many bytes were counted.

    Args:
        body: the exposition as received (Prometheus text format).
        stop_above: stop counting after the first 1 MiB window whose running count passes this (``0``: count it
            all).

    Returns:
        ``(samples, bytes_counted)``; ``bytes_counted < len(body)`` when the count stopped early (the true count is
        then larger).

    Example: ``b"# TYPE x gauge\\nx 1\\nx{a=\\"b\\"} 2\\n"`` → ``(2, 30)``.
    """
    n = len(body)
    if n == 0:
        return 0, 0
    count = 0 if body[:1] == b"#" else 1  # the first line starts at 0, every other one after a "\n"
    start = 0
    while start < n:
        end = min(start + _WINDOW, n)
        lines = body.count(b"\n", start, end)  # each "\n" but the last byte starts a line
        if end == n and body[-1:] == b"\n":
            lines -= 1
        # a "\n#" whose "\n" is the window's last byte belongs to this window
        count += lines - body.count(b"\n#", start, min(end + 1, n))
        start = end
        if stop_above and count > stop_above:
            break
    return count, start


def over_label_limit(samples: Exposition, label_limit: int) -> tuple[str, int] | None:
    """The first parsed series with more than ``label_limit`` labels, as ``(sample name, labels)``; ``None`` when
    there is none (or ``label_limit`` is 0). The name is outside text (made safe to quote, bounded).

    Example: ``({"x": [Sample("x", {"a": "1", "b": "2"}, 1.0)]}, 1)`` → ``("x", 2)``.
    """
    if label_limit <= 0:
        return None
    for name, series in samples.items():
        for s in series:
            if len(s.labels) > label_limit:
                return outside_text(name, limit=120), len(s.labels)
    return None


def label_limit_message(name: str, labels: int, label_limit: int) -> str:
    """The ``sample_limit`` error message of a series over ``label_limit``:
    ``"label_limit exceeded: series big_info has 70 labels; label_limit is 64"``."""
    return f"label_limit exceeded: series {name} has {labels} labels; label_limit is {label_limit}"


def check_page(body: bytes, sample_limit: int) -> str | None:
    """Why ``body`` holds more than ``sample_limit`` samples (the message of a ``sample_limit`` scrape error), or
    ``None`` (also when ``sample_limit`` is 0: no limit). See :func:`count_samples`; a body that cannot hold more
    lines than the limit (no more bytes, or fewer newlines) is not counted.

    Example: ``"sample_limit exceeded: 50,212 samples in the first 1,048,576 of 15,728,640 bytes; sample_limit is
    50,000"``.
    """
    if sample_limit <= 0 or len(body) <= sample_limit:
        return None  # every line counted holds at least one byte
    if body.count(b"\n") < sample_limit:
        # lines ≤ newlines + 1 ≤ the limit: one C pass, not the two of the count (a 62 KB vLLM page: ~30 µs, not
        # ~100; the fleet's per-target CPU, issue 15)
        return None
    samples, counted = count_samples(body, stop_above=sample_limit)
    if samples <= sample_limit:
        return None
    seen = (
        f"{samples:,} samples in the first {counted:,} of {len(body):,} bytes"
        if counted < len(body)
        else f"{samples:,} samples"
    )
    return f"sample_limit exceeded: {seen}; sample_limit is {sample_limit:,}"
