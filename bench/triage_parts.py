"""Process time of the parts of a triage run, in this process (one core): the survey task of a rank (reading its
cluster-level files, then their facts), the reduce over every rank's survey, and the rules over the facts.

    python bench/triage_parts.py bench/data/cluster-512x1 --sample 24 --repeat 3

Process time (``time.process_time``), not wall time: on a shared machine it is far less noisy. Each figure is the
median over the sampled ranks and repeats; the reduce and the rules run ``--repeat`` times over all ranks' surveys.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from advisor.diagnose import default_rulebook
from advisor.facts.rank import rank_facts
from advisor.facts.reduce import reduce_facts
from advisor.ingest.discover import discover
from advisor.ingest.formats import format_of
from advisor.ingest.model import Coverage, Profile, RankDir
from advisor.ingest.paths import Shown


def survey(found: RankDir, base: Path, kind: str) -> tuple[float, float, object]:
    """(read s, facts s, RankFacts) of one rank's survey task."""
    start = time.process_time()
    data = format_of(kind).read(RankDir(found.path, found.output_dir, found.rank), base, Coverage(), True)
    read = time.process_time()
    facts = rank_facts(data, Shown(base), None, deep=False)
    return read - start, time.process_time() - read, facts


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cluster", type=Path)
    parser.add_argument("--sample", type=int, default=24, help="ranks timed one by one (spread over the cluster)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    layout = discover(args.cluster)
    ranks = [r for r in layout.ranks if r.rank is not None]
    step = max(len(ranks) // args.sample, 1)
    reads, facts = [], []
    for _ in range(args.repeat):
        for found in ranks[::step][:args.sample]:
            read, fact, _ = survey(found, layout.base, layout.format)
            reads.append(read)
            facts.append(fact)
    print(f"survey task of one rank: read {median_ms(reads)}, facts {median_ms(facts)}, "
          f"total {median_ms([r + f for r, f in zip(reads, facts)])}")
    surveyed = [survey(found, layout.base, layout.format)[2] for found in ranks]
    profile = Profile(root=args.cluster, base=layout.base, format=layout.format, ranks=[r.meta for r in surveyed],
                      coverage=Coverage(), triage=None)
    book = default_rulebook()
    engine = book.engine(r for r in book.rules.values() if profile.platform in r.spec.platforms)
    reduces, rules = [], []
    for _ in range(args.repeat):
        start = time.process_time()
        factset = reduce_facts(profile, surveyed)
        middle = time.process_time()
        engine.run(factset.facts)
        rules.append(time.process_time() - middle)
        reduces.append(middle - start)
    print(f"reduce of {len(surveyed)} surveyed ranks: {median_ms(reduces)}; "
          f"rules over its {len(factset.facts):,} facts: {median_ms(rules)}")


if __name__ == "__main__":
    main()
