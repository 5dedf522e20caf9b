"""The Chinese texts (zh) of the rules, the knowledge entries and the report labels against the mechanical part of
docs/zh-style.md: one term per concept (the banned variants below), full-width punctuation in Chinese prose, no space
beside a full-width mark, a space between Chinese and Latin letters or digits. Texts are checked as the reports show
them: folded YAML lines joined by advisor.text.collapse, with code spans and {placeholders} taken out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from advisor.resources import data_dir
from advisor.text import collapse

# banned variant → the term docs/zh-style.md settles on
BANNED = {
    "通信组": "通信域",
    "集体通信": "集合通信",
    "流水并行": "流水线并行",
    "主机": "Host",
    "暴露": "未掩盖（exposed communication）",
    "显存": "设备内存 / 预留内存",
    "内存重整": "内存整理",
    "归约": "规约",
    "处方": "建议",
    "假定": "假设",
    "空转": "空闲",
    "闲置": "空闲",
    "延迟": "时延（latency；延迟加载 is allowed）",
    "派发": "下发",
    "内核": "kernel / 算子",
    "固定内存": "锁页内存",
    "页锁定": "锁页内存",
    "增益": "收益",
    "每步": "每个迭代",
    "单步": "单个迭代",
    "存在在": "有…在…",
}
ALLOWED = {"延迟": re.compile("延迟加载")}  # lazy loading, not latency

HAN = "\u4e00-\u9fff"
FULL_WIDTH = "，。；：！？、（）“”‘’《》【】—"
RULES = {
    "half-width punctuation beside Chinese": re.compile(f"[{HAN}][,;:!?]|[,;:!?]\\s*[{HAN}]"),
    "half-width parenthesis around Chinese": re.compile(f"\\(\\s*[{HAN}]|[{HAN}]\\s*\\)"),
    "ASCII quotes around Chinese": re.compile(f'"[^"]*[{HAN}][^"]*"'),
    "space beside a full-width mark": re.compile(f"[{FULL_WIDTH}] | [{FULL_WIDTH}]"),
    "no space between Chinese and Latin or digits": re.compile(f"[{HAN}][A-Za-z0-9]|[A-Za-z0-9][{HAN}]"),
    "space between two Chinese characters": re.compile(f"[{HAN}] +[{HAN}]"),
}


def _zh(node, where: str):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "zh" and isinstance(value, str):
                yield where, collapse(value)
            else:
                yield from _zh(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _zh(value, f"{where}[{index}]")


def zh_texts() -> list[tuple[str, str]]:
    """Every zh text of the built-in rules and knowledge and of reports/labels.yaml, as (where, text)."""
    texts = []
    for name in ("rules", "knowledge"):
        root = data_dir(name)
        for path in sorted(root.rglob("*.yaml")):
            texts += _zh(yaml.safe_load(path.read_text(encoding="utf-8")), f"{name}/{path.relative_to(root)}")
    labels = yaml.safe_load((data_dir("reports") / "labels.yaml").read_text(encoding="utf-8"))["zh"]
    texts += [(f"reports/labels.yaml:zh.{key}", value) for key, value in labels.items()]
    return texts


def prose(text: str) -> str:
    """The text with its code spans and template fields masked (they keep their own punctuation): a code span becomes
    'x', so that the spacing around it is still checked; a field becomes '¤', neither Chinese nor Latin, as it may be
    filled with either (a number, or a Chinese label like {by})."""
    return re.sub(r"\{[^{}]*\}", "¤", re.sub(r"`[^`]*`", "x", text))


def problems(texts: list[tuple[str, str]]) -> list[str]:
    found = []
    for where, text in texts:
        plain = prose(text)
        for variant, preferred in BANNED.items():
            allowed = ALLOWED.get(variant)
            rest = allowed.sub("", plain) if allowed else plain
            if variant in rest:
                found.append(f"{where}: '{variant}' — write {preferred}")
        for name, pattern in RULES.items():
            for match in pattern.finditer(plain):
                found.append(f"{where}: {name}: …{plain[max(match.start() - 12, 0):match.end() + 12]}…")
    return found


def test_there_are_zh_texts_to_check():
    texts = zh_texts()
    assert len(texts) > 1000
    assert any(where.startswith("knowledge/") for where, _ in texts)
    assert any(where.startswith("reports/labels.yaml") for where, _ in texts)


def test_zh_texts_follow_the_style_guide():
    found = problems(zh_texts())
    assert not found, "docs/zh-style.md:\n" + "\n".join(found)


@pytest.mark.parametrize("bad", [
    "当某个通信组的集合通信等待时触发。",
    "主机与设备之间的拷贝阻塞了训练循环。",
    "暴露通信占迭代的 10%。",
    "空闲时间,占迭代的一半。",
    "设备空闲(等待 Host)。",
    "每个迭代1 次。",
    "计算占 5%， 空闲占 2%。",
    '阈值属于经验判断："占主导"指超过一半。',
])
def test_a_banned_variant_or_a_punctuation_slip_is_caught(bad):
    assert problems([("example", bad)])


@pytest.mark.parametrize("good", [
    "模块首次下发时延迟加载，每次下发的中位时延为 {h.launch_latency_us:,.0f} µs。",
    "用 `torch.compile(model, mode=\"reduce-overhead\")` 编译（PyTorch 2.0 及以上）。",
    "在 {by}上的分布相差 {distance:.0%}。",
])
def test_allowed_texts_pass(good):
    assert not problems([("example", good)])


def test_the_zh_report_puts_full_width_colons_after_its_labels():
    """Before: '**结论:**', '*收益估计方法:*' — the templates wrote an ASCII colon after every label (issue 29, item 7);
    the gain line read '96.53 ms 每迭代 (62.9% 占迭代), 实测'."""
    import advisor
    from advisor.render import View, render_document

    report = advisor.diagnose(Path(__file__).parent / "fixtures" / "ascend-level1-2ranks", lang="zh")
    for name in ("markdown", "html"):
        text = render_document(report, name, View(detail="full"))
        assert not re.findall(r"[\u4e00-\u9fff]:", text), name
        assert "每迭代 96.53 ms（占迭代的 62.9%），实测" in text, name


def test_the_zh_report_says_what_each_precondition_was_checked_against_in_chinese():
    """Before: '*适用范围：* ✓ torch_npu (profile format: ascend-pytorch); ✓ 迭代尚未以图重放 (checked against 2 host
    fact(s))' — the gate details (advisor/gates.py) in English between ASCII parentheses; now rewritten by
    reports/messages.yaml and set in full-width parentheses, the English report unchanged."""
    import advisor
    from advisor.render import View, render_document

    root = Path(__file__).parent / "fixtures" / "ascend-level1-2ranks"
    zh = render_document(advisor.diagnose(root, lang="zh"), "markdown", View(detail="full"))
    lines = [line for line in zh.splitlines() if line.startswith("*适用范围：*")]
    assert lines and not [line for line in lines if re.search(r"profile format|checked against|fact\(s\)| \((?:profile|--context|the )", line)]
    assert "torch\\_npu（profile 格式：ascend-pytorch）；✓ 迭代尚未以图重放（已对照 2 条 host 事实核对）" in zh
    en = render_document(advisor.diagnose(root), "markdown", View(detail="full"))
    assert "torch\\_npu (profile format: ascend-pytorch); ✓" in en
