"""How many processes judge (streams.cores): the cores this process may use, bounded by its cgroup's
quota (a container sees the machine's CPUs), the setting when given, one for the staged topology."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from schemas.settings import KafkaSettings, Settings
from streams.cores import judging_processes, usable_cores

AFFINITY = len(os.sched_getaffinity(0))


def test_a_cgroup_v2_quota_bounds_the_cores(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("50000 100000\n")  # half a core: one process
    assert usable_cores(tmp_path) == 1
    (tmp_path / "cpu.max").write_text("max 100000\n")  # no quota: the affinity
    assert usable_cores(tmp_path) == AFFINITY


def test_a_cgroup_v1_quota_bounds_the_cores_and_garbage_is_no_quota(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert usable_cores(tmp_path) == 1
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")  # unlimited
    assert usable_cores(tmp_path) == AFFINITY
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("lots\n")
    assert usable_cores(tmp_path) == AFFINITY
    assert usable_cores(tmp_path / "absent") == AFFINITY


def test_the_setting_wins_and_the_staged_topology_judges_in_one_process() -> None:
    def of(**sections: dict[str, object]) -> Settings:
        return Settings.from_values(sections)

    assert judging_processes(of(kafka={"processes": 3})) == 3
    assert judging_processes(of(kafka={"topology": "staged"})) == 1
    assert judging_processes(of()) == usable_cores() >= 1
    # the local model's server uses the cores already; each process would start its own
    assert judging_processes(of(judge={"kind": "local"})) == 1
    assert judging_processes(of(judge={"kind": "cascade", "cascade_llm": "local"})) == 1
    assert judging_processes(of(judge={"kind": "local"}, kafka={"processes": 2})) == 2
    with pytest.raises(ValidationError, match="GROUNDWATCH_KAFKA__TOPOLOGY=fused"):
        KafkaSettings(processes=3, topology="staged")
