"""Engine adapters (pure): engine metric names by version → :class:`~advisor.domain.EngineSnapshot`.

``get_adapter("vllm")`` returns the adapter; ``ENGINES`` lists every engine id known; every engine fact
(prefixes, names, labels, buckets, flags, wrappers) is in the engine's catalog entry (:func:`entry`,
:mod:`advisor.engines.catalog`). For ``engine: auto``
the caller detects first (:func:`advisor.engines.detect.detect_engine` on the exposition, or on the metric
names a Prometheus API lists) and then asks for that adapter; ``get_adapter("auto")`` is not a thing.

=================  ==============================================  =========================================
engine id          engine                                          module
=================  ==============================================  =========================================
``vllm``           vLLM V0 and V1 (``vllm:*``)                     :mod:`advisor.engines.vllm`
``sglang``         SGLang (``sglang:*`` / ``sglang_*``)            :mod:`advisor.engines.sglang`
``tgi``            Hugging Face TGI (``tgi_*``)                    :mod:`advisor.engines.tgi`
``triton-trtllm``  Triton ``tensorrtllm`` backend (``nv_trt_llm_*``)  :mod:`advisor.engines.trtllm`
``trtllm``         TensorRT-LLM ``trtllm-serve`` (``trtllm_*``)    :mod:`advisor.engines.trtllm`
``llamacpp``       llama.cpp server (``llamacpp:*``)               :mod:`advisor.engines.llamacpp`
``dynamo``         NVIDIA Dynamo frontend (``dynamo_frontend_*``)  :mod:`advisor.engines.dynamo`
=================  ==============================================  =========================================
"""

from __future__ import annotations

from advisor.engines.base import EngineAdapter
from advisor.engines.catalog import CatalogEntry, engine_ids, entries, entry
from advisor.engines.detect import detect_engine
from advisor.engines.dynamo import DynamoFrontendAdapter
from advisor.engines.llamacpp import LlamaCppAdapter
from advisor.engines.sanity import SanitizedAdapter
from advisor.engines.sglang import SGLangAdapter
from advisor.engines.tgi import TGIAdapter
from advisor.engines.trtllm import TritonTRTLLMAdapter, TRTLLMServeAdapter
from advisor.engines.vllm import VLLMAdapter

ENGINES: tuple[str, ...] = engine_ids()
"""Every engine id :func:`get_adapter` accepts, from the catalog (:func:`advisor.engines.catalog.entries`)."""


def get_adapter(engine: str) -> EngineAdapter:
    """Return a new adapter for ``engine`` (``"vllm"``), wrapped so that impossible values become
    unknown (:mod:`advisor.engines.sanity`).

    Raises:
        ValueError: ``engine`` is not known; the message lists the known engines.
    """
    return SanitizedAdapter(entry(engine).adapter())


__all__ = [
    "ENGINES",
    "CatalogEntry",
    "DynamoFrontendAdapter",
    "EngineAdapter",
    "LlamaCppAdapter",
    "SGLangAdapter",
    "TGIAdapter",
    "TRTLLMServeAdapter",
    "TritonTRTLLMAdapter",
    "VLLMAdapter",
    "detect_engine",
    "entries",
    "entry",
    "get_adapter",
]
