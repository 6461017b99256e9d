"""Every dashboard panel's PromQL, with the dashboard variables substituted, ready to run against a Prometheus.

Reads the committed dashboards (``deploy/grafana/dashboards/*.json``, what Grafana loads), so what is proven is what
ships; standard library only. For the end-to-end test::

    from deploy.grafana.queries import panel_queries

    for pq in panel_queries("kv-saturated", rate_interval="1m"):
        # pq.dashboard, pq.panel_id, pq.panel, pq.ref_id, pq.instant, pq.expr
        result = prom_api_query(pq.expr)          # instant query; or a range query over the run
        assert result, f"{pq.dashboard} panel {pq.panel_id} {pq.panel!r} {pq.ref_id}: no data for {pq.expr}"

Substituted: ``$deployment`` (the argument), ``$datasource`` (not in expressions), the text-box variables (their
defaults in the dashboard, or ``overrides``) and Grafana's ``$__rate_interval``, ``$__interval`` and ``$__range``.
Any other ``$name`` is an error, so a typo in a dashboard cannot slip through. Every form Grafana accepts is handled:
``$name``, ``${name}``, ``${name:format}`` and ``[[name]]``.

Command line: ``python deploy/grafana/queries.py DEPLOYMENT [--json]``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DASHBOARDS = Path(__file__).resolve().parent / "dashboards"

_VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)(?::\w+)?\]\]|\$(\w+)")


@dataclass(frozen=True)
class PanelQuery:
    """One query of one panel, variables substituted."""

    dashboard: str  # the dashboard's uid
    panel_id: int
    panel: str  # the panel's title
    ref_id: str
    expr: str
    instant: bool  # the panel asks for an instant value (stat, table); otherwise a range (time series)


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """Replace every variable reference in ``expr`` by its value.

    Raises:
        KeyError: a variable without a value (named in the message).
    """

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        if name not in values:
            raise KeyError(f"no value for variable ${name} in {expr!r}")
        return values[name]

    return _VAR.sub(one, expr)


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for p in panels:
        if p.get("type") == "row":
            yield from _panels(p.get("panels") or [])  # a collapsed row holds its panels
        else:
            yield p


def dashboard_files(dashboards_dir: Path = DASHBOARDS) -> list[Path]:
    """The committed dashboard files."""
    return sorted(dashboards_dir.glob("*.json"))


def variable_defaults(dashboard: Mapping[str, Any]) -> dict[str, str]:
    """The text-box and constant variables' default values."""
    out: dict[str, str] = {}
    for v in (dashboard.get("templating") or {}).get("list") or []:
        if v.get("type") in ("textbox", "constant"):
            current = (v.get("current") or {}).get("value")
            out[v["name"]] = str(current if current not in (None, "") else v.get("query", ""))
    return out


def panel_queries(
    deployment: str,
    *,
    rate_interval: str = "1m",
    interval: str = "15s",
    range_: str = "1h",
    overrides: Mapping[str, str] | None = None,
    dashboards_dir: Path = DASHBOARDS,
) -> list[PanelQuery]:
    """Every Prometheus query of every panel of every dashboard, for ``deployment``.

    ``rate_interval`` stands in for ``$__rate_interval`` (Grafana makes it at least four scrape intervals; give at
    least two of the test's), ``interval`` for ``$__interval`` and ``range_`` for ``$__range``. ``overrides`` sets
    other variables (e.g. ``{"ttft_target": "1"}``).
    """
    out: list[PanelQuery] = []
    for path in dashboard_files(dashboards_dir):
        dash = json.loads(path.read_text())
        values = {
            **variable_defaults(dash),
            "deployment": deployment,
            "datasource": "prometheus",
            "__rate_interval": rate_interval,
            "__interval": interval,
            "__range": range_,
            **(overrides or {}),
        }
        for p in _panels(dash.get("panels") or []):
            for t in p.get("targets") or []:
                if "expr" not in t:
                    continue
                out.append(
                    PanelQuery(
                        dashboard=dash["uid"],
                        panel_id=int(p["id"]),
                        panel=p.get("title", ""),
                        ref_id=t.get("refId", ""),
                        expr=substitute(t["expr"], values),
                        instant=bool(t.get("instant")) and not t.get("range"),
                    )
                )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Print every dashboard panel's PromQL for one deployment.")
    p.add_argument("deployment")
    p.add_argument("--rate-interval", default="1m")
    p.add_argument("--json", action="store_true", help="one JSON object per query")
    args = p.parse_args(argv)
    for pq in panel_queries(args.deployment, rate_interval=args.rate_interval):
        if args.json:
            print(json.dumps(asdict(pq)))
        else:
            print(f"{pq.dashboard} #{pq.panel_id} {pq.panel} [{pq.ref_id}]: {pq.expr}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
