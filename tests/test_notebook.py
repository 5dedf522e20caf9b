"""The example notebook (docs/examples/diagnose.ipynb) is executed in a real Jupyter kernel, on the bundled Ascend
example and on a real GPU trace, and its outputs are checked against the Python API run here: the report, its
one-line repr, DataFrames (a comparison's changes among them) and a chart as a matplotlib figure shown as a PNG."""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import advisor
from advisor.render.common import report_labels, verdict_sentence

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "docs" / "examples" / "diagnose.ipynb"
ASCEND = "../../examples/ascend-level1-2ranks"
GPU = "../../tests/fixtures/pytorch-tutorial-resnet50/num_workers_0"
BASELINE = "../../examples/gpu-synthetic-2ranks"


def _kernel_spec(directory: Path) -> None:
    """A 'python3' kernel spec that runs this interpreter (found first on JUPYTER_PATH, whatever else is installed)."""
    spec = directory / "kernels" / "python3"
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (advisor tests)",
        "language": "python",
    }))


def run_notebook(profile: str, tmp_path: Path, monkeypatch) -> dict[str, dict]:
    """Execute the notebook with PROFILE set to ``profile``; the outputs of each tagged cell, by tag."""
    _kernel_spec(tmp_path / "jupyter")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    (parameters,) = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert f'PROFILE = "{ASCEND}"' in parameters.source
    parameters.source = parameters.source.replace(f'PROFILE = "{ASCEND}"', f"PROFILE = {profile!r}")
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    monkeypatch.chdir(NOTEBOOK.parent)  # where the kernel ran: the API run here reads the same relative paths
    outputs = {}
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        (tag,) = cell.metadata["tags"]
        assert not [o for o in cell.outputs if o.output_type == "error"], tag
        text = "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")
        data = {}
        for output in cell.outputs:
            data.update(output.get("data", {}))
        outputs[tag] = {"stdout": text, **data}
    return outputs


def _check_common(outputs: dict[str, dict], profile: str) -> advisor.Report:
    """The outputs every profile gives, against the API run here on the same path; the report."""
    report = advisor.diagnose(profile)
    page = outputs["report"]["text/html"]
    assert page.startswith('<div class="advisor-report">') and "<body" not in page and "<script" not in page.lower()
    assert html.escape(verdict_sentence(report, report_labels(report)), quote=False) in page
    assert outputs["report"]["text/markdown"] == advisor.render(report, "markdown")
    first = report.findings[0]
    assert f"first finding: {first.id}\n" in outputs["summary"]["stdout"]
    assert f"{report.summary.bottleneck}-bound, {report.summary.step_time_us / 1000:,.2f} ms per step" in outputs["summary"]["stdout"]
    table = outputs["findings"]["text/html"]
    assert "<table" in table and "charged_to" in table
    assert table.index(first.id) < table.index(report.findings[1].id)  # ranked as in the report
    steps = outputs["steps"]["text/plain"]
    assert "step_time_us" in steps and all(f"\n{r.rank} " in steps for r in report.summary.per_rank)
    assert "largest_part" in outputs["facts"]["text/html"]
    assert "refused: context: micro_batch_size: Input should be greater than or equal to 1" in outputs["errors"]["stdout"]
    assert outputs["render"]["stdout"] == advisor.render(report, "markdown")[:600] + "\n"
    gap = advisor.compare(BASELINE, profile)
    assert outputs["compare"]["stdout"].startswith(gap.headline + "\n")
    assert "step_time" in outputs["compare"]["text/html"]
    # the one-line reprs, a comparison's changes as a table, a chart as a figure shown as a PNG
    assert outputs["summary"]["stdout"].startswith(repr(report) + "\n") and len(repr(report)) < 200
    assert outputs["changes"]["stdout"] == repr(gap) + "\n"
    changes = outputs["changes"]["text/html"]
    assert "<table" in changes and "base_gain_us" in changes and "target_severity" in changes
    assert gap.changes and all(change.id in changes for change in gap.changes)
    assert outputs["figure"]["stdout"] == f"{sorted(report.figures())}\n"
    assert outputs["figure"]["image/png"] and "Figure size" in outputs["figure"]["text/plain"]
    return report


def test_the_notebook_runs_on_the_bundled_ascend_example(tmp_path, monkeypatch):
    outputs = run_notebook(ASCEND, tmp_path, monkeypatch)
    report = _check_common(outputs, ASCEND)
    assert report.findings[0].id == "cluster.straggler_outside_capture"  # as the README says
    assert "communication-bound" in outputs["summary"]["stdout"]
    # the env dict reached the rules: the task-queue rule fires only when told TASK_QUEUE_ENABLE=1
    assert "host.task_queue_level" not in {f.id for f in report.findings}
    assert "host.task_queue_level" in outputs["what-if"]["stdout"]


def test_the_notebook_runs_on_a_gpu_trace(tmp_path, monkeypatch):
    outputs = run_notebook(GPU, tmp_path, monkeypatch)
    report = _check_common(outputs, GPU)
    assert report.findings[0].id == "gpu.slow_dataloader"  # the DataLoader, as the README says
    assert "io-bound" in outputs["summary"]["stdout"]
    assert "dataloader" in outputs["facts"]["text/plain"]


def test_a_cell_that_fails_fails_the_run(tmp_path, monkeypatch):
    from nbclient.exceptions import CellExecutionError

    with pytest.raises(CellExecutionError, match="no such file or directory"):
        run_notebook("../../no/such/profile", tmp_path, monkeypatch)
