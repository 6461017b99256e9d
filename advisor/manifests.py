"""Kubernetes manifests for acting on the advisor's replica signal (issue 18; pure: returns values, writes nothing).

``capacity-advisor rules generate`` (:mod:`advisor.rulesgen`, :mod:`advisor.rulescmd`) writes, beside the rule
files, in ``<out>/kubernetes/``:

Both autoscaler files are opt-in: only a ``platform: kubernetes`` deployment with an ``autoscaling:`` block in the
config gets a ScaledObject and an HPA (applying one lets KEDA set the engine's replica count, up to
``maxReplicaCount``: each replica a GPU server). The others get one line, :func:`opt_in_note`; a block without
``max_replica_count`` keeps KEDA's default of 100 and is warned about (:func:`autoscaling_warnings`).

``keda-scaledobjects.yaml`` — one KEDA ``ScaledObject`` (``keda.sh/v1alpha1``) per opted-in deployment, with one
    ``prometheus`` trigger on :data:`advisor.conventions.DESIRED_REPLICAS`. Field names from KEDA's
    ScaledObject specification (https://keda.sh/docs/2.20/reference/scaledobject-spec/) and Prometheus scaler
    (https://keda.sh/docs/2.20/scalers/prometheus/):

    * ``query: max(advisor_desired_replicas{deployment="NAME"})`` — the scaler refuses an answer of more than one
      series ("returned multiple elements", ``pkg/scalers/prometheus_scaler.go``), which two advisors in HA
      would give; ``max`` keeps one and stays empty when the series is absent;
    * ``metricType: AverageValue`` and ``threshold: "1"`` — the HPA KEDA creates then asks for
      ``ceil(value ÷ 1)`` replicas, the advised count (Kubernetes HPA algorithm,
      https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#algorithm-details); KEDA's
      ``fallback`` also requires an ``AverageValue`` trigger (``CheckFallbackValid``, ``apis/keda/v1alpha1``);
    * ``ignoreNullValues: "false"`` — an empty answer (the advisor down, its data not fresh, its series stale) is
      a scaler error, not 0 (KEDA's default ``true`` reads it as 0 and scales to ``minReplicaCount``);
    * ``fallback: {failureThreshold, replicas, behavior: currentReplicasIfHigher}`` — after ``failureThreshold``
      errors in a row KEDA holds ``max(current replicas, replicas)``: an advisor outage never scales an engine
      down, let alone to its minimum (``behavior`` is in KEDA ≥ 2.17's CRD; vendored schema:
      ``tests/fixtures/schemas/``).

``hpa-example.yaml`` — the same signal for a plain ``autoscaling/v2`` ``HorizontalPodAutoscaler``, through an
    external-metrics adapter (prometheus-adapter's ``externalRules``, rule in the file's header): an ``External``
    metric ``advisor_desired_replicas`` selected by ``deployment``, target ``AverageValue: 1``. An example: a
    Deployment scaled by KEDA must not also have this HPA (KEDA creates its own, ``keda-hpa-<name>``).

``prometheusrule.yaml`` — the generated rule groups wrapped in one prometheus-operator ``PrometheusRule``
    (``monitoring.coreos.com/v1``, https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.PrometheusRule).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import yaml

from advisor import conventions as c

if TYPE_CHECKING:
    from advisor.config import Deployment

DNS_1123_SUBDOMAIN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""A Kubernetes object name (RFC 1123 subdomain, at most 253 characters):
https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-subdomain-names"""
DNS_1123_LABEL: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A namespace name (RFC 1123 label, at most 63 characters), same page."""

KEDA_API_VERSION: Final = "keda.sh/v1alpha1"
HPA_API_VERSION: Final = "autoscaling/v2"
PROMETHEUS_RULE_API_VERSION: Final = "monitoring.coreos.com/v1"
TRIGGER_NAME: Final = "advisor-desired-replicas"
FALLBACK_BEHAVIOR: Final = "currentReplicasIfHigher"
"""KEDA fallback behaviour: ``max(current, fallback.replicas)`` (https://keda.sh/docs/2.20/reference/scaledobject-spec/#fallback)."""
ANNOTATION_DEPLOYMENT: Final = "capacity-advisor/deployment"
"""The advisor deployment a manifest is for (an annotation: a deployment name need not be a label value)."""
COMMON_LABELS: Final = {"app.kubernetes.io/name": "capacity-advisor", "app.kubernetes.io/component": "autoscaling"}


@dataclass(frozen=True, slots=True)
class Autoscaling:
    """One deployment's autoscaler settings (the config's ``deployments[].autoscaling``, defaults resolved).

    Attributes:
        deployment: the advisor's deployment name (the ``deployment`` label value).
        scale_target: the engine's Kubernetes Deployment name (``scaleTargetRef.name``).
        namespace: the objects' namespace, or ``None`` (``kubectl apply -n`` decides).
        min_replicas / max_replicas: KEDA ``minReplicaCount`` / ``maxReplicaCount``, HPA ``minReplicas`` /
            ``maxReplicas``.
        cooldown_seconds / polling_seconds: KEDA ``cooldownPeriod`` / ``pollingInterval``, seconds.
        stabilization_seconds: HPA ``behavior.scaleDown.stabilizationWindowSeconds``, seconds.
        fallback_replicas / fallback_failure_threshold: KEDA ``fallback.replicas`` / ``failureThreshold``.
        prometheus_url: KEDA's ``serverAddress``.
        platform: where the engine runs (:data:`advisor.conventions.PLATFORMS`); only ``kubernetes`` gets objects.
        listed_replicas: the number of ``targets`` the config lists (the replicas running when it was written).
        max_replicas_given: ``max_replica_count`` was set in the config (else ``max_replicas`` is KEDA's default).
    """

    deployment: str
    scale_target: str
    namespace: str | None = None
    min_replicas: int = 1
    max_replicas: int = 100
    cooldown_seconds: int = 300
    polling_seconds: int = 30
    stabilization_seconds: int = 0
    fallback_replicas: int = 1
    fallback_failure_threshold: int = 3
    prometheus_url: str = "http://prometheus-operated.monitoring.svc:9090"
    platform: str = c.PLATFORM_KUBERNETES
    listed_replicas: int = 0
    max_replicas_given: bool = True


KEDA_DEFAULT_MAX_REPLICAS: Final = 100
"""KEDA's ``maxReplicaCount`` when none is set (https://keda.sh/docs/2.20/reference/scaledobject-spec/#maxreplicacount)."""


def opt_in_note(deployments: Sequence[str]) -> str | None:
    """The one line for the Kubernetes deployments without an ``autoscaling:`` block (``None`` when there are
    none): no ScaledObject is written for them, and how to ask for one."""
    if not deployments:
        return None
    which = "deployment" if len(deployments) == 1 else "deployments"
    return (
        f"{which} {', '.join(repr(d) for d in deployments)}: no ScaledObject written — add deployments[].autoscaling "
        "with max_replica_count to write one"
    )


@dataclass(frozen=True, slots=True)
class Manifest:
    """One generated YAML file of Kubernetes objects: its path under the output folder, header comment lines and
    documents."""

    name: str
    header: tuple[str, ...]
    docs: tuple[Mapping[str, Any], ...]


KEDA_HPA_PREFIX: Final = "keda-hpa-"
"""KEDA names the HPA it creates ``keda-hpa-<ScaledObject name>``, which must be a DNS-1123 label (≤ 63
characters), so KEDA's admission webhook refuses longer ScaledObject names
(https://github.com/kedacore/keda/issues/6370, https://github.com/kedacore/keda/pull/7762)."""
MAX_SCALED_OBJECT_NAME: Final = 63 - len(KEDA_HPA_PREFIX)
"""54 characters: 63 (RFC 1123 label) minus ``keda-hpa-``."""


def _replicas_there(platform: str) -> str:
    """What sets the replica count on ``platform``, in its own terms (:data:`advisor.platforms.PROFILES`)."""
    from advisor.platforms import PROFILES

    profile = PROFILES[platform]
    if profile.replicas is None:
        return profile.unavailable.format(dial="the replica count")
    return f"there the replica count is {profile.replicas.format(value='N', flag='')}"


def autoscaling_settings(d: Deployment) -> Autoscaling | None:
    """The deployment's ``autoscaling:`` keys with their defaults resolved (:class:`advisor.config.AutoscalingConfig`):
    the scale target defaults to the deployment's name, ``fallback_replicas`` to the larger of
    ``min_replica_count`` and the number of ``targets`` listed (the replicas running when the config was written),
    at most ``max_replica_count``; ``None`` without an ``autoscaling:`` block (opt-in: no ScaledObject)."""
    a = d.autoscaling
    if a is None:
        return None
    fallback = a.fallback_replicas
    if fallback is None:
        fallback = min(a.max_replica_count, max(a.min_replica_count, len(d.targets)))
    return Autoscaling(
        deployment=d.name,
        scale_target=a.scale_target or d.name,
        namespace=a.namespace,
        min_replicas=a.min_replica_count,
        max_replicas=a.max_replica_count,
        cooldown_seconds=int(a.cooldown_period),
        polling_seconds=int(a.polling_interval),
        stabilization_seconds=int(a.stabilization),
        fallback_replicas=fallback,
        fallback_failure_threshold=a.fallback_failure_threshold,
        prometheus_url=a.prometheus_url,
        platform=d.platform,
        listed_replicas=len(d.targets),
        max_replicas_given="max_replica_count" in a.model_fields_set,
    )


def scale_target_problem(a: Autoscaling) -> str | None:
    """Why no KEDA ScaledObject or HPA is written for ``a`` (a warning naming the key to change), or ``None``:
    the engine does not run on Kubernetes; ``a.scale_target`` is not a Kubernetes object name; or it is longer
    than :data:`MAX_SCALED_OBJECT_NAME` (the ScaledObject is named after it, see :data:`KEDA_HPA_PREFIX`)."""
    head = f"deployment {a.deployment!r}: no KEDA ScaledObject or HPA written"
    if a.platform != c.PLATFORM_KUBERNETES:
        return f"{head}: its platform is {a.platform}, not kubernetes; {_replicas_there(a.platform)}"
    if not (len(a.scale_target) <= 253 and re.match(DNS_1123_SUBDOMAIN, a.scale_target)):
        return (
            f"{head}: {a.scale_target!r} is not a Kubernetes object name (RFC 1123: lower-case letters, digits, "
            "'-' and '.'); set deployments[].autoscaling.scale_target to the engine's Deployment"
        )
    if len(a.scale_target) > MAX_SCALED_OBJECT_NAME:
        return (
            f"{head}: the ScaledObject would be named {a.scale_target!r} ({len(a.scale_target)} characters), and "
            f"KEDA's HPA {KEDA_HPA_PREFIX}<name> must be at most 63 characters, so the name at most "
            f"{MAX_SCALED_OBJECT_NAME}; set deployments[].autoscaling.scale_target to a shorter Deployment name"
        )
    return None


def autoscaling_warnings(a: Autoscaling) -> list[str]:
    """Settings that are valid but act against the advisor's signal or were not chosen (the objects are still
    written): no ``max_replica_count`` (KEDA's default :data:`KEDA_DEFAULT_MAX_REPLICAS` bounds the scale-up),
    ``max_replica_count`` below the replicas the config lists (KEDA would scale the running replicas down to it),
    and ``min_replica_count: 0`` (with no replicas there is nothing to scrape, the advisor's series disappears and
    KEDA's fallback decides, https://keda.sh/docs/2.20/reference/scaledobject-spec/#fallback)."""
    where = f"deployment {a.deployment!r}"
    out: list[str] = []
    if not a.max_replicas_given:
        out.append(
            f"{where}: autoscaling has no max_replica_count, so the ScaledObject and HPA use KEDA's default "
            f"maxReplicaCount {a.max_replicas}: KEDA may scale the engine to {a.max_replicas} GPU replicas; set "
            "deployments[].autoscaling.max_replica_count to the most you will run"
        )
    if a.max_replicas < a.listed_replicas:
        out.append(
            f"{where}: autoscaling.max_replica_count {a.max_replicas} is below the {a.listed_replicas} targets "
            f"listed: KEDA would scale the running replicas down to {a.max_replicas}"
        )
    if a.min_replicas == 0:
        out.append(
            f"{where}: autoscaling.min_replica_count 0 scales to zero: with no replicas the advisor has nothing "
            f"to scrape, its {c.DESIRED_REPLICAS} series disappears and KEDA's fallback "
            f"(max(current, {a.fallback_replicas}) replicas after {a.fallback_failure_threshold} failed queries) "
            "decides, not the advisor"
        )
    return out


def desired_replicas_query(deployment: str) -> str:
    """The KEDA trigger's PromQL: one series or none (see the module docstring)."""
    return f"max({c.DESIRED_REPLICAS}{{{c.LABEL_DEPLOYMENT}={json.dumps(deployment)}}})"


def _metadata(name: str, a: Autoscaling) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if a.namespace is not None:
        meta["namespace"] = a.namespace
    meta["labels"] = dict(COMMON_LABELS)
    meta["annotations"] = {ANNOTATION_DEPLOYMENT: a.deployment}
    return meta


def _target_ref(a: Autoscaling) -> dict[str, str]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": a.scale_target}


def scaled_object(a: Autoscaling) -> dict[str, Any]:
    """The KEDA ``ScaledObject`` for one deployment (fields: the module docstring)."""
    return {
        "apiVersion": KEDA_API_VERSION,
        "kind": "ScaledObject",
        "metadata": _metadata(a.scale_target, a),
        "spec": {
            "scaleTargetRef": _target_ref(a),
            "pollingInterval": a.polling_seconds,
            "cooldownPeriod": a.cooldown_seconds,
            "minReplicaCount": a.min_replicas,
            "maxReplicaCount": a.max_replicas,
            "fallback": {
                "failureThreshold": a.fallback_failure_threshold,
                "replicas": a.fallback_replicas,
                "behavior": FALLBACK_BEHAVIOR,
            },
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": a.stabilization_seconds}}
                }
            },
            "triggers": [
                {
                    "type": "prometheus",
                    "name": TRIGGER_NAME,
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": a.prometheus_url,
                        "query": desired_replicas_query(a.deployment),
                        "threshold": "1",
                        "ignoreNullValues": "false",
                    },
                }
            ],
        },
    }


