"""Every name the advisor exports or accepts, in one place.

Metric names follow Prometheus conventions (base units in the name, ``_total`` for counters, no
colons). Dashboards, rule files and code all import from here so they cannot drift apart.
"""

from __future__ import annotations

from typing import Final

MIN_SCRAPE_INTERVAL_SECONDS: Final = 0.1
"""``scrape_interval`` and ``once``/``inspect --interval`` at least: below it a cycle (scrape, evaluate, publish)
would run back to back and burn a core for nothing, and rates over a few milliseconds are noise."""

# --- exported metric names (prometheus-client appends _total to counters itself) -----------------
KV_CACHE_USAGE_RATIO: Final = "advisor_kv_cache_usage_ratio"
KV_CACHE_CAPACITY_TOKENS: Final = "advisor_kv_cache_capacity_tokens"
CONCURRENCY_CEILING: Final = "advisor_concurrency_ceiling"
REQUESTS_RUNNING: Final = "advisor_requests_running"
REQUESTS_WAITING: Final = "advisor_requests_waiting"
PREEMPTIONS_PER_SECOND: Final = "advisor_preemptions_per_second"
GOODPUT_RATIO: Final = "advisor_goodput_ratio"
GOODPUT_RATIO_LOWER: Final = "advisor_goodput_ratio_lower_bound"
GOODPUT_RATIO_UPPER: Final = "advisor_goodput_ratio_upper_bound"
GOODPUT_TOKENS_PER_SECOND: Final = "advisor_goodput_tokens_per_second"
GENERATION_TOKENS_PER_SECOND: Final = "advisor_generation_tokens_per_second"
TTFT_SECONDS: Final = "advisor_ttft_seconds"
TPOT_SECONDS: Final = "advisor_tpot_seconds"
RECOMMENDATION_ACTIVE: Final = "advisor_recommendation_active"
RECOMMENDED_VALUE: Final = "advisor_recommended_value"  # {deployment, dial}: an open recommendation's suggested value
TARGET_UP: Final = "advisor_target_up"
SCRAPE_ERRORS: Final = "advisor_scrape_errors"  # exposed as advisor_scrape_errors_total
LAST_EVALUATION_TIMESTAMP: Final = "advisor_last_evaluation_timestamp_seconds"
DEPLOYMENT_STATE: Final = "advisor_deployment_state"
TARGET_STATE: Final = "advisor_target_state"
# {deployment, target}: series repeated on the target's last page (the first sample of each kept, as Prometheus does)
TARGET_DUPLICATE_SERIES: Final = "advisor_target_duplicate_series"
CAPACITY_MODEL_ERROR_RATIO: Final = "advisor_capacity_model_error_ratio"
# the latency model's online calibration per deployment (issue 17; advisor/online_calibration.py): one-step-ahead
# errors (predicted ÷ observed − 1, the model before the window's update) and the calibrated factors (÷ the prior's)
MODEL_TPOT_ERROR_RATIO: Final = "advisor_model_tpot_error_ratio"
MODEL_TTFT_ERROR_RATIO: Final = "advisor_model_ttft_error_ratio"
MODEL_DECODE_EFFICIENCY_RATIO: Final = "advisor_model_decode_efficiency_ratio"
MODEL_PREFILL_EFFICIENCY_RATIO: Final = "advisor_model_prefill_efficiency_ratio"
# the calibrated fixed CPU times ÷ the prior's: per decode step, and per prefill (step + request overheads)
MODEL_DECODE_OVERHEAD_RATIO: Final = "advisor_model_decode_overhead_ratio"
MODEL_PREFILL_OVERHEAD_RATIO: Final = "advisor_model_prefill_overhead_ratio"
# a running speculative decoding per deployment, over the evaluation window (advisor/telemetry.py SpeculationWindow):
# tokens a verification round yields per sequence (the bonus token included) and draft tokens scored per round;
# absent without a measurement (no speculation, no drafts in the window, or counters that contradict each other)
SPECULATIVE_ACCEPTANCE_LENGTH_TOKENS: Final = "advisor_speculative_mean_acceptance_length_tokens"
SPECULATIVE_DRAFT_LENGTH_TOKENS: Final = "advisor_speculative_draft_length_tokens"
# the autoscaler signals per deployment (issue 18; advisor/signals.py), exported only while the data is fresh: the
# replica count to hold (the replica advice, else the current count), the capacity left at today's load by kind, and
# the seconds until the first KV pool is full at the window's usage trend (absent when usage does not grow); the
# desired replicas is the series a KEDA ScaledObject or an HPA scales on (rules generate)
DESIRED_REPLICAS: Final = "advisor_desired_replicas"
CAPACITY_HEADROOM_RATIO: Final = "advisor_capacity_headroom_ratio"  # {deployment, kind}
TIME_TO_KV_EXHAUSTION_SECONDS: Final = "advisor_time_to_kv_exhaustion_seconds"
HEADROOM_KV_CEILING: Final = "kv_ceiling"  # kind: 1 − KV usage
HEADROOM_SLO_THROUGHPUT: Final = "slo_throughput"  # kind: 1 − arrivals ÷ the replicas' capacity at the SLO
NOTIFICATIONS: Final = "advisor_notifications"  # exposed as advisor_notifications_total
NOTIFICATIONS_QUEUED: Final = "advisor_notifications_queued"
# advisor_notifications_total{outcome}: each alert transition counts once as sent, failed or dropped; every
# further POST carrying it (a retry, an Alertmanager keep-alive re-send) counts as resent, never as sent
NOTIFY_SENT: Final = "sent"
NOTIFY_RESENT: Final = "resent"
NOTIFY_FAILED: Final = "failed"
NOTIFY_DROPPED: Final = "dropped"
NOTIFY_OUTCOMES: Final = (NOTIFY_SENT, NOTIFY_RESENT, NOTIFY_FAILED, NOTIFY_DROPPED)
BUILD_INFO: Final = "advisor_build_info"
# the advisor's health, read by the alerts of rules/advisor.rules.yml (issue 14; SelfMetrics in advisor/exporter.py)
CYCLES_SKIPPED: Final = "advisor_cycles_skipped"  # exposed as advisor_cycles_skipped_total
CYCLE_LAST_SUCCESS_TIMESTAMP: Final = "advisor_cycle_last_success_timestamp_seconds"  # 0 before the first cycle
CONFIG_LAST_RELOAD_SUCCESSFUL: Final = "advisor_config_last_reload_successful"
# the scrape worker processes of `run --workers N` (issue 15; SelfMetrics in advisor/exporter.py, advisor/workers.py)
WORKERS: Final = "advisor_workers"  # how many scrape workers run (1: the in-process thread pool)
WORKER_UP: Final = "advisor_worker_up"  # {worker}: 1 while the worker process runs, 0 while it is down
WORKER_RESTARTS: Final = "advisor_worker_restarts"  # {worker}, exposed as advisor_worker_restarts_total
WORKER_CPU_SECONDS: Final = "advisor_worker_cpu_seconds"  # {worker}, exposed as advisor_worker_cpu_seconds_total

