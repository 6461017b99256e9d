"""Cloud instance types from ``advisor/data/instances.csv``: GPUs, host and on-demand price.

The table carries the 101 rows of the shared catalog ``catalog/cloud_instances.csv`` (AWS 53, Azure 17, GCP 31;
compiled August 2026), with one column added, ``gpu_key``, which links each row to ``advisor/data/gpus.csv``
(:func:`advisor.capacity.hardware.get_gpu`), and a ``verification`` column saying what was re-checked. Every row
cites its sources: ``spec_source`` (GPU model and count, vCPU, RAM, interconnect) and ``price_source`` (the
generated price file, its commit, region and date). Prices are on-demand, Linux, USD per hour for the whole
instance:

=====  =========================================================================  ============  ==========
cloud  price source                                                               region        as of
=====  =========================================================================  ============  ==========
aws    ``aws/karpenter-provider-aws`` ``zz_generated.pricing_aws.go`` @ 6fc13b5   us-east-1     2026-07-20
azure  ``Azure/karpenter-provider-azure`` ``zz_generated.pricing.go`` @ 2b431da   eastus2 [1]_  2026-06-18
gcp    ``cloudpilot-ai/karpenter-provider-gcp`` ``initial-prices.json`` @ 373e2ba us-central1   2026-08-03
=====  =========================================================================  ============  ==========

.. [1] Standard_ND96asr_v4 is priced in eastus (not offered in eastus2 in the source).

Re-checked for this table (2026-11-30): the AWS prices of the g4dn, g5, g6, g6e, gr6, p4d, p4de, p5, p5en,
p6-b200, inf2 and trn1 rows are identical in the karpenter file at commit 031e72b (generated 2026-01-19), e.g.
p5.48xlarge 55.04, p4d.24xlarge 21.957642, g6e.12xlarge 10.49264 USD/h. Rows without a price (p5e, trn2, the
GB200 UltraServer parts, a3-mega/ultra, a4, TPU v5e) are capacity-block or reservation products: their
``price_usd_per_hour`` is ``None`` and the dial search skips them.

Azure's NVads A10 v5 sizes are GPU partitions: ``gpu_count`` is fractional (1/6, 1/3, 1/2) and the GPU
memory column is the partition's. Example::

    >>> get_instance("p5.48xlarge").gpu_count, get_instance("p5.48xlarge").price_usd_per_hour
    (8.0, 55.04)
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache
from typing import Final

from advisor.capacity.data import read_data
from advisor.errors import CapacityError

__all__ = ["CLOUDS", "InstanceType", "UnknownInstanceError", "get_instance", "instance_names", "list_instances"]

CLOUDS: Final = ("aws", "azure", "gcp")
"""The clouds the table covers."""


class UnknownInstanceError(CapacityError):
    """No instance type of that name (the message lists near matches)."""


@dataclass(frozen=True)
class InstanceType:
    """One cloud instance type (a VM size).

    Attributes:
        cloud: ``aws``, ``azure`` or ``gcp``.
        name: the provider's name (``p5.48xlarge``, ``Standard_ND96isr_H100_v5``, ``a3-highgpu-8g``).
        family: the provider's family (``p5``, ``ND-H100-v5``, ``a3``).
        gpu_key: the ``gpus.csv`` key of its accelerator (``h100-sxm``).
        gpu_model: the accelerator as the catalog names it.
        gpu_count: accelerators per instance; fractional for GPU partitions (Azure NVads A10 v5).
        gpu_memory_per_gpu_gb: marketed GB per accelerator (the partition's for fractional GPUs).
        vcpus: virtual CPUs, or ``None`` where no primary source gave it.
        host_ram_gib: instance RAM, GiB, or ``None``.
        gpu_interconnect: GPU-to-GPU fabric as the provider states it (``NVSwitch (NVLink 4, …)``, ``PCIe only``).
        price_usd_per_hour: on-demand Linux price of the whole instance, USD/h, or ``None`` (not sold on demand).
        price_region: the region the price is for.
        price_as_of: the date of the generated price file (``2026-07-20``).
        source: ``price_source`` and ``spec_source`` of the row, joined by `` | ``.
    """

    cloud: str
    name: str
    family: str
    gpu_key: str
    gpu_model: str
    gpu_count: float
    gpu_memory_per_gpu_gb: float
    vcpus: int | None
    host_ram_gib: float | None
    gpu_interconnect: str
    price_usd_per_hour: float | None
    price_region: str
    price_as_of: str
    source: str

    @property
    def whole_gpus(self) -> int:
        """Whole accelerators (0 for a partition of one)."""
        return int(self.gpu_count) if self.gpu_count >= 1 else 0

    @property
    def price_per_gpu_hour(self) -> float | None:
        """``price_usd_per_hour ÷ gpu_count`` (USD per accelerator-hour), or ``None`` without a price."""
        if self.price_usd_per_hour is None or self.gpu_count <= 0:
            return None
        return self.price_usd_per_hour / self.gpu_count


def _opt_float(cell: str) -> float | None:
    cell = cell.strip()
    return float(cell) if cell else None


@cache
def _table() -> dict[str, InstanceType]:
    text = read_data("instances.csv")
    out: dict[str, InstanceType] = {}
    for row in csv.DictReader(io.StringIO(text)):
        vcpus = row["vcpus"].strip()
        inst = InstanceType(
            cloud=row["cloud"],
            name=row["instance_type"],
            family=row["family"],
            gpu_key=row["gpu_key"],
            gpu_model=row["gpu_model"],
            gpu_count=float(row["gpu_count"]),
            gpu_memory_per_gpu_gb=float(row["gpu_memory_per_gpu_gb"]),
            vcpus=int(vcpus) if vcpus else None,
            host_ram_gib=_opt_float(row["host_ram_gib"]),
            gpu_interconnect=row["gpu_interconnect"],
            price_usd_per_hour=_opt_float(row["price_usd_per_hour_on_demand"]),
            price_region=row["price_region"],
            price_as_of=row["price_as_of"],
            source=f"{row['price_source']} | {row['spec_source']}",
        )
        out[inst.name.lower()] = inst
    return out


def instance_names(cloud: str | None = None) -> list[str]:
    """Every instance type name (of one cloud when given), sorted."""
    return sorted(i.name for i in list_instances(cloud))


def list_instances(cloud: str | None = None, *, priced_only: bool = False) -> list[InstanceType]:
    """Instance types of ``cloud`` (``aws``/``azure``/``gcp``; all when ``None``), in table order.

    ``priced_only`` drops the rows without an on-demand price.

    Raises:
        CapacityError: an unknown cloud.
    """
    if cloud is not None and cloud.lower() not in CLOUDS:
        raise CapacityError(f"unknown cloud {cloud!r}; known: {', '.join(CLOUDS)}")
    rows = [i for i in _table().values() if cloud is None or i.cloud == cloud.lower()]
    return [i for i in rows if i.price_usd_per_hour is not None] if priced_only else rows


def get_instance(name: str) -> InstanceType:
    """Look an instance type up by its provider name, ignoring case (``p5.48xlarge``, ``a3-highgpu-8g``).

    Raises:
        UnknownInstanceError: no such name; the message lists names sharing its first three characters.
    """
    found = _table().get(name.strip().lower())
    if found is None:
        stem = name.strip().lower()[:3]
        near = [i.name for i in _table().values() if i.name.lower().startswith(stem)] or instance_names()[:10]
        raise UnknownInstanceError(f"unknown instance type {name!r}; e.g. {', '.join(near[:12])}")
    return found