def hpa(a: Autoscaling) -> dict[str, Any]:
    """An ``autoscaling/v2`` ``HorizontalPodAutoscaler`` on the external metric (see the module docstring).

    With ``target.type: AverageValue`` the HPA asks for ``ceil(metric ÷ averageValue)`` replicas
    (https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#algorithm-details).
    """
    return {
        "apiVersion": HPA_API_VERSION,
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(a.scale_target, a),
        "spec": {
            "scaleTargetRef": _target_ref(a),
            "minReplicas": max(1, a.min_replicas),  # the HPA's minReplicas is ≥ 1 unless HPAScaleToZero is enabled
            "maxReplicas": a.max_replicas,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {
                            "name": c.DESIRED_REPLICAS,
                            "selector": {"matchLabels": {c.LABEL_DEPLOYMENT: a.deployment}},
                        },
                        "target": {"type": "AverageValue", "averageValue": "1"},
                    },
                }
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": a.stabilization_seconds}},
        },
    }


def prometheus_rule(name: str, groups: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The rule groups (as Prometheus reads them) wrapped in one prometheus-operator ``PrometheusRule``."""
    return {
        "apiVersion": PROMETHEUS_RULE_API_VERSION,
        "kind": "PrometheusRule",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/name": "capacity-advisor", "app.kubernetes.io/component": "rules"},
        },
        "spec": {"groups": [dict(g) for g in groups]},
    }


PROMETHEUS_ADAPTER_RULE: Final = (
    "externalRules:",
    f"  - seriesQuery: '{c.DESIRED_REPLICAS}{{{c.LABEL_DEPLOYMENT}!=\"\"}}'",
    "    resources: {namespaced: false}",
    f"    metricsQuery: 'max by ({c.LABEL_DEPLOYMENT}) (<<.Series>>{{<<.LabelMatchers>>}})'",
)
"""prometheus-adapter's external rule that serves the series to the HPA example (config format:
https://github.com/kubernetes-sigs/prometheus-adapter/blob/master/docs/externalmetrics.md)."""


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (PromQL, descriptions) as literal blocks, as the rule files write them."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render(m: Manifest) -> str:
    """The file: header comments, then the documents separated by ``---``; ``yaml.safe_load_all`` gives
    ``m.docs`` back (a test holds this)."""
    head = "".join(("# " + line).rstrip() + "\n" for line in m.header)
    body = yaml.dump_all(
        [dict(d) for d in m.docs], Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120, explicit_start=True
    )
    return head + body
