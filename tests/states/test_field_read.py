"""Field states for issue 12, classes 1 and 2: what one scrape says, read right.

Class 1 — labels the adapter did not know were merged as if they were duplicate processes (Triton's vLLM
backend ``model``/``version``; Ray Serve's ``ReplicaId``; a ``served_model`` matching nothing).
Class 2 — wrapper prefixes and renamed names were missed (Ray's ``ray_vllm_*``, Dynamo worker
``dynamo_component_*`` KV gauges, vLLM's ``gpu_cache_usage_perc`` → ``kv_cache_usage_perc``), and a page with no
engine family was a ``parse_error`` instead of ``unrecognized`` naming its prefixes.

Each page is rendered as that engine version exposes it, from the engines' own source:

* Triton ``vllm_backend`` (r24.08 → r25.0x, vLLM V0 stat logger): ``src/utils/metrics.py`` registers
  ``vllm:num_requests_running``/``waiting``, ``vllm:gpu_cache_usage_perc``, ``vllm:prompt_tokens_total``,
  ``vllm:generation_tokens_total``, ``vllm:num_preemptions_total`` and the latency histograms with the labels
  ``src/model.py`` passes, ``{"model": <model name>, "version": <model version>}``; Triton core adds
  ``nv_inference_*{model,version}``. No ``cache_config_info``, no ``request_success``, no ``_created``.
* Ray Serve LLM (Ray 2.52, vLLM 0.11 V1): ``vllm/v1/metrics/ray_wrappers.py`` re-registers vLLM's families in
  ``ray.util.metrics`` (names sanitized to ``[a-zA-Z0-9_]``, tag ``ReplicaId`` from vLLM PR #24267); Ray's
  exporter prefixes ``ray_`` and adds ``Component``, ``NodeAddress``, ``SessionName``, ``Version``, ``WorkerId``.
  Ray ≤ 2.46 exported the unsanitized ``ray_vllm:`` spelling (ray-project/ray PR #52719).
* Dynamo worker (≥ 0.9): ``lib/runtime/src/metrics/prometheus_names.rs`` ``kvstats::{TOTAL_BLOCKS,
  GPU_CACHE_USAGE_PERCENT}`` under the ``dynamo_component`` prefix (PR #5817; the ``kvstats_`` infix of PR #2704
  removed by PR #5704), labels ``dynamo_component``, ``dynamo_namespace``.
* DCGM exporter: ``etc/default-counters.csv`` (``DCGM_FI_DEV_*``, labels ``gpu``, ``UUID``, ``device``,
  ``modelName``, ``Hostname``).
* vLLM 0.8 V1 (``vllm:gpu_cache_usage_perc``, renamed ``vllm:kv_cache_usage_perc`` in 0.9, PR #18354) and 0.11.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from tests.states import VLLMEngine, go_float
from tests.states.field import FieldState, FieldStateRuns, check_field_state, run_field_states

SLO = {"ttft_seconds": 2.0, "tpot_seconds": 0.1, "target_ratio": 0.95}
KV_ADVICE = [("gpu_memory_utilization", "increase"), ("kv_cache_dtype", None), ("max_num_seqs", "decrease")]
"""Advice that answers a KV pool too small for the load: never right for a model that is idle."""

# --- page surgery: an engine's page as a wrapper re-exports it ---------------------------------------------

_SAMPLE = re.compile(r"^([^\s{]+)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')

Rename = Callable[[str], str | None]
Relabel = Callable[[dict[str, str]], dict[str, str]]


def reexport(text: str, rename: Rename, relabel: Relabel) -> list[tuple[str, list[str]]]:
    """The page's families, renamed (``None`` drops one) and relabelled, in page order:
    ``[(family, [# HELP, # TYPE, samples…])]``."""
    out: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, name, rest = line[2:6], line.split(" ")[2], line.split(" ", 3)[3:]
            new = rename(name)
            if kind == "HELP":
                current = None
                if new is not None:
                    current = []
                    out.append((new, current))
            if current is not None and new is not None:
                current.append(" ".join([f"# {kind}", new, *rest]))
            continue
        m = _SAMPLE.match(line)
        if not m or current is None:
            continue
        name = rename(m.group(1))
        if name is None:
            continue
        labels = relabel(dict(_LABEL.findall(m.group(2) or "")))
        inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
        current.append(f"{name}{{{inner}}} {m.group(3)}" if inner else f"{name} {m.group(3)}")
    return out


def merge(*pages: list[tuple[str, list[str]]]) -> str:
    """One page from several re-exported ones: each family once, its samples from every page in order."""
    order: list[str] = []
    head: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for page in pages:
        for name, lines in page:
            if name not in head:
                order.append(name)
                head[name] = [x for x in lines if x.startswith("#")]
                samples[name] = []
            samples[name].extend(x for x in lines if not x.startswith("#"))
    return "\n".join(line for n in order for line in [*head[n], *samples[n]]) + "\n"


# --- Triton vllm_backend --------------------------------------------------------------------------------------

_TRITON_FAMILIES = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:gpu_cache_usage_perc",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:num_preemptions",
    "vllm:iteration_tokens_total",
    "vllm:time_to_first_token_seconds",
    "vllm:time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_inference_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:request_params_n",
}


def _triton_name(name: str) -> str | None:
    name = name.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    if name.endswith("_created"):
        return None
    base = re.sub(r"(_bucket|_count|_sum|_total)$", "", name)
    if name in _TRITON_FAMILIES or base in _TRITON_FAMILIES:
        return name
    return name if name == "vllm:iteration_tokens_total" or name.startswith("vllm:iteration_tokens_total_") else None


def triton_page(engines: Mapping[str, VLLMEngine], success: Mapping[str, int]) -> str:
    """Triton (vllm_backend) serving several models, each its own vLLM engine, ``version="1"``."""
    pages = []
    for model, eng in engines.items():

        def relabel(labels: dict[str, str], model: str = model) -> dict[str, str]:
            rest = {k: v for k, v in labels.items() if k not in ("engine", "model_name")}
            return {"model": model, "version": "1", **rest}

        pages.append(reexport(eng.render(), _triton_name, relabel))
    core = [
        (
            "nv_inference_request_success",
            [
                "# HELP nv_inference_request_success Number of successful inference requests, all batch sizes",
                "# TYPE nv_inference_request_success counter",
                *(f'nv_inference_request_success{{model="{m}",version="1"}} {n}' for m, n in success.items()),
            ],
        )
    ]
    return merge(core, *pages)


def _engine(model: str, blocks: int, max_len: int, util: float, version: str = "0.11") -> VLLMEngine:
    return VLLMEngine(
        model_name=model, num_gpu_blocks=blocks, max_model_len=max_len, gpu_memory_utilization=util, version=version
    )


def triton_two_models(served: str) -> FieldState:
    """triton-inference-server/server#7583: one Triton serving ``mistral7b`` and ``llama2`` with the vLLM
    backend. Here mistral7b is nearly idle (2 running, KV 5 %) while llama2 is saturated (48 running, 31
    waiting, KV 99 %, preempting)."""
    mistral = _engine("mistral7b", 9000, 32768, 0.45)
    llama = _engine("llama2", 2400, 4096, 0.45)
    mistral.finish(20, prompt=400, output=120, ttft=0.12, tpot=0.02, queue=0.01)
    mistral.first_tokens([0.12] * 20)
    mistral.prefill(20 * 400)
    mistral.decode(20 * 120, 0.02, steps=2400, batch=2)
    llama.finish(900, prompt=1500, output=300, ttft=4.0, tpot=0.09, queue=3.0)
    llama.first_tokens([4.0] * 900)
    llama.prefill(900 * 1500)
    llama.decode(900 * 300, 0.09, steps=6000, batch=45)
    llama.preempt(400)
    mistral.running, mistral.waiting, mistral.kv_usage = 2, 0, 0.05
    llama.running, llama.waiting, llama.kv_usage = 48, 31, 0.99
    first = triton_page({"mistral7b": mistral, "llama2": llama}, {"mistral7b": 20, "llama2": 900})
    mistral.finish(1, prompt=400, output=120, ttft=0.12, tpot=0.02, queue=0.01)
    mistral.first_tokens([0.12])
    mistral.prefill(400)
    mistral.decode(130, 0.02, steps=65, batch=2)
    llama.finish(3, prompt=1500, output=300, ttft=6.0, tpot=0.1, queue=5.0)
    llama.first_tokens([6.0, 6.5, 7.0])
    llama.prefill(3 * 1500)
    llama.decode(500, 0.1, steps=11, batch=46)
    llama.preempt(12)
    llama.running, llama.waiting, llama.kv_usage = 48, 33, 0.995
    second = triton_page({"mistral7b": mistral, "llama2": llama}, {"mistral7b": 21, "llama2": 903})
    chosen, other = ("mistral7b", "llama2") if served == "mistral7b" else ("llama2", "mistral7b")
    is_mistral = served == "mistral7b"
    return FieldState(
        id=f"triton-vllm-two-models-{served}",
        source="https://github.com/triton-inference-server/server/issues/7583",
        engine_version="Triton 24.08 vllm_backend (vLLM 0.5.x V0 stat logger)",
        deployment={
            "name": f"triton-{served}",
            "engine": "auto",
            "served_model": served,
            "model": "mistralai/Mistral-7B-v0.1" if is_mistral else "meta-llama/Llama-2-7b-hf",
            "gpu": "a100-80gb",
            "gpu_memory_utilization": 0.45,
            "max_model_len": 32768 if is_mistral else 4096,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={
            "model": chosen,
            "requests_running": 2 if is_mistral else 48,
            "requests_waiting": 0 if is_mistral else 33,
            "kv_cache_usage_ratio": 0.05 if is_mistral else 0.995,
            "preemptions_total": 0 if is_mistral else 412,
            "generation_tokens_total": (20 * 120 + 130) if is_mistral else (900 * 300 + 500),
        },
        named=[f'model=\\"{other}\\" (ignored)'],
        must_never=KV_ADVICE if is_mistral else [],
    )


# --- Ray Serve LLM ----------------------------------------------------------------------------------------------

_RAY_COMMON = {
    "Component": "core_worker",
    "NodeAddress": "10.1.113.171",
    "SessionName": "session_2025-12-01_11-05-34_460418_3579",
    "Version": "2.52.0",
}


def ray_page(replicas: Mapping[str, VLLMEngine], *, sanitized: bool = True, replica_tag: bool = True) -> str:
    """Ray's metrics export port with each Serve replica's vLLM re-exported (no ``_created``, no process_*)."""

    def rename(name: str) -> str | None:
        if not name.startswith("vllm:") or name.endswith("_created"):
            return None
        return "ray_" + (name.replace(":", "_") if sanitized else name)

    pages = []
    for i, (rid, eng) in enumerate(replicas.items()):

        def relabel(labels: dict[str, str], rid: str = rid, i: int = i) -> dict[str, str]:
            tags = {**_RAY_COMMON, "WorkerId": f"6f8b9bc4ba0fda1ef6769ce2621{i:02d}"}
            if replica_tag:
                tags["ReplicaId"] = rid
            return {**tags, **labels}

        pages.append(reexport(eng.render(), rename, relabel))
    ray_own = [
        (
            "ray_node_cpu_utilization",
            [
                "# HELP ray_node_cpu_utilization Total CPU usage on a ray node",
                "# TYPE ray_node_cpu_utilization gauge",
                'ray_node_cpu_utilization{InstanceId="i-1",NodeAddress="10.1.113.171",SessionName="s"} 23.5',
            ],
        )
    ]
    return merge(ray_own, *pages)


def ray_two_replicas(*, sanitized: bool = True) -> FieldState:
    """vllm-project/vllm PR #24267: a Ray Serve LLM app with two replicas of qwen-0.5b; Ray's endpoint carries
    both replicas' ``ray_vllm_*`` series, told apart only by ``ReplicaId``. One replica is hot (KV 90 %, 12
    waiting), the other nearly idle (KV 10 %): a routing imbalance, never one saturated pool."""
    hot, idle = (_engine("qwen-0.5b", 50000, 8192, 0.9) for _ in range(2))
    for eng, n, running in ((hot, 300, 30), (idle, 40, 3)):
        eng.finish(n, prompt=500, output=200, ttft=0.3, tpot=0.02, queue=0.05)
        eng.first_tokens([0.3] * n)
        eng.prefill(n * 500)
        eng.decode(n * 200, 0.02, steps=4000, batch=running)
    hot.running, hot.waiting, hot.kv_usage = 30, 12, 0.9
    idle.running, idle.waiting, idle.kv_usage = 3, 0, 0.1
    first = ray_page({"3r4e76ag": hot, "9xk2p1qd": idle}, sanitized=sanitized)
    for eng, n in ((hot, 4), (idle, 1)):
        eng.finish(n, prompt=500, output=200, ttft=0.3, tpot=0.02, queue=0.05)
        eng.first_tokens([0.3] * n)
        eng.prefill(n * 500)
        eng.decode(n * 200, 0.02, steps=50, batch=4)
    hot.running, hot.waiting, hot.kv_usage = 31, 12, 0.92
    second = ray_page({"3r4e76ag": hot, "9xk2p1qd": idle}, sanitized=sanitized)
    return FieldState(
        id="ray-serve-two-replicas" + ("" if sanitized else "-unsanitized"),
        source="https://github.com/vllm-project/vllm/pull/24267"
        if sanitized
        else "https://github.com/ray-project/ray/pull/52719",
        engine_version="Ray 2.52 Serve LLM, vLLM 0.11 V1" if sanitized else "Ray 2.46 Serve LLM, vLLM 0.8 V1",
        deployment={
            "name": "qwen-0.5b-serve",
            "engine": "auto",
            "model": "Qwen/Qwen2.5-0.5B",
            "gpu": "a10g",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8192,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={
            "model": "qwen-0.5b",
            "requests_running": 34,  # 31 + 3: summed, never the max of the two replicas' gauges
            "requests_waiting": 12,
            "kv_cache_capacity_tokens": 2 * 50000 * 16,
            "kv_cache_usage_ratio": (0.92 + 0.1) / 2,  # equal pools: the mean, never the hot replica's 0.92
            "prompt_tokens_total": 345 * 500,
            "replicas": 2,  # one target, two engines behind it
            "replicas_up": 2,
        },
        named=["ReplicaId=3r4e76ag", "ReplicaId=9xk2p1qd"],
        must_never=[("gpu_memory_utilization", "increase"), ("kv_cache_dtype", None)],
        extra_check=_replicas_listed({"ReplicaId=3r4e76ag": 0.92, "ReplicaId=9xk2p1qd": 0.1}),
    )


def _replicas_listed(usage: Mapping[str, float]) -> Callable[[dict[str, Any]], None]:
    def check(result: dict[str, Any]) -> None:
        # the ceiling counts each replica's own pool once: 2 × 800,000 tokens at 8,192 per sequence
        assert result["concurrency_ceiling"] == pytest.approx(2 * 50000 * 16 / 8192, rel=0.01)
        ranks = {r["rank"]: r for r in result["snapshot"]["ranks"]}
        for rank, value in usage.items():
            assert rank in ranks, f"replica {rank} not listed: {list(ranks)}"
            assert ranks[rank]["kv_cache_usage_ratio"] == pytest.approx(value), ranks[rank]

    return check


# --- served_model matching nothing ----------------------------------------------------------------------------


def served_model_not_found() -> FieldState:
    """vllm-project/vllm PR #2987: vLLM labels its metrics with ``--model`` (``/root/opt-125m/``), not the
    ``--served-model-name`` (``modelx``) operators query by. The config names ``modelx``: the deployment must be
    unavailable, naming the model the page does carry, never read as a healthy model with nothing known."""
    eng = _engine("/root/opt-125m/", 30000, 2048, 0.9)
    eng.finish(4, prompt=100, output=50, ttft=0.05, tpot=0.01, queue=0.0)
    eng.running, eng.kv_usage = 1, 0.01
    first = eng.render()
    eng.finish(1, prompt=100, output=50, ttft=0.05, tpot=0.01, queue=0.0)
    return FieldState(
        id="vllm-served-model-not-found",
        source="https://github.com/vllm-project/vllm/pull/2987",
        engine_version="vLLM 0.11 V1 (model_name = --model path)",
        deployment={
            "name": "opt-125m",
            "engine": "vllm",
            "served_model": "modelx",
            "model": "Qwen/Qwen2.5-0.5B",
            "gpu": "a10g",
            "max_model_len": 2048,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        state="unavailable",
        state_reason_contains=["served_model_not_found", "/root/opt-125m/"],
        named=["served_model_not_found", "modelx"],
        no_advice=True,
    )


# --- Dynamo worker ----------------------------------------------------------------------------------------------


def dynamo_worker(*, current: bool) -> FieldState:
    """ai-dynamo/dynamo PR #5817 (current names) / PR #2704 (``kvstats_`` names, its curl output: 12,894 blocks,
    usage 7.76e-05): a Dynamo worker's system port where the backend publishes only Dynamo's own gauges."""
    infix = "" if current else "kvstats_"
    labels = 'dynamo_component="backend",dynamo_namespace="dynamo"'

    def page(usage: float, uptime: float) -> str:
        return (
            f"# HELP dynamo_component_{infix}gpu_cache_usage_percent GPU cache usage as a percentage (0.0-1.0)\n"
            f"# TYPE dynamo_component_{infix}gpu_cache_usage_percent gauge\n"
            f"dynamo_component_{infix}gpu_cache_usage_percent{{{labels}}} {go_float(usage)}\n"
            f"# HELP dynamo_component_{infix}total_blocks Total number of KV cache blocks available on the worker\n"
            f"# TYPE dynamo_component_{infix}total_blocks gauge\n"
            f"dynamo_component_{infix}total_blocks{{{labels}}} 12894\n"
            "# HELP dynamo_component_uptime_seconds Total uptime of the DistributedRuntime in seconds\n"
            "# TYPE dynamo_component_uptime_seconds gauge\n"
            f'dynamo_component_uptime_seconds{{dynamo_namespace="dynamo"}} {go_float(uptime)}\n'
        )

    usage = 0.41 if current else 7.755545084364712e-05
    return FieldState(
        id="dynamo-worker-kv-gauges" + ("" if current else "-kvstats"),
        source="https://github.com/ai-dynamo/dynamo/pull/5817"
        if current
        else "https://github.com/ai-dynamo/dynamo/pull/2704",
        engine_version="Dynamo 0.9 worker" if current else "Dynamo 0.5 worker",
        deployment={
            "name": "dynamo-worker",
            "engine": "auto",
            "model": "Qwen/Qwen3-0.6B",
            "gpu": "h100-sxm",
            "max_model_len": 40960,
            "slo": SLO,
        },
        scrapes=[(page(usage, 811.0), page(usage, 812.0))],
        state=None,
        snapshot={"kv_cache_usage_ratio": usage},
        extra_check=_engine_is("dynamo"),
    )


def _engine_is(engine: str) -> Callable[[dict[str, Any]], None]:
    def check(result: dict[str, Any]) -> None:
        assert result["engine"] == engine, result["engine"]
        assert all(t["error_reason"] is None for t in result["targets"]), result["targets"]

    return check


# --- unrecognized pages ---------------------------------------------------------------------------------------


def dcgm_page() -> str:
    rows = []
    for field_name, help_text, value in (
        ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", 1530),
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", 97),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", 15100),
    ):
        rows += [f"# HELP {field_name} {help_text}", f"# TYPE {field_name} gauge"]
        for gpu in range(2):
            rows.append(
                f'{field_name}{{gpu="{gpu}",UUID="GPU-{gpu}a1",device="nvidia{gpu}",'
                f'modelName="Tesla V100-SXM2-16GB",Hostname="dcgm-exporter-x2"}} {value}'
            )
    return "\n".join(rows) + "\n"


def unrecognized_dcgm() -> FieldState:
    """NVIDIA/dcgm-exporter#250: the DCGM exporter's page scraped where an engine was expected."""
    page = dcgm_page()
    return FieldState(
        id="unrecognized-dcgm",
        source="https://github.com/NVIDIA/dcgm-exporter/issues/250",
        engine_version="dcgm-exporter 2.x (Hostname label)",
        deployment={
            "name": "gpu-box",
            "engine": "auto",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "gpu": "a100-80gb",
            "max_model_len": 8192,
            "slo": SLO,
        },
        scrapes=[(page, page)],
        state="unavailable",
        state_reason_contains=["unrecognized", "DCGM_FI_", "GPU telemetry"],
        named=["unrecognized"],
        no_advice=True,
        extra_check=_target_reason("unrecognized"),
    )


def unrecognized_engine_use_ray() -> FieldState:
    """vllm-project/vllm PR #3938: with ``--engine-use-ray`` vLLM 0.4's metrics vanished from ``/metrics``; the
    page held only prometheus_client's own ``python_*`` and ``process_*`` families."""
    page = (
        "# HELP python_gc_objects_collected_total Objects collected during gc\n"
        "# TYPE python_gc_objects_collected_total counter\n"
        'python_gc_objects_collected_total{generation="0"} 6290.0\n'
        'python_gc_objects_collected_total{generation="1"} 8336.0\n'
        "# HELP python_info Python platform information\n"
        "# TYPE python_info gauge\n"
        'python_info{implementation="CPython",major="3",minor="10",patchlevel="12",version="3.10.12"} 1.0\n'
        "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
        "# TYPE process_resident_memory_bytes gauge\n"
        "process_resident_memory_bytes 1.2e+09\n"
    )
    return FieldState(
        id="unrecognized-vllm-engine-use-ray",
        source="https://github.com/vllm-project/vllm/pull/3938",
        engine_version="vLLM 0.4.0 (--engine-use-ray)",
        deployment={
            "name": "opt-125m",
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-0.5B",
            "gpu": "a10g",
            "max_model_len": 2048,
            "slo": SLO,
        },
        scrapes=[(page, page)],
        state="unavailable",
        state_reason_contains=["unrecognized", "python_", "process_"],
        no_advice=True,
        extra_check=_target_reason("unrecognized"),
    )


def _target_reason(reason: str) -> Callable[[dict[str, Any]], None]:
    def check(result: dict[str, Any]) -> None:
        assert [t["error_reason"] for t in result["targets"]] == [reason], result["targets"]

    return check


# --- vLLM renames ------------------------------------------------------------------------------------------------


def vllm_rename(version: str) -> FieldState:
    """vllm-project/vllm PR #27133 (0.11 dashboards went blank: ``gpu_cache_usage_perc`` hidden, read
    ``kv_cache_usage_perc``) and kubernetes-sigs/inference-perf PR #277; before 0.9 V1 exposed only
    ``gpu_cache_usage_perc``. Either spelling is the same KV usage."""
    eng = _engine("meta-llama/Llama-3.1-8B-Instruct", 27000, 8192, 0.9)
    eng.finish(500, prompt=800, output=200, ttft=0.2, tpot=0.03, queue=0.02)
    eng.first_tokens([0.2] * 500)
    eng.prefill(500 * 800)
    eng.decode(500 * 200, 0.03, steps=5000, batch=20)
    eng.running, eng.kv_usage = 20, 0.37

    def render() -> str:
        text = eng.render()
        if version == "0.8":
            text = text.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
        return text

    first = render()
    eng.finish(3, prompt=800, output=200, ttft=0.2, tpot=0.03, queue=0.02)
    eng.first_tokens([0.2] * 3)
    eng.decode(600, 0.03, steps=30, batch=20)
    eng.running, eng.kv_usage = 21, 0.38
    return FieldState(
        id=f"vllm-{version}-kv-usage-name",
        source="https://github.com/vllm-project/vllm/pull/27133"
        if version == "0.11"
        else "https://github.com/kubernetes-sigs/inference-perf/pull/277",
        engine_version=f"vLLM {version} V1",
        deployment={
            "name": "llama8b",
            "engine": "auto",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "a100-80gb",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8192,
            "slo": SLO,
        },
        scrapes=[(first, render())],
        snapshot={"kv_cache_usage_ratio": 0.38, "requests_running": 21, "kv_cache_capacity_tokens": 27000 * 16},
        must_never=KV_ADVICE,
    )


STATES: list[FieldState] = [
    triton_two_models("mistral7b"),
    triton_two_models("llama2"),
    ray_two_replicas(),
    ray_two_replicas(sanitized=False),
    served_model_not_found(),
    dynamo_worker(current=True),
    dynamo_worker(current=False),
    unrecognized_dcgm(),
    unrecognized_engine_use_ray(),
    vllm_rename("0.11"),
    vllm_rename("0.8"),
]


@pytest.fixture(scope="module")
def once(tmp_path_factory: pytest.TempPathFactory) -> FieldStateRuns:
    """``once --json`` of every state of this module, a few at a time (:func:`tests.states.field.run_field_states`)."""
    return run_field_states(tmp_path_factory, STATES)


@pytest.mark.parametrize("state", STATES, ids=[s.id for s in STATES])
def test_field_state(once: FieldStateRuns, state: FieldState) -> None:
    check_field_state(once[state], state)
