"""Spreadsheets (issue 29, item 6): ``-o findings.csv`` and ``-o report.xlsx`` (``-f csv|xlsx``) for diagnose and
compare, read back with the csv module and openpyxl on real profiles, and checked against the JSON report."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, REAL, SAMPLE_CLUSTER
from openpyxl import load_workbook
from typer.testing import CliRunner

import advisor
from advisor.cli import app
from advisor.cli.options import OutputFormat
from advisor.cli.output import write_report
from advisor.errors import InputError
from advisor.render import View, render_csv
from advisor.render.spreadsheets import cell_text

GPU = FIXTURES / "h200-recorded" / "train_bf16"  # a real PyTorch profiler trace from an H200
BOM = "\ufeff".encode()
HOSTILE = ("=cmd|' /C calc'!A0", "@SUM(A1:A9)")  # operator types that a spreadsheet would evaluate as formulas


def _invoke(*arguments: str):
    return CliRunner().invoke(app, list(arguments), env={"LANG": "C.UTF-8", "COLUMNS": "100"})


def _diagnose(path: Path, out: Path, *names: str, options: tuple[str, ...] = ()) -> dict:
    """Diagnose ``path`` once into ``out``/names and a JSON report; the JSON report, parsed."""
    outputs = [argument for name in (*names, "report.json") for argument in ("-o", str(out / name))]
    result = _invoke("diagnose", str(path), *outputs, *options)
    assert result.exit_code == 0, result.stderr
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


def _csv_rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8-sig"))))


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("real")
    return out, _diagnose(REAL, out, "findings.csv", "report.xlsx")


def test_csv_has_a_row_per_finding_as_the_json_report_ranks_them(real):
    out, report = real
    assert (out / "findings.csv").read_bytes().startswith(BOM)  # Excel reads it as UTF-8, not the ANSI code page
    header, *rows = _csv_rows(out / "findings.csv")
    assert header[:5] == ["#", "Rule", "Subject", "Severity", "Finding"]
    assert len(rows) == len(report["findings"]) > 5
    column = {name: index for index, name in enumerate(header)}
    for position, (row, finding) in enumerate(zip(rows, report["findings"], strict=True), 1):
        assert int(row[column["#"]]) == position and row[column["Rule"]] == finding["id"]
        assert row[column["Subject"]] == (finding["key"] or "")
        assert row[column["Finding"]] == finding["title"] and row[column["Why"]] == finding["explanation"]
        assert row[column["Charged to"]] == (finding["charged_to"] or "")
        gain = row[column["Estimated gain, µs"]]
        assert (float(gain) if gain else None) == pytest.approx(finding["estimated_gain_us"], abs=1e-3)
        assert row[column["Gain basis"]] == (finding["gain_basis"] or "not estimated")
    top, first = rows[0], report["findings"][0]
    assert float(top[column["Estimated gain, %"]]) == pytest.approx(100 * first["estimated_gain_ratio"], abs=1e-3)
    prescription = first["prescriptions"][0]
    assert top[column["What to do"]] == f"{prescription['title']}: {prescription['actions'][0]}"


def test_workbook_has_findings_steps_operators_and_summary_as_numbers(real):
    out, report = real
    book = load_workbook(out / "report.xlsx")
    assert book.sheetnames == ["Findings", "Steps", "Operators", "Summary"]
    findings = book["Findings"]
    assert findings.max_row - 1 == len(report["findings"])
    assert findings["B2"].value == report["findings"][0]["id"]
    assert findings["F2"].value == pytest.approx(report["findings"][0]["estimated_gain_us"])
    assert findings["G2"].value == pytest.approx(report["findings"][0]["estimated_gain_ratio"])
    assert findings["F2"].data_type == "n" and findings["G2"].number_format == "0.0%"
    steps = [f for f in report["facts"] if f["type"] == "step"]
    rows = list(book["Steps"].iter_rows(min_row=2, values_only=True))
    assert [(rank, step) for rank, step, *_ in rows] == sorted((f["rank"], f["step"]) for f in steps)
    assert rows[0][2] == pytest.approx(next(f["step_time_us"] for f in steps if f["rank"] == rows[0][0]))
    operators = list(book["Operators"].iter_rows(min_row=2, values_only=True))
    assert [row[0] for row in operators] == [op["op_type"] for op in report["summary"]["top_operators"]]
    assert all(isinstance(value, (int, float)) for row in operators for value in row[3:])
    summary = dict(book["Summary"].iter_rows(min_row=2, values_only=True))
    assert summary["Step time, µs"] == pytest.approx(report["summary"]["step_time_us"])
    assert summary["Compute, %"] == pytest.approx(report["summary"]["compute_ratio"])
    for sheet in book:
        assert sheet.freeze_panes == "A2" and all(cell.font.b for cell in sheet[1])
        widths = [sheet.column_dimensions[cell.column_letter].width for cell in sheet[1]]
        assert all(4 <= width <= 60 for width in widths), (sheet.title, widths)


def test_gpu_trace_workbook_in_chinese(tmp_path):
    report = _diagnose(GPU, tmp_path, "report.xlsx", "findings.csv", options=("--lang", "zh"))
    book = load_workbook(tmp_path / "report.xlsx")
    header = [cell.value for cell in book["Findings"][1]]
    assert header[:5] == ["#", "规则", "对象", "严重程度", "问题"]
    assert [row[1] for row in book["Findings"].iter_rows(min_row=2, values_only=True)] == [
        f["id"] for f in report["findings"]]
    assert book["Findings"]["D2"].value in ("高", "中", "低")
    assert book["Operators"].max_row - 1 == len(report["summary"]["top_operators"]) > 0
    assert book["Steps"].max_row - 1 == sum(f["type"] == "step" for f in report["facts"]) > 1
    text = (tmp_path / "findings.csv").read_bytes()
    assert text.startswith(BOM) and "规则" in text.decode("utf-8-sig").splitlines()[0]


def test_filters_and_format_option_apply_to_spreadsheets(tmp_path):
    result = _invoke("diagnose", str(REAL), "-f", "csv", "--max-findings", "3")
    assert result.exit_code == 0, result.stderr
    header, *rows = csv.reader(io.StringIO(result.stdout.removeprefix("\ufeff")))
    assert len(rows) == 3 and header[0] == "#"
    result = _invoke("diagnose", str(REAL), "-f", "xlsx", "-o", str(tmp_path / "report.bin"), "--min-severity", "high")
    assert result.exit_code == 0, result.stderr
    book = load_workbook(io.BytesIO((tmp_path / "report.bin").read_bytes()))
    findings = list(book["Findings"].iter_rows(min_row=2, values_only=True))
    assert findings and {row[3] for row in findings} == {"high"}
    result = _invoke("diagnose", str(REAL), "-f", "xlsx")  # standard output that is not a terminal gets the bytes
    assert result.exit_code == 0, result.stderr
    assert load_workbook(io.BytesIO(result.stdout_bytes)).sheetnames[0] == "Findings"


def test_the_python_api_renders_the_csv_but_not_the_binary_workbook():
    report = advisor.diagnose(str(REAL))
    assert advisor.render(report, "csv", max_findings=2) == render_csv(report, View(max_findings=2))
    with pytest.raises(InputError, match="unknown report format 'xlsx'"):
        advisor.render(report, "xlsx")


def test_a_workbook_is_not_printed_on_a_terminal(monkeypatch):
    class Terminal(io.TextIOWrapper):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdout", Terminal(io.BytesIO()))
    with pytest.raises(InputError, match="a workbook is binary and is not printed on a terminal; pass -o FILE.xlsx"):
        write_report(OutputFormat.xlsx, None, print, lambda name: b"PK")


def test_formula_injection_from_operator_names_is_neutralised(tmp_path):
    """Operator types from the profile that start like a formula are shown as text, never evaluated."""
    hostile = tmp_path / "prof"
    shutil.copytree(REAL, hostile)
    for table in hostile.glob("*/ASCEND_PROFILER_OUTPUT/*.csv"):
        text = table.read_text(encoding="utf-8")
        table.write_text(text.replace(",ForeachAddList,", f",{HOSTILE[0]},").replace(",TransData,", f",{HOSTILE[1]},"),
                         encoding="utf-8")
    report = _diagnose(hostile, tmp_path, "findings.csv", "report.xlsx")
    assert {HOSTILE[0], HOSTILE[1]} <= {op["op_type"] for op in report["summary"]["top_operators"]}
    assert any(HOSTILE[0] in (f["key"] or "") for f in report["findings"])  # the name reaches a finding too
    cells = [cell for row in _csv_rows(tmp_path / "findings.csv") for cell in row]
    assert f"'{HOSTILE[0]}" in cells
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@", "\t", "\r"))]
    book = load_workbook(tmp_path / "report.xlsx")
    operators = [row[0] for row in book["Operators"].iter_rows(min_row=2, values_only=True)]
    assert f"'{HOSTILE[0]}" in operators and f"'{HOSTILE[1]}" in operators
    for sheet in book:
        for row in sheet.iter_rows():
            for cell in row:
                assert cell.data_type != "f", f"{sheet.title}!{cell.coordinate} is a formula: {cell.value}"
                assert not (isinstance(cell.value, str) and cell.value.startswith(("=", "+", "-", "@")))


@pytest.mark.parametrize(("text", "shown"), [("=1+2", "'=1+2"), ("+1", "'+1"), ("-1", "'-1"), ("@A1", "'@A1"),
                                             ("\tx", "'\tx"), ("\r=x", "'=x"), ("MatMul", "MatMul"), ("a=b", "a=b")])
def test_cell_text(text, shown):
    assert cell_text(text) == shown


def test_compare_writes_the_changes(tmp_path):
    outputs = ("-o", str(tmp_path / "changes.csv"), "-o", str(tmp_path / "gap.xlsx"), "-o", str(tmp_path / "gap.json"))
    result = _invoke("compare", str(SAMPLE_CLUSTER), str(REAL), *outputs)
    assert result.exit_code == 0, result.stderr
    comparison = json.loads((tmp_path / "gap.json").read_text(encoding="utf-8"))
    header, *rows = _csv_rows(tmp_path / "changes.csv")
    assert header[:4] == ["Rule", "Subject", "Finding", "Change"]
    assert [(row[0], row[1] or None) for row in rows] == [(c["id"], c["key"]) for c in comparison["changes"]]
    book = load_workbook(tmp_path / "gap.xlsx")
    assert book.sheetnames == ["Changes", "Findings", "Breakdown", "Operators", "Operator shapes", "Framework ops",
                               "Operator memory", "Summary"]
    breakdown = list(book["Breakdown"].iter_rows(min_row=2, values_only=True))
    step_time = comparison["breakdown"][0]
    assert breakdown[0][1:3] == pytest.approx((step_time["base"], step_time["target"]))


def test_unknown_suffix_lists_the_known_ones(tmp_path):
    result = _invoke("diagnose", str(REAL), "-o", str(tmp_path / "report.ods"))
    assert result.exit_code == 2
    assert ("report.ods: cannot tell the format from the suffix (known: .md, .markdown, .html, .htm, .json, .txt, "
            ".csv, .xlsx); pass --format md|html|json|csv|xlsx") in " ".join(result.stderr.split())


@pytest.mark.parametrize("name", ["findings.csv", "report.xlsx"])
def test_a_spreadsheet_that_cannot_be_written_is_a_clear_error(tmp_path, name):
    missing = tmp_path / "no such directory" / name
    result = _invoke("diagnose", str(REAL), "-o", str(missing))
    assert result.exit_code == 2
    assert f"{missing}: cannot write the report (No such file or directory)" in result.stderr
    assert "Traceback" not in result.stderr and not missing.parent.exists()
    result = _invoke("diagnose", str(REAL), "-f", "xlsx", "-o", str(tmp_path))  # a directory
    assert result.exit_code == 2 and f"{tmp_path}: cannot write the report (is a directory)" in result.stderr
