"""detect_engine: family prefixes → engine id (catalog §10)."""

from __future__ import annotations

import pytest

from advisor.engines import ENGINES, detect_engine, get_adapter


@pytest.mark.parametrize(
    ("names", "engine"),
    [
        (["vllm:num_requests_running", "process_start_time_seconds"], "vllm"),
        (["sglang:token_usage"], "sglang"),
        (["sglang_token_usage"], "sglang"),
        (["tgi_queue_size", "tgi_request_success_total"], "tgi"),
        (["nv_trt_llm_request_metrics", "nv_inference_count"], "triton-trtllm"),
        (["trtllm_request_success_total", "dynamo_component_uptime_seconds"], "trtllm"),
        (["llamacpp:requests_processing"], "llamacpp"),
        (["dynamo_frontend_inflight_requests"], "dynamo"),
        (["dynamo_frontend_inflight_requests", "vllm:num_requests_running"], "vllm"),
        (["DCGM_FI_DEV_FB_USED"], "dcgm"),
        (["python_gc_objects_collected_total"], None),
        ([], None),
    ],
)
def test_an_exposition_names_its_engine_by_prefix(names: list[str], engine: str | None) -> None:
    assert detect_engine(names) == engine
    assert detect_engine({n: [] for n in names}) == engine


def test_every_detected_engine_but_dcgm_has_an_adapter() -> None:
    assert set(ENGINES) == {"vllm", "sglang", "tgi", "triton-trtllm", "trtllm", "llamacpp", "dynamo"}
    for engine in ENGINES:
        assert get_adapter(engine).engine == engine
    with pytest.raises(ValueError, match="known engines"):
        get_adapter("auto")


def test_detection_writes_no_engine_prefix_of_its_own_it_reads_the_catalog() -> None:
    """The prefixes are written once, in the catalog entries: detect.py holds none of them (on the branch head it
    kept its own PREFIXES table)."""
    import ast
    from pathlib import Path

    from advisor.engines import catalog, detect

    tree = ast.parse(Path(detect.__file__).read_text(encoding="utf-8"))
    literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not literals & catalog.all_prefixes()
    assert detect.prefixes()[: len(catalog.entries())] == catalog.detection_prefixes()
    for engine, prefixes in catalog.detection_prefixes():
        for prefix in prefixes:
            assert detect_engine([prefix + "x"]) == engine
