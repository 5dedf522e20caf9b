"""The registries a contributor extends (docs/architecture.md, "How to add …"): a fact family, an input format and a
renderer each go in with their own module and one registry line, and are then run end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from conftest import SAMPLE_SINGLE

import advisor
from advisor import cluster
from advisor.facts import extract_facts, rank, reduce
from advisor.facts.models import ContextFact, Fact
from advisor.facts.rank import RankFamily
from advisor.facts.reduce import ProfileScope, ReduceFamily
from advisor.facts.scope import RankScope
from advisor.ingest import formats, load_profile
from advisor.ingest.model import Coverage, InputFormat, Layout, RankData, RankDir
from advisor.render import DOCUMENTS


class ToyFact(Fact):
    family: ClassVar[str] = "toy"
    source: ClassVar[str] = "the test"
    rank: int | None = None
    steps: int


def toy_facts(scope: RankScope) -> list[Fact]:
    """A rank family that reads what earlier families left in the scope."""
    return [ToyFact(id=f"toy:r{scope.rank.rank}", rank=scope.rank.rank, steps=len(scope.steps))]


def toy_profile_facts(scope: ProfileScope) -> list[Fact]:
    return [ToyFact(id="toy:profile", steps=len(scope.breakdowns))]


def test_a_fact_family_added_to_the_registries_is_run_in_its_place(monkeypatch):
    monkeypatch.setattr(rank, "RANK_FAMILIES", [*rank.RANK_FAMILIES, RankFamily(toy_facts, "head")])
    monkeypatch.setattr(reduce, "REDUCE_FAMILIES", [*reduce.REDUCE_FAMILIES, ReduceFamily("end", toy_profile_facts)])
    facts = extract_facts(load_profile(SAMPLE_SINGLE)).facts
    families = [f.family for f in facts]
    toy = families.index("toy")
    assert facts[toy].steps == len([f for f in facts if f.family == "step"]) > 0  # the step family ran before it
    assert families.index("sequence") < toy < families.index("memory")  # head: before the rank's tail families
    assert facts[-1].id == "toy:profile" and facts[-1].steps == 1


def _toy_rank_at(path: Path, is_dir: bool) -> Path | None:
    return path if not is_dir and path.suffix == ".toy" else None


def _toy_layout(found: list[Path], _path: Path, base: Path) -> Layout:
    return Layout(format="toy", ranks=[RankDir(p, p.parent, None) for p in found], base=base, warnings=[])


def _toy_read(found: RankDir, _base: Path, coverage: Coverage, _survey: bool) -> RankData:
    coverage.read.append(found.path.name)
    recorded = json.loads(found.path.read_text())["rank"]
    return RankData(rank=recorded if found.rank is None else found.rank, path=found.path, output_dir=found.path.parent,
                    metadata={"recorded": recorded})


TOY = InputFormat(platforms={"toy": "ascend"}, described="toy files", what="toy file(s)", rank_at=_toy_rank_at,
                  layout=_toy_layout, read=_toy_read, finish=lambda ranks, _layout, _coverage: sorted(ranks, key=lambda r: r.rank),
                  rank_hint=lambda path: json.loads(path.read_text())["rank"])


def test_an_input_format_added_to_the_registry_is_discovered_and_read(monkeypatch, tmp_path):
    monkeypatch.setattr(formats, "FORMATS", [*formats.FORMATS, TOY])
    for number in (1, 0):
        (tmp_path / f"rank{number}.toy").write_text(json.dumps({"rank": number}))
    profile = load_profile(tmp_path)
    assert (profile.format, profile.platform) == ("toy", "ascend")
    assert [r.rank for r in profile.ranks] == [0, 1] and sorted(profile.coverage.read) == ["rank0.toy", "rank1.toy"]
    assert load_profile(tmp_path / "rank1.toy").ranks[0].rank == 1  # a file given is one rank
    analysed, facts = cluster.run(tmp_path)  # the way `advisor diagnose` reads: one task per rank, then the reduce
    assert [r.rank for r in analysed.ranks] == [0, 1] and [r.metadata["recorded"] for r in analysed.ranks] == [0, 1]
    (context,) = facts.of(ContextFact)
    assert context.rank_count == 2


def test_a_renderer_added_to_the_registry_is_reached_by_its_name(monkeypatch):
    monkeypatch.setitem(DOCUMENTS, "toy", lambda report, view: f"{len(report.findings)} findings\n")
    report = advisor.diagnose(SAMPLE_SINGLE)
    assert advisor.render(report, "toy") == f"{len(report.findings)} findings\n"
