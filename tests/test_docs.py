"""Documentation that states facts about the code is checked against it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from advisor import errors

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_exit_codes_in_docs_match_the_code():
    table = dict(re.findall(r"^\| (\d+) \| `(EXIT_\w+)` \|", (DOCS / "errors.md").read_text(), re.M))
    code = {str(getattr(errors, name)): name for name in dir(errors) if name.startswith("EXIT_")}
    assert table == code


def test_fact_catalogue_doc_is_generated_from_the_models():
    from advisor.facts.catalogue import catalogue_markdown

    assert (DOCS / "facts.md").read_text(encoding="utf-8") == catalogue_markdown(), "run `make docs`"


def test_fact_examples_are_what_the_real_profiles_give():
    """The catalogue's 'on the real profiles' column (issue 32, item 3: a rule written from the docs said 'Atlas A2/A3'
    where the profiles say 'Atlas A2/A3 (Ascend 910B/910C)') comes from advisor/facts/examples.json, which must be what
    the bundled real profiles' facts are today."""
    import importlib.util

    from advisor.facts.catalogue import seen_text

    spec = importlib.util.spec_from_file_location("fact_examples", DOCS / "fact_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.TARGET.read_text(encoding="utf-8") == module.text(), "run `make fact-examples` (then `make docs`)"
    assert seen_text("context", "hardware").startswith("one of 'Atlas A2/A3 (Ascend 910B/910C)'")
    assert "'PYTORCH_NPU_ALLOC_CONF'" in seen_text("environment", "name")


def test_readme_markdown_excerpt_matches_todays_report():
    """The README quotes what `advisor diagnose examples/ascend-level1-2ranks -f md` prints: the brief report, whole."""
    import advisor
    from advisor.render import View, render_markdown

    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    quoted = "\n".join(line[2:] if line.startswith("> ") else "" for line in readme.splitlines() if line.startswith(">"))
    blocks = [" ".join(block.split()) for block in quoted.split("\n\n") if block.strip()]
    assert len(blocks) >= 8
    report = advisor.diagnose(DOCS.parent / "examples" / "ascend-level1-2ranks")
    # the path as the command line above gives it, from the repository's root
    report = report.model_copy(update={"input": report.input.model_copy(update={"path": "examples/ascend-level1-2ranks"})})
    brief = render_markdown(report, View("brief"))
    flat = " ".join(brief.split())
    for block in blocks:
        assert block in flat, f"README excerpt is out of date: {block[:80]}…"
    assert " ".join(quoted.split()) == flat, "the README quotes the whole brief report"
    assert f"{len(brief.splitlines())} lines" in readme


def test_readme_counts_of_rules_and_prescriptions_are_current():
    from advisor.rulebook import load_rulebook

    book = load_rulebook(installed=False)
    readme = " ".join((DOCS.parent / "README.md").read_text(encoding="utf-8").split())
    match = re.search(r"has (\d+) prescriptions .*? at least one of (\d+) rules", readme)
    assert match and (int(match.group(1)), int(match.group(2))) == (len(book.knowledge), len(book.rules))


_RAISED = {"FileProblem", "InputError", "RuleError", "NothingToDiagnose", "EngineError", "AdvisorError"}


def _template(node: ast.AST) -> str | None:
    """A message argument as text with ``{}`` for every interpolated part (None when built at run time)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _messages() -> list[tuple[str, str]]:
    """(where, template) of every message the code raises to the user or appends to a warnings list."""
    found = []
    for path in sorted((ROOT / "advisor").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            if name in _RAISED or name == "_note" or (name == "append" and owner == "warnings"):
                text = _template(node.args[0])
                if text is not None:
                    found.append((f"{path.relative_to(ROOT)}:{node.lineno}", text))
    return found


def test_errors_doc_lists_every_message_the_code_can_give():
    doc = (DOCS / "errors.md").read_text(encoding="utf-8").replace("\\|", "|")
    messages = _messages()
    assert len(messages) > 60
    undocumented = []
    for where, text in messages:
        for fragment in text.split("{}"):
            fragment = fragment.strip(" ;:,.()'\"")
            if len(fragment) >= 6 and fragment not in doc:
                undocumented.append(f"{where}: {fragment!r}")
    assert not undocumented, "docs/errors.md lacks:\n" + "\n".join(undocumented)


def test_quoted_command_outputs_are_what_the_commands_print():
    """The README's and docs' `$ advisor …` blocks (issue 29, item 8: the decode example said '48 iterations' and
    '1,896.6 µs' after the report had changed) are today's output of their commands; `make docs` rewrites them."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("command_outputs", DOCS / "command_outputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    quoted = {(path.name, command): output for path in module.QUOTING
              for command, output in module.quoted(path.read_text(encoding="utf-8"))}
    assert {command.split()[1] for _, command in quoted} >= {"diagnose", "plan"}
    assert len(quoted) >= 4
    for (name, command), output in quoted.items():
        assert output == module.output_of(command), f"{name}: `{command}` prints something else today: run `make docs`"
