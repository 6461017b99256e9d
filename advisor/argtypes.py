"""argparse types that reject NaN, infinity and out-of-range numbers with a message naming the value."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from advisor.errors import CapacityError


def interval_arg(upper: float) -> Callable[[str], float]:
    """A type for seconds between scrapes: :func:`positive_float` of ``upper``, at least
    :data:`advisor.conventions.MIN_SCRAPE_INTERVAL_SECONDS` (``once --interval 0.001`` read rates over 7 ms, 3–4.5×
    off, at full confidence). The constant is imported when an argument is parsed, not when the parser is built
    (``--help`` stays import-free: ``tests/test_lazy_cli.py``)."""
    positive = positive_float(upper)

    def parse(text: str) -> float:
        from advisor.conventions import MIN_SCRAPE_INTERVAL_SECONDS

        v = positive(text)
        if v < MIN_SCRAPE_INTERVAL_SECONDS:
            raise argparse.ArgumentTypeError(f"must be at least {MIN_SCRAPE_INTERVAL_SECONDS:g}, got {text!r}")
        return v

    return parse


def positive_float(upper: float) -> Callable[[str], float]:
    """A type accepting finite numbers in (0, ``upper``]."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(v) or v <= 0 or v > upper:
            raise argparse.ArgumentTypeError(f"must be a positive number of at most {upper:g}, got {text!r}")
        return v

    return parse


def duration_arg(text: str) -> float:
    """Seconds ≥ 0, finite (0 means: until stopped): a number, or a Prometheus duration (``90s``, ``5m``,
    ``1h30m``) as the config file takes."""
    try:
        v = float(text)
    except ValueError:
        from advisor.config import parse_duration

        try:
            return parse_duration(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds or a duration like 90s, 5m: {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (run until stopped) or a positive number of seconds, got {text!r}")
    return v


def shard_arg(text: str) -> tuple[int, int]:
    """``i/n`` with 0 ≤ i < n."""
    try:
        i_text, n_text = text.split("/")
        i, n = int(i_text), int(n_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be i/n, e.g. 0/3, got {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"must be i/n with 0 <= i < n, got {text!r}")
    return i, n


def version_arg(text: str) -> str:
    """An engine version such as ``0.7.3``, ``v0.10.2``, ``0.6.6.post1`` or ``0.7.3rc1``: it must start with
    numbers separated by dots (what the accounting profiles compare), else the flag is refused
    (:func:`advisor.capacity.generation.checked_version`)."""
    from advisor.capacity.generation import checked_version

    try:
        return checked_version(text)
    except CapacityError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in ``[low, high]`` (the bounds in the message), so that 0, negatives and
    values no deployment could have are refused with one line instead of producing nonsense or overflow."""

    def parse(text: str) -> int:
        try:
            v = int(text.strip().replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:,} and {high:,}, got {text!r}")
        return v

    return parse


def http_url_arg(text: str) -> str:
    """An absolute http(s) URL with a host, as a config file's URLs are checked
    (:func:`advisor.config.check_http_url`; the message shows the URL redacted, never its credentials). Imported
    when an argument is parsed, not when the parser is built (``tests/test_lazy_cli.py``)."""
    from advisor.config import check_http_url

    try:
        return check_http_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def nonblank_arg(text: str) -> str:
    """A name that is not empty or only whitespace (the config's ``min_length=1`` fields, ``served_model``): an empty
    ``--served-model ""`` would otherwise read as "no model named" and the first model be read silently."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def bounded_float(low: float, high: float, what: str) -> Callable[[str], float]:
    """An argparse type: a finite number in ``[low, high]``, refused with one line naming ``what`` it must be
    (``"a number of GiB"``: "must be a number of GiB in 0..16384, got '-1'")."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {what} in {low:g}..{high:g}, got {text!r}")
        return value

    return parse


def fraction_below_one(text: str) -> float:
    """An argparse type: a finite fraction in (0, 1) — a share of requests that must meet a target, where 1 (every
    request) is no target a percentile histogram can show met ("must be a fraction in (0, 1), e.g. 0.9")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1), e.g. 0.9, got {text!r}")
    return value
