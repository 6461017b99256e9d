"""Version hints on re-exported vLLM pages: Triton's vLLM backend is named as such, never dated by the engine
label vLLM's own exporter would carry."""

from __future__ import annotations

from advisor.observe import observe

# triton-inference-server/vllm_backend src/utils/metrics.py: the scheduler gauges and the KV usage gauge, each
# labelled {"model": <model name>, "version": <model version>} (src/model.py), beside Triton's nv_inference_*
TRITON_PAGE = """\
nv_inference_request_success{model="llama",version="1"} 12
vllm:num_requests_running{model="llama",version="1"} 3
vllm:num_requests_waiting{model="llama",version="1"} 1
vllm:gpu_cache_usage_perc{model="llama",version="1"} 0.5
vllm:prompt_tokens_total{model="llama",version="1"} 100
vllm:generation_tokens_total{model="llama",version="1"} 200
"""

# vLLM's own exporter before the V1 engine label (vllm/engine/metrics.py, 0.7.x): model_name only
VLLM_07_PAGE = """\
vllm:num_requests_running{model_name="llama"} 3
vllm:num_requests_waiting{model_name="llama"} 1
vllm:gpu_cache_usage_perc{model_name="llama"} 0.5
"""


def test_a_triton_vllm_backend_page_is_hinted_as_triton_not_as_vllm_0_7() -> None:
    obs = observe(TRITON_PAGE, "vllm")
    assert obs.snapshot is not None, obs.error_message
    assert obs.snapshot.model == "llama"
    assert "Triton vLLM backend (model/version labels)" in obs.version_hints
    assert not any("no engine label" in h for h in obs.version_hints), obs.version_hints


def test_vllm_s_own_page_without_an_engine_label_keeps_its_hint() -> None:
    hints = observe(VLLM_07_PAGE, "vllm").version_hints
    assert "vLLM 0.7.x V1 or V0 (no engine label)" in hints
    assert not any("Triton" in h for h in hints)
