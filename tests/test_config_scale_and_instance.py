"""check-config: a Kubernetes Deployment scaled by two ScaledObjects, and an ``instance_type`` that is not what
the deployment's platform rents or does not carry its GPU (issue 18 follow-ups).

Expected facts from the catalogs' published rows, written out by hand: ``g5.xlarge`` has one NVIDIA A10G,
``p5.48xlarge`` eight H100 SXM (AWS's instance pages, ``advisor/data/instances.csv``); SageMaker rents the latter
as ``ml.p5.48xlarge`` (``advisor/data/managed_instances.csv``); ``a2-ultragpu-8g`` is a Compute Engine machine
type with A100 80GB GPUs, a Vertex AI ``machineType``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from advisor.config import parse_config
from advisor.errors import ConfigError

DEP: dict[str, Any] = {
    "name": "chat-8b",
    "engine": "vllm",
    "targets": ["http://127.0.0.1:8000/metrics"],
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "gpu": "H100-SXM",
    "max_model_len": 8192,
    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.95},
}


def _dep(**changes: Any) -> dict[str, Any]:
    d = copy.deepcopy(DEP)
    d.update(changes)
    return d


def _problems(*deps: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        parse_config({"deployments": list(deps)})
    except ConfigError as err:
        return list(err.problems)
    return []


# --- one Deployment, two ScaledObjects -----------------------------------------------------------------------


def test_two_deployments_scaling_the_same_kubernetes_deployment_are_refused_naming_both() -> None:
    problems = _problems(
        _dep(name="chat-a", autoscaling={"scale_target": "vllm-chat"}),
        _dep(name="chat-b", targets=["http://127.0.0.1:8001/metrics"], autoscaling={"scale_target": "vllm-chat"}),
    )
    (problem,) = problems
    path, message = problem
    assert path == "deployments[1].autoscaling.scale_target"
    assert "'chat-a'" in message and "'chat-b'" in message and "'vllm-chat'" in message


def test_a_scale_target_equal_to_another_deployments_default_name_is_refused_too() -> None:
    problems = _problems(
        _dep(name="vllm-chat", autoscaling={}), _dep(name="other", autoscaling={"scale_target": "vllm-chat"})
    )
    assert [p for p, _ in problems] == ["deployments[1].autoscaling.scale_target"]


def test_a_deployment_without_an_autoscaling_block_writes_no_scaled_object_so_no_conflict() -> None:
    """Issue 19: the ScaledObject is opt-in; a deployment without ``autoscaling:`` gets none to collide with."""
    assert _problems(_dep(name="vllm-chat"), _dep(name="other", autoscaling={"scale_target": "vllm-chat"})) == []


@pytest.mark.parametrize(
    "second",
    [
        {"autoscaling": {"scale_target": "vllm-chat", "namespace": "other"}},  # another namespace: another object
        {"autoscaling": {"scale_target": "vllm-chat"}, "platform": "systemd"},  # no ScaledObject written for it
    ],
)
def test_the_same_target_in_another_namespace_or_off_kubernetes_is_no_conflict(second: dict[str, Any]) -> None:
    first = _dep(name="chat-a", autoscaling={"scale_target": "vllm-chat"})
    assert _problems(first, _dep(name="chat-b", **second)) == []


# --- instance_type agrees with the platform and the GPU --------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"instance_type": "g5.xlarge"}, ["g5.xlarge has NVIDIA A10G GPUs", "gpu is H100-SXM"]),
        ({"instance_type": "ml.p5.48xlarge"}, ["sagemaker", "did you mean 'p5.48xlarge'"]),
        ({"instance_type": "p5.48xlarge", "platform": "sagemaker"}, ["did you mean 'ml.p5.48xlarge'"]),
        ({"instance_type": "ml.g5.xlarge", "platform": "sagemaker"}, ["NVIDIA A10G", "H100-SXM"]),
        ({"instance_type": "p5.48xlarge", "platform": "bedrock"}, ["bedrock", "remove instance_type"]),
        ({"instance_type": "p5.48xlarge", "platform": "vertex"}, ["not a vertex instance"]),
        ({"instance_type": "P5.48XLARGE"}, ["did you mean 'p5.48xlarge'"]),
    ],
)
def test_an_instance_type_that_disagrees_is_an_error_naming_the_field_and_why(
    changes: dict[str, Any], words: list[str]
) -> None:
    (problem,) = _problems(_dep(**changes))
    assert problem[0] == "deployments[0].instance_type"
    text = problem[1]
    for w in words:
        assert w in text, (w, text)


@pytest.mark.parametrize(
    "changes",
    [
        {"instance_type": "p5.48xlarge"},
        {"instance_type": "p5.48xlarge", "platform": "systemd"},
        {"instance_type": "ml.p5.48xlarge", "platform": "sagemaker"},
        {"instance_type": "a2-ultragpu-8g", "platform": "vertex", "gpu": "A100-80GB"},
        {"platform": "bedrock"},
    ],
)
def test_an_instance_type_that_agrees_passes(changes: dict[str, Any]) -> None:
    assert _problems(_dep(**changes)) == []


def test_both_are_reported_in_the_same_run_as_a_schema_error() -> None:
    problems = _problems(
        _dep(name="chat-a", instance_type="g5.xlarge", max_model_len="long", autoscaling={}),
        _dep(name="chat-b", targets=["http://127.0.0.1:8001/metrics"], autoscaling={"scale_target": "chat-a"}),
    )
    paths = [p for p, _ in problems]
    assert "deployments[0].max_model_len" in paths
    assert "deployments[0].instance_type" in paths
    assert "deployments[1].autoscaling.scale_target" in paths
