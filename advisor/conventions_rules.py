"""Every name the generated Prometheus rule files (``rules/``) emit: recording rules, alerts, groups, files.

Kept beside :mod:`advisor.conventions` (the advisor's own ``advisor_*`` names, which the alerts read) so that
dashboards, rule files, the runbook and the generator agree. Recording rules follow node-mixin's
``level:metric:operations`` (``rules/rules.libsonnet``): the level is ``deployment`` (the label every series is
aggregated to), the metric an engine-neutral ``llm_*`` name, the operations what was done
(``sum``, ``ratio``, ``rate5m``, ``p90_rate5m``). Alerts are CamelCase with the shared prefix
``CapacityAdvisor`` (monitoring-mixins guidelines).
"""

from __future__ import annotations

from typing import Final

from advisor.conventions import ALERT_RECOMMENDATION, LABEL_DEPLOYMENT

# --- the scrape convention ----------------------------------------------------------------------------------
DEPLOYMENT_LABEL: Final = LABEL_DEPLOYMENT
"""Target label every engine scrape job carries (``static_configs[].labels.deployment`` or a relabel rule); its
value is the deployment's ``name`` in the advisor config. The recording rules aggregate ``by (deployment)``."""

# --- recording rules: engine metrics normalised per deployment -------------------------------------------------
LEVEL: Final = "deployment"
KV_CACHE_USAGE: Final = "deployment:llm_kv_cache_usage:ratio"
REQUESTS_RUNNING: Final = "deployment:llm_requests_running:sum"
REQUESTS_WAITING: Final = "deployment:llm_requests_waiting:sum"
REQUESTS_FINISHED_RATE: Final = "deployment:llm_requests_finished:rate5m"
GENERATION_TOKENS_RATE: Final = "deployment:llm_generation_tokens:rate5m"
PREEMPTIONS_RATE: Final = "deployment:llm_preemptions:rate5m"
QUANTILES: Final = (0.5, 0.9, 0.99)


def ttft_quantile(q: float) -> str:
    """``deployment:llm_ttft_seconds:p90_rate5m`` for ``q = 0.9``."""
    return f"deployment:llm_ttft_seconds:p{_percent(q)}_rate5m"


def tpot_quantile(q: float) -> str:
    """``deployment:llm_tpot_seconds:p90_rate5m`` for ``q = 0.9``."""
    return f"deployment:llm_tpot_seconds:p{_percent(q)}_rate5m"


def _percent(q: float) -> str:
    return format(q * 100, ".10g").replace(".", "")


# --- recording rules: goodput against each deployment's SLO ----------------------------------------------------
def ttft_within_target(window: str) -> str:
    """Fraction of requests whose TTFT is within the deployment's target, over ``window`` (``5m``)."""
    return f"deployment:llm_ttft_within_target:ratio_rate{window}"


def tpot_within_target(window: str) -> str:
    """Fraction of requests whose TPOT is within the deployment's target, over ``window``."""
    return f"deployment:llm_tpot_within_target:ratio_rate{window}"


def ttft_within_le(window: str) -> str:
    """Fraction of requests whose TTFT is within each bucket bound ``le`` a target of an ``engine: auto``
    deployment uses, over ``window``, per deployment and ``le``: the ``or`` chain over every engine's names,
    written once for all such deployments (each deployment's :func:`ttft_within_target` reads its own ``le``)."""
    return f"deployment_le:llm_ttft_within_le:ratio_rate{window}"


def tpot_within_le(window: str) -> str:
    """As :func:`ttft_within_le`, for TPOT."""
    return f"deployment_le:llm_tpot_within_le:ratio_rate{window}"


def goodput(window: str) -> str:
    """Estimated fraction of requests within both targets (TTFT × TPOT, as the advisor estimates it)."""
    return f"deployment:llm_goodput:ratio_rate{window}"


# --- SLO windows (Google SRE workbook, ch. 5 "Alerting on SLOs", table 5-8, for a 30-day SLO:
# https://sre.google/workbook/alerting-on-slos/#6-multiwindow-multi-burn-rate-alerts) ----------------------------
SLO_PERIOD: Final = "30d"
BURN_RATE_WINDOWS: Final = (
    # (long window, short window, burn-rate factor, for, severity)   budget spent when it fires
    ("1h", "5m", 14.4, "2m", "critical"),  # 2 % of the 30-day budget in 1 hour
    ("6h", "30m", 6.0, "15m", "critical"),  # 5 % in 6 hours
    ("1d", "2h", 3.0, "1h", "warning"),  # 10 % in 1 day
    ("3d", "6h", 1.0, "3h", "warning"),  # 10 % in 3 days
)
"""Multi-window, multi-burn-rate pairs. The factors and windows are the workbook's multiwindow, multi-burn-rate
table (14.4 / 6 / 3 / 1 over 1h / 6h / 1d / 3d, short windows 5m / 30m / 2h / 6h); the ``for`` durations are
kubernetes-mixin's (``KubeAPIErrorBudgetBurn``), which damp single-evaluation blips. A pair fires on an error ratio
above ``factor × (1 − target_ratio)``; where that is 1 or more (14.4× for a target_ratio ≤ 0.9305…) it can never
fire and ``rules generate`` does not write it (:func:`advisor.rulesgen._burn_comment`)."""
SLO_WINDOWS: Final = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
"""Every window a goodput ratio is recorded over (the short and long windows above, plus 5m for dashboards)."""
LABEL_LONG_WINDOW: Final = "long_window"
LABEL_SHORT_WINDOW: Final = "short_window"
LABEL_BURN_RATE: Final = "burn_rate"