# --- label names ------------------------------------------------------------------------------------
LABEL_DEPLOYMENT: Final = "deployment"
LABEL_TARGET: Final = "target"
LABEL_REASON: Final = "reason"
LABEL_DIAL: Final = "dial"
LABEL_ACTION: Final = "action"
LABEL_SEVERITY: Final = "severity"
LABEL_RULE: Final = "rule"
LABEL_QUANTILE: Final = "quantile"
LABEL_STATE: Final = "state"
LABEL_RECEIVER: Final = "receiver"
LABEL_OUTCOME: Final = "outcome"
LABEL_WORKER: Final = "worker"
LABEL_KIND: Final = "kind"

# --- scrape error reasons ---------------------------------------------------------------------------
REASON_CONNECTION_REFUSED: Final = "connection_refused"
REASON_TIMEOUT: Final = "timeout"
REASON_HTTP_STATUS: Final = "http_status"
REASON_TOO_LARGE: Final = "too_large"
REASON_PARSE_ERROR: Final = "parse_error"
REASON_UNRECOGNIZED: Final = "unrecognized"  # valid text, but no family of a known engine (prefixes named)
REASON_SERVED_MODEL_NOT_FOUND: Final = "served_model_not_found"  # served_model matches no model on the page
# the page holds more samples than scrape.sample_limit, or a series more labels than scrape.label_limit (the message
# says which limit, the count and the limit), as Prometheus fails such a scrape
REASON_SAMPLE_LIMIT: Final = "sample_limit"
# the page answered with the engine's families, but every value the advisor reads is NaN: a NaN is absent, not a
# value, so nothing was read (issue 19)
REASON_NAN_VALUES: Final = "nan_values"
SCRAPE_ERROR_REASONS: Final = (
    REASON_CONNECTION_REFUSED,
    REASON_TIMEOUT,
    REASON_HTTP_STATUS,
    REASON_TOO_LARGE,
    REASON_PARSE_ERROR,
    REASON_UNRECOGNIZED,
    REASON_SERVED_MODEL_NOT_FOUND,
    REASON_SAMPLE_LIMIT,
    REASON_NAN_VALUES,
)

