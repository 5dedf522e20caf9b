"""`advisor compare` warns when BASE and TARGET run different workloads (issue 19, item 2).

The criterion (advisor/compare.py operator_mix_distance): the total variation distance between the two sides'
operator mixes — each side's compute time split into shares over operator types (same platform) or classes
(across vendors), half the sum of the differences. Checked on real traces: the PyTorch tutorial's two runs of
one ResNet-50 (DataLoader num_workers 0 and 4) are one workload; that ResNet-50 against the real two-rank Ascend
capture (a small convolutional network, 5 Conv2D per step against ResNet-50's 53) is not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REAL

import advisor
from advisor.compare import WORKLOAD_DISTANCE, operator_mix_distance
from advisor.facts.models import OperatorDeltaFact

TUTORIAL = Path(__file__).parent / "fixtures" / "pytorch-tutorial-resnet50"


def _delta(key: str, base: float, target: float) -> OperatorDeltaFact:
    return OperatorDeltaFact(id=f"operator_delta:{key}", sources=[], key=key, matched_by="type", base_types=key,
                             target_types=key, base_count=1.0, target_count=1.0, position=1, base_us=base,
                             target_us=target, diff_us=target - base, ratio=None, share_of_base_step=0.0,
                             operator_class=key.lower(), class_diff_us=target - base, class_share_of_base_step=0.0)


def test_the_distance_is_the_share_of_compute_time_that_moved():
    assert operator_mix_distance([_delta("MatMul", 100, 50), _delta("Add", 20, 10)]) == pytest.approx(0.0)
    assert operator_mix_distance([_delta("MatMul", 100, 0), _delta("Conv", 0, 80)]) == pytest.approx(1.0)
    # a fused kernel replacing a third of the compute time moves the mix by a third
    fused = [_delta("MatMul", 60, 60), _delta("Softmax", 30, 0), _delta("FlashAttention", 0, 30)]
    assert operator_mix_distance(fused) == pytest.approx(1 / 3) and 1 / 3 < WORKLOAD_DISTANCE
    assert operator_mix_distance([_delta("MatMul", 100, 0)]) is None  # TARGET has no operator time


@pytest.fixture(scope="module")
def tutorial_pair():
    return advisor.compare(TUTORIAL / "num_workers_0", TUTORIAL / "num_workers_4")


@pytest.fixture(scope="module")
def resnet_against_ascend():
    return advisor.compare(TUTORIAL / "num_workers_0", REAL)


def test_one_workload_twice_gives_no_warning(tutorial_pair):
    assert tutorial_pair.operators_matched_by == "type"
    assert tutorial_pair.operator_mix_distance < 0.15
    assert not [w for w in tutorial_pair.warnings if "different workloads" in w]


def test_a_different_model_is_named_a_different_workload(resnet_against_ascend):
    gap = resnet_against_ascend
    assert gap.operators_matched_by == "class"
    assert gap.operator_mix_distance >= WORKLOAD_DISTANCE
    warning = next(w for w in gap.warnings if "seem to run different workloads" in w)
    assert f"{gap.operator_mix_distance:.0%} differently" in warning and "convolution" in warning
    assert "operator classes" in warning


def test_the_warning_reaches_every_format_and_standard_error(tmp_path):
    from typer.testing import CliRunner

    from advisor.cli import app

    outputs = [tmp_path / f"gap.{suffix}" for suffix in ("html", "md", "json")]
    result = CliRunner().invoke(app, ["compare", str(TUTORIAL / "num_workers_0"), str(REAL),
                                      *[a for o in outputs for a in ("-o", str(o))]])
    assert result.exit_code in (0, 3), result.output
    assert "seem to run different workloads" in result.output  # stderr (CliRunner mixes the two)
    html, markdown, document = (o.read_text(encoding="utf-8") for o in outputs)
    assert "seem to run different workloads" in html and "seem to run different workloads" in markdown
    assert markdown.index("## Warnings") < markdown.index("## Step breakdown")  # before the tables it qualifies
    data = json.loads(document)
    assert data["operator_mix_distance"] >= WORKLOAD_DISTANCE and any("different workloads" in w for w in data["warnings"])
