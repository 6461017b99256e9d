"""The Kubernetes manifests ``rules generate`` writes (``rules/kubernetes/``), validated against published schemas.

* KEDA ``ScaledObject`` and prometheus-operator ``PrometheusRule``: the CRDs' ``openAPIV3Schema``, vendored under
  ``tests/fixtures/schemas/`` (version, source and licence in its README), strict (unknown fields refused).
* ``autoscaling/v2`` ``HorizontalPodAutoscaler``: ``kubernetes-validate`` (PyPI; bundles the Kubernetes OpenAPI
  schemas, offline), strict.

Expected values are written out by hand from the example config (``deploy/advisor.example.yaml``: deployment
``chat-8b`` with two targets, ``autoscaling: {min_replica_count: 1, max_replica_count: 8}``) and KEDA's
documentation, not taken from the generator.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from advisor.cli import main
from advisor.errors import ConfigError
from advisor.manifests import Autoscaling, Manifest, render
from advisor.rulescmd import autoscaling_settings, rules_input
from advisor.rulesgen import DeploymentSLO, RulesInput, generate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "advisor.example.yaml"
SCHEMAS = ROOT / "tests" / "fixtures" / "schemas"
KUBERNETES_VERSION = "1.30.0"


def _strict(schema: Any) -> Any:
    """The CRD schema with ``additionalProperties: false`` on every object that lists its properties and does not
    keep unknown fields (kubectl's ``--validate=strict``; see the schemas' README)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _crd_validator(file: str, version: str) -> jsonschema.Draft4Validator:
    crd = yaml.safe_load((SCHEMAS / file).read_text(encoding="utf-8"))
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return jsonschema.Draft4Validator(_strict(served["schema"]["openAPIV3Schema"]))


KEDA = _crd_validator("keda.sh_scaledobjects.yaml", "v1alpha1")
PROMETHEUS_RULE = _crd_validator("monitoring.coreos.com_prometheusrules.yaml", "v1")


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / "rules" / "kubernetes" / name).read_text(encoding="utf-8")) if d]


