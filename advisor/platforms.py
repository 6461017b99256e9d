"""Platform profiles: every dial said in the words of the platform the deployment runs on (issue 18, point 2).

A deployment's ``platform:`` (config) says where its engine runs. The rules build each turn's engine flag
(:func:`advisor.engines.flags.flag_for`: Kubernetes' phrasing, the default); :func:`platform_flag` — the one place
a flag is translated — restates it in the platform's own terms, or gives ``None`` with the reason when the
platform does not offer the dial. The option names below come from each platform's documentation, cited per
profile in :data:`PROFILES` (``sources``); a test (``tests/test_platforms.py``) checks them against those pages.

==============  =====================================================================================================
platform        where the change goes
==============  =====================================================================================================
``kubernetes``  the Deployment's container ``args`` (the engine flag) and ``spec.replicas`` (``kubectl scale``) or
                the KEDA ScaledObject's ``minReplicaCount``/``maxReplicaCount`` — the flags as they were before
                profiles existed
``systemd``     the service unit's ``ExecStart=`` command line (the engine flag) and instances of a template unit
                (``name@N.service``)
``sagemaker``   the LMI container's environment (``OPTION_*``; ``OPTION_ROLLING_BATCH`` names the engine) and the
                production variant's ``InstanceType`` / ``InitialInstanceCount`` (``DesiredInstanceCount``)
``vertex``      the model's ``containerSpec.args`` and the deployed model's ``dedicatedResources``:
                ``machineSpec.machineType`` / ``acceleratorType`` / ``acceleratorCount``, ``minReplicaCount`` /
                ``maxReplicaCount``
``azure-ml``    the managed online deployment's ``environment_variables`` (the engine arguments its container's
                entry point reads), ``instance_type`` and ``instance_count``
``bedrock``     none: Bedrock serves the model itself, no engine dial, instance or replica count is the
                customer's; it is a buy option (issue 18 point 3, host-or-buy), so every flag is ``None``
==============  =====================================================================================================
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from advisor import conventions as c
from advisor.capacity.hardware import get_gpu
from advisor.capacity.managed import ManagedInstance, cheapest_managed
from advisor.engines.flags import flag_for
from advisor.errors import UnknownGPUError

KUBERNETES: Final = c.PLATFORM_KUBERNETES
PLATFORMS: Final = c.PLATFORMS
"""Values ``platform:`` accepts (:data:`advisor.conventions.PLATFORMS`); the first is the default."""

FLAG_REASON_KEY: Final = "flag_unavailable_reason"
"""Evidence key (and alternative key) holding why ``flag`` is ``None`` on the deployment's platform."""

PLATFORM_KEY: Final = "platform"
"""Evidence key naming the platform a translated flag is written for (absent on Kubernetes, the default)."""

_ENGINE_DIALS: Final = frozenset(c.DIALS) - {c.DIAL_REPLICAS, c.DIAL_INSTANCE_TYPE}


@dataclass(frozen=True, slots=True)
class PlatformProfile:
    """How one platform takes a change.

    Attributes:
        platform: the id ``platform:`` accepts.
        name: the platform as its vendor names it.
        engine_args: template for an engine flag (``{flag}``: the engine's flag as
            :func:`advisor.engines.flags.flag_for` writes it); ``None``: engine flags are translated by
            :func:`_sagemaker_env` (SageMaker) or not offered (Bedrock).
        replicas: template for a replica count (``{value}``); ``None``: not offered.
        instance: template for an instance choice (``{value}``: the GPU to move to); ``None``: not offered.
        instance_named: on a platform that rents its own instances (:data:`advisor.conventions.
            MANAGED_INSTANCE_PLATFORMS`), the instance choice naming the cheapest sourced instance (``{name}``,
            ``{what}``: its GPUs, ``{price}``: its price, region, date and source); ``None``: not such a platform.
        unavailable: why a dial the profile has no template for is not offered (``{dial}``).
        sources: the documentation pages the option names come from.
    """

    platform: str
    name: str
    engine_args: str | None
    replicas: str | None
    instance: str | None
    unavailable: str
    sources: tuple[str, ...]
    instance_named: str | None = None


