"""The Grafana dashboards: regenerated from code, loadable by Grafana's schema models, and every query valid PromQL
over names the advisor and the engine adapters really use."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor import conventions as c
from advisor.exporter import make_registry
from deploy.grafana.queries import DASHBOARDS, dashboard_files, panel_queries, substitute
from tests.deploy.conftest import REPO, need_binary

OVERVIEW_UID = "capacity-advisor-overview"
DEPLOYMENT_UID = "capacity-advisor-deployment"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DASHBOARDS / name).read_text())
    return data


def all_panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in dash["panels"]:
        out.append(p)
        out.extend(p.get("panels") or [])
    return out


def test_the_committed_dashboards_are_what_the_generator_builds() -> None:
    pytest.importorskip(
        "grafana_foundation_sdk", reason="grafana-foundation-sdk is not installed (pip install .[test])"
    )
    from deploy.grafana import generate

    built = generate.build_all()
    assert sorted(built) == sorted(p.name for p in dashboard_files())
    for name, content in built.items():
        assert (DASHBOARDS / name).read_text() == content, f"{name} is stale: run python deploy/grafana/generate.py"


def test_each_dashboard_loads_into_grafanas_typed_model_unchanged() -> None:
    sdk = pytest.importorskip("grafana_foundation_sdk", reason="grafana-foundation-sdk is not installed")
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import Dashboard

    assert sdk
    for path in dashboard_files():
        raw = json.loads(path.read_text())
        model = Dashboard.from_json(raw)
        assert json.loads(JSONEncoder().encode(model)) == raw, f"{path.name} has fields Grafana's schema does not"


def test_there_are_two_dashboards_with_stable_uids_and_unique_panel_ids() -> None:
    uids = {load(p.name)["uid"] for p in dashboard_files()}
    assert uids == {OVERVIEW_UID, DEPLOYMENT_UID}
    for p in dashboard_files():
        ids = [panel["id"] for panel in all_panels(load(p.name))]
        assert len(ids) == len(set(ids)), p.name


@pytest.mark.parametrize("name", ["overview.json", "deployment.json"])
def test_a_dashboard_has_a_prometheus_datasource_variable_and_a_deployment_variable(name: str) -> None:
    variables = {v["name"]: v for v in load(name)["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    dep = variables["deployment"]
    assert dep["type"] == "query"
    assert dep["query"] == f"label_values({c.KV_CACHE_USAGE_RATIO}, {c.LABEL_DEPLOYMENT})"
    assert dep["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_every_panel_but_rows_and_text_queries_the_datasource_variable() -> None:
    for path in dashboard_files():
        for p in all_panels(load(path.name)):
            if p["type"] in ("row", "text"):
                continue
            assert p.get("targets"), f"{path.name}: panel {p['title']!r} has no query"
            for t in p["targets"]:
                assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
                assert t["expr"].strip(), p["title"]


def test_the_capacity_view_has_what_the_operator_needs() -> None:
    exprs = " ".join(t["expr"] for p in all_panels(load("deployment.json")) for t in p.get("targets") or [])
    for name in (
        c.KV_CACHE_CAPACITY_TOKENS,
        c.KV_CACHE_USAGE_RATIO,
        c.CONCURRENCY_CEILING,
        c.REQUESTS_RUNNING,
        c.REQUESTS_WAITING,
        c.GOODPUT_RATIO,
        c.RECOMMENDATION_ACTIVE,
        c.RECOMMENDED_VALUE,
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "$ttft_target",
        "$tpot_target",
    ):
        assert name in exprs, name
    text = [p for p in all_panels(load("deployment.json")) if p["type"] == "text"]
    assert text and "${advisor_url}/api/v1/recommendations" in text[0]["options"]["content"]


def test_the_targets_default_to_the_example_configs_slo() -> None:
    cfg = yaml.safe_load((REPO / "deploy" / "advisor.example.yaml").read_text())
    slo = cfg["deployments"][0]["slo"]
    variables = {v["name"]: v for v in load("deployment.json")["templating"]["list"]}
    assert float(variables["ttft_target"]["query"]) == slo["ttft_seconds"]
    assert float(variables["tpot_target"]["query"]) == slo["tpot_seconds"]


def test_panel_queries_substitutes_every_variable() -> None:
    queries = panel_queries("chat-8b", rate_interval="2m")
    assert len(queries) > 40
    for pq in queries:
        assert "$" not in pq.expr and "[[" not in pq.expr, pq
    dep = [pq for pq in queries if pq.dashboard == DEPLOYMENT_UID]
    assert all('"chat-8b"' in pq.expr or "vector(" in pq.expr for pq in dep if "advisor_" in pq.expr)
    assert any("[2m]" in pq.expr for pq in queries)
    assert {pq.dashboard for pq in queries} == {OVERVIEW_UID, DEPLOYMENT_UID}


def test_substitute_knows_grafanas_forms_and_refuses_an_unknown_variable() -> None:
    values = {"a": "1", "b": "2"}
    assert substitute("x{$a} ${b} ${a:regex} [[b]]", values) == "x{1} 2 1 2"
    with pytest.raises(KeyError, match=r"\$nope"):
        substitute('up{d="$nope"}', values)


def test_every_panel_query_is_valid_promql(tmp_path: Path) -> None:
    promtool = need_binary("promtool")
    rules = [{"record": f"dashboard:query{i}:check", "expr": pq.expr} for i, pq in enumerate(panel_queries("x"))]
    f = tmp_path / "queries.yml"
    f.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    out = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_advisor_metric_a_panel_reads_is_one_the_advisor_exports() -> None:
    registry, _, _ = make_registry()
    families = {m.name for m in registry.collect()}
    exported = {v for k, v in vars(c).items() if k.isupper() and isinstance(v, str) and v.startswith("advisor_")}
    exported |= families | {f"{n}_total" for n in exported | families}
    exported |= {f"{n}_bucket" for n in families}
    used = {m for pq in panel_queries("x") for m in re.findall(r"\badvisor_[a-z_]+", pq.expr)}
    assert used, "no advisor_* metric in the dashboards"
    assert used <= exported, f"not exported: {sorted(used - exported)}"


def test_the_engine_histograms_are_the_ones_the_adapters_read() -> None:
    pytest.importorskip("grafana_foundation_sdk", reason="grafana-foundation-sdk is not installed")
    from deploy.grafana import generate

    sources = "".join(p.read_text() for p in (REPO / "advisor" / "engines").glob("*.py"))
    for name in (*generate.TTFT_HISTOGRAMS, *generate.TPOT_HISTOGRAMS):
        assert f'"{name}"' in sources, f"{name} is not read by any engine adapter"
