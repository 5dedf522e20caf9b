"""What the user adds with --env, --env-file and --context becomes facts that rules use."""

from __future__ import annotations

import json
import math

import pytest
from builders import RankSpec, build_rank
from conftest import FIXTURES, REAL, SAMPLE_SINGLE
from test_cli import advisor as run_cli

import advisor
from advisor.errors import InputError
from advisor.facts import EnvironmentFact, ModelFact, extract_facts
from advisor.ingest import load_profile
from advisor.usercontext import build_context


def test_env_pairs_files_and_precedence(tmp_path):
    env_file = tmp_path / "job.env"
    env_file.write_text("# launch script\nexport TASK_QUEUE_ENABLE=1\nCPU_AFFINITY_CONF='2'\n\nHCCL_BUFFSIZE=\"120\"\n")
    context = build_context(["TASK_QUEUE_ENABLE=2", "ASCEND_LAUNCH_BLOCKING=0"], [env_file], None)
    assert context.env == {
        "TASK_QUEUE_ENABLE": ("2", "--env"),  # the command line wins over the file
        "CPU_AFFINITY_CONF": ("2", str(env_file)),
        "HCCL_BUFFSIZE": ("120", str(env_file)),
        "ASCEND_LAUNCH_BLOCKING": ("0", "--env"),
    }


@pytest.mark.parametrize(
    ("pairs", "file_text", "message"),
    [
        (["NOEQUALS"], None, "--env: 'NOEQUALS' is not KEY=VALUE"),
        (["1BAD=x"], None, "--env: '1BAD=x' is not KEY=VALUE"),
        ([], "GOOD=1\nthis is not a pair\n", "job.env:2: 'this is not a pair' is not KEY=VALUE"),
    ],
)
def test_bad_env_input_names_the_place(tmp_path, pairs, file_text, message):
    files = []
    if file_text is not None:
        (tmp_path / "job.env").write_text(file_text)
        files = [tmp_path / "job.env"]
    with pytest.raises(InputError, match=message):
        build_context(pairs, files, None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("micro_batch_size: 0\n", "micro_batch_size: Input should be greater than or equal to 1"),
        ("dtype: fp4\n", "dtype: Input should be 'fp32', 'fp16', 'bf16', 'fp8', 'int8' or 'int4'"),
        ("batch: 4\n", "batch: Extra inputs are not permitted"),
        ("- 1\n- 2\n", "expected a mapping of model settings"),
        ("a: [1\n", "model.yaml:2: invalid YAML"),
        ("micro_batch_size: 99999999999999999999999999\n", "micro_batch_size: Input should be less than or equal to 1048576"),
        ("sequence_length: 9223372036854775808\n", "sequence_length: Input should be less than or equal to 1073741824"),
        ("device_memory_gb: .nan\n", "device_memory_gb: Input should be a finite number"),
        ("device_memory_gb: .inf\n", "device_memory_gb: Input should be a finite number"),
        ("parameters_billion: 1.0e+308\n", "parameters_billion: Input should be less than or equal to 1000000"),
    ],
)
def test_bad_context_file_names_the_problem(tmp_path, text, message):
    (tmp_path / "model.yaml").write_text(text)
    with pytest.raises(InputError, match=message):
        build_context([], [], tmp_path / "model.yaml")
    with pytest.raises(InputError, match="no such file"):
        build_context([], [], tmp_path / "absent.yaml")


def test_user_values_become_facts_with_their_source(tmp_path):
    (tmp_path / "model.yaml").write_text("micro_batch_size: 4\nsequence_length: 4096\ndtype: bf16\ntensor_parallel: 8\n")
    context = build_context(["ASCEND_LAUNCH_BLOCKING=1"], [], tmp_path / "model.yaml")
    facts = extract_facts(load_profile(REAL / "rank0_ascend_pt"), context)
    env = {f.name: f for f in facts.of(EnvironmentFact)}
    assert env["ASCEND_LAUNCH_BLOCKING"].value == "1" and env["ASCEND_LAUNCH_BLOCKING"].sources == ["--env"]
    assert env["HCCL_RDMA_TC"].sources == ["rank0_ascend_pt/profiler_metadata.json[ENV_VARIABLES]"]
    (model,) = facts.of(ModelFact)
    assert (model.micro_batch_size, model.sequence_length, model.dtype, model.tensor_parallel) == (4, 4096, "bf16", 8)
    assert model.sources == [str(tmp_path / "model.yaml")]