PROFILES: Final[dict[str, PlatformProfile]] = {
    KUBERNETES: PlatformProfile(
        platform=KUBERNETES,
        name="Kubernetes",
        engine_args="{flag}",  # the engine flag is the container's args as flag_for writes it (unchanged)
        replicas="{flag}",
        instance="{flag}",
        unavailable="",
        sources=(
            "https://kubernetes.io/docs/concepts/workloads/controllers/deployment/",
            "https://kubernetes.io/docs/reference/kubectl/generated/kubectl_scale/",
            "https://keda.sh/docs/2.16/reference/scaledobject-spec/",
        ),
    ),
    "systemd": PlatformProfile(
        platform="systemd",
        name="systemd",
        engine_args="the unit's ExecStart= command line: {flag} (then systemctl daemon-reload and restart it)",
        replicas=(
            "run {value} instance(s) of the template unit, one per GPU set "
            "(systemctl enable --now <name>@1.service … <name>@{value}.service)"
        ),
        instance="move the unit to a host with {value} GPU(s)",
        unavailable="",
        sources=(
            "https://www.freedesktop.org/software/systemd/man/latest/systemd.service.html",
            "https://www.freedesktop.org/software/systemd/man/latest/systemd.unit.html",
        ),
    ),
    "sagemaker": PlatformProfile(
        platform="sagemaker",
        name="Amazon SageMaker AI (LMI container)",
        engine_args=None,
        replicas=(
            "production variant DesiredInstanceCount={value} (UpdateEndpointWeightsAndCapacities; "
            "InitialInstanceCount in a new endpoint config; Application Auto Scaling MinCapacity/MaxCapacity)"
        ),
        instance="production variant InstanceType: an ml.* instance with {value} GPU(s) (a new endpoint config)",
        instance_named="production variant InstanceType={name} ({what}; {price}) (a new endpoint config)",
        unavailable="",
        sources=(
            "https://docs.djl.ai/docs/serving/serving/docs/lmi/deployment_guide/configurations.html",
            "https://docs.djl.ai/docs/serving/serving/docs/lmi/user_guides/vllm_user_guide.html",
            "https://docs.aws.amazon.com/sagemaker/latest/dg/large-model-inference-configuration.html",
            "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ProductionVariant.html",
            "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DesiredWeightAndCapacity.html",
        ),
    ),
    "vertex": PlatformProfile(
        platform="vertex",
        name="Vertex AI (custom container online prediction)",
        engine_args="the model's containerSpec.args: {flag} (gcloud ai models upload --container-args, then redeploy)",
        replicas=(
            "dedicatedResources.minReplicaCount={value} with maxReplicaCount ≥ {value} "
            "(gcloud ai endpoints deploy-model --min-replica-count={value} --max-replica-count=…)"
        ),
        instance=(
            "dedicatedResources.machineSpec: machineType, acceleratorType and acceleratorCount for {value} GPU(s) "
            "(gcloud ai endpoints deploy-model --machine-type=… --accelerator=type=…,count=…)"
        ),
        instance_named=(
            "dedicatedResources.machineSpec.machineType={name} with its acceleratorType and acceleratorCount "
            "({what}; {price}) (gcloud ai endpoints deploy-model --machine-type={name} --accelerator=type=…,count=…)"
        ),
        unavailable="",
        sources=(
            "https://cloud.google.com/vertex-ai/docs/reference/rest/v1/ModelContainerSpec",
            "https://cloud.google.com/vertex-ai/docs/reference/rest/v1/DedicatedResources",
            "https://cloud.google.com/vertex-ai/docs/reference/rest/v1/MachineSpec",
            "https://cloud.google.com/sdk/gcloud/reference/ai/endpoints/deploy-model",
        ),
    ),
    "azure-ml": PlatformProfile(
        platform="azure-ml",
        name="Azure Machine Learning (managed online endpoint)",
        engine_args=(
            "the deployment's environment_variables: the engine arguments its container's entry point reads, "
            "with {flag} (az ml online-deployment update)"
        ),
        replicas="instance_count: {value} (az ml online-deployment update --set instance_count={value})",
        instance="instance_type: a managed online endpoint SKU with {value} GPU(s) (a new deployment)",
        instance_named="instance_type: {name} ({what}; {price}) (a new deployment)",
        unavailable="",
        sources=(
            "https://learn.microsoft.com/en-us/azure/machine-learning/reference-yaml-deployment-managed-online",
            "https://learn.microsoft.com/en-us/azure/machine-learning/reference-managed-online-endpoints-vm-sku-list",
        ),
    ),
    "bedrock": PlatformProfile(
        platform="bedrock",
        name="Amazon Bedrock",
        engine_args=None,
        replicas=None,
        instance=None,
        unavailable=(
            "Amazon Bedrock serves the model itself: {dial} is not the customer's to set (no engine, instance or "
            "replica count; throughput is bought as on-demand tokens or Provisioned Throughput model units): "
            "a buy option, not a configuration to tune"
        ),
        sources=(
            "https://docs.aws.amazon.com/bedrock/latest/userguide/what-is-bedrock.html",
            "https://docs.aws.amazon.com/bedrock/latest/userguide/prov-throughput.html",
        ),
    ),
}

