"""The Kubernetes manifests, validated against schemas, not by eye.

Core kinds: ``kubernetes-validate`` (PyPI; the Kubernetes OpenAPI schemas, strict: unknown fields are errors).
prometheus-operator kinds: the validators generated from the operator's CRD schemas in the npm package
``@kubernetes-models/prometheus-operator``, installed once into a cache folder and run with node. Each part skips
with the reason when its validator cannot be had.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.config import load_config
from tests.deploy.conftest import DEPLOY, REPO, need_binary

K8S = DEPLOY / "kubernetes"
RULES_K8S = REPO / "rules" / "kubernetes"
KUBERNETES_VERSION = "1.30.0"
NPM_PACKAGE = "@kubernetes-models/prometheus-operator@6.0.0"
CRD_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}

VALIDATE_MJS = """\
import { readFileSync } from "node:fs";
const docs = JSON.parse(readFileSync(0, "utf8"));
const out = [];
for (const doc of docs) {
  const mod = await import(`@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/${doc.kind}`);
  try { new mod[doc.kind](doc).validate(); out.push(null); } catch (e) { out.push(String(e.message || e)); }
}
process.stdout.write(JSON.stringify(out));
"""


def _resources(directory: Path) -> list[Path]:
    """The files a kustomization in ``directory`` applies, its bases (directories) followed."""
    out: list[Path] = []
    for r in yaml.safe_load((directory / "kustomization.yaml").read_text())["resources"]:
        path = (directory / r).resolve()
        out.extend(_resources(path) if path.is_dir() else [path])
    return out


def manifests() -> list[tuple[str, dict[str, Any]]]:
    """Every document ``kubectl apply -k deploy/kubernetes`` applies, by file name."""
    out = []
    for path in _resources(K8S):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((path.name, doc))
    return out


def core() -> list[tuple[str, dict[str, Any]]]:
    return [(n, d) for n, d in manifests() if d["kind"] not in CRD_KINDS]


def crds() -> list[tuple[str, dict[str, Any]]]:
    return [(n, d) for n, d in manifests() if d["kind"] in CRD_KINDS]


@pytest.fixture(scope="session")
def crd_validator() -> Path:
    """A folder with the npm package and the validator script; skips when node/npm or the registry is missing."""
    need_binary("node")
    npm = need_binary("npm")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llm-capacity-advisor" / "k8s-models"
    marker = cache / "node_modules" / "@kubernetes-models" / "prometheus-operator" / "package.json"
    if not marker.exists():
        cache.mkdir(parents=True, exist_ok=True)
        (cache / "package.json").write_text('{"name": "deploy-validate", "private": true, "type": "module"}\n')
        r = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", NPM_PACKAGE],
            cwd=cache,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if r.returncode != 0 or not marker.exists():
            pytest.skip(f"cannot install {NPM_PACKAGE} with npm: {r.stderr.strip()[-400:]}")
    (cache / "validate.mjs").write_text(VALIDATE_MJS)
    return cache


def validate_crds(folder: Path, docs: list[dict[str, Any]]) -> list[str | None]:
    r = subprocess.run(
        ["node", str(folder / "validate.mjs")], input=json.dumps(docs), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    result: list[str | None] = json.loads(r.stdout)
    return result


def test_the_core_manifests_pass_kubernetes_strict_schema_validation() -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed (pip install .[test])")
    assert {d["kind"] for _, d in core()} == {"ConfigMap", "Deployment", "Service"}
    for _, doc in core():
        kv.validate(doc, KUBERNETES_VERSION, strict=True)  # raises ValidationError with the path


def test_the_core_validator_rejects_an_unknown_field_and_a_wrong_type() -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    deployment = next(d for _, d in core() if d["kind"] == "Deployment")
    bad = json.loads(json.dumps(deployment))
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, KUBERNETES_VERSION, strict=True)
    bad = json.loads(json.dumps(deployment))
    bad["spec"]["replicas"] = "one"
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, KUBERNETES_VERSION, strict=True)


def test_the_prometheus_operator_manifests_pass_their_crd_schemas(crd_validator: Path) -> None:
    docs = crds()
    assert {d["kind"] for _, d in docs} == CRD_KINDS
    errors = validate_crds(crd_validator, [d for _, d in docs])
    assert errors == [None] * len(docs), dict(zip([n for n, _ in docs], errors, strict=True))


def test_the_crd_validator_rejects_a_broken_monitor(crd_validator: Path) -> None:
    sm = next(d for _, d in crds() if d["kind"] == "ServiceMonitor")
    bad = json.loads(json.dumps(sm))
    bad["spec"]["endpoints"][0]["interval"] = "15 seconds"
    bad2 = json.loads(json.dumps(sm))
    bad2["spec"]["endpoints"][0]["port"] = 9188
    errors = validate_crds(crd_validator, [bad, bad2])
    assert errors[0] and "interval" in errors[0]
    assert errors[1] and "port" in errors[1]


def test_the_kustomization_applies_the_generated_prometheusrule_and_it_is_valid(crd_validator: Path) -> None:
    """One PrometheusRule in the repository: ``rules/kubernetes/prometheusrule.yaml`` (``rules generate``, checked up
    to date in tests/promrules), included by ``deploy/kubernetes`` as a kustomize base that lists only it."""
    base = yaml.safe_load((RULES_K8S / "kustomization.yaml").read_text())
    assert base["resources"] == ["prometheusrule.yaml"]
    (pr,) = [d for d in yaml.safe_load_all((RULES_K8S / "prometheusrule.yaml").read_text()) if d]
    assert pr["kind"] == "PrometheusRule"
    assert validate_crds(crd_validator, [pr]) == [None]
    assert not (K8S / "prometheusrule.yaml").exists(), "a second copy of the PrometheusRule in deploy/kubernetes"


def test_the_advisor_runs_non_root_on_a_read_only_root_with_probes_and_resources() -> None:
    dep = next(d for _, d in core() if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    (ctr,) = pod["containers"]
    sc = ctr["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert ctr["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert ctr["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert ctr["resources"]["requests"] and ctr["resources"]["limits"]["memory"]
    assert ctr["args"][0] == "run" and "--config=/etc/capacity-advisor/config.yaml" in ctr["args"]
    mounts = {m["mountPath"] for m in ctr["volumeMounts"]}
    assert {"/etc/capacity-advisor", "/var/lib/capacity-advisor", "/tmp"} <= mounts


def test_the_service_and_servicemonitor_select_the_advisor_pods() -> None:
    docs = {d["kind"]: d for _, d in manifests()}
    pod_labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert docs["Service"]["spec"]["selector"].items() <= pod_labels.items()
    sm_labels = docs["ServiceMonitor"]["spec"]["selector"]["matchLabels"]
    assert sm_labels.items() <= docs["Service"]["metadata"]["labels"].items()
    port_names = {p["name"] for p in docs["Service"]["spec"]["ports"]}
    assert {e["port"] for e in docs["ServiceMonitor"]["spec"]["endpoints"]} <= port_names
    relabel = docs["PodMonitor"]["spec"]["podMetricsEndpoints"][0]["relabelings"]
    assert any(r.get("targetLabel") == "deployment" for r in relabel)


def test_the_configmap_holds_a_config_the_advisor_accepts(tmp_path: Path) -> None:
    cm = next(d for _, d in core() if d["kind"] == "ConfigMap")
    f = tmp_path / "config.yaml"
    f.write_text(cm["data"]["config.yaml"])
    cfg = load_config(f)
    assert cfg.deployments and cfg.state_file == "/var/lib/capacity-advisor/state.json"


def test_the_kustomization_lists_every_manifest() -> None:
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    bases = {r for r in kust["resources"] if not r.endswith(".yaml")}
    assert set(kust["resources"]) - bases == files
    assert {(K8S / b).resolve() for b in bases} == {RULES_K8S.resolve()}
    assert (REPO / "rules").is_dir()
