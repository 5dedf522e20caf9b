"""Write advisor/facts/examples.json: the values each fact field takes on the bundled real profiles (the ones
tests/test_real_profiles.py diagnoses), for the fact catalogue (docs/facts.md, ``advisor facts --list``).

Per family and field: the distinct values seen, in the order the profiles give them — all of them for text and
yes/no fields with at most MAX_LISTED values (a closed set as far as the real profiles go), else the first few — and
the profiles they came from. Run by ``make fact-examples``; tests/test_docs.py checks that the file is current.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "advisor" / "facts" / "examples.json"
MAX_LISTED = 12  # text values listed in full up to this many
LONGEST_TEXT = 80  # longer text is a sentence for the explanations, not a value a condition tests
NUMBERS_SHOWN = 3


def real_profiles() -> list[str]:
    """The real profiles' paths under tests/fixtures, as tests/test_real_profiles.py lists them."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_real_profiles import EXPECTED  # noqa: PLC0415

    return list(EXPECTED)


def examples() -> dict[str, dict[str, dict[str, object]]]:
    from advisor.facts import extract_facts
    from advisor.ingest import load_profile

    seen: dict[str, dict[str, dict[str, object]]] = {}
    for profile in real_profiles():
        for fact in extract_facts(load_profile(ROOT / "tests" / "fixtures" / profile)).facts:
            fields = seen.setdefault(fact.family, {})
            for name, value in fact.model_dump(mode="json", exclude={"id", "sources"}).items():
                if value is None or isinstance(value, (list, dict)) or (isinstance(value, str) and len(value) > LONGEST_TEXT):
                    continue
                entry = fields.setdefault(name, {"values": [], "profiles": [], "more": False})
                if value in entry["values"]:
                    continue
                limit = MAX_LISTED if isinstance(value, (str, bool)) else NUMBERS_SHOWN
                if len(entry["values"]) >= limit:
                    entry["more"] = True
                    continue
                entry["values"].append(value)
                if profile not in entry["profiles"]:
                    entry["profiles"].append(profile)
    return {family: dict(sorted(fields.items())) for family, fields in sorted(seen.items())}


def text() -> str:
    return json.dumps(examples(), ensure_ascii=False, indent=1, sort_keys=False) + "\n"


if __name__ == "__main__":
    TARGET.write_text(text(), encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
