"""The config turned into what the tracker evaluates: rules, deployment contexts, target lists, shards.

Reads files (``file_sd``, model configs through the config module) but holds no state and starts nothing, so
the daemon (:mod:`advisor.service`) and ``backtest`` (:mod:`advisor.backtest`) build the same deployments from
the same config.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from pathlib import Path

from advisor.capacity.deployment import resolve_deployment
from advisor.capacity.models import ModelArch
from advisor.config import Config, Deployment, deployment_spec, file_sd_targets
from advisor.errors import CapacityError
from advisor.manifests import autoscaling_settings, scale_target_problem
from advisor.rules.base import DeploymentContext, KedaScaling, Rule, SLOTargets
from advisor.rules.registry import builtin_rules, load_plugins

log = logging.getLogger(__name__)


def build_rules(cfg: Config) -> list[Rule]:
    """The built-in rules with thresholds from the config, then the plugins (broken ones skipped)."""
    rules = builtin_rules(cfg.rules, cfg.data_quality.capacity_model_error_bound)
    plugins, _ = load_plugins(cfg.rules.plugins)
    return rules + plugins


def deployment_context(
    dep: Deployment, base_dir: Path | None = None, engine: str | None = None, model: ModelArch | None = None
) -> DeploymentContext:
    """Map a configured deployment to the rules' context through the one resolver
    (:func:`advisor.config.deployment_spec` → :func:`advisor.capacity.deployment.resolve_deployment`, which
    ``plan``, the API, ``simulate`` and the search use): the GPU as they identify it and the capacity pass
    under the deployment's own engine's accounting, so an SGLang, TGI, TensorRT-LLM or llama.cpp deployment
    is never sized as vLLM. ``engine``: the detected engine of an ``engine: auto`` deployment; ``model``: the
    architecture already resolved.

    Raises:
        CapacityError: the model or GPU cannot be resolved, or the weights do not fit.
    """
    resolved = resolve_deployment(deployment_spec(dep, base_dir, engine=engine, model=model))
    return DeploymentContext(
        name=dep.name,
        engine=engine or dep.engine,
        slo=SLOTargets(dep.slo.ttft_seconds, dep.slo.tpot_seconds, dep.slo.target_ratio),
        inputs=resolved.inputs,
        capacity=resolved.result,
        gpu=resolved.gpu.part,
        replicas=len(dep.targets),
        speculative_decoding=dep.speculative_decoding,
        platform=dep.platform,
        instance_type=dep.instance_type,
        model=dep.model,
        served_model=dep.served_model,
        scaled_by_keda=_keda(dep),
        max_num_seqs_stated=dep.max_num_seqs is not None or dep.parallel is not None,
    )


def _keda(dep: Deployment) -> KedaScaling | None:
    """What KEDA scales for ``dep``: its ``autoscaling:`` block as ``rules generate`` resolves it
    (:func:`advisor.manifests.autoscaling_settings`), when a ScaledObject is written for it; ``None`` without the
    block, or where none is written (not Kubernetes, or a scale target that is no Kubernetes name or too long:
    :func:`advisor.manifests.scale_target_problem`), so no advice names a ScaledObject that cannot exist."""
    a = autoscaling_settings(dep)
    if a is None or scale_target_problem(a) is not None:
        return None
    return KedaScaling(a.scale_target, a.namespace, a.min_replicas, a.max_replicas)


def sized_for_engine(ctx: DeploymentContext, dep: Deployment, engine: str) -> DeploymentContext:
    """``ctx`` once ``engine: auto`` has been detected as ``engine``: re-sized with that engine's accounting
    (replica count kept). A deployment that engine cannot run keeps its size, with the engine set and a
    warning logged."""
    try:
        sized = deployment_context(dep, engine=engine, model=ctx.inputs.model)
    except CapacityError as exc:
        log.warning("deployment=%s: cannot size it as %s (%s); keeping the configured size", dep.name, engine, exc)
        return dataclasses.replace(ctx, engine=engine)
    return dataclasses.replace(sized, replicas=ctx.replicas)


def in_shard(name: str, shard: tuple[int, int]) -> bool:
    """Whether deployment ``name`` belongs to shard ``(i, n)``: a stable hash (the first 8 bytes of
    SHA-256) modulo ``n`` equals ``i``, as Prometheus's ``hashmod`` relabel action splits targets."""
    i, n = shard
    if n <= 1:
        return True
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big") % n == i


def _sd_path(path: str, base_dir: Path | None) -> Path:
    p = Path(path)
    return base_dir / p if base_dir is not None and not p.is_absolute() else p


def sd_mtimes(cfg: Config, base_dir: Path | None) -> dict[str, float]:
    """Modification time of every ``file_sd`` file (missing files count as 0)."""
    out: dict[str, float] = {}
    for d in cfg.deployments:
        for f in d.file_sd:
            p = _sd_path(f, base_dir)
            try:
                out[str(p)] = p.stat().st_mtime
            except OSError:
                out[str(p)] = 0.0
    return out


def resolve_targets(dep: Deployment, base_dir: Path | None, duplicates: list[str] | None = None) -> list[str]:
    """The deployment's scrape URLs: ``targets`` plus every target of its ``file_sd`` files
    (:func:`advisor.config.file_sd_targets`; relative paths from ``base_dir``), each page once: a discovered target
    that is one already listed written another way (:func:`advisor.redact.endpoint_key`: ``host:8000`` beside
    ``…/metrics/``) is left out with a warning naming both, as the config refuses two such ``targets`` — one engine
    listed twice would count as two replicas (breaker 16). With ``duplicates`` given, each such warning is appended
    to it instead of logged (``check-config`` prints them).

    Raises:
        ConfigError: a file_sd file is unreadable or malformed (naming the file and the entry).
    """
    from advisor.redact import endpoint_key, redact_url

    urls = list(dep.targets)
    keys = {endpoint_key(u): u for u in urls}
    for f in dep.file_sd:
        for url in file_sd_targets(_sd_path(f, base_dir), dep.metrics_path):
            first = keys.setdefault(endpoint_key(url), url)
            if first == url and url not in urls:
                urls.append(url)
            elif first != url:
                said = f"file_sd target {redact_url(url)} is the same page as {redact_url(first)}: listed once"
                if duplicates is None:
                    log.warning("deployment=%s: %s", dep.name, said)
                else:
                    duplicates.append(f"deployment {dep.name!r}: {said}")
    return urls
