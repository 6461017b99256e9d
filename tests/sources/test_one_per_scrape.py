"""One point per raw scrape, read from a store's range answer, when the scrape times are not one clean series
(adversarial review of the store-lag fix): two scrape jobs on one target, scrape times missing at some points,
scrape times going back. A point re-reading a scrape must never be kept as new (it reads as a stalled engine);
a point whose scrape is unknown is left out and said so."""

from __future__ import annotations

from typing import Any

from advisor.sources.prometheus import (
    SCRAPE_TIME,
    SCRAPE_TIME_MARK,
    FederationReader,
    groups_from_federation,
    histories_from_matrix,
)

TARGET = {"instance": "i1"}
STEPS = [100.0, 101.0, 102.0, 103.0]


def _up(job: str) -> dict[str, Any]:
    return {"metric": {"__name__": "up", **TARGET, "job": job}, "values": [[t, "1"] for t in STEPS]}


def _times(job: str, times: list[float | str]) -> dict[str, Any]:
    metric = {"__name__": SCRAPE_TIME, SCRAPE_TIME_MARK[0]: SCRAPE_TIME_MARK[1], **TARGET, "job": job}
    return {"metric": metric, "values": [[t, str(v)] for t, v in zip(STEPS, times, strict=True) if v != ""]}


def _counter(job: str, values: list[float]) -> dict[str, Any]:
    metric = {"__name__": "vllm:generation_tokens_total", **TARGET, "job": job}
    return {"metric": metric, "values": [[t, str(v)] for t, v in zip(STEPS, values, strict=True)]}


def _read(result: list[dict[str, Any]]) -> tuple[list[float], list[float], tuple[str, ...]]:
    h = histories_from_matrix({"resultType": "matrix", "result": result})
    (g,) = h.groups
    counts = [expo["vllm:generation_tokens_total"][0].value for _, expo in g.points]
    return [t for t, _ in g.points], counts, h.warnings


def test_two_jobs_on_one_target_keep_only_points_where_the_kept_job_scraped_anew() -> None:
    """Job a (read: its series sort first) scrapes every second step, job b every step. Before, job b's scrape
    times (the last series read) judged job a's points: all four kept, counters flat twice — a stall."""
    result = [
        _up("a"),
        _up("b"),
        _counter("a", [100, 100, 102, 102]),
        _counter("b", [100, 101, 102, 103]),
        _times("a", [99.9, 99.9, 101.9, 101.9]),
        _times("b", [99.9, 100.9, 101.9, 102.9]),
    ]
    times, counts, warnings = _read(result)
    assert times == [99.9, 101.9]  # each point stamped with its scrape's time, not the evaluation time
    assert counts == [100.0, 102.0]  # no flat interval
    assert any("repeated" in w for w in warnings)  # the two jobs are still named


def test_two_jobs_with_the_kept_job_faster_never_keep_a_re_read() -> None:
    result = [
        _up("a"),
        _up("b"),
        _counter("a", [100, 101, 102, 103]),
        _counter("b", [100, 100, 102, 102]),
        _times("a", [99.9, 100.9, 101.9, 102.9]),
        _times("b", [99.9, 99.9, 101.9, 101.9]),
    ]
    times, counts, _ = _read(result)
    assert times == [99.9, 101.9]  # job a's scrapes at 101 and 103 are lost (coverage), none is re-read
    assert counts == [100.0, 102.0]


def test_a_point_without_a_scrape_time_is_left_out_and_said_so() -> None:
    """Scrape times 99.5, unknown, 99.5, 102.5: before, the unknown reset the comparison and the third point (a
    re-read of the first scrape) was kept."""
    result = [_up("a"), _counter("a", [100, 100, 100, 103]), _times("a", [99.5, "", 99.5, 102.5])]
    times, counts, warnings = _read(result)
    assert times == [99.5, 102.5]
    assert counts == [100.0, 103.0]
    assert any("1 point(s) without a scrape time" in w and "i1" in w for w in warnings)


def test_a_scrape_time_going_back_is_not_a_new_scrape() -> None:
    result = [_up("a"), _counter("a", [100, 101, 101, 104]), _times("a", [99.5, 100.5, 98.0, 103.5])]
    times, _, warnings = _read(result)
    assert times == [99.5, 100.5, 103.5]
    assert not any("without a scrape time" in w for w in warnings)


def test_one_clean_job_keeps_one_point_per_scrape() -> None:
    result = [_up("a"), _counter("a", [100, 100, 102, 103]), _times("a", [99.5, 99.5, 101.5, 102.5])]
    times, counts, warnings = _read(result)
    assert times == [99.5, 101.5, 102.5]
    assert counts == [100.0, 102.0, 103.0]
    assert warnings == ()


def test_two_jobs_one_of_them_down_read_the_series_from_the_job_up_and_name_the_other() -> None:
    """Job ``probe`` (its series sort first) is down from 102 on; its copy still reads its last value there (a
    store serving stale samples through its look-back, as VictoriaMetrics does). Before, the first copy was read
    whole (counters flat from 101: a stall) and the target's ``up`` was whichever series came last. Now each
    time is read from a job up then, the target is up, and ``probe`` is named."""
    result = [
        {
            "metric": {"__name__": "up", **TARGET, "job": "probe"},
            "values": [[t, v] for t, v in zip(STEPS, "1100", strict=True)],
        },
        _up("vllm"),
        _counter("probe", [100, 101, 101, 101]),
        _counter("vllm", [100, 101, 102, 103]),
        _times("probe", [99.9, 100.9, 101.9, 102.9]),
        _times("vllm", [99.9, 100.9, 101.9, 102.9]),
    ]
    h = histories_from_matrix({"resultType": "matrix", "result": result})
    (g,) = h.groups
    assert [expo["vllm:generation_tokens_total"][0].value for _, expo in g.points] == [100.0, 101.0, 102.0, 103.0]
    assert g.up == tuple((t, 1.0) for t in STEPS) and g.down_jobs == ("probe",)


def test_a_federated_target_with_one_job_down_is_read_from_the_job_up() -> None:
    """``probe``'s up (0) is the newest line and its stale sample is still served: before, the target had no point
    (its newest ``up`` was 0) — and had it had one, ``probe``'s copy, sorting first, was read."""
    text = (
        'up{instance="a:1",job="probe"} 0 1700000001000\n'
        'up{instance="a:1",job="vllm"} 1 1700000000000\n'
        'vllm:num_requests_running{instance="a:1",job="probe"} 5 1699999900000\n'
        'vllm:num_requests_running{instance="a:1",job="vllm"} 7 1700000000000\n'
    )
    for read in (groups_from_federation, FederationReader().read):
        (g,) = read(text).groups
        ((t, expo),) = g.points
        assert t == 1700000000.0 and [s.value for s in expo["vllm:num_requests_running"]] == [7.0]
        assert g.up == ((1700000001.0, 1.0),) and g.down_jobs == ("probe",)
        assert g.scraped == (1700000000.0,)
