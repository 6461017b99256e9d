"""Pages for the read-path tests (issue 12), written from the engines' own metric definitions.

Triton ``vllm_backend`` ``src/utils/metrics.py`` (labels ``model``, ``version``); vLLM
``vllm/v1/metrics/ray_wrappers.py`` as Ray exports it (``ray_vllm_*``, ``ReplicaId``, vLLM PR #24267); Dynamo
``lib/runtime/src/metrics/prometheus_names.rs`` (``dynamo_component_total_blocks``,
``dynamo_component_gpu_cache_usage_percent``); DCGM exporter ``etc/default-counters.csv``.
"""

from __future__ import annotations

TRITON_TWO_MODELS = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="mistral7b",version="1"} 20
nv_inference_request_success{model="llama2",version="1"} 900
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model="mistral7b",version="1"} 2
vllm:num_requests_running{model="llama2",version="1"} 48
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model="mistral7b",version="1"} 0
vllm:num_requests_waiting{model="llama2",version="1"} 31
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model="mistral7b",version="1"} 0.05
vllm:gpu_cache_usage_perc{model="llama2",version="1"} 0.99
# HELP vllm:num_preemptions_total Number of preemption tokens processed.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model="mistral7b",version="1"} 0
vllm:num_preemptions_total{model="llama2",version="1"} 412
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model="mistral7b",version="1"} 1000
vllm:generation_tokens_total{model="llama2",version="1"} 250000
"""

_RAY = 'Component="core_worker",NodeAddress="10.1.113.171",SessionName="session_2025",Version="2.52.0"'
RAY_TWO_REPLICAS = f"""\
# HELP ray_vllm_num_requests_running Number of requests in model execution batches.
# TYPE ray_vllm_num_requests_running gauge
ray_vllm_num_requests_running{{{_RAY},ReplicaId="3r4e76ag",WorkerId="6f8b",engine="0",model_name="qwen-0.5b"}} 30
ray_vllm_num_requests_running{{{_RAY},ReplicaId="9xk2p1qd",WorkerId="a1c0",engine="0",model_name="qwen-0.5b"}} 3
# HELP ray_vllm_num_requests_waiting Number of requests waiting to be processed.
# TYPE ray_vllm_num_requests_waiting gauge
ray_vllm_num_requests_waiting{{{_RAY},ReplicaId="3r4e76ag",WorkerId="6f8b",engine="0",model_name="qwen-0.5b"}} 12
ray_vllm_num_requests_waiting{{{_RAY},ReplicaId="9xk2p1qd",WorkerId="a1c0",engine="0",model_name="qwen-0.5b"}} 0
# HELP ray_vllm_kv_cache_usage_perc KV-Cache usage. 1 means 100 percent usage.
# TYPE ray_vllm_kv_cache_usage_perc gauge
ray_vllm_kv_cache_usage_perc{{{_RAY},ReplicaId="3r4e76ag",WorkerId="6f8b",engine="0",model_name="qwen-0.5b"}} 0.9
ray_vllm_kv_cache_usage_perc{{{_RAY},ReplicaId="9xk2p1qd",WorkerId="a1c0",engine="0",model_name="qwen-0.5b"}} 0.1
# HELP ray_vllm_prompt_tokens_total Number of prefill tokens processed.
# TYPE ray_vllm_prompt_tokens_total counter
ray_vllm_prompt_tokens_total{{{_RAY},ReplicaId="3r4e76ag",WorkerId="6f8b",engine="0",model_name="qwen-0.5b"}} 5000
ray_vllm_prompt_tokens_total{{{_RAY},ReplicaId="9xk2p1qd",WorkerId="a1c0",engine="0",model_name="qwen-0.5b"}} 700
"""

DCGM = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",device="nvidia0",modelName="Tesla V100-SXM2-16GB",Hostname="h"} 97
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-1",device="nvidia0",modelName="Tesla V100-SXM2-16GB",Hostname="h"} 15000
# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 12
"""

_DYN = 'dynamo_component="backend",dynamo_namespace="dynamo",model="Qwen/Qwen3-0.6B"'
DYNAMO_WORKER = f"""\
# HELP dynamo_component_gpu_cache_usage_percent GPU cache usage as a percentage (0.0-1.0)
# TYPE dynamo_component_gpu_cache_usage_percent gauge
dynamo_component_gpu_cache_usage_percent{{{_DYN}}} 0.62
# HELP dynamo_component_total_blocks Total number of KV cache blocks available on the worker
# TYPE dynamo_component_total_blocks gauge
dynamo_component_total_blocks{{{_DYN}}} 12894
# HELP dynamo_component_uptime_seconds Total uptime of the DistributedRuntime in seconds
# TYPE dynamo_component_uptime_seconds gauge
dynamo_component_uptime_seconds{{dynamo_namespace="dynamo"}} 812.5
"""
