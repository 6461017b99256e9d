"""The engine adapter protocol: one engine's metric names → one :class:`~advisor.domain.EngineSnapshot`.

Adapters are pure: they take the samples a source kept (``parse_exposition(text, keep=adapter.wants)``)
and return values; they perform no I/O and never read the clock.
"""

from __future__ import annotations

from typing import Protocol

from advisor.domain import EngineSnapshot, Exposition


class EngineAdapter(Protocol):
    """Reads one engine's exposition.

    Attributes:
        engine: adapter id, as in ``advisor.engines.ENGINES`` (``"vllm"``).
    """

    engine: str

    def wants(self, sample_name: str) -> bool:
        """Whether the adapter reads samples of this name (sources skip the rest while parsing)."""
        ...

    def models(self, exposition: Exposition) -> list[str]:
        """The served models present (the engine's model label), in exposition order; ``[]`` when the
        engine has no model label (TGI, llama.cpp). Each is a separate :meth:`snapshot`."""
        ...

    def snapshot(self, exposition: Exposition, model: str | None = None) -> EngineSnapshot:
        """The engine-neutral reading of one scrape.

        Args:
            exposition: samples keyed by sample name (``advisor.sources.exposition.parse_exposition``).
            model: the served model to read when the exposition carries several; ``None`` picks the
                first one (each adapter documents its rule).
        """
        ...
