"""Build the Grafana dashboards from code, with ``grafana-foundation-sdk`` (Grafana's own typed builders).

Two dashboards, written as JSON beside this file (``dashboards/*.json``, committed; a test regenerates them and
fails on a difference)::

    python deploy/grafana/generate.py            # rewrite dashboards/*.json
    python deploy/grafana/generate.py --check    # exit 1 if the committed JSON differs from what the code builds

* ``capacity-advisor-overview`` — every deployment at once: state, KV usage, running against the ceiling, waiting,
  goodput, open recommendations, and the advisor's own health (cycles, scrape errors, notifications).
* ``capacity-advisor-deployment`` — one deployment: KV pool and usage, ceiling against running, waiting and
  preemptions, TTFT/TPOT quantiles against the SLO targets, goodput with its bounds, the recommendations (dial,
  action, severity, suggested value), the alerts firing for it, and links to the explanations (the advisor's status
  page and recommendations API, Alertmanager's view with the alerts' ``description`` annotations).

Every ``advisor_*`` name comes from :mod:`advisor.conventions`, so the dashboards and the exporter cannot drift.
Engine series (TTFT/TPOT histograms) are selected by the ``deployment`` label that each engine scrape job attaches
as a target label (``deploy/prometheus/prometheus.yml``). Variables: ``$datasource`` (Prometheus), ``$deployment``
(``label_values(advisor_kv_cache_usage_ratio, deployment)``), and text boxes for the SLO targets and the advisor's
and Alertmanager's URLs (defaults from ``deploy/advisor.example.yaml``).

:func:`deploy.grafana.queries.panel_queries` lists every panel's PromQL with the variables substituted, for the
end-to-end test that runs each against a real Prometheus.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, table, text, timeseries
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import text as tm
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from advisor import conventions as c

HERE = Path(__file__).resolve().parent
OUT_DIR = HERE / "dashboards"
EXAMPLE_CONFIG = HERE.parent / "advisor.example.yaml"

OVERVIEW_UID = "capacity-advisor-overview"
DEPLOYMENT_UID = "capacity-advisor-deployment"
TAGS = ["llm", "capacity-advisor"]

# Engine histograms, in each adapter's order of preference (advisor/engines/{vllm,sglang,trtllm,dynamo}.py).
# A deployment runs one engine, so at most one family of each list has series; the `or` chain also keeps a vLLM
# that exposes both the per-request TPOT and the deprecated per-step name from being counted twice.
TTFT_HISTOGRAMS = (
    "vllm:time_to_first_token_seconds",
    "sglang:time_to_first_token_seconds",
    "trtllm_time_to_first_token_seconds",
    "dynamo_frontend_time_to_first_token_seconds",
)
TPOT_HISTOGRAMS = (
    "vllm:request_time_per_output_token_seconds",
    "vllm:time_per_output_token_seconds",
    "vllm:inter_token_latency_seconds",
    "sglang:request_time_per_output_token_seconds",
    "sglang:time_per_output_token_seconds",
    "sglang:inter_token_latency_seconds",
    "trtllm_time_per_output_token_seconds",
    "dynamo_frontend_inter_token_latency_seconds",
)
QUANTILES = (0.5, 0.9, 0.99)

# The advisor's self-metrics that advisor/exporter.py names directly (SelfMetrics).
CYCLE_STEP_SECONDS = "advisor_cycle_step_duration_seconds"
CYCLES_TOTAL = "advisor_cycles_total"
CYCLE_FAILURES_TOTAL = "advisor_cycle_failures_total"

DS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
ONE = f'{{{c.LABEL_DEPLOYMENT}="$deployment"}}'  # the per-deployment dashboard: one deployment
ANY = f'{{{c.LABEL_DEPLOYMENT}=~"$deployment"}}'  # the overview: the selected ones (All by default)
RATE = "$__rate_interval"


# -- defaults from the example config -----------------------------------------------------------------------------
def slo_defaults(path: Path = EXAMPLE_CONFIG) -> dict[str, str]:
    """The text-box defaults: the first deployment's SLO in the example config and the KV saturation threshold."""
    cfg = yaml.safe_load(path.read_text())
    slo = cfg["deployments"][0]["slo"]
    kv = (cfg.get("rules") or {}).get("kv_saturation") or {}
    return {
        "ttft_target": f"{slo['ttft_seconds']:g}",
        "tpot_target": f"{slo['tpot_seconds']:g}",
        "goodput_target": f"{slo.get('target_ratio', 0.95):g}",
        "kv_threshold": f"{kv.get('usage_threshold', 0.9):g}",
    }