# SageMaker LMI: the vLLM argument → the LMI option's environment variable. LMI names four of them itself
# (configurations.md "LMI Common Configurations": option.max_rolling_batch_size, option.tensor_parallel_degree;
# vllm_user_guide.md: option.quantize, option.max_rolling_batch_prefill_tokens); every other vLLM EngineArgs key
# passes through as OPTION_<KEY> (vllm_user_guide.md "Pass-Through").
_LMI_NAMED: Final[dict[str, str]] = {
    "--max-num-seqs": "OPTION_MAX_ROLLING_BATCH_SIZE",
    "--tensor-parallel-size": "OPTION_TENSOR_PARALLEL_DEGREE",
    "--quantization": "OPTION_QUANTIZE",
    "--max-num-batched-tokens": "OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS",
}
_LMI_ENGINES: Final[dict[str, str]] = {"vllm": "vllm"}
"""Engine id → its ``OPTION_ROLLING_BATCH`` value in the LMI container (configurations.md, "Inference Library
Configuration": vllm, lmi-dist, trtllm). TensorRT-LLM's LMI options are not mapped here: its dials say so."""


def _sagemaker_env(engine: str, engine_flag: str) -> tuple[str | None, str | None]:
    """The LMI environment options for a vLLM flag (``--max-num-seqs 64`` → ``OPTION_MAX_ROLLING_BATCH_SIZE=64``),
    or ``(None, reason)`` when the engine is not an LMI backend mapped here or the flag is not plain arguments."""
    rolling = _LMI_ENGINES.get(engine)
    if rolling is None:
        return None, (
            f"the SageMaker LMI container runs vLLM, lmi-dist or TensorRT-LLM (OPTION_ROLLING_BATCH); the advisor "
            f"maps LMI options for vLLM only, so it has no LMI option for this {engine} change ({engine_flag})"
        )
    try:
        tokens = shlex.split(engine_flag)
    except ValueError:
        tokens = []
    pairs: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("--"):
            return None, f"the change is not an engine argument LMI can pass through ({engine_flag})"
        name = _LMI_NAMED.get(tok, "OPTION_" + tok[2:].replace("-", "_").upper())
        if i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            value = tokens[i + 1]
            i += 2
        else:
            value = "true"  # a vLLM boolean switch (--enable-prefix-caching) is OPTION_<KEY>=true in LMI
            i += 1
        pairs.append(f"{name}={shlex.quote(value)}")
    if not pairs:
        return None, f"the change is not an engine argument LMI can pass through ({engine_flag})"
    return f"LMI container environment (OPTION_ROLLING_BATCH={rolling}): {' '.join(pairs)}", None


def instance_choice(platform: str, value: Any, gpu_count: int | None = None) -> ManagedInstance | None:
    """The cheapest instance ``platform`` rents, at its own sourced price (:func:`advisor.capacity.managed.
    cheapest_managed`), for an instance turn to ``value`` — a GPU name (``"L4"``; any catalog name or alias) or a
    GPU count — with ``gpu_count`` GPUs when given; ``None`` when the platform rents no instances of its own, the
    GPU is not in the catalog or no sourced price matches (the price is unknown: never the raw VM's, never 0)."""
    if platform not in c.MANAGED_INSTANCE_PLATFORMS:
        return None
    gpu_key: str | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        gpu_count = value if gpu_count is None else gpu_count
    else:
        try:
            gpu_key = get_gpu(str(value)).key
        except UnknownGPUError:
            return None
    return cheapest_managed(platform, gpu_count=gpu_count, gpu_key=gpu_key)


