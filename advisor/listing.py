"""Bounded lists for messages: a page can carry thousands of models, and every message naming them must stay
short (a log line, a status-page cell, a ``missing:`` line).

Pure: no I/O; engines, observation and rendering code import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

MAX_LISTED: Final = 20
"""How many items of a list a message names before it says how many more there are."""

MAX_ITEM_CHARS: Final = 120
"""How much of one item (a model name from a page label) :func:`join_bounded` quotes, characters."""


def bounded(items: Sequence[str], more: str = "… and {n} more", limit: int = MAX_LISTED) -> list[str]:
    """The first ``limit`` items, then one entry ``more.format(n=...)`` when ``n`` items were left out.

    Args:
        items: the full list, in the order to show.
        more: the closing entry; ``{n}`` is the count left out.
        limit: how many items are kept (≥ 0).

    >>> bounded(["a", "b", "c"], limit=2)
    ['a', 'b', '… and 1 more']
    >>> bounded(["a"], limit=2)
    ['a']
    """
    if len(items) <= limit:
        return list(items)
    return [*items[:limit], more.format(n=len(items) - limit)]


def join_bounded(items: Sequence[str], sep: str = ", ", limit: int = MAX_LISTED) -> str:
    """``sep.join`` of :func:`bounded` items, each cut to :data:`MAX_ITEM_CHARS` (ending in ``…`` when cut).

    >>> join_bounded([f"m{i}" for i in range(25)], limit=3)
    'm0, m1, m2, … and 22 more'
    """
    cut = [s if len(s) <= MAX_ITEM_CHARS else s[: MAX_ITEM_CHARS - 1] + "…" for s in items[:limit]]
    return sep.join(bounded([*cut, *items[limit:]], limit=limit))


IGNORED_MORE: Final = "{n} more models ignored"
"""The closing ``missing`` entry after the first :data:`MAX_LISTED` ``model_name="…" (ignored)`` entries."""
