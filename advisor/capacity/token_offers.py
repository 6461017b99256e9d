"""Host or buy: the self-hosted cost per million goodput tokens beside the token-metered offers for the same model.

The offers live in ``advisor/data/managed_token_offers.csv``, one offer of one provider per row:

=========================  ==========================================================================================
column                     meaning
=========================  ==========================================================================================
``provider``               ``aws-bedrock`` (on-demand), ``azure-ai-foundry`` (serverless API, pay-as-you-go "models
                           as a service"), ``vertex-ai`` (Model Garden managed models, MaaS)
``offer``                  ``on_demand`` (billed per token) or ``provisioned`` (units of throughput billed per hour)
``provider_model_id``      the model as the provider names it (``meta.llama3-1-70b-instruct-v1:0``)
``model_preset``           the ``advisor/data/models.json`` preset id it serves (``meta-llama/Llama-3.1-70B-Instruct``)
``input_usd_per_million``  USD per million input (prompt) tokens; empty = unknown
``output_usd_per_million`` USD per million output (generated) tokens; empty = unknown
``unit_usd_per_hour``      ``provisioned`` only: USD per hour of one unit; empty = unknown
``unit_tokens_per_minute`` ``provisioned`` only: tokens per minute (input + output) one unit carries; empty = unknown
``region``                 the region the price is for; empty = not stated by the source
``price_as_of``            the date the figure was read from its source (ISO 8601)
``price_source``           the URL it was read from (a provider page, or a public file that quotes it, at its commit)
``notes``                  the key read and the upstream source the quoting file names
=========================  ==========================================================================================

A provisioned row is only written where the provider publishes both the unit's hourly price and its throughput;
none of the sources read (2026-12-04) did for these models, so the table has none. An unknown cell stays empty and
is reported as unknown, never as 0. What was looked for and left out: Vertex AI's Llama 3.1 70B and 8B MaaS were
listed in Preview at no charge (``cloud.google.com/vertex-ai/generative-ai/docs/partner-models/llama``; LiteLLM records
0.0) — a preview without a production price is no offer to compare, so no row; no sourced Vertex price for Llama 3.3
70B was found.

The arithmetic (per million *goodput* tokens, the unit of ``plan --search``'s ``$/Mtok`` column: output tokens of
requests that meet the SLO, :mod:`advisor.capacity.queueing`):

- **token-metered, on demand**: ``(input tokens/min × input price + output tokens/min × output price) ÷ output
  tokens/min`` — what a million output tokens cost with the prompt tokens that came with them. The provider's latency
  against the SLO is not modelled: every one of its output tokens counts as goodput.
- **token-metered, provisioned**: ``ceil(peak (input + output) tokens/min ÷ unit tokens/min) × unit $/h`` per hour,
  ÷ the output tokens of an hour at the mean demand × 10⁶ (units are bought for the peak, paid through the mean).
- **self-hosted**: ``hourly price of the replicas needed at the PEAK ÷ goodput tokens served per hour at the MEAN ×
  10⁶``. Replicas are sized for the peak (they must hold it within the SLO, :func:`~advisor.capacity.queueing.\
replicas_for_slo`) and paid for every hour, but a day serves the mean demand: dividing by the peak's tokens would
  price self-hosting as if it always ran full. The mean's goodput is the peak's × mean ÷ peak: the good fraction
  at the peak is kept (at the lower mean load it is at least that), so the figure errs on the dear side.

Pure: no I/O but the package's own table (read as :mod:`advisor.capacity.data` reads the others), no clock.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from advisor.capacity.data import ISO_DATE, read_data
from advisor.errors import CapacityError

__all__ = [
    "NO_OFFER_NOTE",
    "OFFERS_FILE",
    "Demand",
    "OfferCost",
    "SelfHosted",
    "TokenOffer",
    "load_offers",
    "offer_cost",
    "offers",
    "offers_for",
    "priced",
    "providers_without_offer",
    "self_hosted_usd_per_million",
]

OFFERS_FILE: Final = "managed_token_offers.csv"
"""The price table, in ``advisor/data``."""

OFFER_KINDS: Final = ("on_demand", "provisioned")
"""The ``offer`` column's values."""

