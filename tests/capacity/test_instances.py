"""The cloud instance table: figures checked against the price files and spec pages it cites."""

from __future__ import annotations

import pytest

from advisor.capacity.hardware import get_gpu
from advisor.capacity.instances import UnknownInstanceError, get_instance, instance_names, list_instances
from advisor.errors import CapacityError


@pytest.mark.parametrize(
    ("name", "gpu_key", "gpus", "vcpus", "ram_gib", "price", "region", "as_of"),
    [
        # aws/karpenter-provider-aws zz_generated.pricing_aws.go (us-east-1): "p5.48xlarge": 55.040000,
        # "p4d.24xlarge": 21.957642, "g6e.12xlarge": 10.492640, "g4dn.xlarge": 0.526000; EC2 labels from
        # karpenter's instance-types.md (p5.48xlarge 192 vCPU, 2 TiB; p4d 96 vCPU, 1152 GiB).
        ("p5.48xlarge", "h100-sxm", 8, 192, 2048, 55.04, "us-east-1", "2026-07-20"),
        ("p4d.24xlarge", "a100-40gb", 8, 96, 1152, 21.957642, "us-east-1", "2026-07-20"),
        ("g6e.12xlarge", "l40s", 4, 48, 384, 10.49264, "us-east-1", "2026-07-20"),
        ("g4dn.xlarge", "t4", 1, 4, 16, 0.526, "us-east-1", "2026-07-20"),
        # Azure Retail Prices via Azure/karpenter-provider-azure; ND96asr_v4 is priced in eastus (SOURCES.md).
        ("Standard_ND96isr_H100_v5", "h100-sxm", 8, 96, 1900, 98.32, "eastus2", "2026-06-18"),
        ("Standard_ND96asr_v4", "a100-40gb", 8, 96, 900, 27.197, "eastus", "2026-06-18"),
        # GCP Cloud Billing API via cloudpilot-ai/karpenter-provider-gcp (us-central1).
        ("a3-highgpu-8g", "h100-sxm", 8, 208, 1872, 88.4899999025753, "us-central1", "2026-08-03"),
    ],
)
def test_rows_carry_the_cited_figures(
    name: str, gpu_key: str, gpus: int, vcpus: int, ram_gib: float, price: float, region: str, as_of: str
) -> None:
    inst = get_instance(name)
    assert inst.gpu_key == gpu_key
    assert inst.gpu_count == gpus
    assert inst.vcpus == vcpus
    assert inst.host_ram_gib == ram_gib
    assert inst.price_usd_per_hour == pytest.approx(price, abs=1e-9)
    assert inst.price_region == region
    assert inst.price_as_of == as_of
    assert "github.com" in inst.source


def test_the_table_has_every_catalog_row_per_cloud() -> None:
    # SOURCES.md: 101 instance types, AWS 53, GCP 31, Azure 17.
    assert len(list_instances()) == 101
    assert [len(list_instances(c)) for c in ("aws", "azure", "gcp")] == [53, 17, 31]
    assert instance_names("azure")[0].startswith("Standard_")


def test_every_row_links_to_a_gpu_and_priced_rows_name_their_source() -> None:
    for inst in list_instances():
        get_gpu(inst.gpu_key)  # raises on a dangling key
        if inst.price_usd_per_hour is not None:
            assert inst.price_region and inst.price_as_of
        assert inst.gpu_interconnect


def test_rows_not_sold_on_demand_have_no_price() -> None:
    # SOURCES.md: p5e.48xlarge, trn2.48xlarge and p6e-gb200 have no on-demand price in the source.
    for name in ("p5e.48xlarge", "trn2.48xlarge", "p6e-gb200.36xlarge", "a3-megagpu-8g"):
        assert get_instance(name).price_usd_per_hour is None
        assert get_instance(name).price_per_gpu_hour is None
    priced = list_instances("aws", priced_only=True)
    assert all(i.price_usd_per_hour is not None for i in priced)
    assert len(priced) == 53 - 3


def test_one_h100_costs_the_same_per_gpu_in_a_p5_4xlarge_and_a_p5_48xlarge() -> None:
    # 55.04 / 8 = 6.88 = the p5.4xlarge price
    assert get_instance("p5.48xlarge").price_per_gpu_hour == pytest.approx(6.88)
    assert get_instance("p5.4xlarge").price_per_gpu_hour == pytest.approx(6.88)


def test_gpu_partitions_have_no_whole_gpu() -> None:
    part = get_instance("Standard_NV6ads_A10_v5")
    assert part.gpu_count == pytest.approx(1 / 6, abs=0.001)
    assert part.whole_gpus == 0
    assert get_instance("Standard_NV72ads_A10_v5").whole_gpus == 2


def test_lookup_ignores_case_and_reports_unknown_names() -> None:
    assert get_instance("P5.48XLARGE").name == "p5.48xlarge"
    assert get_instance("standard_nd96isr_h100_v5").cloud == "azure"
    with pytest.raises(UnknownInstanceError, match=r"p5\.96xlarge.*p5\.48xlarge"):
        get_instance("p5.96xlarge")
    with pytest.raises(CapacityError, match="oracle"):
        list_instances("oracle")
