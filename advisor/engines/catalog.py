"""One engine catalog: every engine fact the advisor uses, one :class:`CatalogEntry` per engine id.

Each engine module appends its entry (``CATALOG_ENTRIES``) at its end; :func:`entries` gathers them in
detection priority order. Everything outside :mod:`advisor.engines` that needs an engine fact — detection ids,
config validation, the flag a dial maps to, ``rules generate``, the simulator's and the stand-in's expositions,
the daemon — reads it here, never from its own copy (acceptance 5: ``tests/test_engine_facts.py`` scans the
package for engine names and prefixes written anywhere else).

An entry holds:

==================  ===========================================================================================
field               meaning
==================  ===========================================================================================
``engine``          the id ``engine:`` accepts (``"vllm"``)
``prefixes``        family prefixes the engine registers (detection, PromQL alternative spellings)
``wrappers``        servers that run this engine and pass its families through (Triton, Ray Serve, Dynamo
                    workers, production-stack): what they add and what ``engine:`` to write for them
``name_table``      snapshot field → exposed names newest first, with versions and source (the adapter's)
``units``           snapshot field → the unit the engine exposes it in (before :attr:`Series.scale`)
``labels``          label role (``rank``, ``model``, ``replica``, ``process``) → the engine's label names
``buckets``         default TTFT / TPOT bucket bounds, with their source and older releases' limits
``promql``          how ``source: prometheus`` and ``rules generate`` select the engine's series
``flags``           dial id → the engine's flag or config key (a ``str.format`` template with ``{value}``)
``kv``              how KV usage and capacity are accounted (what ``kv_cache_usage_ratio`` means there)
``exposition``      the families a reference release serves (name, type, help, buckets); the simulator and
                    the stand-in render these and nothing else
``counters_advance  whether the token counters (``prompt_tokens_total``, ``generation_tokens_total``) move while
_during_decode``    requests decode (``True``: per scheduler step, vLLM) or only when a request finishes (``False``:
                    SGLang, TGI, TensorRT-LLM, llama.cpp); ``None`` unknown. The ``stalled`` rule reads it
``reported          the capacity-pass dials the engine reports it runs with, read from its ``engine_config``
_settings``         (vLLM ``cache_config_info``); ``None``: it reports none. Turns start from these values
==================  ===========================================================================================

Source of every fact: the engine module that declares the entry, which cites the engine's own files and
``../shared/reference/engine-metrics-catalog.md``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Final, Literal

from advisor.engines.common import Kind, NameTable

if TYPE_CHECKING:
    from advisor.engines.base import EngineAdapter

LabelRole = Literal["rank", "model", "replica", "process"]

ENGINE_MODULES: Final = ("vllm", "sglang", "tgi", "trtllm", "llamacpp", "dynamo")
"""Modules of :mod:`advisor.engines` that declare ``CATALOG_ENTRIES``, in detection priority order."""


@dataclass(frozen=True, slots=True)
class Wrapper:
    """A server that runs an engine and passes its ``/metrics`` through (adding families of its own).

    Attributes:
        name: the wrapper's name as operators say it (``"Ray Serve"``).
        prefixes: family prefixes the wrapper adds beside the engine's (``("ray_vllm_",)``); ``()`` when it adds
            none.
        note: what changes in the exposition and what ``engine:`` to write (``engine: vllm``).
        source: where the behaviour is documented (repository file or issue).
    """

    name: str
    prefixes: tuple[str, ...]
    note: str
    source: str


@dataclass(frozen=True, slots=True)
class LatencyBuckets:
    """An engine's default TTFT and TPOT bucket bounds in seconds (``()``: the engine has no such histogram).

    ``note_ttft_above`` / ``note_tpot_above``: older releases' buckets stop there (a target above is in their
    ``+Inf`` bucket); ``source`` cites where the bounds come from.
    """

    ttft: tuple[float, ...]
    tpot: tuple[float, ...]
    source: str
    note_ttft_above: tuple[float, str] | None = None
    note_tpot_above: tuple[float, str] | None = None


@dataclass(frozen=True, slots=True)
class PromQLHandling:
    """How PromQL selects the engine's series (``source: prometheus``, ``rules generate``).

    Attributes:
        model_label: the label carrying the served model (``None``: the engine has none).
        casefold_model: the model label's case varies between families (Dynamo): match case-insensitively.
        collapse: labels whose gauges repeat one value (vLLM ``pid``, SGLang TP/PP ranks): ``max without``.
        collapse_counters: labels whose counters and histograms repeat one value (SGLang TP/PP ranks).
        extra_matchers: ``(label, value)`` matchers on every selector (SGLang ``priority=""``).
        alt_prefix: a second spelling of every name (``("sglang:", "sglang_")``), read after the first.
    """

    model_label: str | None = None
    casefold_model: bool = False
    collapse: tuple[str, ...] = ()
    collapse_counters: tuple[str, ...] = ()
    extra_matchers: tuple[tuple[str, str], ...] = ()
    alt_prefix: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class RatioTerm:
    """A derived KV usage ``used ÷ maximum`` from two name-table fields (when no usage gauge is read).

    Attributes:
        used: name-table field of the numerator (``"kv_cache_reserved_tokens"``).
        maximum: name-table field of the denominator (``"kv_cache_capacity_tokens"``).
        free: name-table field whose ``used + free ≈ maximum`` must hold (Triton's array-shift check), or ``None``.
    """

    used: str
    maximum: str
    free: str | None = None


@dataclass(frozen=True, slots=True)
class KVAccounting:
    """What the engine's KV numbers mean.

    Attributes:
        usage: how ``kv_cache_usage_ratio`` (0–1) is obtained, in words.
        capacity: how ``kv_cache_capacity_tokens`` is obtained, in words.
        derived: usage terms computed from other families when the usage gauge is absent (PromQL rules).
    """

    usage: str
    capacity: str
    derived: tuple[RatioTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class Family:
    """One family a reference release serves, as its ``/metrics`` renders it.

    Attributes:
        name: the family name (counters without ``_total``, as prometheus-client declares them).
        kind: ``gauge``, ``counter``, ``histogram`` or ``info``.
        help: the ``# HELP`` text, verbatim.
        buckets: histogram bucket bounds (without ``+Inf``); ``()`` for other kinds.
    """

    name: str
    kind: Kind
    help: str
    buckets: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Exposition:
    """The families one reference release serves (keyed by a role name the renderer uses).

    Attributes:
        version: the release (``"0.33.0"``).
        source: the engine file that declares the families.
        families: role → :class:`Family`.
        not_rendered: families of the real page a renderer may leave out, with why (``http_*`` …), as
            prefixes.
    """

    version: str
    source: str
    families: Mapping[str, Family]
    not_rendered: tuple[str, ...] = ()

    def __getitem__(self, role: str) -> Family:
        """The family for ``role``; ``KeyError`` names the role when it is not declared."""
        try:
            return self.families[role]
        except KeyError:
            raise KeyError(f"no family {role!r} in the {self.version} exposition") from None


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """Every fact about one engine id; see the module docstring for each field."""

    engine: str
    title: str
    prefixes: tuple[str, ...]
    name_table: NameTable
    labels: Mapping[LabelRole, tuple[str, ...]]
    buckets: LatencyBuckets
    promql: PromQLHandling
    flags: Mapping[str, str] | None
    kv: KVAccounting
    adapter: Callable[[], EngineAdapter]
    units: Mapping[str, str] = field(default_factory=dict)
    wrappers: tuple[Wrapper, ...] = ()
    exposition: Exposition | None = None
    frontend_only: bool = False
    """A frontend that proxies engines (Dynamo): detection prefers an engine's own families over it."""
    counters_advance_during_decode: bool | None = None
    """The token counters move while requests decode (``True``), or only when a request finishes (``False``: a
    few long generations hold them still for minutes on a healthy engine); ``None`` unknown. Each engine module
    sets it with the engine file that shows where its counters are incremented."""
    tokens_counted_per_finished_request: bool = False
    """The prompt and generation token counters count exactly the requests the finished-request counter counts, once
    each, when they finish: their quotient is the finished requests' mean length. ``False`` where tokens of requests
    that never finish are counted too (vLLM counts a prompt at its first token, so aborted requests' tokens are in
    its counters and not in ``request_success``; TGI records an input length at validation, queued and dropped
    requests too). Each engine module sets it with the engine file that shows it."""
    itl_per_token: bool = False
    """The inter-token-latency histogram observes one gap per output token even when an engine step yields several
    (a speculative round): SGLang divides a chunk's interval by its tokens and observes it once per token
    (``python/sglang/srt/metrics/collector.py`` ``observe_inter_token_latency``). ``False`` where one gap per step
    per request is observed (vLLM V1 ``v1/metrics/stats.py`` ``update_from_output``: a whole round is one gap) or
    not known."""
    reserves_max_length_at_admission: bool = False
    """The default scheduler admits a request only when the pool can hold its whole length — prompt + its max new
    tokens, and max-model-len when the client sends no ``max_tokens`` — so at most ``⌊pool ÷ max-model-len⌋``
    requests without ``max_tokens`` run at once however few blocks they write (TensorRT-LLM's default
    ``GUARANTEED_NO_EVICT`` capacity scheduler; NVIDIA/TensorRT-LLM#9412). Each engine module sets it with its
    source."""
    usage_is_whole_request_reservation: bool = False
    """The engine admits a request only when its budget holds the request's whole length (prompt + max new tokens)
    whatever its settings, and its KV usage gauge is that reservation, not blocks written: TGI's router (the
    reservation ratio ``tgi_batch_current_max_tokens ÷ tgi_batch_max_total_tokens``, ``backends/v3/src/backend.rs``;
    ``backends/v3/src/queue.rs`` ``next_batch`` takes a request only when the block allocator grants its input +
    ``max_new_tokens``). "Admit only when the whole request fits" is then its only policy, never a turn. Each engine
    module sets it with its source."""
    running_cap_slack: int = 0
    """Sequence slots per data-parallel rank the engine leaves idle below its running-request cap while requests
    queue, in steady state: SGLang parks each rank one below ``--max-running-requests`` under chunked prefill (the
    in-flight chunked request's slot is counted twice by ``Scheduler._get_new_batch_prefill_raw``'s batch-full check,
    and ``batch_is_full`` stays set until a request finishes: sgl-project/sglang#30294, #38118, #35537, the open fix
    PR #30295). The cap binds at ``cap − slack`` running. Each engine module sets it with its source."""
    spec_counters_mean_configured: bool = False
    """The engine registers its speculative-decoding counters only when speculation is configured, so a page that
    carries them says it runs whether or not a draft moved (vLLM V1: ``SpecDecodingProm`` exists only with a
    ``speculative_config``, ``vllm/v1/spec_decode/metrics.py``); ``False``: the engine exports them always
    (llama.cpp's read 0 without a draft model) or not at all. Each engine module sets it with its source."""
    reported_settings: Callable[[Mapping[str, str]], Mapping[str, float | int | str | None]] | None = None
    """``engine_config`` → ``{CapacityInputs field: value}`` of the dials the engine says it runs with (only those
    it reports and that read cleanly); ``None``: the engine reports none."""

    def metric_names(self) -> frozenset[str]:
        """Every family name the entry knows (name table, both prefix spellings, reference exposition).

        Names declared by ``prometheus_client`` itself (``process_start_time_seconds``) are not the
        engine's and are left out.
        """
        names: set[str] = set()
        for aliases in self.name_table.values():
            for s in aliases:
                if not s.source.startswith("prometheus_client"):
                    names.add(s.name)
        if self.exposition is not None:
            names.update(f.name for f in self.exposition.families.values() if f.name.startswith(self.prefixes))
        if self.promql.alt_prefix is not None:
            old, new = self.promql.alt_prefix
            names.update(new + n[len(old) :] for n in list(names) if n.startswith(old))
        return frozenset(names)


@cache
def entries() -> tuple[CatalogEntry, ...]:
    """Every catalog entry, in detection priority order (engines before frontends).

    Raises:
        RuntimeError: an engine module declares no ``CATALOG_ENTRIES`` or two entries share an id.
    """
    out: list[CatalogEntry] = []
    for module_name in ENGINE_MODULES:
        module = importlib.import_module(f"advisor.engines.{module_name}")
        declared = getattr(module, "CATALOG_ENTRIES", None)
        if not declared:
            raise RuntimeError(f"advisor.engines.{module_name} declares no CATALOG_ENTRIES")
        out.extend(declared)
    ids = [e.engine for e in out]
    if len(set(ids)) != len(ids):
        raise RuntimeError(f"duplicate engine ids in the catalog: {ids}")
    return tuple(sorted(out, key=lambda e: e.frontend_only))


def engine_ids() -> tuple[str, ...]:
    """Every engine id ``engine:`` accepts besides ``auto`` (``("vllm", "sglang", …)``)."""
    return tuple(e.engine for e in entries())


def entry(engine: str) -> CatalogEntry:
    """The entry for ``engine``.

    Raises:
        ValueError: ``engine`` is not known; the message lists the known ids.
    """
    for e in entries():
        if e.engine == engine:
            return e
    raise ValueError(f"unknown engine {engine!r}; known engines: {', '.join(engine_ids())}")


def counters_advance_during_decode(engine: str) -> bool | None:
    """The engine's :attr:`CatalogEntry.counters_advance_during_decode`; ``None`` for an engine id the catalog
    does not know (``auto`` before detection)."""
    try:
        return entry(engine).counters_advance_during_decode
    except ValueError:
        return None


def tokens_counted_per_finished_request(engine: str) -> bool:
    """The engine's :attr:`CatalogEntry.tokens_counted_per_finished_request`; ``False`` for an engine id the catalog
    does not know."""
    try:
        return entry(engine).tokens_counted_per_finished_request
    except ValueError:
        return False


def itl_per_token(engine: str) -> bool:
    """The engine's :attr:`CatalogEntry.itl_per_token`; ``False`` for an engine id the catalog does not know."""
    try:
        return entry(engine).itl_per_token
    except ValueError:
        return False


def reserves_max_length_at_admission(engine: str) -> bool:
    """The engine's :attr:`CatalogEntry.reserves_max_length_at_admission`; ``False`` for an engine id the catalog does
    not know."""
    try:
        return entry(engine).reserves_max_length_at_admission
    except ValueError:
        return False


def usage_is_whole_request_reservation(engine: str) -> bool:
    """The engine's :attr:`CatalogEntry.usage_is_whole_request_reservation`; ``False`` for an engine id the catalog
    does not know."""
    try:
        return entry(engine).usage_is_whole_request_reservation
    except ValueError:
        return False


def running_cap_slack(engine: str) -> int:
    """The engine's :attr:`CatalogEntry.running_cap_slack`; 0 for an engine id the catalog does not know."""
    try:
        return entry(engine).running_cap_slack
    except ValueError:
        return 0


def spec_counters_mean_configured(engine: str) -> bool:
    """The engine's :attr:`CatalogEntry.spec_counters_mean_configured`; ``False`` for an engine id the catalog does
    not know."""
    try:
        return entry(engine).spec_counters_mean_configured
    except ValueError:
        return False


def exposes(engine: str, field: str) -> bool | None:
    """Whether ``engine`` exposes the snapshot ``field`` at all (its :attr:`CatalogEntry.name_table` maps it);
    ``None`` for an engine id the catalog does not know (``auto`` before detection).

    A field the engine does not expose is unknown at every evaluation, a lasting absence; one it exposes is
    unknown only when this window cannot tell (one scrape after a restart). Rules judge the two differently.

    Example: ``exposes("tgi", "preemptions_total")`` → ``False``; ``exposes("vllm", "preemptions_total")`` →
    ``True``.
    """
    try:
        return field in entry(engine).name_table
    except ValueError:
        return None


def reported_settings(engine: str, engine_config: Mapping[str, str]) -> Mapping[str, float | int | str | None]:
    """The capacity-pass dials ``engine`` reports it runs with (:attr:`CatalogEntry.reported_settings`), ``{}``
    when it reports none, the config is empty, or the engine id is not in the catalog."""
    if not engine_config:
        return {}
    try:
        reader = entry(engine).reported_settings
    except ValueError:
        return {}
    return {} if reader is None else reader(engine_config)


def all_prefixes() -> frozenset[str]:
    """Every family prefix of every engine and wrapper in the catalog."""
    out: set[str] = set()
    for e in entries():
        out.update(e.prefixes)
        if e.promql.alt_prefix is not None:
            out.update(e.promql.alt_prefix)
        for w in e.wrappers:
            out.update(w.prefixes)
    return frozenset(out)


def all_metric_names() -> frozenset[str]:
    """Every engine family name in the catalog (:meth:`CatalogEntry.metric_names` of every entry)."""
    out: set[str] = set()
    for e in entries():
        out.update(e.metric_names())
    return frozenset(out)


def reference_exposition(engine: str) -> Exposition:
    """The families ``engine``'s reference release serves (what the simulator and the stand-in render).

    Raises:
        ValueError: ``engine`` is unknown or its entry declares no reference exposition.
    """
    found = entry(engine).exposition
    if found is None:
        raise ValueError(f"the {engine} catalog entry declares no reference exposition")
    return found


def detection_prefixes() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``(engine id, prefixes)`` in detection priority order: engines first, frontends last (a Dynamo worker
    passes its engine's families through, so the engine wins). For :mod:`advisor.engines.detect`."""
    return tuple((e.engine, e.prefixes) for e in entries())
