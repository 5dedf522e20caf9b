"""Issue 15: fused-operator gains from the whole decomposed kernel chain, and SwiGLU only where a gate Mul follows."""

from __future__ import annotations

import json

import pytest
from builders import BASE_US, STEP_SPACING_US, Kernel, RankSpec, StepRow, build_rank

import advisor
from advisor.facts import extract_facts
from advisor.facts.models import ChainFact
from advisor.ingest import load_profile

V = "AI_VECTOR_CORE"
HIDDEN = "4096,1,4096"
# KB-FU-02's kernels of a Python RMSNorm, with its casts: x.float(), x², mean, + ε, rsqrt, × x, .type_as, × weight
RMS_NORM = [("Cast", 10.0, HIDDEN), ("Square", 12.0, HIDDEN), ("ReduceMeanD", 15.0, HIDDEN), ("Add", 5.0, "4096,1,1;1"),
            ("Rsqrt", 5.0, "4096,1,1"), ("Mul", 12.0, f"{HIDDEN};4096,1,1"), ("Cast", 10.0, HIDDEN),
            ("Mul", 12.0, f"4096;{HIDDEN}")]
# KB-FU-01: q·cos + rotate_half(q)·sin
ROTARY = [("Mul", 9.0, "4096,32,128;4096,1,128"), ("StridedSliceD", 4.0, "4096,32,128"), ("Neg", 4.0, "4096,32,64"),
          ("StridedSliceD", 4.0, "4096,32,128"), ("ConcatD", 6.0, "4096,32,64;4096,32,64"),
          ("Mul", 9.0, "4096,32,128;4096,1,128"), ("Add", 7.0, "4096,32,128;4096,32,128")]
UP = ("MatMulV2", 300.0, "4096,4096;4096,22016")
GATE = "4096,11008"
# KB-FU-04: a, b = x.chunk(2, -1); silu(a) * b
SWIGLU = [UP, ("StridedSliceD", 8.0, "4096,22016"), ("StridedSliceD", 8.0, "4096,22016"), ("Swish", 30.0, GATE),
          ("Mul", 25.0, f"{GATE};{GATE}")]
SEPARATE = [("MatMulV2", 150.0, "4096,4096;4096,11008"), ("Swish", 30.0, GATE), ("MatMulV2", 150.0, "4096,4096;4096,11008"),
            ("Mul", 25.0, f"{GATE};{GATE}")]  # silu(gate_proj(x)) * up_proj(x)
PLAIN_SILU = [("Conv2D", 200.0, "8,320,64,64;320,320,3,3"), ("GroupNorm", 40.0, "8,320,64,64"),
              ("Swish", 30.0, "8,320,64,64"), ("Mul", 10.0, "8,320,64,64;1")]  # a UNet block: the Mul scales, no gate


def _rank(tmp_path, layer: list[tuple[str, float, str]], layers: int = 4, silu_calls: int = 0):
    kernels = [Kernel(step, f"{op}_{n}_{i}", op, "AI_CORE" if op.startswith(("MatMul", "Conv")) else V, us, shapes=shape)
               for step in (5, 6) for n in range(layers) for i, (op, us, shape) in enumerate(layer)]
    rank_dir = build_rank(tmp_path, RankSpec(kernels=kernels, kernel_spacing_us=400.0, syncs_per_step=0, dataloader_us=50.0,
                                             steps=[StepRow(s, 4000.0, 100.0, 500.0) for s in (5, 6)]))
    if silu_calls:  # the framework op in the trace, as torch_npu records F.silu
        path = rank_dir / "ASCEND_PROFILER_OUTPUT/trace_view.json"
        events = json.loads(path.read_text())
        python = next(e["pid"] for e in events if e["ph"] == "M" and e["args"]["name"] == "Python")
        for step in (5, 6):
            start = BASE_US + step * STEP_SPACING_US
            events += [{"ph": "X", "name": "aten::silu", "pid": python, "tid": 1, "cat": "cpu_op",
                        "ts": f"{start + 1000.0 + 100.0 * i:.3f}", "dur": 20.0} for i in range(silu_calls)]
        path.write_text(json.dumps(events))
    return tmp_path


def _chains(path) -> dict[str, ChainFact]:
    return {f.pattern: f for f in extract_facts(load_profile(path)).of(ChainFact)}


def _finding(path, rule):
    return next((f for f in advisor.diagnose(path).findings if f.id == rule), None)


def test_rms_norm_gain_is_the_whole_chain_not_one_pair(tmp_path):
    chain = _chains(_rank(tmp_path, RMS_NORM))["rms_norm"]
    assert (chain.count_per_step, chain.kernels_per_chain) == (4.0, 8.0)
    assert chain.us_per_step == pytest.approx(4 * sum(us for _, us, _ in RMS_NORM))  # 324 µs, not Rsqrt + Mul (68)
    assert chain.sequence == "Cast → Square → ReduceMeanD → Add → Rsqrt → Mul → Cast → Mul"
    finding = _finding(tmp_path, "fused.rms_norm_decomposed")
    assert finding.estimated_gain_us == pytest.approx(324.0) and finding.gain_basis == "measured"


def test_rotary_gain_is_the_whole_chain(tmp_path):
    chain = _chains(_rank(tmp_path, ROTARY))["rotary_embedding"]
    assert (chain.count_per_step, chain.kernels_per_chain) == (4.0, 7.0)
    assert chain.us_per_step == pytest.approx(4 * 43.0)
    assert _finding(tmp_path, "fused.rotary_decomposed").estimated_gain_us == pytest.approx(172.0)


def test_swiglu_chain_takes_the_chunk_slices_the_silu_and_its_gate(tmp_path):
    chain = _chains(_rank(tmp_path, SWIGLU, silu_calls=4))["swiglu"]
    assert chain.sequence == "StridedSliceD → StridedSliceD → Swish → Mul" and chain.adjacent_share == 1.0
    assert chain.us_per_step == pytest.approx(4 * 71.0)  # the up-projection MatMul is not part of it
    assert _finding(tmp_path, "fused.swiglu_decomposed").estimated_gain_us == pytest.approx(284.0)
    assert _finding(tmp_path, "fused.swiglu_api") is None


def test_separate_gate_and_up_projections_are_the_api_finding(tmp_path):
    chain = _chains(_rank(tmp_path, SEPARATE, silu_calls=4))["swiglu"]
    assert chain.sequence == "Swish → Mul" and chain.adjacent_share == 0.0
    finding = _finding(tmp_path, "fused.swiglu_api")
    assert finding is not None and finding.estimated_gain_us == pytest.approx(4 * 55.0)
    assert _finding(tmp_path, "fused.swiglu_decomposed") is None


def test_a_plain_silu_is_not_swiglu(tmp_path):
    # GroupNorm → SiLU → a scaling Mul (its second input is a scalar): no gate, so no SwiGLU, whatever aten::silu says
    assert "swiglu" not in _chains(_rank(tmp_path, PLAIN_SILU, silu_calls=4))
    ids = {f.id for f in advisor.diagnose(tmp_path).findings}
    assert not ids & {"fused.swiglu_api", "fused.swiglu_decomposed"}


def test_without_shapes_only_a_mul_right_after_the_silu_gates_it(tmp_path):
    no_shapes = [(op, us, "") for op, us, _ in SEPARATE]
    assert "swiglu" not in _chains(_rank(tmp_path / "separate", no_shapes))
    adjacent = [(op, us, "") for op, us, _ in SWIGLU]
    assert _chains(_rank(tmp_path / "adjacent", adjacent))["swiglu"].count_per_step == 4.0