def _errors(validator: jsonschema.Draft4Validator, doc: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


# --- KEDA ScaledObject ----------------------------------------------------------------------------------------


def test_the_scaled_object_passes_kedas_crd_schema_and_says_what_the_example_config_asks() -> None:
    (so,) = _docs("keda-scaledobjects.yaml")
    assert _errors(KEDA, so) == []
    assert (so["apiVersion"], so["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    spec = so["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat-8b"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 8)
    # the CRD's CEL rule (x-kubernetes-validations), which JSON Schema does not evaluate
    assert spec["minReplicaCount"] <= spec["maxReplicaCount"]
    # KEDA's defaults: pollingInterval 30 s, cooldownPeriod 300 s (keda.sh/docs/2.20/reference/scaledobject-spec)
    assert (spec["pollingInterval"], spec["cooldownPeriod"]) == (30, 300)
    # the outage guard: two targets listed → fallback 2, never below the current count
    assert spec["fallback"] == {"failureThreshold": 3, "replicas": 2, "behavior": "currentReplicasIfHigher"}
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus"
    assert trigger["metricType"] == "AverageValue"  # KEDA's fallback requires it (CheckFallbackValid)
    assert trigger["metadata"] == {
        "serverAddress": "http://prometheus-operated.monitoring.svc:9090",
        "query": 'max(advisor_desired_replicas{deployment="chat-8b"})',
        "threshold": "1",
        "ignoreNullValues": "false",
    }


def test_kedas_schema_refuses_a_boolean_ignore_null_values_an_unknown_field_and_a_zero_max() -> None:
    (so,) = _docs("keda-scaledobjects.yaml")
    bad = copy.deepcopy(so)
    bad["spec"]["triggers"][0]["metadata"]["ignoreNullValues"] = False  # trigger metadata values are strings
    assert any("ignoreNullValues" in e for e in _errors(KEDA, bad))
    bad = copy.deepcopy(so)
    bad["spec"]["fallback"]["replica"] = 2
    assert any("replica" in e for e in _errors(KEDA, bad))
    bad = copy.deepcopy(so)
    bad["spec"]["maxReplicaCount"] = 0
    assert any("maxReplicaCount" in e for e in _errors(KEDA, bad))
    bad = copy.deepcopy(so)
    bad["spec"]["fallback"]["behavior"] = "minimum"
    assert any("behavior" in e for e in _errors(KEDA, bad))


# --- HPA ------------------------------------------------------------------------------------------------------


def test_the_hpa_example_passes_kubernetes_strict_schema_validation() -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed (pip install .[test])")
    (h,) = _docs("hpa-example.yaml")
    kv.validate(h, KUBERNETES_VERSION, strict=True)  # raises ValidationError with the path
    assert (h["apiVersion"], h["kind"]) == ("autoscaling/v2", "HorizontalPodAutoscaler")
    assert (h["spec"]["minReplicas"], h["spec"]["maxReplicas"]) == (1, 8)
    (metric,) = h["spec"]["metrics"]
    assert metric == {
        "type": "External",
        "external": {
            "metric": {"name": "advisor_desired_replicas", "selector": {"matchLabels": {"deployment": "chat-8b"}}},
            # AverageValue 1: the HPA asks for ceil(value ÷ 1) replicas (Kubernetes HPA algorithm details)
            "target": {"type": "AverageValue", "averageValue": "1"},
        },
    }
    bad = copy.deepcopy(h)
    bad["spec"]["metrics"][0]["external"]["target"]["averageValues"] = "1"
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, KUBERNETES_VERSION, strict=True)


# --- PrometheusRule -------------------------------------------------------------------------------------------


def _rule_file_groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = []
    for name in ("engines.rules.yml", "slo.rules.yml", "advisor.rules.yml"):
        groups += yaml.safe_load((ROOT / "rules" / name).read_text(encoding="utf-8"))["groups"]
    return groups


def test_the_prometheus_rule_passes_prometheus_operators_crd_schema_and_wraps_the_rule_files() -> None:
    (pr,) = _docs("prometheusrule.yaml")
    assert _errors(PROMETHEUS_RULE, pr) == []
    assert (pr["apiVersion"], pr["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert pr["spec"]["groups"] == _rule_file_groups()
    bad = copy.deepcopy(pr)
    bad["spec"]["groups"][0]["rules"][0]["expression"] = "1"
    assert _errors(PROMETHEUS_RULE, bad)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (scripts/install-system-deps)")
def test_the_prometheus_rules_groups_pass_promtool_check_rules(tmp_path: Path) -> None:
    (pr,) = _docs("prometheusrule.yaml")
    path = tmp_path / "from-prometheusrule.yml"
    path.write_text(yaml.safe_dump({"groups": pr["spec"]["groups"]}), encoding="utf-8")
    done = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


# --- generation -----------------------------------------------------------------------------------------------


def test_the_committed_manifests_are_what_the_example_config_generates(tmp_path: Path) -> None:
    assert main(["rules", "generate", "--config", str(EXAMPLE), "--out", str(tmp_path)]) == 0
    for name in ("keda-scaledobjects.yaml", "hpa-example.yaml", "prometheusrule.yaml"):
        assert (tmp_path / "kubernetes" / name).read_text(encoding="utf-8") == (
            ROOT / "rules" / "kubernetes" / name
        ).read_text(encoding="utf-8"), f"rules/kubernetes/{name} is stale: run capacity-advisor rules generate"


def test_a_rendered_manifest_loads_back_as_its_documents() -> None:
    a = Autoscaling(deployment="chat-8b", scale_target="vllm-chat")
    gen = generate(RulesInput((DeploymentSLO("chat-8b", "vllm", 2.5, 0.1, 0.95, autoscaling=a),)))
    for m in gen.manifests:
        assert [d for d in yaml.safe_load_all(render(m)) if d] == [dict(d) for d in m.docs]
    assert render(Manifest("x.yaml", ("a",), ())) == "# a\n"


def test_a_deployment_name_that_is_no_kubernetes_name_gets_a_warning_and_no_scaled_object() -> None:
    ok = Autoscaling(deployment="chat-8b", scale_target="chat-8b")
    bad = Autoscaling(deployment="Chat_8B", scale_target="Chat_8B")
    gen = generate(
        RulesInput(
            (
                DeploymentSLO("chat-8b", "vllm", 2.5, 0.1, 0.95, autoscaling=ok),
                DeploymentSLO("Chat_8B", "vllm", 2.5, 0.1, 0.95, autoscaling=bad),
            )
        )
    )
    keda = next(m for m in gen.manifests if m.name == "kubernetes/keda-scaledobjects.yaml")
    assert [d["spec"]["scaleTargetRef"]["name"] for d in keda.docs] == ["chat-8b"]
    (warning,) = [w for w in gen.warnings if "Chat_8B" in w]
    assert "deployments[].autoscaling.scale_target" in warning


def _scaled(*deps: DeploymentSLO) -> tuple[list[str], list[str], tuple[str, ...]]:
    """(ScaledObject names, HPA names, warnings) that ``generate`` gives for ``deps``."""
    gen = generate(RulesInput(deps))
    by_name = {m.name: m for m in gen.manifests}
    keda = [d["metadata"]["name"] for d in by_name["kubernetes/keda-scaledobjects.yaml"].docs]
    hpas = [d["metadata"]["name"] for d in by_name["kubernetes/hpa-example.yaml"].docs]
    return keda, hpas, gen.warnings


@pytest.mark.parametrize(
    ("platform", "scaled_there_by"),
    [  # each platform's own replica setting (advisor/platforms.py PROFILES, from the platforms' documentation)
        ("systemd", "systemctl enable --now"),
        ("sagemaker", "DesiredInstanceCount"),
        ("vertex", "dedicatedResources.minReplicaCount"),
        ("azure-ml", "instance_count"),
        ("bedrock", "Provisioned Throughput"),
    ],
)
def test_a_deployment_not_on_kubernetes_gets_one_warning_naming_its_platform_and_no_scaled_object(
    platform: str, scaled_there_by: str
) -> None:
    keda, hpas, warnings = _scaled(
        DeploymentSLO("chat-8b", "vllm", 2.5, 0.1, 0.95, autoscaling=Autoscaling("chat-8b", "chat-8b")),
        DeploymentSLO(
            "elsewhere", "vllm", 2.5, 0.1, 0.95, autoscaling=Autoscaling("elsewhere", "elsewhere", platform=platform)
        ),
    )
    assert (keda, hpas) == (["chat-8b"], ["chat-8b"])
    (warning,) = [w for w in warnings if "'elsewhere'" in w]
    assert f"platform is {platform}" in warning
    assert scaled_there_by in warning


def test_the_config_platform_reaches_the_generator(tmp_path: Path) -> None:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    data["deployments"][0]["platform"] = "sagemaker"
    data.pop("receivers", None)
    path = tmp_path / "advisor.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    keda, hpas, warnings = _scaled(*rules_input(path).deployments)
    assert (keda, hpas) == ([], [])
    assert [w for w in warnings if "platform is sagemaker" in w] != []


def test_a_scale_target_longer_than_kedas_54_characters_gets_a_warning_and_no_scaled_object() -> None:
    # KEDA names its HPA "keda-hpa-" + the ScaledObject's name, a DNS-1123 label of at most 63 characters:
    # 63 - len("keda-hpa-") = 63 - 9 = 54 (https://github.com/kedacore/keda/issues/6370)
    fits, over = "a" * 54, "b" * 55
    keda, hpas, warnings = _scaled(
        DeploymentSLO("fits", "vllm", 2.5, 0.1, 0.95, autoscaling=Autoscaling("fits", fits)),
        DeploymentSLO("over", "vllm", 2.5, 0.1, 0.95, autoscaling=Autoscaling("over", over)),
    )
    assert (keda, hpas) == ([fits], [fits])
    (warning,) = [w for w in warnings if "'over'" in w]
    assert "55 characters" in warning and "54" in warning and "scale_target" in warning


def test_max_replica_count_below_the_listed_targets_and_scale_to_zero_are_warnings(tmp_path: Path) -> None:
    (below,) = rules_input(_config(tmp_path, {"max_replica_count": 2}, targets=3)).deployments
    keda, _, warnings = _scaled(below)
    assert keda == ["chat-8b"]  # a warning, not a refusal
    assert [w for w in warnings if "max_replica_count 2 is below the 3 targets" in w] != []
    (zero,) = rules_input(_config(tmp_path, {"min_replica_count": 0}, targets=1)).deployments
    keda, _, warnings = _scaled(zero)
    assert keda == ["chat-8b"]
    (warning,) = [w for w in warnings if "min_replica_count 0" in w]
    assert "fallback" in warning and "disappears" in warning
    (plain,) = rules_input(_config(tmp_path, {"max_replica_count": 3}, targets=3)).deployments
    assert [w for w in _scaled(plain)[2] if "replica_count" in w] == []


# --- config ---------------------------------------------------------------------------------------------------


def _config(tmp_path: Path, autoscaling: dict[str, Any], targets: int = 3) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    (dep,) = data["deployments"]
    dep["targets"] = [f"http://10.0.0.{i}:8000/metrics" for i in range(1, targets + 1)]
    dep["autoscaling"] = autoscaling
    data.pop("receivers", None)
    path = tmp_path / "advisor.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_config_keys_map_to_the_manifest_fields(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        {
            "scale_target": "vllm-chat",
            "namespace": "llm",
            "min_replica_count": 2,
            "max_replica_count": 6,
            "cooldown_period": "10m",
            "polling_interval": "15s",
            "stabilization": "1m",
            "fallback_failure_threshold": 5,
        },
    )
    (dep,) = rules_input(path).deployments
    assert dep.autoscaling == Autoscaling(
        deployment="chat-8b",
        scale_target="vllm-chat",
        namespace="llm",
        min_replicas=2,
        max_replicas=6,
        cooldown_seconds=600,
        polling_seconds=15,
        stabilization_seconds=60,
        fallback_replicas=3,  # three targets listed, above min_replica_count 2
        fallback_failure_threshold=5,
        prometheus_url="http://prometheus-operated.monitoring.svc:9090",
        platform="kubernetes",
        listed_replicas=3,
    )


def test_fallback_defaults_to_min_replica_count_when_fewer_targets_are_listed(tmp_path: Path) -> None:
    from advisor.config import load_config

    (d,) = load_config(_config(tmp_path, {"min_replica_count": 4}, targets=1)).deployments
    a = autoscaling_settings(d)
    assert a is not None and a.fallback_replicas == 4


# --- opt-in (issue 19) ------------------------------------------------------------------------------------------


def _two(tmp_path: Path, first: dict[str, Any], second: dict[str, Any]) -> Path:
    """The example config with two deployments, ``first`` and ``second`` merged into each."""
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    (dep,) = data["deployments"]
    dep.pop("autoscaling", None)
    data["deployments"] = [
        {**dep, "name": "chat-8b", **first},
        {**dep, "name": "qwen-14b", "targets": ["http://10.0.0.9:8000/metrics"], **second},
    ]
    data.pop("receivers", None)
    path = tmp_path / "advisor.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _keda_names(gen: Any) -> list[str]:
    keda = next(m for m in gen.manifests if m.name.endswith("keda-scaledobjects.yaml"))
    hpas = next(m for m in gen.manifests if m.name.endswith("hpa-example.yaml"))
    names = [d["metadata"]["name"] for d in keda.docs]
    assert names == [d["metadata"]["name"] for d in hpas.docs]
    return names


def test_a_deployment_without_an_autoscaling_block_gets_no_scaled_object_and_one_line_saying_how(
    tmp_path: Path,
) -> None:
    """Issue 19: a deployment with no ``autoscaling:`` got a ScaledObject with KEDA's maxReplicaCount 100: applying
    it could scale an engine to 100 GPU replicas unasked. Now only a deployment with the block gets one; the
    others are named in one line (stderr and the manifests' header)."""
    gen = generate(rules_input(_two(tmp_path, {"autoscaling": {"max_replica_count": 4}}, {})))
    assert _keda_names(gen) == ["chat-8b"]
    assert [w for w in gen.warnings if "ScaledObject" in w] == []  # a note, not a warning (fresh user, 2026-12-06)
    (line,) = [w for w in gen.notes if "ScaledObject" in w]
    assert line == (
        "deployment 'qwen-14b': no ScaledObject written — add deployments[].autoscaling with max_replica_count "
        "to write one"
    )
    keda = next(m for m in gen.manifests if m.name.endswith("keda-scaledobjects.yaml"))
    assert f"- {line}" in keda.header

    gen = generate(rules_input(_two(tmp_path, {}, {})))
    assert _keda_names(gen) == []
    (line,) = [w for w in gen.notes if "ScaledObject" in w]
    assert line.startswith("deployments 'chat-8b', 'qwen-14b': no ScaledObject written")


def test_a_deployment_off_kubernetes_without_the_block_gets_no_opt_in_line(tmp_path: Path) -> None:
    gen = generate(rules_input(_two(tmp_path, {"platform": "systemd"}, {"autoscaling": {"max_replica_count": 3}})))
    assert _keda_names(gen) == ["qwen-14b"]
    assert [w for w in (*gen.warnings, *gen.notes) if "ScaledObject" in w] == []


def test_a_block_without_max_replica_count_keeps_kedas_100_and_warns_once(tmp_path: Path) -> None:
    """KEDA's default maxReplicaCount is 100 (https://keda.sh/docs/2.20/reference/scaledobject-spec/)."""
    gen = generate(rules_input(_two(tmp_path, {"autoscaling": {}}, {"autoscaling": {"max_replica_count": 3}})))
    assert _keda_names(gen) == ["chat-8b", "qwen-14b"]
    keda = next(m for m in gen.manifests if m.name.endswith("keda-scaledobjects.yaml"))
    assert [d["spec"]["maxReplicaCount"] for d in keda.docs] == [100, 3]
    (line,) = [w for w in gen.warnings if "max_replica_count" in w]
    assert line.startswith("deployment 'chat-8b': autoscaling has no max_replica_count") and "100" in line


@pytest.mark.parametrize(
    ("autoscaling", "words"),
    [
        ({"min_replica_count": 5, "max_replica_count": 4}, "min_replica_count 5 is above max_replica_count 4"),
        ({"max_replica_count": 4, "fallback_replicas": 9}, "fallback_replicas 9 is outside"),
        ({"scale_target": "Chat_8B"}, "scale_target"),
        ({"polling_interval": "1.5s"}, "whole seconds"),
        ({"stabilization": "2h"}, "stabilization"),
        ({"minReplicaCount": 1}, "minReplicaCount"),
    ],
)
def test_bad_autoscaling_keys_are_errors_naming_the_field(
    tmp_path: Path, autoscaling: dict[str, Any], words: str
) -> None:
    from advisor.config import load_config

    with pytest.raises(ConfigError) as err:
        load_config(_config(tmp_path, autoscaling))
    assert words in str(err.value)
    assert "autoscaling" in str(err.value)


# --- the trigger's PromQL against a real Prometheus ----------------------------------------------------------


class _Exposition:
    """A stand-in advisor's /metrics on loopback (one ``advisor_desired_replicas`` sample)."""

    def __init__(self, text: str) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from threading import Thread

        body = text.encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.hostport = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop serving (again: nothing)."""
        if not self.thread.is_alive():
            return
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.mark.integration
def test_the_triggers_query_gives_one_series_from_two_advisors_and_nothing_once_they_are_down(
    tmp_path: Path,
) -> None:
    """KEDA's Prometheus scaler refuses an answer of several series and, with ``ignoreNullValues: "false"``, an
    empty one (``pkg/scalers/prometheus_scaler.go`` at v2.20.2): two advisors in HA must give one value, and an
    advisor outage must give an empty answer (→ scaler error → fallback), never 0."""
    import time

    import requests

    from tests.e2e.prometheus import prometheus_binary, start_prometheus, wait_for_series

    if prometheus_binary() is None:
        pytest.skip("the prometheus binary is absent: run scripts/install-system-deps")
    (so,) = _docs("keda-scaledobjects.yaml")
    query = so["spec"]["triggers"][0]["metadata"]["query"]
    a = _Exposition('advisor_desired_replicas{deployment="chat-8b"} 3\n')
    b = _Exposition('advisor_desired_replicas{deployment="chat-8b"} 4\nadvisor_desired_replicas{deployment="x"} 9\n')
    try:
        with start_prometheus(tmp_path, {"advisor": [a.hostport, b.hostport]}, scrape_interval="500ms") as url:
            wait_for_series(url, 'count(advisor_desired_replicas{deployment="chat-8b"}) == 2')
            (one,) = wait_for_series(url, query)
            assert one["metric"] == {}
            assert float(one["value"][1]) == 4.0  # max of the two advisors' 3 and 4
            a.stop()
            b.stop()
            # a failed scrape writes staleness markers: empty within a few 500 ms scrape cycles (bound: 20)
            deadline = time.monotonic() + 20 * 0.5
            while True:
                r = requests.get(f"{url}/api/v1/query", params={"query": query}, timeout=5).json()
                if r["data"]["result"] == []:
                    break
                assert time.monotonic() < deadline, f"still {r['data']['result']} after 20 scrape cycles"
                time.sleep(0.25)
    finally:
        a.stop()
        b.stop()
