"""Managed platforms' own instances and prices, from ``advisor/data/managed_instances.csv`` (issue 18, point 2).

SageMaker AI bills its ``ml.*`` instances, Vertex AI its prediction nodes and Azure ML its managed online
endpoints at their own rates, not at the price of the raw cloud VM underneath. Each row of the table names the
platform's instance, the raw instance of ``advisor/data/instances.csv`` it runs on (:func:`get_instance`: the GPU
key and count come from there, one fact in one place), and the platform's own on-demand price with its region,
date and source. A row without a price is kept with ``price_usd_per_hour`` ``None`` (unknown, never 0), and a
platform without rows has no known prices: its instance choices are unknown, never the VM's.

=========  ===============================================================================  =========  ==========
platform   price source                                                                     region     as of
=========  ===============================================================================  =========  ==========
sagemaker  ``aws-samples/foundation-model-benchmarking-tool`` ``fmbench/configs/pricing.yml``  us-east-1  2025-01-26
           @ d881420 (AWS's benchmarking tool's SageMaker endpoint price table)
vertex     none sourced (no stored copy of the prediction-node prices of
           https://cloud.google.com/vertex-ai/pricing was found)
azure-ml   none sourced (Azure ML's cost pages say managed online endpoints "use VMs for the
           deployments" but do not state the rate they are billed at)
=========  ===============================================================================  =========  ==========

Example::

    >>> row = cheapest_managed("sagemaker", gpu_count=1, gpu_key="a10g")
    >>> row.name, row.price_usd_per_hour, row.raw.price_usd_per_hour
    ('ml.g5.xlarge', 1.4084, 1.006)
"""

from __future__ import annotations

import csv
import dataclasses
import io
from dataclasses import dataclass
from functools import cache
from typing import Final

from advisor.capacity.data import ISO_DATE, read_data
from advisor.capacity.instances import InstanceType, UnknownInstanceError, get_instance
from advisor.conventions import MANAGED_INSTANCE_PLATFORMS
from advisor.errors import CapacityError

__all__ = [
    "COLUMNS",
    "ManagedInstance",
    "cheapest_managed",
    "managed_instances",
    "parse_managed_instances",
]

COLUMNS: Final = (
    "platform",
    "instance_type",
    "raw_instance",
    "price_usd_per_hour",
    "region",
    "price_as_of",
    "price_source",
    "notes",
)
"""The table's header, in order."""


@dataclass(frozen=True)
class ManagedInstance:
    """One instance a managed platform rents, at the platform's own price.

    Attributes:
        platform: ``sagemaker``, ``vertex`` or ``azure-ml`` (:data:`advisor.conventions.MANAGED_INSTANCE_PLATFORMS`).
        name: the platform's name for it (``ml.g5.xlarge``; a Vertex machine type; an Azure ML ``instance_type``).
        raw: the raw cloud instance it runs on (``instances.csv``): its GPUs, never its price.
        price_usd_per_hour: the platform's on-demand price of one instance, USD/h, or ``None`` (unknown).
        region: the region the price is for.
        price_as_of: the date of the price's source (``YYYY-MM-DD``).
        price_source: the URL the price was read from.
        notes: how the price was read and its caveats.
    """

    platform: str
    name: str
    raw: InstanceType
    price_usd_per_hour: float | None
    region: str
    price_as_of: str
    price_source: str
    notes: str

    @property
    def gpu_key(self) -> str:
        """The ``gpus.csv`` key of its accelerator (the raw instance's)."""
        return self.raw.gpu_key

    @property
    def whole_gpus(self) -> int:
        """Whole accelerators per instance (the raw instance's)."""
        return self.raw.whole_gpus

    def as_instance(self) -> InstanceType:
        """This row as an :class:`InstanceType` for the dial search: the raw instance's GPUs and host under the
        platform's name, with the platform's price, region, date and source — the VM's price is not carried."""
        return dataclasses.replace(
            self.raw,
            name=self.name,
            price_usd_per_hour=self.price_usd_per_hour,
            price_region=self.region,
            price_as_of=self.price_as_of,
            source=self.price_source,
        )


def _bad(line: int, field: str, why: str) -> CapacityError:
    return CapacityError(f"managed_instances.csv line {line}: {field} {why}")