# --- backtest ----------------------------------------------------------------------------------------------
BACKTEST_GRID: Final = 8
"""A backtest's evaluation times and steps are multiples of ``1 / BACKTEST_GRID`` s (:data:`advisor.backtest.GRID`
says why); ``--step`` is at least one grid point."""
BACKTEST_MIN_STEP_SECONDS: Final = 1 / BACKTEST_GRID

# --- data-quality states ------------------------------------------------------------------------------
STATE_FRESH: Final = "fresh"
ENGINE_CONFIG_MIXED: Final = "<mixed>"
"""The value :attr:`advisor.rules.base.Evaluation.engine_config` holds for a label the answering replicas report
differently (one replica's prefix cache on, another's off): no one replica's value speaks for the deployment."""
STATE_STALE: Final = "stale"
STATE_UNAVAILABLE: Final = "unavailable"
STATES: Final = (STATE_FRESH, STATE_STALE, STATE_UNAVAILABLE)

# --- dial ids -------------------------------------------------------------------------------------------
DIAL_MAX_NUM_SEQS: Final = "max_num_seqs"
DIAL_MAX_NUM_BATCHED_TOKENS: Final = "max_num_batched_tokens"
DIAL_GPU_MEMORY_UTILIZATION: Final = "gpu_memory_utilization"
DIAL_KV_CACHE_MEMORY_BYTES: Final = "kv_cache_memory_bytes"
"""vLLM's ``--kv-cache-memory-bytes`` (0.11+, ``vllm/engine/arg_utils.py``): the pool's size per GPU in bytes, which
replaces the utilization budget when set (``gpu_memory_utilization`` is then inert for the pool)."""
DIAL_WEIGHT_QUANTIZATION: Final = "weight_quantization"
DIAL_KV_CACHE_DTYPE: Final = "kv_cache_dtype"
DIAL_TENSOR_PARALLEL_SIZE: Final = "tensor_parallel_size"
DIAL_SPECULATIVE_DECODING: Final = "speculative_decoding"
DIAL_MAX_MODEL_LEN: Final = "max_model_len"
DIAL_CHUNKED_PREFILL: Final = "chunked_prefill"
DIAL_PREFIX_CACHING: Final = "prefix_caching"
DIAL_ADMISSION_POLICY: Final = "admission_policy"
DIAL_REPLICAS: Final = "replicas"
DIAL_INSTANCE_TYPE: Final = "instance_type"
DIALS: Final = (
    DIAL_MAX_NUM_SEQS,
    DIAL_MAX_NUM_BATCHED_TOKENS,
    DIAL_GPU_MEMORY_UTILIZATION,
    DIAL_KV_CACHE_MEMORY_BYTES,
    DIAL_WEIGHT_QUANTIZATION,
    DIAL_KV_CACHE_DTYPE,
    DIAL_TENSOR_PARALLEL_SIZE,
    DIAL_SPECULATIVE_DECODING,
    DIAL_MAX_MODEL_LEN,
    DIAL_CHUNKED_PREFILL,
    DIAL_PREFIX_CACHING,
    DIAL_ADMISSION_POLICY,
    DIAL_REPLICAS,
    DIAL_INSTANCE_TYPE,
)

DIAL_ENGINE_PROCESS: Final = "engine_process"
"""A pseudo-dial, not in :data:`DIALS` (no engine flag turns it): the engine process itself, which the ``stalled``
rule asks the operator to restart (action :data:`ACTION_RESTART`) when a hung engine holds requests and does no
work. No capacity dial fixes a hung engine."""
ACTION_RESTART: Final = "restart"
DIAL_LOAD_BALANCER: Final = "load_balancer"
"""A pseudo-dial, not in :data:`DIALS` (no engine flag turns it): the router in front of the replicas, which the
``load_imbalance`` rule asks the operator to fix (action ``set``) when one replica strains while another idles."""
DIAL_MANAGED_OFFER: Final = "managed_offer"
"""A pseudo-dial, not in :data:`DIALS` (no engine or platform setting turns it): buying the model per token instead
of hosting it, which the ``host_or_buy`` rule prices (:mod:`advisor.capacity.token_offers`); its ``flag`` is always
``None``."""

ACTIONS: Final = ("increase", "decrease", "enable", "disable", "set", ACTION_RESTART)
SEVERITIES: Final = ("critical", "warning", "info")

# --- rule ids -----------------------------------------------------------------------------------------
RULE_KV_SATURATION: Final = "kv_saturation"
RULE_GOODPUT_BELOW_TARGET: Final = "goodput_below_target"

