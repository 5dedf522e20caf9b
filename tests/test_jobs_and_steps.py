"""A directory mixing several runs is not merged into one cluster, and a capture with very many steps does not list
a fact per step (issue #18, item 10)."""

from __future__ import annotations

import re
import shutil

from conftest import FIXTURES

from advisor.facts import StepFact
from advisor.facts import listed_steps
from advisor.ingest.discover import discover

CLUSTER = FIXTURES / "samples" / "cluster_2ranks"


def _copy_run(target, stamp_from: str, stamp_to: str) -> None:
    for rank_dir in CLUSTER.iterdir():
        shutil.copytree(rank_dir, target / rank_dir.name.replace(stamp_from, stamp_to))


def test_runs_captured_an_hour_apart_are_not_one_cluster(tmp_path):
    _copy_run(tmp_path, "20251127192733", "20251127192733")
    _copy_run(tmp_path, "20251127192733", "20251127203502")
    layout = discover(tmp_path)
    assert [r.path.name for r in layout.ranks] == ["localhost_2231054_20251127203502123_ascend_pt",
                                                    "localhost_2231055_20251127203502127_ascend_pt"]
    (warning,) = layout.warnings
    assert re.fullmatch(r".* holds 2 separate runs \(captures more than 10 minutes apart\), which are not merged into one "
                        r"cluster: run 1: 2 rank directories captured from 2025-11-27 19:27 \(e\.g\. .*\); run 2: 2 rank "
                        r"directories captured from 2025-11-27 20:35 .*Diagnosing the newest, run 2; .*", warning)


def test_ranks_of_one_run_started_minutes_apart_are_one_job(tmp_path):
    _copy_run(tmp_path, "20251127192733", "20251127192733")
    (tmp_path / "later").mkdir()
    source = next(p for p in tmp_path.iterdir() if p.name.startswith("localhost_2231055"))
    source.rename(tmp_path / "later" / source.name.replace("20251127192733", "20251127193233"))  # 5 minutes later
    assert len(discover(tmp_path).ranks) == 2


def _step(rank: int, step: int, time: float) -> StepFact:
    return StepFact(id=f"step:r{rank}:s{step}", rank=rank, step=step, step_time_us=time, compute_us=time, comm_not_overlapped_us=0.0,
                    free_us=0.0, compute_ratio=1.0, communication_ratio=0.0, free_ratio=0.0)


def test_a_capture_of_many_steps_lists_a_sample_of_them():
    steps = [_step(0, n, 1000.0 + (n % 7)) for n in range(5000)]
    steps[1234] = _step(0, 1234, 9000.0)  # the slowest
    steps[4321] = _step(0, 4321, 10.0)  # the fastest
    warnings: list[str] = []
    kept = listed_steps(steps, 0, warnings)
    assert len(kept) <= 200 and {s.step for s in kept} >= {0, 1234, 4321, 4999}
    assert [s.step for s in kept] == sorted(s.step for s in kept)
    assert warnings == ["rank 0: 5,000 steps; the report lists 200 of them as step facts (the slowest, the fastest "
                        "and evenly spaced ones) — the breakdown and every other figure cover all of them"]
    assert listed_steps(steps[:150], 0, warnings) == steps[:150] and len(warnings) == 1


def test_a_fifo_or_a_huge_sparse_profiler_info_does_not_stall_discovery(tmp_path):
    """An unnamed rank directory whose profiler_info.json is a FIFO (no writer) or a 3 GiB sparse file: discovery
    reads neither (it would wait forever, or read gigabytes) and numbers the rank itself."""
    import os

    from advisor.ingest.ascend import rank_id_from_dir

    fifo_dir, sparse_dir = tmp_path / "a_ascend_pt", tmp_path / "b_ascend_pt"
    fifo_dir.mkdir()
    sparse_dir.mkdir()
    os.mkfifo(fifo_dir / "profiler_info.json")
    with open(sparse_dir / "profiler_info.json", "wb") as handle:
        handle.truncate(3 << 30)
    import threading

    found: list = []
    worker = threading.Thread(target=lambda: found.extend([rank_id_from_dir(fifo_dir), rank_id_from_dir(sparse_dir)]),
                              daemon=True)  # a regression would block forever on the FIFO: fail instead of hanging
    worker.start()
    worker.join(timeout=30)
    assert found == [None, None], "discovery blocked on a FIFO or read a sparse file whole"
