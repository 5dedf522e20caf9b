"""Real PyTorch profiler traces: the committed one recorded with the CPU build of torch, and fresh ones
recorded here when torch is installed (.ci/run installs it; ADVISOR_REQUIRE_TORCH=1 makes its absence fail)."""

from __future__ import annotations

import importlib.util
import os

import pytest
from conftest import FIXTURES
from torch_traces import record_training_trace

from advisor.diagnose import diagnose
from advisor.facts import extract_facts
from advisor.ingest import load_profile

TORCH_CPU = FIXTURES / "torch-cpu"
HAVE_TORCH = importlib.util.find_spec("torch") is not None
if not HAVE_TORCH and os.environ.get("ADVISOR_REQUIRE_TORCH"):
    raise RuntimeError("ADVISOR_REQUIRE_TORCH is set but torch is not installed")
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (.ci/run installs the CPU build)")


def _facts(path, family):
    return [f for f in extract_facts(load_profile(path)).facts if f.family == family]


def test_the_recorded_trace_gives_steps_data_loading_and_framework_ops():
    facts = extract_facts(load_profile(TORCH_CPU)).facts
    (context,) = [f for f in facts if f.family == "context"]
    assert (context.format, context.platform, context.step_count) == ("pytorch-kineto", "gpu", 3)
    assert context.record_shapes is True and context.profile_memory is True and context.with_stack is None  # not written when off
    assert context.sources == [f"{next(TORCH_CPU.glob('*.pt.trace.json')).name}[header: record_shapes, profile_memory, with_stack; else ops' Input Dims, Call stack]"]
    (loader,) = [f for f in facts if f.family == "dataloader"]
    # 8 samples of 4 ms each per batch, one batch per step, fetched in the training process
    assert loader.calls_per_step == 1 and loader.iterator == "single-process"
    assert 32_000 <= loader.us_per_step <= 60_000 and 0.2 <= loader.share_of_step <= 0.6
    ops = {f.name: f for f in facts if f.family == "api"}
    assert ops["aten::_log_softmax"].calls_per_step == 1
    (host,) = [f for f in facts if f.family == "host"]
    assert host.steps == 3 and host.optimizer_us_per_step > 0
    assert not [f for f in facts if f.family in ("memory", "gpu")]  # host memory and no GPU: nothing to say about a device


def test_diagnosing_a_cpu_only_trace_says_what_to_record():
    report = diagnose(TORCH_CPU)
    assert report.status == "empty"
    assert [f.id for f in report.findings] == ["gpu.no_gpu_activity"]


@needs_torch
@pytest.mark.parametrize(("workers", "iterator"), [(0, "single-process"), (2, "multi-process")])
def test_fresh_traces_measure_the_data_loader(tmp_path, workers, iterator):
    trace = record_training_trace(tmp_path, active_steps=3, sleep_s=0.003, num_workers=workers)
    assert trace.name.startswith("worker0.") and trace.name.endswith(".pt.trace.json")
    (loader,) = _facts(tmp_path, "dataloader")
    assert loader.iterator == iterator and loader.calls_per_step == 1
    if workers == 0:
        assert loader.us_per_step >= 8 * 3000  # eight samples, each sleeping 3 ms, in the training process


@needs_torch
def test_a_fresh_compressed_trace_is_read(tmp_path):
    trace = record_training_trace(tmp_path, active_steps=2, sleep_s=0.001, use_gzip=True)
    assert trace.name.endswith(".pt.trace.json.gz")
    profile = load_profile(tmp_path)
    assert profile.coverage.read == [trace.name] and profile.ranks[0].kineto.settings["profile_memory"] is True
