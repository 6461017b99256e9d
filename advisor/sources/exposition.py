"""Prometheus text exposition → :data:`advisor.domain.Exposition` (samples keyed by sample name).

This is the single entry point from exposition text to samples. The result is, by definition, what
``prometheus_client``'s own text parser (``prometheus_client.parser.text_string_to_metric_families``) gives,
flattened into samples keyed by *sample* name, because engines do not agree with the parser about family
names (a counter's family is ``vllm:num_preemptions`` but its sample is ``vllm:num_preemptions_total``; a
histogram named ``vllm:iteration_tokens_total`` has samples ``vllm:iteration_tokens_total_bucket``).

Speed: a full parse of every family costs ~10–20 µs per line, which bounds how many targets one process can
scrape. :mod:`advisor.sources.selective_parser` validates every line and reads only the samples ``keep``
accepts in one regex pass, skipping the rest inside the regex engine (≥10× faster on every real capture;
``bench/parse.py`` measures it); whatever it does not recognize goes to ``prometheus_client``, so the values
are the same either way. ``keep`` must be a pure function of the sample name (an adapter's ``wants``): its
answers are remembered per ``keep`` object, so the first parse with a new ``keep`` (or a new name) also
learns them.

Example (``keep`` accepts only ``vllm:`` names)::

    # HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
    # TYPE vllm:num_preemptions_total counter
    vllm:num_preemptions_total{engine="0",model_name="m"} 3.0
    vllm:num_preemptions_created{engine="0",model_name="m"} 1.7e+09
    process_start_time_seconds 1.7e+09

    →  {"vllm:num_preemptions_total": [Sample("vllm:num_preemptions_total",
                                              {"engine": "0", "model_name": "m"}, 3.0)],
        "vllm:num_preemptions_created": [Sample("vllm:num_preemptions_created", {...}, 1.7e9)]}

Text that is not the Prometheus text format (an HTML error page, JSON, binary) raises
:class:`advisor.errors.ParseError`; an empty body is a valid exposition with no samples.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from advisor.domain import Sample
from advisor.errors import ParseError
from advisor.redact import outside_text
from advisor.sources.selective_parser import Unrecognized, parse_selected

_MAX_REASON_CHARS = 200


def parse_exposition(text: str, keep: Callable[[str], bool] | None = None) -> dict[str, list[Sample]]:
    """Parse Prometheus text format into samples keyed by sample name.

    Args:
        text: the exposition body (Prometheus text format 0.0.4, as served on ``/metrics``).
        keep: predicate on the sample name; samples it rejects are skipped (an adapter's ``wants``).
            ``None`` keeps every sample.

    Returns:
        ``{sample name: [Sample, ...]}`` in exposition order. Values are floats exactly as exposed
        (NaN and ±Inf included); labels are plain ``dict[str, str]``; timestamps and exemplars are
        dropped.

    Raises:
        ParseError: the text is not Prometheus text format; the message is a short reason
            (at most 200 characters, no more of the body than the parser quoted, credentials and URL query values
            replaced by ``<redacted>``, control characters escaped).
    """
    try:
        return parse_selected(text, keep)
    except Unrecognized:
        return parse_exposition_full(text, keep)


def parse_exposition_full(text: str, keep: Callable[[str], bool] | None = None) -> dict[str, list[Sample]]:
    """:func:`parse_exposition` through ``prometheus_client`` alone: the reference the fast path must equal."""
    out: dict[str, list[Sample]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if keep is not None and not keep(s.name):
                    continue
                out.setdefault(s.name, []).append(Sample(name=s.name, labels=dict(s.labels), value=s.value))
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        # the parser quotes the offending line: scrub credentials, escape control characters, bound it
        reason = outside_text(" ".join(str(exc).split()) or type(exc).__name__, limit=_MAX_REASON_CHARS)
        raise ParseError(f"not Prometheus text format: {reason}") from exc
    return out
