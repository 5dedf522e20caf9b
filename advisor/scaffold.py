"""``advisor rules new``: a rule file and its knowledge entry to start from, in a pack directory.

The scaffold is a working rule (a condition on the step breakdown, a fire and a quiet case that pass)
whose texts say TODO, so ``advisor rules lint`` points at every text that still needs writing.
"""

from __future__ import annotations

from pathlib import Path

from advisor.engine.spec import RULE_ID
from advisor.errors import InputError
from advisor.vocabulary import CATEGORIES

_RULE = """\
id: {id}
title:
  en: "TODO: the problem in a few words, as a finding title"
  zh: "TODO: 用一句话说明问题"
category: {category}
platforms: [ascend]                 # where it runs: [ascend] (NPU profiles), [gpu] (PyTorch traces), or [ascend, gpu]
description:
  en: "TODO: what the rule detects, from which facts, and why it costs time."
  zh: "TODO: 规则检测什么、依据哪些事实、为什么耗时。"
when:
  all:
    # One item per fact; `advisor facts --list` documents every family and field.
    - fact: breakdown
      as: b
      where:
        scope: rank
        free_ratio: {{gte: 0.2}}
then:
  recommend: [{id}]
  gain_us: b.free_us * 0.5          # µs per step the fix can save; or 'unknown'
  gain_basis: assumed               # measured (time the profile shows would go) or assumed (a planning factor)
  charged_to: idle                  # the bucket of the step the gain comes out of (docs/rule-format.md)
  key: "rank {{b.rank}}"            # one finding per distinct key
explain:
  en: "TODO: the finding, with numbers: the device is idle {{b.free_ratio:.1%}} of the step."
  zh: "TODO: 带数字的结论：设备在 {{b.free_ratio:.1%}} 的迭代时间内空闲。"
tests:
  - name: fires at 30 % free time
    facts:
      - {{fact: breakdown, scope: rank, rank: 0, step_time_us: 1000.0, free_us: 300.0, free_ratio: 0.3}}
    expect: fire
  - name: quiet at 5 % free time
    facts:
      - {{fact: breakdown, scope: rank, rank: 0, step_time_us: 1000.0, free_us: 50.0, free_ratio: 0.05}}
    expect: quiet
"""

_KNOWLEDGE = """\
id: {id}
title:
  en: "TODO: the fix, as an imperative"
  zh: "TODO: 修复方法"
category: {category}
platforms: [ascend]                 # where the advice holds: [ascend], [gpu], or [ascend, gpu]
problem:
  en: "TODO: why this pattern is slow, in the reader's terms."
  zh: "TODO: 为什么这种情况慢。"
actions:
  - en: "TODO: the first concrete step (a setting, a code change, a command)."
    zh: "TODO: 第一个具体步骤。"
gain:
  model:
    en: "TODO: how the rule's gain_us is estimated."
    zh: "TODO: gain_us 的估算方法。"
references:
  - title: "TODO: where this advice comes from"
"""


def scaffold(rule_id: str, category: str, pack: Path) -> list[Path]:
    """Write ``pack/rules/<category>/<id>.yaml`` and ``pack/knowledge/<category>/<id>.yaml``; never overwrite."""
    if not RULE_ID.match(rule_id):
        raise InputError(f"{rule_id!r} is not a rule id: use dotted lower-case words, e.g. team.slow_embedding")
    if category not in CATEGORIES:
        raise InputError(f"unknown category {category!r}; one of: {', '.join(CATEGORIES)}")
    files = {
        pack / "rules" / category / f"{rule_id}.yaml": _RULE,
        pack / "knowledge" / category / f"{rule_id}.yaml": _KNOWLEDGE,
    }
    existing = [str(p) for p in files if p.exists() or p.is_symlink()]  # a dangling link is not written through
    if existing:
        raise InputError(f"{', '.join(existing)}: already exists; not overwritten")
    for path, template in files.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("x", encoding="utf-8") as handle:  # O_EXCL: never follows a link, never overwrites
                handle.write(template.format(id=rule_id, category=category))
        except FileExistsError as exc:
            raise InputError(f"{path}: already exists; not overwritten") from exc
        except OSError as exc:
            raise InputError(f"{path}: cannot be written ({exc.strerror or exc})") from exc
    return list(files)
