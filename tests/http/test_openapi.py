"""Acceptance 5: the OpenAPI document validates (openapi-spec-validator), and a property-based run of
schemathesis against the running daemon finds no 5xx — and no answer that breaks the document (status
codes, content types and bodies as declared)."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from advisor.api_models import openapi_document
from tests.http.conftest import Daemon

schemathesis = pytest.importorskip("schemathesis")
# imported here, at a shallow stack: imported lazily mid-test, pytest's assertion rewrite compiled it deep in a
# recursion and CPython 3.11.7 raised "SystemError: AST constructor recursion depth mismatch" (gh-106905)
pytest.importorskip("schemathesis.specs.openapi.schemas")
openapi_spec_validator = pytest.importorskip("openapi_spec_validator")

pytestmark = pytest.mark.integration

MAX_EXAMPLES = 25


def test_the_openapi_document_validates_and_names_every_endpoint(daemon: Daemon) -> None:
    r = requests.get(daemon.url + "/api/v1/openapi.json", timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    doc: dict[str, Any] = r.json()
    openapi_spec_validator.validate(doc)
    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) == {
        "/api/v1/deployments",
        "/api/v1/recommendations",
        "/api/v1/recommendations/{id}",
        "/api/v1/recommendations/{id}/snooze",
        "/api/v1/recommendations/{id}/ack",
        "/api/v1/plan",
        "/api/v1/openapi.json",
    }
    for name in ("PlanRequest", "SnoozeRequest", "AckRequest", "Error", "Recommendation", "PlanResponse"):
        assert name in doc["components"]["schemas"], name
    # with basic auth on, the document says so
    openapi_spec_validator.validate(openapi_document(write_needs_auth=True, basic_auth=True))


def test_schemathesis_finds_no_server_error(daemon: Daemon) -> None:
    from hypothesis import HealthCheck, given, settings
    from schemathesis.checks import not_a_server_error
    from schemathesis.generation import GenerationMode
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        negative_data_rejection,
        response_schema_conformance,
        status_code_conformance,
    )

    daemon.wait_open()
    schema = schemathesis.openapi.from_url(daemon.url + "/api/v1/openapi.json")
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.label for op in operations} >= {
        "GET /api/v1/deployments",
        "GET /api/v1/recommendations",
        "GET /api/v1/recommendations/{id}",
        "POST /api/v1/recommendations/{id}/snooze",
        "POST /api/v1/recommendations/{id}/ack",
        "POST /api/v1/plan",
    }, [op.label for op in operations]
    session = requests.Session()
    tried: dict[str, int] = {}
    runs: list[tuple[Any, GenerationMode, bool]] = []
    for op in operations:
        runs += [(op, GenerationMode.POSITIVE, False), (op, GenerationMode.NEGATIVE, False)]
        if "{id}" in op.path:  # and on a real open recommendation, not only unknown ids
            runs.append((op, GenerationMode.POSITIVE, True))

    def runner(op: Any, mode: GenerationMode, path_parameters: dict[str, Any] | None) -> Any:
        extra = [negative_data_rejection] if mode == GenerationMode.NEGATIVE else []

        @given(case=op.as_strategy(generation_mode=mode, path_parameters=path_parameters))
        @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def run(case: Any) -> None:
            response = case.call_and_validate(base_url=daemon.url, session=session, checks=checks + extra, timeout=30)
            key = f"{case.operation.label} {response.status_code}"
            tried[key] = tried.get(key, 0) + 1

        return run

    def open_id() -> dict[str, Any]:
        """The id of a recommendation open now (asked before each run on a real id: on a loaded machine the
        saturated stand-in's incident was once replaced mid-test, and the id taken at the start answered 404)."""
        return {"id": daemon.wait_open()[0]["id"]}

    for op, mode, real_id in runs:
        runner(op, mode, open_id() if real_id else None)()
    labels = {k.rsplit(" ", 1)[0] for k in tried}
    assert labels == {op.label for op in operations}, tried
    # the real id reached the write endpoints: some snooze and ack answered 200 (asked again, at most twice, on the
    # id open then, when the one a run started with was replaced during it)
    writes = [op for op in operations if op.method.upper() == "POST" and "{id}" in op.path]
    for _ in range(2):
        missing = [op for op in writes if not tried.get(f"{op.label} 200")]
        for op in missing:
            runner(op, GenerationMode.POSITIVE, open_id())()
    assert tried.get("POST /api/v1/recommendations/{id}/snooze 200") and tried.get(
        "POST /api/v1/recommendations/{id}/ack 200"
    ), sorted(tried.items())


def test_plan_answers_200_or_400_for_any_catalog_deployment_and_turn(daemon: Daemon) -> None:
    """Schemathesis draws model and GPU names at random, so nearly every plan it sends is a 400 for an
    unknown model; this property run draws them from the catalogs so the capacity pass itself is
    exercised through the API: every answer is a 200 that matches PlanResponse, or a 400 that says why."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from advisor.api_models import PlanResponse
    from advisor.capacity.hardware import gpu_keys
    from advisor.capacity.models import preset_ids
    from advisor.rules.turns import FIELD_FOR_DIAL

    values: dict[str, st.SearchStrategy[Any]] = {
        "kv_cache_dtype": st.sampled_from(["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "int3"]),
        "gpu_memory_utilization": st.floats(0.05, 1.0),
        "weight_quantization": st.sampled_from([None, "fp8", "awq", "gptq", "int8", "mxfp4", "nvfp4", "zip"]),
        "tensor_parallel_size": st.sampled_from([1, 2, 3, 4, 8, 16]),
        "max_model_len": st.integers(1, 2_000_000),
        "max_num_seqs": st.integers(1, 100_000),
        "max_num_batched_tokens": st.integers(1, 1_000_000),
        "kv_cache_memory_bytes": st.integers(1, 2**45),
    }
    turns = st.sampled_from(sorted(FIELD_FOR_DIAL)).flatmap(
        lambda dial: st.fixed_dictionaries({"dial": st.just(dial), "value": values[dial]})
    )
    deployments = st.fixed_dictionaries(
        {
            "model": st.sampled_from(preset_ids()),
            "gpu": st.sampled_from(gpu_keys()),
            "max_model_len": st.integers(16, 1_000_000),
        },
        optional={
            "tensor_parallel_size": st.sampled_from([1, 2, 4, 8]),
            "gpu_memory_utilization": st.floats(0.05, 1.0),
            "dtype": st.sampled_from(["auto", "bfloat16", "float16", "float32", "half", "fp4"]),
            "quantization": st.sampled_from([None, "fp8", "awq", "gptq"]),
            "kv_cache_dtype": st.sampled_from(["auto", "fp8"]),
            "max_num_seqs": st.integers(1, 4096),
            "max_num_batched_tokens": st.integers(1, 65536),
            "block_size": st.sampled_from([1, 8, 16, 32, 64, 128]),
            "kv_cache_memory_bytes": st.integers(2**20, 2**40),
        },
    )
    session = requests.Session()
    codes: dict[int, int] = {}

    @given(body=st.fixed_dictionaries({"deployment": deployments}, optional={"turn": turns}))
    @settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def run(body: dict[str, Any]) -> None:
        r = session.post(daemon.url + "/api/v1/plan", json=body, timeout=30)
        codes[r.status_code] = codes.get(r.status_code, 0) + 1
        assert r.status_code in (200, 400), (body, r.status_code, r.text)
        if r.status_code == 200:
            PlanResponse.model_validate(r.json())
        else:
            assert r.json()["error"], r.text

    run()
    assert codes.get(200), codes