def test_env_drives_rules_through_the_api_and_the_cli(tmp_path):
    build_rank(tmp_path, RankSpec(syncs_per_step=1))
    quiet = {f.id for f in advisor.diagnose(REAL).findings}
    assert "host.task_queue_level" not in quiet and "environment.launch_blocking" not in quiet
    told = advisor.diagnose(REAL, context=build_context(["TASK_QUEUE_ENABLE=1", "ASCEND_LAUNCH_BLOCKING=1"], [], None))
    ids = {f.id for f in told.findings}
    assert {"host.task_queue_level", "environment.launch_blocking"} <= ids
    result = run_cli("diagnose", str(REAL), "-f", "json", "--env", "TASK_QUEUE_ENABLE=0")
    finding = next(f for f in json.loads(result.stdout)["findings"] if f["id"] == "host.task_queue_level")
    assert finding["prescriptions"][0]["env"] == {"TASK_QUEUE_ENABLE": "2"}
    assert "TASK_QUEUE_ENABLE is 0" in finding["explanation"]


def test_device_memory_from_context_measures_the_peak_against_capacity(tmp_path):
    from advisor.facts import MemoryFact

    (tmp_path / "small.yaml").write_text("device_memory_gb: 2.2\n")
    (tmp_path / "large.yaml").write_text("device_memory_gb: 64\n")
    small = build_context([], [], tmp_path / "small.yaml")
    (memory,) = extract_facts(load_profile(REAL / "rank0_ascend_pt"), small).of(MemoryFact)
    assert memory.capacity_mb == pytest.approx(2.2 * 1024)
    assert memory.peak_share_of_capacity == pytest.approx(memory.process_peak_reserved_mb / (2.2 * 1024))
    assert str(tmp_path / "small.yaml") in memory.sources
    assert "memory.near_capacity" in {f.id for f in advisor.diagnose(REAL, context=small).findings}
    large = build_context([], [], tmp_path / "large.yaml")
    assert "memory.near_capacity" not in {f.id for f in advisor.diagnose(REAL, context=large).findings}


MOST = {"micro_batch_size": 1 << 20, "global_batch_size": 1 << 30, "sequence_length": 1 << 30, "hidden_size": 1 << 20,
        "num_layers": 100_000, "dtype": "fp32", "tensor_parallel": 1 << 20, "pipeline_parallel": 1 << 20,
        "data_parallel": 1 << 20, "context_parallel": 1 << 20, "expert_parallel": 1 << 20, "cards_per_node": 1,
        "device_memory_gb": float(1 << 20), "parameters_billion": 1e6}


@pytest.mark.parametrize("profile", [REAL, FIXTURES / "h200-recorded" / "train_bf16"], ids=["ascend", "gpu"])
def test_every_setting_at_its_largest_is_diagnosed(tmp_path, profile):
    """The bounds are what the rules can compute with: at every field's maximum (infinite device memory was exit 70,
    an OverflowError or a non-finite fact) the diagnosis completes."""
    (tmp_path / "most.json").write_text(json.dumps(MOST))
    result = run_cli("diagnose", str(profile), "--context", str(tmp_path / "most.json"), "-f", "json")
    assert result.returncode == 0, result.stderr
    model = [f for f in json.loads(result.stdout)["facts"] if f["id"] == "model"]
    assert model[0]["micro_batch_size"] == 1 << 20 and math.isfinite(model[0]["activation_mb"])


def test_an_environment_value_over_1_mib_is_cut_with_a_warning():
    """A value of tens of MB made the rule engine refuse the fact (its error 314): now its first MiB is kept."""
    report = advisor.diagnose(SAMPLE_SINGLE.parent, env={"MY_VAR": "a" * (20 << 20), "TASK_QUEUE_ENABLE": "2"})
    assert "env: the value of MY_VAR is 20,971,520 characters long; only its first 1,048,576 were kept" \
        in report.coverage.warnings
    kept = [f for f in report.facts if f["id"] == "environment:MY_VAR"]
    assert len(kept[0]["value"]) == 1 << 20