# --- alerts ---------------------------------------------------------------------------------------------------
ALERT_PREFIX: Final = "CapacityAdvisor"
ALERT_GOODPUT_BUDGET_BURN: Final = "CapacityAdvisorGoodputBudgetBurn"
ALERT_RECOMMENDATION_OPEN: Final = ALERT_RECOMMENDATION  # same alertname the advisor's own webhooks carry
ALERT_CAPACITY_MODEL_DRIFT: Final = "CapacityAdvisorCapacityModelDrift"
ALERT_TARGET_NOT_FRESH: Final = "CapacityAdvisorTargetNotFresh"
ALERT_NOT_EVALUATING: Final = "CapacityAdvisorNotEvaluating"
ALERT_ABSENT: Final = "CapacityAdvisorAbsent"
ALERT_CYCLES_SKIPPED: Final = "CapacityAdvisorCyclesSkipped"
ALERT_CONFIG_RELOAD_FAILED: Final = "CapacityAdvisorConfigReloadFailed"
ALERT_NOTIFICATIONS_LOST: Final = "CapacityAdvisorNotificationsLost"
ALERT_NOTIFICATIONS_STUCK: Final = "CapacityAdvisorNotificationsStuck"
ALERTS: Final = (
    ALERT_GOODPUT_BUDGET_BURN,
    ALERT_RECOMMENDATION_OPEN,
    ALERT_CAPACITY_MODEL_DRIFT,
    ALERT_TARGET_NOT_FRESH,
    ALERT_NOT_EVALUATING,
    ALERT_ABSENT,
    ALERT_CYCLES_SKIPPED,
    ALERT_CONFIG_RELOAD_FAILED,
    ALERT_NOTIFICATIONS_LOST,
    ALERT_NOTIFICATIONS_STUCK,
)

ANNOTATION_SUMMARY: Final = "summary"
ANNOTATION_DESCRIPTION: Final = "description"
ANNOTATION_RUNBOOK_URL: Final = "runbook_url"

RUNBOOK_URL: Final = "https://github.com/llm-capacity-advisor/llm-capacity-advisor/blob/main/rules/runbook.md"


def runbook_anchor(alert: str) -> str:
    """The GitHub anchor of the alert's section in ``rules/runbook.md`` (heading ``## <alert>``)."""
    return alert.lower()


def runbook_url(alert: str) -> str:
    """``…/rules/runbook.md#capacityadvisorgoodputbudgetburn``."""
    return f"{RUNBOOK_URL}#{runbook_anchor(alert)}"


# --- rule groups and files ------------------------------------------------------------------------------------
GROUP_ENGINES: Final = "capacity-advisor-engines"
GROUP_GOODPUT: Final = "capacity-advisor-goodput"
GROUP_SLO_ALERTS: Final = "capacity-advisor-slo-alerts"
GROUP_ADVISOR_ALERTS: Final = "capacity-advisor-alerts"

FILE_RECORDING: Final = "engines.rules.yml"
FILE_SLO: Final = "slo.rules.yml"
FILE_ADVISOR: Final = "advisor.rules.yml"
GENERATED_FILES: Final = (FILE_RECORDING, FILE_SLO, FILE_ADVISOR)

# Kubernetes manifests `rules generate` writes beside the rule files, in a subfolder (issue 18): rule-file globs
# (rules/*.yml, deploy/kubernetes/generate_prometheusrule.py) do not descend into it
MANIFEST_DIR: Final = "kubernetes"
FILE_KEDA: Final = f"{MANIFEST_DIR}/keda-scaledobjects.yaml"
FILE_HPA: Final = f"{MANIFEST_DIR}/hpa-example.yaml"
FILE_PROMETHEUS_RULE: Final = f"{MANIFEST_DIR}/prometheusrule.yaml"
GENERATED_MANIFESTS: Final = (FILE_KEDA, FILE_HPA, FILE_PROMETHEUS_RULE)
PROMETHEUS_RULE_NAME: Final = "capacity-advisor"