def _instance_text(platform: str, value: Any, gpu_count: int | None) -> str:
    """The instance turn in ``platform``'s terms: the cheapest sourced instance with its price and source, or the
    profile's generic wording with ``price unknown`` when none is sourced (a platform renting its own
    instances)."""
    profile = PROFILES[platform]
    assert profile.instance is not None
    what = f"{gpu_count} {value}" if gpu_count is not None and not isinstance(value, int) else value
    if profile.instance_named is None:
        return profile.instance.format(value=what)
    choice = instance_choice(platform, value, gpu_count)
    if choice is None:
        return profile.instance.format(value=what) + (
            f"; price unknown: no sourced {profile.name} price for such an instance "
            "(advisor/data/managed_instances.csv)"
        )
    raw = choice.raw
    return profile.instance_named.format(
        name=choice.name,
        what=f"{raw.whole_gpus} × {raw.gpu_model}",
        price=(
            f"{choice.price_usd_per_hour:g} USD/h on demand in {choice.region} as of {choice.price_as_of}, "
            f"source {choice.price_source}"
        ),
    )


def keda_replicas_text(value: int, target: str, namespace: str | None, min_replicas: int, max_replicas: int) -> str:
    """A replica turn for a Kubernetes deployment whose replica count KEDA sets (an ``autoscaling:`` block: the
    ScaledObject ``capacity-advisor rules generate`` writes follows ``advisor_desired_replicas``, :mod:`advisor.
    manifests`). A ``kubectl scale`` there is undone by the HPA at its next sync (15 s by default,
    https://kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/), so the turn says what sets
    the count: KEDA, within ``[min_replicas, max_replicas]`` (``minReplicaCount``/``maxReplicaCount``,
    https://keda.sh/docs/2.16/reference/scaledobject-spec/), at this count or the lead's higher one
    (:class:`advisor.signals.ReplicaLead`); a count outside them is the bound to move, in the advisor config's
    key. ``kubectl scale`` stays for a cluster where the ScaledObject was not applied.

    ``value``: the advised replica count; ``target``/``namespace``: ``scaleTargetRef.name`` and the namespace
    (``None``: the one ``kubectl`` uses). Returns one line.
    """
    ns = f" -n {namespace}" if namespace else ""
    dep = f"deployment/{target}"
    if value > max_replicas:
        return (
            f"raise autoscaling.max_replica_count (the ScaledObject's maxReplicaCount) from {max_replicas} to "
            f"{value} and re-apply `capacity-advisor rules generate`'s ScaledObject: KEDA holds {dep} at "
            f"{max_replicas}"
        )
    if value < min_replicas:
        return (
            f"lower autoscaling.min_replica_count (the ScaledObject's minReplicaCount) from {min_replicas} to "
            f"{value} and re-apply `capacity-advisor rules generate`'s ScaledObject: KEDA holds {dep} at "
            f"{min_replicas}"
        )
    return (
        f"KEDA scales {dep} to {value} or more (its ScaledObject follows {c.DESIRED_REPLICAS}: this count, or the "
        f"arrival trend's when higher); where the ScaledObject is not applied: kubectl{ns} scale {dep} "
        f"--replicas={value}"
    )


