"""``/metrics`` rendered with remembered line prefixes (advisor.exporter.MetricsRenderer) is byte for byte what
prometheus-client's ``generate_latest`` writes for the same registry: on generated families (label values with
backslashes, newlines, quotes and any Unicode; names the text format must escape; NaN, ±Inf, -0.0; timestamps;
counters with and without ``_created``; histograms), rendered again after the series set changed, and on the
daemon's own registry after real cycles against a stand-in engine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import requests
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from advisor.config import parse_config
from advisor.exporter import MetricsRenderer, make_registry
from advisor.service import Service
from advisor.standin import StandInEngine, StandInServer
from tests.http.conftest import SATURATED, config, start_daemon, stop_daemon

NAMES = st.sampled_from(["advisor_target_up", "advisor_x", "a:b", "ab.c", "ünits", "_u"])
LABEL_NAMES = st.lists(st.sampled_from(["deployment", "target", "state", "reason", "x.y", "ä"]), unique=True)
VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 1e22, 123456789.0, 5e-324]),
    st.integers(-(2**60), 2**60).map(float),
)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ['a"b', "a\\b", "a\nb", 'http://u:p@h:1/m?x="1"\\n', ""]
)


@st.composite
def families(draw: Any) -> list[Metric]:
    out: list[Metric] = []
    for i in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["gauge", "counter", "histogram"]))
        name = f"{draw(NAMES)}_{i}"
        doc = draw(TEXT)
        labels = draw(LABEL_NAMES)
        rows = draw(st.lists(st.tuples(st.lists(TEXT, min_size=len(labels), max_size=len(labels)), VALUES), max_size=5))
        stamp = draw(st.none() | st.floats(0, 2e9))
        if kind == "gauge":
            g = GaugeMetricFamily(name, doc, labels=labels)
            for values, v in rows:
                g.add_metric(values, v, timestamp=stamp)
            out.append(g)
        elif kind == "counter":
            c = CounterMetricFamily(name, doc, labels=labels)
            created = draw(st.none() | st.floats(0, 2e9))
            for values, v in rows:
                c.add_metric(values, v, created=created)
            out.append(c)
        else:
            h = HistogramMetricFamily(name, doc, labels=labels)
            for values, v in rows:
                h.add_metric(values, [("1.0", 1.0), ("+Inf", 2.0)], sum_value=v)
            out.append(h)
    return out


class Fixed:
    """A collector yielding the families it is given (swapped between renders)."""

    def __init__(self) -> None:
        self.metrics: list[Metric] = []

    def collect(self) -> Iterator[Metric]:
        yield from self.metrics


@settings(max_examples=300, deadline=None)
@given(st.lists(families(), min_size=1, max_size=4))
def test_each_render_equals_generate_latest_as_the_series_change(rounds: list[list[Metric]]) -> None:
    registry = CollectorRegistry(auto_describe=False)
    fixed = Fixed()
    registry.register(fixed)  # type: ignore[arg-type]
    renderer = MetricsRenderer()
    for metrics in rounds + rounds[:1]:  # the first set again, after the others replaced its prefixes
        fixed.metrics = metrics
        expected = generate_latest(registry)
        assert renderer.render(registry) == expected
        assert renderer.render(registry) == expected  # every prefix remembered


def test_the_daemons_own_registry_renders_as_generate_latest_cycle_after_cycle() -> None:
    srv = StandInServer(StandInEngine(phases=SATURATED, speed=1.0, num_gpu_blocks=1000))
    srv.start_background()
    try:
        data = config(srv.url())
        data["deployments"].append(
            {**data["deployments"][0], "name": "second.one_2", "targets": [srv.url() + "?a=%22q%22&b=\\"]}
        )
        registry, collector, metrics = make_registry()
        svc = Service(parse_config(data), collector, metrics)
        renderer = MetricsRenderer()
        try:
            for _ in range(3):
                svc.run_once()
                expected = generate_latest(registry)
                assert b"advisor_target_up{" in expected and b"advisor_scrape_errors_total" in expected
                assert renderer.render(registry) == expected
        finally:
            svc.close()
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_daemon_serves_metrics_through_the_renderer() -> None:
    srv = StandInServer(StandInEngine(phases=SATURATED, speed=1.0, num_gpu_blocks=1000))
    srv.start_background()
    d = start_daemon(config(srv.url()))
    try:
        d.wait_open()
        served = requests.get(d.url + "/metrics", timeout=30).text
        assert 'advisor_target_up{deployment="chat-8b",target="' in served
        assert "# TYPE advisor_scrape_errors_total counter" in served
    finally:
        stop_daemon(d)
        srv.shutdown()
        srv.server_close()