NO_OFFER_NOTE: Final = "no token-metered offer is known for {model}"
"""What is said when the table has no row for the served model (``{model}``: its preset id)."""

_COLUMNS: Final = (
    "provider",
    "offer",
    "provider_model_id",
    "model_preset",
    "input_usd_per_million",
    "output_usd_per_million",
    "unit_usd_per_hour",
    "unit_tokens_per_minute",
    "region",
    "price_as_of",
    "price_source",
    "notes",
)


@dataclass(frozen=True)
class TokenOffer:
    """One row of the table (the module docstring gives each column); ``None`` = unknown."""

    provider: str
    offer: str
    provider_model_id: str
    model_preset: str
    input_usd_per_million: float | None
    output_usd_per_million: float | None
    unit_usd_per_hour: float | None
    unit_tokens_per_minute: float | None
    region: str | None
    price_as_of: str
    price_source: str
    notes: str


@dataclass(frozen=True)
class Demand:
    """The load to serve, at its mean, and how far its peak rises above it.

    Attributes:
        input_tokens_per_minute: mean prompt tokens per minute.
        output_tokens_per_minute: mean generated tokens per minute.
        requests_per_minute: mean requests per minute.
        peak_to_mean: peak ÷ mean of the same stream (≥ 1); 1 = a flat load.

    Raises:
        CapacityError: a figure not finite, negative, output tokens 0, or ``peak_to_mean`` below 1 (named).
    """

    input_tokens_per_minute: float
    output_tokens_per_minute: float
    requests_per_minute: float
    peak_to_mean: float = 1.0

    def __post_init__(self) -> None:
        for name in ("input_tokens_per_minute", "output_tokens_per_minute", "requests_per_minute"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise CapacityError(f"demand {name} must be a finite number >= 0, got {v}")
        if self.output_tokens_per_minute <= 0:
            raise CapacityError("demand output_tokens_per_minute must be above 0 (cost per million output tokens)")
        if not math.isfinite(self.peak_to_mean) or self.peak_to_mean < 1:
            raise CapacityError(f"demand peak_to_mean must be a finite number >= 1, got {self.peak_to_mean}")

    @classmethod
    def from_rate(
        cls, requests_per_second: float, prompt_tokens: float, output_tokens: float, peak_to_mean: float = 1.0
    ) -> Demand:
        """The demand of ``requests_per_second`` (the mean) requests of ``prompt_tokens`` + ``output_tokens``."""
        rpm = requests_per_second * 60.0
        return cls(rpm * prompt_tokens, rpm * output_tokens, rpm, peak_to_mean)


@dataclass(frozen=True)
class OfferCost:
    """An offer priced for a demand: USD per hour and per million goodput (output) tokens; ``None`` = unknown
    (a price or a unit's size the source does not give), with ``unknown_reason``."""

    offer: TokenOffer
    usd_per_hour: float | None
    usd_per_million_goodput_tokens: float | None
    units: int | None = None
    unknown_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (unknown: ``null``)."""
        o = self.offer
        return {
            "provider": o.provider,
            "offer": o.offer,
            "provider_model_id": o.provider_model_id,
            "model_preset": o.model_preset,
            "input_usd_per_million_tokens": o.input_usd_per_million,
            "output_usd_per_million_tokens": o.output_usd_per_million,
            "unit_usd_per_hour": o.unit_usd_per_hour,
            "unit_tokens_per_minute": o.unit_tokens_per_minute,
            "units": self.units,
            "usd_per_hour": None if self.usd_per_hour is None else round(self.usd_per_hour, 4),
            "usd_per_million_goodput_tokens": (
                None if self.usd_per_million_goodput_tokens is None else round(self.usd_per_million_goodput_tokens, 4)
            ),
            "unknown_reason": self.unknown_reason,
            "region": o.region,
            "price_as_of": o.price_as_of,
            "price_source": o.price_source,
            "notes": o.notes,
        }


@dataclass(frozen=True)
class SelfHosted:
    """A self-hosted configuration priced for a demand.

    Attributes:
        label: what it is (``p4d.24xlarge × 1, TP 8``).
        hourly_usd: USD per hour of what is run for the peak.
        goodput_tokens_per_second_at_peak: goodput tokens/s it serves at the peak demand.
        usd_per_million_goodput_tokens: :func:`self_hosted_usd_per_million` at the demand's mean.
    """

    label: str
    hourly_usd: float
    goodput_tokens_per_second_at_peak: float
    usd_per_million_goodput_tokens: float | None


def _cell_float(row: dict[str, str], name: str, where: str) -> float | None:
    text = (row.get(name) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise CapacityError(f"{where}: {name} {text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise CapacityError(
            f"{where}: {name} must be a positive number (an unknown price is an empty cell), got {text}"
        )
    return value


def load_offers(text: str) -> tuple[TokenOffer, ...]:
    """The offers of a table in the format of :data:`OFFERS_FILE` (the module docstring).

    Raises:
        CapacityError: a missing column, an unknown ``offer``, a missing provider, model, date or source, a date not
            ``YYYY-MM-DD``, a source not an ``https://`` URL, a price 0, negative or not a number, a price on the wrong
            kind of offer — each naming the row (its line) and the field.
    """
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in _COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise CapacityError(f"{OFFERS_FILE}: missing column(s) {', '.join(missing)}")
    out: list[TokenOffer] = []
    for row in reader:
        where = f"{OFFERS_FILE} line {reader.line_num}"
        for name in ("provider", "offer", "provider_model_id", "model_preset", "price_as_of", "price_source"):
            if not (row.get(name) or "").strip():
                raise CapacityError(f"{where}: {name} is empty")
        kind = row["offer"].strip()
        if kind not in OFFER_KINDS:
            raise CapacityError(f"{where}: offer {kind!r} is not one of {', '.join(OFFER_KINDS)}")
        if not ISO_DATE.match(row["price_as_of"].strip()):
            raise CapacityError(f"{where}: price_as_of {row['price_as_of']!r} is not a YYYY-MM-DD date")
        if not row["price_source"].strip().startswith("https://"):
            raise CapacityError(f"{where}: price_source {row['price_source']!r} is not an https:// URL")
        prices = {n: _cell_float(row, n, where) for n in _COLUMNS[4:8]}
        wrong = ("unit_usd_per_hour", "unit_tokens_per_minute") if kind == "on_demand" else ()
        for name in wrong:
            if prices[name] is not None:
                raise CapacityError(f"{where}: {name} applies to a provisioned offer, not {kind}")
        out.append(
            TokenOffer(
                provider=row["provider"].strip(),
                offer=kind,
                provider_model_id=row["provider_model_id"].strip(),
                model_preset=row["model_preset"].strip(),
                input_usd_per_million=prices["input_usd_per_million"],
                output_usd_per_million=prices["output_usd_per_million"],
                unit_usd_per_hour=prices["unit_usd_per_hour"],
                unit_tokens_per_minute=prices["unit_tokens_per_minute"],
                region=(row.get("region") or "").strip() or None,
                price_as_of=row["price_as_of"].strip(),
                price_source=row["price_source"].strip(),
                notes=(row.get("notes") or "").strip(),
            )
        )
    return tuple(out)


@functools.cache
def offers() -> tuple[TokenOffer, ...]:
    """Every offer of the packaged table (:data:`OFFERS_FILE`), read once.

    Raises:
        CapacityError: the table is malformed (:func:`load_offers`).
    """
    return load_offers(read_data(OFFERS_FILE))


def offers_for(model: str, table: Iterable[TokenOffer] | None = None) -> list[TokenOffer]:
    """The offers serving the preset ``model`` (its id as :func:`advisor.modelfile.resolve_model` names it,
    compared without regard to case), in table order; empty when none is known.

    Raises:
        CapacityError: the packaged table is malformed.
    """
    key = model.strip().lower()
    return [o for o in (offers() if table is None else table) if o.model_preset.lower() == key]


def providers_without_offer(model: str, table: Iterable[TokenOffer] | None = None) -> list[str]:
    """The table's providers that have no offer for the preset ``model`` (sorted): the offers that are not known,
    said as such.

    Raises:
        CapacityError: the packaged table is malformed.
    """
    rows = list(offers() if table is None else table)
    serving = {o.provider for o in offers_for(model, rows)}
    return sorted({o.provider for o in rows} - serving)


def offer_cost(offer: TokenOffer, demand: Demand) -> OfferCost:
    """``offer`` priced for ``demand`` (formulas: the module docstring). An unknown price or unit size gives
    ``None`` costs and the reason, never 0."""
    out_per_hour = demand.output_tokens_per_minute * 60.0
    if offer.offer == "on_demand":
        unknown = [
            n
            for n, v in (
                ("input price", offer.input_usd_per_million),
                ("output price", offer.output_usd_per_million),
            )
            if v is None
        ]
        if unknown or offer.input_usd_per_million is None or offer.output_usd_per_million is None:
            return OfferCost(offer, None, None, unknown_reason=f"{' and '.join(unknown)} unknown")
        per_minute = (
            demand.input_tokens_per_minute * offer.input_usd_per_million
            + demand.output_tokens_per_minute * offer.output_usd_per_million
        ) / 1e6
        hourly = per_minute * 60.0
        return OfferCost(offer, hourly, hourly / out_per_hour * 1e6)
    if offer.unit_usd_per_hour is None or offer.unit_tokens_per_minute is None:
        return OfferCost(offer, None, None, unknown_reason="the unit's hourly price or throughput is unknown")
    peak = (demand.input_tokens_per_minute + demand.output_tokens_per_minute) * demand.peak_to_mean
    units = max(1, math.ceil(peak / offer.unit_tokens_per_minute - 1e-9))
    hourly = units * offer.unit_usd_per_hour
    return OfferCost(offer, hourly, hourly / out_per_hour * 1e6, units=units)


def self_hosted_usd_per_million(
    hourly_usd: float, goodput_tokens_per_second_at_peak: float, peak_to_mean: float = 1.0
) -> float | None:
    """USD per million goodput tokens of a deployment paid ``hourly_usd`` (sized for the peak) that serves
    ``goodput_tokens_per_second_at_peak`` at the peak: ``hourly ÷ (3600 × goodput at the peak ÷ peak_to_mean) ×
    10⁶`` (the module docstring says why the mean). ``None`` when it serves no goodput (the cost per token is
    unbounded, not 0).

    Raises:
        CapacityError: a negative or non-finite price or goodput, or ``peak_to_mean`` below 1.
    """
    if not math.isfinite(hourly_usd) or hourly_usd < 0:
        raise CapacityError(f"hourly_usd must be a finite number >= 0, got {hourly_usd}")
    if not math.isfinite(goodput_tokens_per_second_at_peak) or goodput_tokens_per_second_at_peak < 0:
        raise CapacityError(
            f"goodput_tokens_per_second_at_peak must be a finite number >= 0, got {goodput_tokens_per_second_at_peak}"
        )
    if not math.isfinite(peak_to_mean) or peak_to_mean < 1:
        raise CapacityError(f"peak_to_mean must be a finite number >= 1, got {peak_to_mean}")
    mean_goodput = goodput_tokens_per_second_at_peak / peak_to_mean
    if mean_goodput <= 0:
        return None
    return hourly_usd / (3600.0 * mean_goodput) * 1e6


def priced(offers_: Sequence[TokenOffer], demand: Demand) -> list[OfferCost]:
    """Each offer priced for ``demand``, cheapest per million goodput tokens first; unknown costs last."""
    costs = [offer_cost(o, demand) for o in offers_]
    return sorted(
        costs,
        key=lambda c: (c.usd_per_million_goodput_tokens is None, c.usd_per_million_goodput_tokens or 0.0),
    )