# -- small builders ----------------------------------------------------------------------------------------------
def q(expr: str, legend: str = "", *, ref: str = "A", instant: bool = False, table_fmt: bool = False) -> Any:
    """A Prometheus query on ``$datasource``."""
    b = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DS)
    if legend:
        b = b.legend_format(legend)
    b = b.instant() if instant else b.range()
    if table_fmt:
        b = b.format(PromQueryFormat.TABLE)
    return b


def quantiles_of(histograms: Sequence[str], selector: str, quantile: float) -> str:
    """``histogram_quantile`` over the first of ``histograms`` that has series (``or``-chained bucket rates)."""
    rates = " or ".join(f"sum by (le) (rate({h}_bucket{selector}[{RATE}]))" for h in histograms)
    return f"histogram_quantile({quantile:g}, {rates})"


def thresholds(*steps: tuple[float | None, str]) -> db.ThresholdsConfig:
    return (
        db.ThresholdsConfig()
        .mode(dm.ThresholdsMode.ABSOLUTE)
        .steps([dm.Threshold(value=v, color=col) for v, col in steps])
    )


def value_map(mapping: dict[str, tuple[str, str]]) -> list[dm.ValueMapping]:
    opts = {k: dm.ValueMappingResult(text=t, color=col, index=i) for i, (k, (t, col)) in enumerate(mapping.items())}
    return [dm.ValueMap(options=opts)]


OPEN_RESOLVED = value_map({"1": ("open", "red"), "0": ("resolved", "green")})
HIDE_COLUMNS = {"Time": True, "__name__": True, "job": True, "instance": True}


def organize(rename: dict[str, str] | None = None, hide: dict[str, bool] | None = None) -> dm.DataTransformerConfig:
    return dm.DataTransformerConfig(
        id_val="organize",
        options={"excludeByName": hide or HIDE_COLUMNS, "renameByName": rename or {}, "indexByName": {}},
    )


def ts(title: str, desc: str, *targets: Any, unit: str = "short", w: int = 12, h: int = 8) -> timeseries.Panel:
    p = timeseries.Panel().title(title).description(desc).datasource(DS).unit(unit).span(w).height(h)
    p = p.legend(
        cb.VizLegendOptions()
        .show_legend(True)
        .display_mode(cm.LegendDisplayMode.TABLE)
        .placement(cm.LegendPlacement.BOTTOM)
        .calcs(["lastNotNull", "max"])
    )
    for t in targets:
        p = p.with_target(t)
    return p


def st(title: str, desc: str, *targets: Any, unit: str = "short", w: int = 4, h: int = 4) -> stat.Panel:
    p = stat.Panel().title(title).description(desc).datasource(DS).unit(unit).span(w).height(h)
    p = p.reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    for t in targets:
        p = p.with_target(t)
    return p


def tbl(title: str, desc: str, *targets: Any, w: int = 12, h: int = 8) -> table.Panel:
    p = table.Panel().title(title).description(desc).datasource(DS).span(w).height(h)
    for t in targets:
        p = p.with_target(t)
    return p


def datasource_var() -> db.DatasourceVariable:
    return db.DatasourceVariable("datasource").label("Data source").type("prometheus")