EVIDENCE_POOL_FACTOR_NEEDED: Final = "pool_factor_needed"
"""Evidence key of a KV-pool turn that alone does not hold the current demand: how many times the pool must grow
(the turn grows it less). The console lines say so beside the turn (:func:`advisor.service.not_enough_alone`)."""
RULE_POOL_CONTEXT: Final = "pool_context"
RULE_ADMISSION_THRASH: Final = "admission_thrash"
RULE_QUEUE_GROWTH: Final = "queue_growth"
RULE_OVER_PROVISIONED: Final = "over_provisioned"
RULE_SPECULATIVE_DECODING: Final = "speculative_decoding"
RULE_KV_BUDGET: Final = "kv_budget"
RULE_WEIGHTS_CROWD: Final = "weights_crowd"
RULE_MODEL_DRIFT: Final = "model_drift"
RULE_STALLED: Final = "stalled"
RULE_HOST_OR_BUY: Final = "host_or_buy"
RULE_SEQ_CAP: Final = "seq_cap"
RULE_ADMISSION_WEDGED: Final = "admission_wedged"
RULE_RANK_WEDGED: Final = "rank_wedged"
RULE_LOAD_IMBALANCE: Final = "load_imbalance"
RULE_PREFIX_CACHING_OFF: Final = "prefix_caching_off"

# --- problems (issue 13): the rules' proposals for one deployment and problem merge into one incident ---------
PROBLEM_SATURATION: Final = "saturation"
"""The deployment cannot carry its load: KV pool full, queue growing, goodput below target, admission thrash,
a pool smaller than one request, preemptions under a low memory budget, requests waiting for a sequence slot. One
incident, whichever of these rules sees it first."""
PROBLEM_STALLED: Final = "stalled"
"""Requests wait, none complete, the token counters stand still; or vLLM admits none of them with slots and blocks
free (the deferred-requests admission wedge)."""

PROBLEM_LOAD_IMBALANCE: Final = "load_imbalance"
"""One replica strains while another idles: the router's problem, its own incident (it waits its own for-duration
instead of joining a saturation incident the moment another rule's holds; breaker 9, 2026-12-06)."""

# --- alert names (webhook payload alertname) ----------------------------------------------------------
ALERT_RECOMMENDATION: Final = "CapacityAdvisorRecommendation"

RUNBOOK_BASE: Final = "https://github.com/llm-capacity-advisor/llm-capacity-advisor/blob/main/rules/runbook.md"
"""The default runbook; ``runbook_base_url`` in the config replaces this prefix in every notification."""
LOW_CONFIDENCE: Final = 0.5
"""Below this confidence a recommendation is never ``critical`` (issue 13): the payload says ``warning``."""

# --- extension points ----------------------------------------------------------------------------
RULE_PLUGIN_GROUP: Final = "advisor.rules"
"""The entry-point group third-party rule modules register under (``rules.plugins.<name>`` configures one)."""


PLATFORM_KUBERNETES: Final = "kubernetes"
PLATFORM_SAGEMAKER: Final = "sagemaker"
PLATFORM_VERTEX: Final = "vertex"
PLATFORM_AZURE_ML: Final = "azure-ml"
PLATFORMS: Final = (PLATFORM_KUBERNETES, "systemd", PLATFORM_SAGEMAKER, PLATFORM_VERTEX, PLATFORM_AZURE_ML, "bedrock")
"""Where a deployment's engine runs (``platform:``, ``plan --platform``); the first is the default. Each platform's
terms and their documentation: :mod:`advisor.platforms`."""

MANAGED_INSTANCE_PLATFORMS: Final = (PLATFORM_SAGEMAKER, PLATFORM_VERTEX, PLATFORM_AZURE_ML)
"""Platforms that rent their own instances at their own prices (``ml.*``, Vertex AI prediction nodes, Azure ML
managed online endpoints): their instance choices and prices come from ``advisor/data/managed_instances.csv``
(:mod:`advisor.capacity.managed`), never from the raw VM table."""

WAITING_REASON_CAPACITY: Final = "capacity"
"""The ``EngineSnapshot.requests_waiting_by_reason`` key of requests that wait for the engine's capacity — KV blocks
or a scheduler slot (vLLM 0.20+ ``num_requests_waiting_by_reason{reason="capacity"}``, the Triton TensorRT-LLM
backend's ``active − scheduled``); read by the rules as the queue ``waiting_capacity``."""

EVIDENCE_REQUESTS_PAUSED: Final = "requests_paused"
"""Evidence and predicted-effect key: requests the engine paused in the window (``Evaluation.requests_paused_max``)."""