def platform_flag(
    platform: str, engine: str, dial: str, value: Any, engine_flag: str, *, gpu_count: int | None = None
) -> tuple[str | None, str | None]:
    """``(flag, None)``: the change in ``platform``'s own terms; ``(None, reason)``: the platform does not offer it.

    ``engine_flag`` is the flag the rule built for ``engine`` (Kubernetes' phrasing); ``value`` the turn's
    suggested value (a replica count for ``replicas``, what to move to for ``instance_type``: a GPU name, with
    ``gpu_count`` GPUs per instance when known). On a platform that rents its own instances, an instance turn names
    the cheapest instance it sells with those GPUs, at the platform's own sourced price (:func:`instance_choice`),
    or says the price is unknown — never the raw VM's price. A replica or
    instance flag the rule wrapped in words of its own (``add one dedicated long-context replica …; scale to 3``)
    keeps them, with the Kubernetes phrase replaced by the platform's. Dials outside :data:`advisor.conventions.DIALS`
    (an engine restart, an advisor config field) keep their flag on every platform but Bedrock.

    Raises:
        KeyError: ``platform`` is not in :data:`PLATFORMS` (config validation refuses it first).
    """
    profile = PROFILES[platform]
    if platform == KUBERNETES:
        return engine_flag, None
    reason_none = profile.unavailable.format(dial=dial)
    if dial == c.DIAL_REPLICAS or dial == c.DIAL_INSTANCE_TYPE:
        template = profile.replicas if dial == c.DIAL_REPLICAS else profile.instance
        if template is None:
            return None, reason_none
        k8s = flag_for(engine, dial, value)
        if dial == c.DIAL_INSTANCE_TYPE:
            said = _instance_text(platform, value, gpu_count)
        else:
            said = template.format(value=value, flag=engine_flag)
        return (engine_flag.replace(k8s, said) if k8s in engine_flag else said), None
    if dial in _ENGINE_DIALS:
        return engine_args_in_terms(platform, engine, engine_flag, dial)
    if profile.engine_args is None and platform != "sagemaker":
        return None, reason_none
    return engine_flag, None


def engine_args_in_terms(platform: str, engine: str, engine_flag: str, what: str) -> tuple[str | None, str | None]:
    """An engine argument (``--num-gpu-blocks-override 512``) as ``platform`` passes it to the engine: the LMI
    environment on SageMaker (:func:`_sagemaker_env`), the profile's container-arguments wording elsewhere, the flag
    itself on Kubernetes; ``(None, reason)`` naming ``what`` where the platform takes no engine arguments (Bedrock).

    Raises:
        KeyError: ``platform`` is not in :data:`PLATFORMS`.
    """
    profile = PROFILES[platform]
    if platform == KUBERNETES:
        return engine_flag, None
    if platform == "sagemaker":
        return _sagemaker_env(engine, engine_flag)
    if profile.engine_args is None:
        return None, profile.unavailable.format(dial=what)
    return profile.engine_args.format(flag=engine_flag), None


def flag_text(flag: str | None, evidence: Mapping[str, Any]) -> str:
    """A flag for a human reader: the flag, or ``not offered: <reason>`` when the platform has none."""
    if flag is not None:
        return flag
    return f"not offered: {evidence.get(FLAG_REASON_KEY) or 'the platform has no setting for this dial'}"


def configuration_in_terms(
    platform: str, engine: str, settings: list[tuple[str, Any]], *, gpu_count: int | None = None
) -> list[dict[str, Any]]:
    """A configuration (``plan``'s) as ``platform`` takes it: one row per ``(dial, value)`` with ``dial``,
    ``value``, ``flag`` (:func:`platform_flag` on the engine's flag, :func:`advisor.engines.flags.flag_for`) and,
    when the platform does not offer the dial, :data:`FLAG_REASON_KEY` with ``flag`` ``None``. An
    ``instance_type`` row (``value``: the GPU, ``gpu_count`` of them per instance) on a platform that rents its own
    instances also carries ``instance``, ``price_usd_per_hour`` (``None``: unknown), ``price_region``,
    ``price_as_of`` and ``price_source`` of the cheapest sourced one (:func:`instance_choice`), all ``None`` when
    none is sourced.

    Raises:
        KeyError: an unknown platform or dial.
    """
    rows: list[dict[str, Any]] = []
    for dial, value in settings:
        flag, reason = platform_flag(platform, engine, dial, value, flag_for(engine, dial, value), gpu_count=gpu_count)
        row: dict[str, Any] = {"dial": dial, "value": value, "flag": flag}
        if flag is None:
            row[FLAG_REASON_KEY] = reason
        if dial == c.DIAL_INSTANCE_TYPE and platform in c.MANAGED_INSTANCE_PLATFORMS:
            choice = instance_choice(platform, value, gpu_count)
            row.update(
                instance=None if choice is None else choice.name,
                price_usd_per_hour=None if choice is None else choice.price_usd_per_hour,
                price_region=None if choice is None else choice.region,
                price_as_of=None if choice is None else choice.price_as_of,
                price_source=None if choice is None else choice.price_source,
            )
        rows.append(row)
    return rows