def deployment_var(multi: bool) -> db.QueryVariable:
    v = (
        db.QueryVariable("deployment")
        .label("Deployment")
        .datasource(DS)
        .query(f"label_values({c.KV_CACHE_USAGE_RATIO}, {c.LABEL_DEPLOYMENT})")
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
    )
    if multi:
        v = (
            v.multi(True)
            .include_all(True)
            .all_value(".+")
            .current(dm.VariableOption(selected=True, text="All", value="$__all"))
        )
    return v


def textbox(name: str, label: str, default: str, desc: str) -> db.TextBoxVariable:
    return (
        db.TextBoxVariable(name)
        .label(label)
        .description(desc)
        .default_value(default)
        .current(dm.VariableOption(selected=True, text=default, value=default))
    )


def base(uid: str, title: str, desc: str) -> db.Dashboard:
    return (
        db.Dashboard(title)
        .uid(uid)
        .description(desc)
        .tags(TAGS)
        .editable()
        .time("now-1h", "now")
        .refresh("30s")
        .timezone("browser")
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .link(
            db.DashboardLink("Capacity advisor")
            .type(dm.DashboardLinkType.DASHBOARDS)
            .tags(["capacity-advisor"])
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )


# -- the overview ------------------------------------------------------------------------------------------------
def overview() -> dm.Dashboard:
    """Every deployment the advisor watches, and the advisor itself."""
    d = base(
        OVERVIEW_UID,
        "LLM capacity advisor / Overview",
        "Every deployment the capacity advisor watches: KV usage, running against the concurrency ceiling, waiting, "
        "goodput and open recommendations; and the advisor's own health.",
    )
    d = d.with_variable(datasource_var()).with_variable(deployment_var(multi=True))
    per_dep = f"/d/{DEPLOYMENT_UID}?var-datasource=${{datasource}}&var-deployment=${{__field.labels.deployment}}"
    drill: list[Builder[dm.DashboardLink]] = [db.DashboardLink("Deployment capacity").url(per_dep).keep_time(True)]

    d = d.with_row(db.Row("Fleet"))
    d = d.with_panel(
        st(
            "Deployments",
            "Deployments the advisor evaluates.",
            q(f"count(count by ({c.LABEL_DEPLOYMENT}) ({c.DEPLOYMENT_STATE}{ANY}))", instant=True),
        )
    )
    d = d.with_panel(
        st(
            "Data quality",
            "Deployments by data-quality state: fresh, stale (no new sample, or frozen counters) or unavailable "
            "(the last scrape failed). Rules never fire on stale or unavailable data.",
            q(f"sum by ({c.LABEL_STATE}) ({c.DEPLOYMENT_STATE}{ANY})", "{{state}}", instant=True),
            w=6,
        ).color_mode(cm.BigValueColorMode.NONE)
    )
    d = d.with_panel(
        st(
            "Open recommendations",
            "Recommendations open now, all deployments selected.",
            q(f"count({c.RECOMMENDATION_ACTIVE}{ANY} == 1) or on() vector(0)", instant=True),
        ).thresholds(thresholds((None, "green"), (1, "orange")))
    )
    d = d.with_panel(
        st(
            "Targets up",
            "Share of the engines' /metrics targets whose last scrape by the advisor succeeded.",
            q(f"sum({c.TARGET_UP}{ANY}) / count({c.TARGET_UP}{ANY})", instant=True),
            unit="percentunit",
            w=5,
        ).thresholds(thresholds((None, "red"), (0.99, "green")))
    )
    d = d.with_panel(
        st(
            "Since last evaluation",
            "Seconds since the advisor last completed an evaluation cycle (a few scrape intervals at most).",
            q(f"time() - max({c.LAST_EVALUATION_TIMESTAMP})", instant=True),
            unit="s",
            w=5,
        ).thresholds(thresholds((None, "green"), (120, "red")))
    )

    d = d.with_row(db.Row("Deployments"))
    cols = [
        ("A", c.KV_CACHE_USAGE_RATIO, "KV usage"),
        ("B", c.KV_CACHE_CAPACITY_TOKENS, "KV pool (tokens)"),
        ("C", c.CONCURRENCY_CEILING, "Ceiling"),
        ("D", c.REQUESTS_RUNNING, "Running"),
        ("E", c.REQUESTS_WAITING, "Waiting"),
        ("F", c.GOODPUT_RATIO, "Goodput"),
    ]
    now = tbl(
        "Deployments now",
        "The advisor's latest reading per deployment. Click a deployment for its capacity view.",
        *[q(f"max by ({c.LABEL_DEPLOYMENT}) ({m}{ANY})", ref=r, instant=True, table_fmt=True) for r, m, _ in cols],
        w=24,
        h=7,
    )
    now = now.with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
    now = now.with_transformation(organize({f"Value #{r}": label for r, _, label in cols}, {"Time": True}))
    now = now.override_by_name(
        "deployment", [dm.DynamicConfigValue(id_val="links", value=[{"title": "Deployment capacity", "url": per_dep}])]
    )
    now = now.override_by_name("KV usage", [dm.DynamicConfigValue(id_val="unit", value="percentunit")])
    now = now.override_by_name("Goodput", [dm.DynamicConfigValue(id_val="unit", value="percentunit")])
    d = d.with_panel(now)
    d = d.with_panel(
        ts(
            "KV cache usage",
            "KV-cache usage 0-1 per deployment (capacity-weighted over replicas; evictable prefix cache counts as "
            "free).",
            q(f"{c.KV_CACHE_USAGE_RATIO}{ANY}", "{{deployment}}"),
            unit="percentunit",
        )
        .min(0)
        .max(1)
        .data_links(drill)
    )
    d = d.with_panel(
        ts(
            "Running ÷ concurrency ceiling",
            "Requests running as a share of the sequences at max-model-len the KV pools hold. Above 1 the engine "
            "runs shorter requests than max-model-len; near 1 with requests waiting, the pool is the limit.",
            q(f"{c.REQUESTS_RUNNING}{ANY} / {c.CONCURRENCY_CEILING}{ANY}", "{{deployment}}"),
            unit="percentunit",
        ).data_links(drill)
    )
    d = d.with_panel(
        ts(
            "Waiting requests",
            "Requests queued (summed over replicas).",
            q(f"{c.REQUESTS_WAITING}{ANY}", "{{deployment}}"),
        ).data_links(drill)
    )
    d = d.with_panel(
        ts(
            "Goodput ratio",
            "Estimated fraction of requests meeting both the TTFT and the TPOT target over the evaluation window.",
            q(f"{c.GOODPUT_RATIO}{ANY}", "{{deployment}}"),
            unit="percentunit",
        )
        .min(0)
        .max(1)
        .data_links(drill)
    )

    d = d.with_row(db.Row("Recommendations"))
    d = d.with_panel(
        tbl(
            "Recommendations",
            "Every recommendation the advisor has made since it started: open (1) or resolved (0), by dial, action "
            "and severity. The explanation (evidence, predicted effect, the engine flag) is on the deployment's "
            "capacity view and the advisor's status page.",
            q(f"{c.RECOMMENDATION_ACTIVE}{ANY}", instant=True, table_fmt=True),
            w=14,
        )
        .with_transformation(organize({"Value": "state"}))
        .mappings(OPEN_RESOLVED)
        .override_by_name(
            "deployment",
            [dm.DynamicConfigValue(id_val="links", value=[{"title": "Deployment capacity", "url": per_dep}])],
        )
    )
    d = d.with_panel(
        ts(
            "Open recommendations by deployment",
            "Recommendations open per deployment and dial over time.",
            q(
                f"sum by ({c.LABEL_DEPLOYMENT}, {c.LABEL_DIAL}) ({c.RECOMMENDATION_ACTIVE}{ANY})",
                "{{deployment}} {{dial}}",
            ),
            w=10,
        )
        .draw_style(cm.GraphDrawStyle.BARS)
        .min(0)
    )

    d = d.with_row(db.Row("The advisor"))
    d = d.with_panel(
        ts(
            "Cycle step duration (p90)",
            "90th percentile of each named step of the evaluation cycle (scrape, evaluate, export, notify, …).",
            q(
                f"histogram_quantile(0.9, sum by (le, step) (rate({CYCLE_STEP_SECONDS}_bucket[{RATE}])))",
                "{{step}}",
            ),
            unit="s",
            w=8,
        )
    )
    d = d.with_panel(
        ts(
            "Cycles and failures",
            "Evaluation cycles completed and failed per second (a failure of one deployment's part counts).",
            q(f"sum(rate({CYCLES_TOTAL}[{RATE}]))", "cycles", ref="A"),
            q(f"sum(rate({CYCLE_FAILURES_TOTAL}[{RATE}])) or on() vector(0)", "failures", ref="B"),
            unit="ops",
            w=8,
        )
    )
    d = d.with_panel(
        ts(
            "Scrape errors",
            "Failed scrapes of the engines by reason (connection_refused, timeout, http_status, too_large, "
            "parse_error); 0 when there were none.",
            q(
                f"sum by ({c.LABEL_REASON}) (rate({c.SCRAPE_ERRORS}_total{ANY}[{RATE}])) or on() vector(0)",
                "{{reason}}",
            ),
            unit="ops",
            w=8,
        )
    )
    d = d.with_panel(
        ts(
            "Notifications",
            "Notifications sent, failed and dropped per receiver (the advisor's own webhooks; 0 when none).",
            q(
                f"sum by ({c.LABEL_RECEIVER}, {c.LABEL_OUTCOME}) (rate({c.NOTIFICATIONS}_total[{RATE}])) "
                "or on() vector(0)",
                "{{receiver}} {{outcome}}",
            ),
            unit="ops",
            w=12,
        )
    )
    d = d.with_panel(
        tbl(
            "Advisor instances",
            "Each advisor Prometheus scrapes, with its version.",
            q(f"{c.BUILD_INFO}", instant=True, table_fmt=True),
        ).with_transformation(organize({}, {"Time": True, "__name__": True, "Value": True}))
    )
    return d.build()


# -- one deployment ------------------------------------------------------------------------------------------------
def deployment(defaults: dict[str, str]) -> dm.Dashboard:
    """One deployment's capacity: pool, ceiling, queue, latency against targets, goodput, recommendations."""
    d = base(
        DEPLOYMENT_UID,
        "LLM capacity advisor / Deployment capacity",
        "One deployment: KV pool and usage, concurrency ceiling against running, waiting and preemptions, TTFT and "
        "TPOT quantiles against the SLO targets, goodput, and the advisor's recommendations with their explanations.",
    )
    d = d.with_variable(datasource_var()).with_variable(deployment_var(multi=False))
    d = d.with_variable(
        textbox("ttft_target", "TTFT target (s)", defaults["ttft_target"], "The deployment's slo.ttft_seconds.")
    )
    d = d.with_variable(
        textbox("tpot_target", "TPOT target (s)", defaults["tpot_target"], "The deployment's slo.tpot_seconds.")
    )
    d = d.with_variable(
        textbox("goodput_target", "Goodput target", defaults["goodput_target"], "The deployment's slo.target_ratio.")
    )
    d = d.with_variable(
        textbox(
            "advisor_url",
            "Advisor URL",
            "http://capacity-advisor:9188",
            "Where operators reach the advisor's status page and API.",
        )
    )
    d = d.with_variable(
        textbox(
            "alertmanager_url", "Alertmanager URL", "http://alertmanager:9093", "Where operators reach Alertmanager."
        )
    )
    kv_threshold = float(defaults["kv_threshold"])

    d = d.with_row(db.Row("Now"))
    d = d.with_panel(
        st(
            "Data quality",
            "fresh, stale (no new sample, or frozen counters) or unavailable (the last scrape failed). Rules never "
            "fire on stale or unavailable data.",
            q(f"{c.DEPLOYMENT_STATE}{ONE} == 1", "{{state}}", instant=True),
        )
        .text_mode(cm.BigValueTextMode.NAME)
        .color_mode(cm.BigValueColorMode.NONE)
    )
    d = d.with_panel(
        st(
            "KV pool",
            "KV-cache capacity in tokens summed over replicas, as the engines report it.",
            q(f"{c.KV_CACHE_CAPACITY_TOKENS}{ONE}", instant=True),
        )
    )
    d = d.with_panel(
        st(
            "KV usage",
            "KV-cache usage now (capacity-weighted over replicas).",
            q(f"{c.KV_CACHE_USAGE_RATIO}{ONE}", instant=True),
            unit="percentunit",
        ).thresholds(thresholds((None, "green"), (0.8, "orange"), (kv_threshold, "red")))
    )
    d = d.with_panel(
        st(
            "Concurrency ceiling",
            "Sequences at max-model-len the answering replicas' KV pools hold.",
            q(f"{c.CONCURRENCY_CEILING}{ONE}", instant=True),
        ).decimals(1)
    )
    d = d.with_panel(
        st(
            "Goodput",
            "Estimated fraction of requests meeting both targets over the evaluation window.",
            q(f"{c.GOODPUT_RATIO}{ONE}", instant=True),
            unit="percentunit",
        ).thresholds(thresholds((None, "red"), (float(defaults["goodput_target"]), "green")))
    )
    d = d.with_panel(
        st(
            "Capacity model error",
            "The capacity pass's KV tokens per replica ÷ the engine's own report − 1. Large values mean the "
            "configured model, GPU or dials do not match what the engine runs.",
            q(f"{c.CAPACITY_MODEL_ERROR_RATIO}{ONE}", instant=True),
            unit="percentunit",
        )
    )

    d = d.with_row(db.Row("KV cache and concurrency"))
    d = d.with_panel(
        ts(
            "KV cache usage",
            f"KV-cache usage 0-1; the line is the kv_saturation rule's threshold ({kv_threshold:g}).",
            q(f"{c.KV_CACHE_USAGE_RATIO}{ONE}", "usage"),
            unit="percentunit",
        )
        .min(0)
        .max(1)
        .thresholds(thresholds((None, "green"), (kv_threshold, "red")))
        .thresholds_style(cb.GraphThresholdsStyleConfig().mode(cm.GraphTresholdsStyleMode.LINE))
    )
    d = d.with_panel(
        ts(
            "Concurrency ceiling vs running",
            "Sequences at max-model-len the KV pools hold, against the requests running. Running at the ceiling "
            "with requests waiting: the pool is the limit.",
            q(f"{c.CONCURRENCY_CEILING}{ONE}", "ceiling", ref="A"),
            q(f"{c.REQUESTS_RUNNING}{ONE}", "running", ref="B"),
        ).min(0)
    )
    d = d.with_panel(
        ts(
            "Waiting and preemptions",
            "Requests waiting (left axis) and preemptions per second over the evaluation window (right axis).",
            q(f"{c.REQUESTS_WAITING}{ONE}", "waiting", ref="A"),
            q(f"{c.PREEMPTIONS_PER_SECOND}{ONE}", "preemptions/s", ref="B"),
        )
        .min(0)
        .override_by_name(
            "preemptions/s",
            [
                dm.DynamicConfigValue(id_val="custom.axisPlacement", value="right"),
                dm.DynamicConfigValue(id_val="unit", value="ops"),
            ],
        )
    )
    d = d.with_panel(
        ts(
            "KV pool",
            "KV-cache capacity in tokens summed over the answering replicas.",
            q(f"{c.KV_CACHE_CAPACITY_TOKENS}{ONE}", "tokens"),
        ).min(0)
    )

    d = d.with_row(db.Row("Latency and goodput"))
    d = d.with_panel(
        ts(
            "TTFT quantiles vs target",
            "Time to first token from the engines' own histograms (deployment label added by the scrape job); "
            "the dashed line is the target.",
            *[
                q(quantiles_of(TTFT_HISTOGRAMS, ONE, qq), f"p{qq * 100:g}", ref=chr(ord("A") + i))
                for i, qq in enumerate(QUANTILES)
            ],
            q("vector($ttft_target)", "target", ref="T"),
            unit="s",
        ).override_by_name("target", [dm.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash"})])
    )
    d = d.with_panel(
        ts(
            "TPOT quantiles vs target",
            "Time per output token (per-request TPOT where the engine has it, else inter-token latency); the dashed "
            "line is the target.",
            *[
                q(quantiles_of(TPOT_HISTOGRAMS, ONE, qq), f"p{qq * 100:g}", ref=chr(ord("A") + i))
                for i, qq in enumerate(QUANTILES)
            ],
            q("vector($tpot_target)", "target", ref="T"),
            unit="s",
        ).override_by_name("target", [dm.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash"})])
    )
    d = d.with_panel(
        ts(
            "Goodput ratio",
            "Estimated fraction of requests meeting both targets, between its Fréchet bounds; the dashed line is "
            "the target ratio.",
            q(f"{c.GOODPUT_RATIO}{ONE}", "goodput", ref="A"),
            q(f"{c.GOODPUT_RATIO_LOWER}{ONE}", "lower bound", ref="B"),
            q(f"{c.GOODPUT_RATIO_UPPER}{ONE}", "upper bound", ref="C"),
            q("vector($goodput_target)", "target", ref="T"),
            unit="percentunit",
        )
        .min(0)
        .max(1)
        .override_by_name("target", [dm.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash"})])
    )
    d = d.with_panel(
        ts(
            "Tokens per second",
            "Generation tokens per second, and the part of it that met both targets (goodput).",
            q(f"{c.GENERATION_TOKENS_PER_SECOND}{ONE}", "generated", ref="A"),
            q(f"{c.GOODPUT_TOKENS_PER_SECOND}{ONE}", "goodput", ref="B"),
        ).min(0)
    )

    d = d.with_row(db.Row("Recommendations"))
    alerts_link = "${alertmanager_url}/#/alerts?filter=%7Bdeployment%3D%22${deployment}%22%7D"
    d = d.with_panel(
        tbl(
            "Recommendations",
            "Every recommendation for this deployment since the advisor started: open or resolved, by dial, action "
            "and severity.",
            q(f"{c.RECOMMENDATION_ACTIVE}{ONE}", instant=True, table_fmt=True),
            w=10,
        )
        .with_transformation(organize({"Value": "state"}, {**HIDE_COLUMNS, c.LABEL_DEPLOYMENT: True}))
        .mappings(OPEN_RESOLVED)
    )
    d = d.with_panel(
        tbl(
            "Suggested values",
            "The value each open recommendation suggests for its dial (numeric suggestions only).",
            q(f"{c.RECOMMENDED_VALUE}{ONE}", instant=True, table_fmt=True),
            w=6,
        ).with_transformation(organize({"Value": "suggested"}, {**HIDE_COLUMNS, c.LABEL_DEPLOYMENT: True}))
    )
    d = d.with_panel(
        text.Panel()
        .title("Explanations")
        .span(8)
        .height(8)
        .mode(tm.TextMode.MARKDOWN)
        .content(
            "Each recommendation comes with its evidence, the predicted effect, a confidence and the exact engine "
            "flag:\n\n"
            "* [the advisor's status page](${advisor_url}/) — open and recently resolved recommendations\n"
            "* [the recommendations API](${advisor_url}/api/v1/recommendations) — the same as JSON\n"
            f"* [Alertmanager]({alerts_link}) — the alerts for **${{deployment}}** with their `summary`, "
            "`description` and `runbook_url`\n\n"
            "`capacity-advisor once --config FILE` prints the same explanations on a terminal."
        )
    )
    d = d.with_panel(
        ts(
            "Recommendation timeline",
            "1 while a recommendation is open, 0 after it resolved.",
            q(f"{c.RECOMMENDATION_ACTIVE}{ONE}", "{{dial}} {{action}} ({{severity}})"),
            w=12,
        )
        .line_interpolation(cm.LineInterpolation.STEP_AFTER)
        .min(0)
        .max(1)
    )
    d = d.with_panel(
        tbl(
            "Alerts for this deployment",
            "Prometheus alerts carrying this deployment's label (the advisor's recommendation alerts and the goodput "
            "SLO burn-rate alerts from rules/). Open Alertmanager for their descriptions.",
            q(f"ALERTS{ONE}", instant=True, table_fmt=True),
            w=12,
        )
        .with_transformation(organize({}, {**HIDE_COLUMNS, "Value": True, c.LABEL_DEPLOYMENT: True}))
        .override_by_name(
            "alertname",
            [dm.DynamicConfigValue(id_val="links", value=[{"title": "Alertmanager", "url": alerts_link}])],
        )
    )

    d = d.with_row(db.Row("Targets"))
    d = d.with_panel(
        ts(
            "Targets up",
            "1 if the advisor's last scrape of each replica's /metrics succeeded.",
            q(f"{c.TARGET_UP}{ONE}", "{{target}}"),
        )
        .line_interpolation(cm.LineInterpolation.STEP_AFTER)
        .min(0)
        .max(1)
    )
    d = d.with_panel(
        ts(
            "Scrape errors",
            "Failed scrapes by target and reason per second; 0 when there were none.",
            q(
                f"sum by ({c.LABEL_TARGET}, {c.LABEL_REASON}) (rate({c.SCRAPE_ERRORS}_total{ONE}[{RATE}])) "
                "or on() vector(0)",
                "{{target}} {{reason}}",
            ),
            unit="ops",
        )
    )
    d = d.annotation(
        db.AnnotationQuery()
        .name("Recommendations")
        .datasource(DS)
        .enable(True)
        .icon_color("orange")
        .expr(f"changes({c.RECOMMENDATION_ACTIVE}{ONE}[2m]) > 0")
    )
    return d.build()


# -- output ------------------------------------------------------------------------------------------------------
def number_panels(dash: dm.Dashboard) -> dm.Dashboard:
    """Give every panel (rows included) a stable id in layout order, so ``viewPanel=`` links survive regeneration."""
    for i, panel in enumerate(dash.panels or [], start=1):
        panel.id_val = i
    return dash


def render(dash: dm.Dashboard) -> str:
    """The dashboard as Grafana reads it (stable key order, two-space indent, final newline)."""
    dash = number_panels(dash)
    return json.dumps(json.loads(JSONEncoder().encode(dash)), indent=2, ensure_ascii=False) + "\n"


def build_all(defaults: dict[str, str] | None = None) -> dict[str, str]:
    """File name → JSON text of every dashboard."""
    defaults = defaults or slo_defaults()
    builders: list[tuple[str, Callable[[], dm.Dashboard]]] = [
        ("overview.json", overview),
        ("deployment.json", lambda: deployment(defaults)),
    ]
    return {name: render(make()) for name, make in builders}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--check", action="store_true", help="exit 1 if the committed JSON differs from the code's")
    p.add_argument("--out", type=Path, default=OUT_DIR, help=f"output folder (default {OUT_DIR})")
    args = p.parse_args(argv)
    out: Path = args.out
    stale = []
    for name, content in build_all().items():
        path = out / name
        if args.check:
            if not path.exists() or path.read_text() != content:
                stale.append(str(path))
            continue
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        print(f"wrote {path}")
    if stale:
        print("out of date (run deploy/grafana/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