def parse_managed_instances(text: str) -> list[ManagedInstance]:
    """The rows of a ``managed_instances.csv`` text, validated.

    Raises:
        CapacityError: naming the line and field — a header other than :data:`COLUMNS`; a ``platform`` outside
            :data:`advisor.conventions.MANAGED_INSTANCE_PLATFORMS`; an empty ``instance_type``; a ``raw_instance``
            missing from ``instances.csv``; a ``price_usd_per_hour`` that is not a positive number; a priced row
            without a ``region``, a ``price_as_of`` date (``YYYY-MM-DD``) or an ``https://`` ``price_source``;
            the same ``(platform, instance_type)`` twice.
    """
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise CapacityError(f"managed_instances.csv: header must be {','.join(COLUMNS)}; got {reader.fieldnames}")
    rows: list[ManagedInstance] = []
    seen: set[tuple[str, str]] = set()
    for i, row in enumerate(reader, start=2):
        platform = (row["platform"] or "").strip()
        if platform not in MANAGED_INSTANCE_PLATFORMS:
            raise _bad(i, "platform", f"{platform!r} is not one of {', '.join(MANAGED_INSTANCE_PLATFORMS)}")
        name = (row["instance_type"] or "").strip()
        if not name:
            raise _bad(i, "instance_type", "is empty")
        if (platform, name.lower()) in seen:
            raise _bad(i, "instance_type", f"{name!r} appears twice for {platform}")
        seen.add((platform, name.lower()))
        try:
            raw = get_instance((row["raw_instance"] or "").strip())
        except UnknownInstanceError as exc:
            raise _bad(i, "raw_instance", f"is not in instances.csv ({exc})") from None
        cell = (row["price_usd_per_hour"] or "").strip()
        price: float | None = None
        if cell:
            try:
                price = float(cell)
            except ValueError:
                raise _bad(i, "price_usd_per_hour", f"{cell!r} is not a number (USD per hour)") from None
            if not price > 0 or price == float("inf"):
                raise _bad(i, "price_usd_per_hour", f"{cell!r} must be a positive price (leave it empty if unknown)")
        region = (row["region"] or "").strip()
        as_of = (row["price_as_of"] or "").strip()
        source = (row["price_source"] or "").strip()
        if price is not None:
            if not region:
                raise _bad(i, "region", "is empty for a priced row")
            if not ISO_DATE.match(as_of):
                raise _bad(i, "price_as_of", f"{as_of!r} is not a date YYYY-MM-DD")
            if not source.startswith("https://"):
                raise _bad(i, "price_source", f"{source!r} is not an https:// URL")
        rows.append(ManagedInstance(platform, name, raw, price, region, as_of, source, (row["notes"] or "").strip()))
    return rows


@cache
def _table() -> tuple[ManagedInstance, ...]:
    return tuple(parse_managed_instances(read_data("managed_instances.csv")))


def managed_instances(platform: str, *, priced_only: bool = False) -> list[ManagedInstance]:
    """The rows of ``platform`` in table order (``[]`` when none is sourced); ``priced_only`` drops the unpriced.

    Raises:
        CapacityError: ``platform`` is not a managed-instance platform.
    """
    if platform not in MANAGED_INSTANCE_PLATFORMS:
        raise CapacityError(
            f"platform {platform!r} rents no instances of its own; managed: {', '.join(MANAGED_INSTANCE_PLATFORMS)}"
        )
    return [r for r in _table() if r.platform == platform and (r.price_usd_per_hour is not None or not priced_only)]


def cheapest_managed(
    platform: str, *, gpu_count: int | None = None, gpu_key: str | None = None
) -> ManagedInstance | None:
    """The cheapest priced row of ``platform`` with exactly ``gpu_count`` whole GPUs (any count when ``None``) of
    ``gpu_key`` (any GPU when ``None``); ``None`` when no priced row matches (the price is unknown).

    Raises:
        CapacityError: ``platform`` is not a managed-instance platform.
    """
    rows = [
        r
        for r in managed_instances(platform, priced_only=True)
        if (gpu_count is None or r.whole_gpus == gpu_count) and (gpu_key is None or r.gpu_key == gpu_key)
    ]
    return min(rows, key=lambda r: (r.price_usd_per_hour or 0.0, r.name), default=None)
