"""Engine adapters (pure): engine metric names by version → :class:`~advisor.domain.EngineSnapshot`.

``get_adapter("vllm")`` returns the adapter; ``ENGINES`` lists every engine id known.
"""

from __future__ import annotations

from collections.abc import Callable

from advisor.engines.base import EngineAdapter
from advisor.engines.vllm import VLLMAdapter

_FACTORIES: dict[str, Callable[[], EngineAdapter]] = {
    "vllm": VLLMAdapter,
}

ENGINES: tuple[str, ...] = tuple(_FACTORIES)
"""Every engine id :func:`get_adapter` accepts."""


def get_adapter(engine: str) -> EngineAdapter:
    """Return a new adapter for ``engine`` (``"vllm"``).

    Raises:
        ValueError: ``engine`` is not known; the message lists the known engines.
    """
    try:
        factory = _FACTORIES[engine]
    except KeyError:
        raise ValueError(f"unknown engine {engine!r}; known engines: {', '.join(ENGINES)}") from None
    return factory()


__all__ = ["ENGINES", "EngineAdapter", "VLLMAdapter", "get_adapter"]
