"""The hardening corpus: hundreds of broken and hostile inputs, each with the behaviour it must produce.

Every case copies one of the bundled profiles (the real two-rank capture or the single-rank and cluster
samples), breaks or poisons something in it and states what the CLI must do: the exit code, the messages
on standard error (each naming the file and the problem), which input files the damage may cost findings
from (every other finding of the intact profile must survive), and extra checks on the output (escaping).

``python tests/corpus/cases.py OUT`` writes every case under ``OUT/<name>/`` with ``OUT/manifest.json``
(name, command, expected exit code and messages) so the corpus can be run by hand or by another tool;
``tests/test_corpus.py`` builds the same cases in a temporary directory and runs the CLI on each.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = FIXTURES / "ascend-level1-2ranks"
SINGLE = FIXTURES / "samples" / "single_rank"
CLUSTER = FIXTURES / "samples" / "cluster_2ranks"
REAL_DB = FIXTURES / "ascend-more" / "db-level1-2ranks"  # the real DB export, as torch_npu typed its columns
BASES = {"real": REAL, "single": SINGLE, "cluster": CLUSTER, "realdb": REAL_DB}  # and "db", "kineto": written by tests/builders.py

RANK = "localhost_2231054_20251127192733123_ascend_pt"  # the single sample's rank directory
OUT = f"{RANK}/ASCEND_PROFILER_OUTPUT"
CSV_FILES = ("step_trace_time.csv", "kernel_details.csv", "op_statistic.csv", "memory_record.csv",
             "operator_memory.csv", "npu_module_mem.csv")
JSON_FILES = (f"{OUT}/communication.json", f"{OUT}/communication_matrix.json", f"{OUT}/trace_view.json", f"{RANK}/profiler_info_0.json",
              f"{RANK}/profiler_metadata.json", f"{RANK}/PROF_000001_20251127192733456_FKFLNPEPPRGCEGFC/device_0/info.json.0")
READ_FILES = tuple(f"{OUT}/{name}" for name in CSV_FILES) + JSON_FILES
EMPTY_WHEN_NULL = ("trace_view.json", "communication.json", "communication_matrix.json")  # nothing usable is left
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

Check = Callable[[str, str, Path], None]  # (stdout, stderr, case directory) -> raises AssertionError


@dataclass
class Case:
    """One corpus input and the behaviour the CLI must show on it."""

    name: str
    base: str | None  # which bundled profile it is made from (None: made from nothing)
    mutate: Callable[[Path], None]  # breaks the copied profile in place (given its root)
    exit: int
    messages: tuple[str, ...] = ()  # regexes stderr must match
    lost: tuple[str, ...] | None = ()  # files whose findings may go; None: no finding can be expected
    args: tuple[str, ...] = ("-f", "json")  # options after `diagnose PATH`
    command: tuple[str, ...] = ("diagnose",)
    target: str = "prof"  # the path given to the command, relative to the case directory
    checks: tuple[Check, ...] = field(default_factory=tuple)

    def build(self, directory: Path) -> list[str]:
        """Write the case under ``directory`` and return the CLI arguments that run it."""
        profile = directory / "prof"
        if self.base is not None:
            make_base(self.base, profile)
        else:
            directory.mkdir(parents=True, exist_ok=True)
        self.mutate(profile)
        target = str(directory / self.target) if self.target else ""
        arguments = [a.replace("{dir}", str(directory)) for a in self.args]
        return [*self.command, *([target] if target else []), *arguments]


def make_base(base: str, profile: Path) -> None:
    """Put an intact copy of the bundled profile ``base`` at ``profile`` (the DB export is built, not copied)."""
    if base in ("db", "kineto"):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from builders import GpuJob, RankSpec, build_rank_db, write_gpu_job

        if base == "db":
            build_rank_db(profile, RankSpec(compiles_per_step=2, reserved_drops_per_step=1, gc_us=300.0))
        else:
            write_gpu_job(profile, GpuJob(ranks=2, nccl_us=3000.0, syncs=2, dataloader_us=2000.0, memory_drops=1))
    else:
        shutil.copytree(BASES[base], profile, symlinks=True, ignore=shutil.ignore_patterns("LICENSE-NOTICE.md"))


def skipped(file: str, reason: str) -> str:
    return rf"advisor: warning: skipped {re.escape(file)}: (?:{reason})"


def warned(file: str, problem: str) -> str:
    return rf"advisor: warning: {re.escape(file)}: .*(?:{problem})"


# --- file-level damage, applied to every file advisor reads ---------------------------------------------

def _write(relative: str, content: bytes) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        (root / relative).write_bytes(content)
    return mutate


def _replace_with_directory(relative: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        path = root / relative
        path.unlink()
        (path / "inner").mkdir(parents=True)
    return mutate


def _symlink(relative: str, target: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        path = root / relative
        path.unlink()
        path.symlink_to(target)
    return mutate


def _fifo(relative: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        path = root / relative
        path.unlink()
        os.mkfifo(path)
    return mutate


def _unreadable(relative: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        (root / relative).chmod(0)
    return mutate


def _truncate(relative: str, fraction: float) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        path = root / relative
        data = path.read_bytes()
        path.write_bytes(data[: max(1, int(len(data) * fraction))])
    return mutate


def _sparse(relative: str, size: int) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        path = root / relative
        with path.open("r+b") as handle:
            handle.truncate(size)
    return mutate


def _file_damage() -> list[Case]:
    cases = []
    for relative in READ_FILES:
        name = relative.rsplit("/", 1)[-1]
        lost = (relative,)
        is_csv = name.endswith(".csv")
        cases += [
            Case(f"{name}/zero-bytes", "single", _write(relative, b""), 3, (skipped(relative, "is empty"),), lost),
            Case(f"{name}/whitespace", "single", _write(relative, b" \r\n\t\n"), 3, (skipped(relative, "is empty"),), lost),
            Case(f"{name}/directory", "single", _replace_with_directory(relative), 3,
                 (skipped(relative, "is not a regular file"),), lost),
            Case(f"{name}/fifo", "single", _fifo(relative), 3, (skipped(relative, "is not a regular file"),), lost),
            Case(f"{name}/symlink-loop", "single", _symlink(relative, name), 3,
                 (skipped(relative, "is a symbolic link that leads nowhere"),), lost),
            Case(f"{name}/dangling-symlink", "single", _symlink(relative, "/nonexistent/file"), 3,
                 (skipped(relative, r"is a symbolic link that leads nowhere \(to /nonexistent/file\)"),), lost),
            Case(f"{name}/binary", "single", _write(relative, bytes(range(256)) * 64), 3,
                 (skipped(relative, "is binary" if is_csv else "is not valid JSON|is not a JSON array"),), lost),
            Case(f"{name}/truncated-at-1-byte", "single", _truncate(relative, 0.0001), 3,
                 (skipped(relative, "lacks the column|is not (a )?valid JSON|is truncated|is empty"),), lost),
            Case(f"{name}/sparse-5GiB", "single", _sparse(relative, 5 << 30), 3,
                 (skipped(relative, r"is 5\.0 GiB, over the .* limit"),), lost),
        ]
        if IS_ROOT:  # root reads anything: the file is simply read
            cases.append(Case(f"{name}/unreadable", "single", _unreadable(relative), 0))
        else:
            cases.append(Case(f"{name}/unreadable", "single", _unreadable(relative), 3,
                              (skipped(relative, r"cannot be read \(permission denied\)"),), lost))
    return cases


# --- CSV content damage ---------------------------------------------------------------------------------

def _edit_csv(relative: str, edit: Callable[[list[list[str]]], list[list[str]]], line_end: str = "\r\n",
              prefix: bytes = b"") -> Callable[[Path], None]:
    import csv
    import io

    def mutate(root: Path) -> None:
        path = root / relative
        rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator=line_end).writerows(edit(rows))
        path.write_bytes(prefix + buffer.getvalue().encode("utf-8"))
    return mutate


def _set_column(header: str, value: str, every: int = 1) -> Callable[[list[list[str]]], list[list[str]]]:
    def edit(rows: list[list[str]]) -> list[list[str]]:
        index = [h.strip() for h in rows[0]].index(header)
        for number, row in enumerate(rows[1:]):
            if number % every == 0:
                row[index] = value
        return rows
    return edit


REQUIRED = {  # the first required column of each CSV and a numeric column advisor uses
    "step_trace_time.csv": ("Computing", "Free"),
    "kernel_details.csv": ("Name", "Duration(us)"),
    "op_statistic.csv": ("OP Type", "Total Time(us)"),
    "memory_record.csv": ("Component", "Total Reserved(MB)"),
    "operator_memory.csv": ("Name", "Size(KB)"),
    "npu_module_mem.csv": ("Component", "Total Reserved(MB)"),
}


def _csv_damage() -> list[Case]:
    cases = []
    for name in CSV_FILES:
        relative = f"{OUT}/{name}"
        lost = (relative,)
        required, numeric = REQUIRED[name]

        def drop(rows, column=required):
            index = [h.strip() for h in rows[0]].index(column)
            return [r[:index] + r[index + 1:] for r in rows]

        def rename(rows, column=required):
            rows[0] = [f"{h}_renamed" if h.strip() == column else h for h in rows[0]]
            return rows

        def upper(rows):
            rows[0] = [h.upper() for h in rows[0]]
            return rows

        def reverse(rows):
            return [list(reversed(r)) for r in rows]

        def duplicate(rows, column=numeric):
            index = [h.strip() for h in rows[0]].index(column)
            return [r + [r[index]] for r in rows]

        def extra(rows):
            return [r + ["extra" if i == 0 else "x,y"] for i, r in enumerate(rows)]

        def ragged(rows):
            return [r[:-2] if i == 2 else r for i, r in enumerate(rows)]

        def header_only(rows):
            return rows[:1]

        def huge(rows, column=numeric):
            return _set_column(column, "1e308", every=2)(rows)

        cases += [
            Case(f"{name}/missing-required-column", "single", _edit_csv(relative, drop), 3,
                 (skipped(relative, f"lacks the column\\(s\\) '{re.escape(required)}'"),), lost),
            Case(f"{name}/renamed-required-column", "single", _edit_csv(relative, rename), 3,
                 (skipped(relative, "lacks the column"),), lost),
            Case(f"{name}/upper-case-headers", "single", _edit_csv(relative, upper), 0),
            Case(f"{name}/reordered-columns", "single", _edit_csv(relative, reverse), 0),
            Case(f"{name}/duplicated-column", "single", _edit_csv(relative, duplicate), 0),
            Case(f"{name}/extra-quoted-column", "single", _edit_csv(relative, extra), 0),
            Case(f"{name}/ragged-row", "single", _edit_csv(relative, ragged), 0,
                 (warned(relative, r"1 row\(s\) with the wrong number of fields were skipped"),), lost),
            Case(f"{name}/header-only", "single", _edit_csv(relative, header_only), 0, (), lost),
            Case(f"{name}/nan-values", "single", _edit_csv(relative, _set_column(numeric, "nan", 2)), 0, (), lost),
            Case(f"{name}/inf-values", "single", _edit_csv(relative, _set_column(numeric, "inf", 2)), 0,
                 (warned(relative, "infinite value"),), lost),
            Case(f"{name}/negative-values", "single", _edit_csv(relative, _set_column(numeric, "-5", 2)), 0, (), lost),
            Case(f"{name}/huge-values", "single", _edit_csv(relative, huge), 0, (), lost),
            Case(f"{name}/text-in-numbers", "single", _edit_csv(relative, _set_column(numeric, "12abc", 2)), 0,
                 (warned(relative, "non-numeric value"),), lost),
            Case(f"{name}/bom-lf", "single", _edit_csv(relative, lambda r: r, "\n", b"\xef\xbb\xbf"), 0),
            Case(f"{name}/truncated-mid-row", "single", _truncate_mid_row(relative), 0,
                 (warned(relative, "wrong number of fields"),), lost),
            Case(f"{name}/latin1-values", "single", _latin1_values(relative, required), 0,
                 (warned(relative, "not UTF-8"),), lost),
        ]
    single_line = f"{OUT}/kernel_details.csv"
    cases += [
        Case("kernel_details.csv/50MB-single-line", "single", _write(single_line, b"Name," + b"x" * (50 << 20)), 3,
             (skipped(single_line, "has no line break in its first MiB"),), (single_line,)),
        Case("kernel_details.csv/latin1-header", "single", _write(single_line, "Name,Dur\xe9e\n".encode("latin-1")), 3,
             (skipped(single_line, r"header is not UTF-8 text"),), (single_line,)),
        Case("kernel_details.csv/blank-name-and-type", "single",  # an operator is never called "nan"
             _edit_csv(single_line, lambda rows: _set_column("Type", "", 2)(_set_column("Name", "", 2)(rows))), 0, (),
             (single_line,), checks=(_not_in_report('"nan"'),)),
        Case("kernel_details.csv/nul-bytes-in-values", "single", _write(single_line, b"Name,Duration(us)\n\x00\x00,1\n"),
             0, (), (single_line,)),
    ]
    return cases


def _truncate_mid_row(relative: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        path = root / relative
        data = path.read_bytes()
        last_row = data.rstrip(b"\r\n").rfind(b"\n") + 1
        path.write_bytes(data[: last_row + 2])
    return mutate


def _latin1_values(relative: str, column: str) -> Callable[[Path], None]:
    """Every third cell of ``column`` gets a Latin-1 byte (an é), which is not UTF-8."""
    def mutate(root: Path) -> None:
        _edit_csv(relative, _set_column(column, "LATIN1CELL", every=3))(root)
        path = root / relative
        path.write_bytes(path.read_bytes().replace(b"LATIN1CELL", b"caf\xe9"))
    return mutate


# --- JSON content damage --------------------------------------------------------------------------------

def _json_edit(relative: str, edit: Callable[[object], object]) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        path = root / relative
        path.write_text(json.dumps(edit(json.loads(path.read_bytes()))))
    return mutate


def _json_damage() -> list[Case]:
    cases = []
    for relative in JSON_FILES:
        name = relative.rsplit("/", 1)[-1]
        lost = (relative,)
        is_trace = name == "trace_view.json"
        for fraction in (0.1, 0.35, 0.5, 0.75, 0.99):
            if is_trace:  # a cut trace keeps the events before the cut
                cases.append(Case(f"{name}/truncated-at-{int(fraction * 100)}pct", "single", _truncate(relative, fraction),
                                  3, (rf"advisor: warning: read only part of {re.escape(relative)}: it is truncated",), lost))
            else:
                cases.append(Case(f"{name}/truncated-at-{int(fraction * 100)}pct", "single", _truncate(relative, fraction),
                                  3, (skipped(relative, r"is not valid JSON \(.* at line \d+, column \d+\)"),), lost))
        wrong_shape = "is not a JSON array of events" if is_trace else "holds a JSON (list|int|str), expected an object"
        cases += [
            Case(f"{name}/wrong-container", "single", _json_edit(relative, lambda v: v if not isinstance(v, (list, dict))
                                                                 else ({"traceEvents": v} if isinstance(v, list) else [v])),
                 3, (skipped(relative, wrong_shape),), lost),
            Case(f"{name}/bare-number", "single", _write(relative, b"42"), 3,
                 (skipped(relative, "is not a JSON array|holds a JSON int"),), lost),
            Case(f"{name}/nan-literal", "single", _write(relative, b'{"a": NaN}' if not is_trace else b'[{"ph": NaN}]'), 3,
                 (skipped(relative, "is not (a )?valid JSON"),), lost),
            Case(f"{name}/deep-nesting", "single", _write(relative, b"[" * 100_000 + b"]" * 100_000), 3,
                 (skipped(relative, "is not (a )?valid JSON|is not a JSON array|holds a JSON list|nest"),), lost),
            Case(f"{name}/nulls-everywhere", "single", _json_edit(relative, _nullify),
                 3 if name in EMPTY_WHEN_NULL else 0,
                 (skipped(relative, "has no process_name metadata|holds no communication op with time info|holds no link"),)
                 if name in EMPTY_WHEN_NULL else (), lost),
            Case(f"{name}/strings-for-numbers", "single", _json_edit(relative, _stringify), 0, (), lost),
        ]
    trace = f"{OUT}/trace_view.json"
    cases += [
        Case("trace_view.json/missing-ph-and-ts", "single", _json_edit(trace, _drop_keys("ph", "ts")), 3,
             (skipped(trace, "has no process_name metadata"),), (trace,)),
        Case("trace_view.json/missing-ts", "single", _json_edit(trace, _drop_keys("ts")), 0,
             (warned(trace, r"event\(s\) without a usable ts/dur were ignored"),), (trace,)),
        Case("trace_view.json/negative-durations", "single", _json_edit(trace, _negate("dur")), 0,
             (warned(trace, r"without a usable ts/dur"),), (trace,)),
        Case("trace_view.json/objects-for-strings", "single", _json_edit(trace, _objects_for_names), 0,
             (warned(trace, r"event\(s\) with fields of unexpected types were ignored"),), (trace,)),
        Case("trace_view.json/empty-array", "single", _write(trace, b"[]"), 3,
             (skipped(trace, "has no process_name metadata"),), (trace,)),
    ]
    return cases


def _nullify(value: object) -> object:
    if isinstance(value, dict):
        return {k: (_nullify(v) if isinstance(v, (dict, list)) or k in ("ph", "name") else None) for k, v in value.items()}
    if isinstance(value, list):
        return [_nullify(v) for v in value]
    return None


def _stringify(value: object) -> object:
    if isinstance(value, dict):
        return {k: _stringify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value)
    return value


def _drop_keys(*keys: str) -> Callable[[object], object]:
    return lambda events: [{k: v for k, v in e.items() if k not in keys} for e in events]


def _negate(key: str) -> Callable[[object], object]:
    return lambda events: [{**e, key: -float(e[key])} if key in e else e for e in events]


def _objects_for_names(events: list) -> list:
    return [{**e, "name": {"nested": e["name"]}} if e.get("ph") == "X" and i % 3 == 0 else e for i, e in enumerate(events)]


# --- directory structure --------------------------------------------------------------------------------

def _remove(*relatives: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        for relative in relatives:
            path = root / relative
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    return mutate


def _chain(*mutations: Callable[[Path], None]) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        for m in mutations:
            m(root)
    return mutate


def _nothing(_root: Path) -> None:
    return None


def _cluster_rank(index: int) -> str:
    return sorted(p.name for p in CLUSTER.iterdir() if p.is_dir())[index]


def _structure() -> list[Case]:
    rank1 = _cluster_rank(1)
    out1 = f"{rank1}/ASCEND_PROFILER_OUTPUT"
    every_output = [f"{OUT}/{n}" for n in CSV_FILES] + [f"{OUT}/communication.json", f"{OUT}/trace_view.json"]

    def empty_dir(root: Path) -> None:
        root.mkdir()

    def unrelated(root: Path) -> None:
        root.mkdir()
        (root / "notes.txt").write_text("not a profile")
        (root / "data.csv").write_text("a,b\n1,2\n")

    def loop(root: Path) -> None:
        (root / RANK / "loop").symlink_to("..")

    def deep(root: Path) -> None:
        nested = root.parent / "deep" / "a" / "b" / "c" / "d" / "e"
        nested.mkdir(parents=True)
        shutil.move(str(root), nested / "prof")
        (root.parent / "deep").rename(root)

    def shift_steps(root: Path) -> None:
        path = root / out1 / "step_trace_time.csv"
        path.write_text(path.read_text().replace("\n5,", "\n15,").replace("\n6,", "\n16,"))

    def duplicate_rank(root: Path) -> None:
        rank0 = _cluster_rank(0)
        shutil.copytree(root / rank0, root / "copy_of_rank0_ascend_pt")

    def unicode_path(root: Path) -> None:
        root.rename(root.parent / "профиль 性能 <b>")
        (root.parent / "профиль 性能 <b>").rename(root)

    def unreadable_dir(root: Path) -> None:
        (root / RANK / "ASCEND_PROFILER_OUTPUT").chmod(0)

    def no_level(root: Path) -> None:
        path = root / RANK / "profiler_info_0.json"
        info = json.loads(path.read_text())
        info.pop("config", None)
        path.write_text(json.dumps(info))

    nothing = tuple(skipped(f, ".*") for f in every_output[:1])
    cases = [
        Case("structure/nonexistent-path", None, _nothing, 2, (r"advisor: error: .*prof: no such file or directory",),
             None),
        Case("structure/file-instead-of-directory", None, lambda r: r.write_text("{}"), 2,
             (r"advisor: error: .*prof: is not a PyTorch profiler trace \(an empty JSON object\)",), None),
        Case("structure/empty-directory", None, empty_dir, 2, (r"advisor: error: .*prof: is empty",), None),
        Case("structure/unrelated-files", None, unrelated, 2,
             (r"prof: holds no profile \(found 2 files: data\.csv, notes\.txt; expected \*_ascend_pt",), None),
        Case("structure/empty-output-directory", "single", _remove(*every_output), 4,
             (r"advisor: error: nothing could be diagnosed",), None),
        Case("structure/every-output-file-broken", "single",
             _chain(*(_write(f, b"\x00garbage") for f in every_output)), 4, nothing, None),
        Case("structure/only-trace-view", "single", _remove(*every_output[:-1]), 0,
             (rf"advisor: warning: {re.escape(OUT)}/step_trace_time\.csv is missing; the step breakdown of rank 0 "
              "comes from the Overlap Analysis lanes",), None),
        Case("structure/symlink-loop-directory", "single", loop, 0),
        Case("structure/nested-too-deep", "single", deep, 2,
             (r"holds no profile \(found no file, only 4 directories: a/, .*directories deeper than 4 levels are not "
              r"searched",), None),
        Case("structure/unicode-and-markup-path", "single", unicode_path, 0),
        Case("structure/no-profiler-config", "single", no_level, 0),
        Case("cluster/rank-missing-every-file", "cluster", _remove(out1), 0, (), (rank1,)),
        Case("cluster/rank-missing-step-trace", "cluster", _remove(f"{out1}/step_trace_time.csv"), 0, (),
             (f"{out1}/step_trace_time.csv",)),
        Case("cluster/rank-with-broken-kernels", "cluster", _write(f"{out1}/kernel_details.csv", b"x"), 3,
             (skipped(f"{out1}/kernel_details.csv", "lacks the column"),), (f"{out1}/kernel_details.csv",)),
        Case("cluster/mismatched-steps", "cluster", shift_steps, 0, (), (f"{out1}/step_trace_time.csv",)),
        Case("cluster/duplicate-rank-id", "cluster", duplicate_rank, 0,
             (r"advisor: warning: rank 0 appears in .* and .*; using the newer",), None),
        Case("real/trace-view-truncated", "real", _truncate("rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", 0.6),
             3, (r"read only part of rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json",),
             ("rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json",)),
        Case("real/communication-wrong-shape", "real",
             _write("rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json", b'{"step1": [1, 2, 3]}'), 3,
             (skipped("rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json", "holds no communication op"),), ("rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json",)),
    ]
    if IS_ROOT:
        cases.append(Case("structure/unreadable-output-directory", "single", unreadable_dir, 0))
    else:
        cases.append(Case("structure/unreadable-output-directory", "single", unreadable_dir, 3,
                          (r"permission denied",), (f"{RANK}/ASCEND_PROFILER_OUTPUT",)))
    return cases


# --- rule packs -----------------------------------------------------------------------------------------

RULE = """\
id: team.{name}
title: {{en: Compute is a small share of the step, zh: 计算占比低}}
category: host-dispatch
description: {{en: Fires when compute is under half of the step., zh: 计算占比低于一半时触发。}}
when:
  all:
    - fact: breakdown
      as: b
      where: {where}
then:
  recommend: [{knowledge}]
  gain_us: unknown
explain: {{en: "Compute is {{b.compute_ratio:.1%}}.", zh: "计算占比 {{b.compute_ratio:.1%}}。"}}
tests:
  - name: fires
    facts: [{{fact: breakdown, scope: rank, rank: 0, compute_ratio: 0.1}}]
    expect: fire
  - name: quiet
    facts: [{{fact: breakdown, scope: rank, rank: 0, compute_ratio: 0.9}}]
    expect: quiet
"""


def _pack(files: dict[str, bytes]) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        rules = root.parent / "pack" / "rules"
        rules.mkdir(parents=True)
        for name, content in files.items():
            (rules / name).write_bytes(content.replace(b"{dir}", str(root.parent).encode()))
    return mutate


def _rule(where: str, name: str = "r", knowledge: str = "host.task_queue_level") -> bytes:
    return RULE.format(name=name, where=where, knowledge=knowledge).encode()


def _packs() -> list[Case]:
    pack_args = ("--rules", "{dir}/pack", "-f", "json")
    # a broken rule file is left out of its pack (the rest of the pack loads), with its first problem as a warning
    loaded = (r"advisor: warning: skipped .*pack/rules/team\.r\.yaml: rule file left out of rule pack 'pack', whose other "
              r"files were loaded: \d+ problem\(s\), first: .*{}")
    bad = {
        "invalid-yaml": (b"id: [unclosed\n", r"team.r.yaml:\d+:\d+: invalid YAML"),
        "python-object-tag": (b"!!python/object/apply:os.system ['touch {dir}/pwned']\n", "team.r.yaml"),
        "python-name-tag": (b"id: !!python/name:os.system\n", "team.r.yaml"),
        "custom-tag": (b"id: !include /etc/passwd\n", "team.r.yaml"),
        "duplicate-keys": (_rule("{compute_ratio: {lt: 0.5}}") + b"category: io\n", "duplicate"),
        "unknown-fact-field": (_rule("{compute_ratoi: {lt: 0.5}}"), "compute_ratoi"),
        "unsupported-escape": (_rule("{dominant_overhead: {matches: 'a\\bb'}}"), "escape"),
        "lazy-quantifier": (_rule("{dominant_overhead: {matches: 'a.*?b'}}"), "regex"),
        "alternation-after-repeat": (_rule("{dominant_overhead: {matches: '.*(ab|cd).*'}}"), "alternation|regex"),
        "invalid-regex": (_rule("{dominant_overhead: {matches: '([a-'}}"), "regex|pattern"),
        "not-utf8": (b"id: team.\xff\xfe\n", "utf-8|UTF-8"),
        "binary": (bytes(range(256)), "team.r.yaml"),
        "empty-file": (b"", "team.r.yaml"),
        "list-document": (b"- a\n- b\n", "team.r.yaml"),
        "anchor-bomb": (b"a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                        b"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
                        b"f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n", "team.r.yaml"),
        "unknown-knowledge": (_rule("{compute_ratio: {lt: 0.5}}", knowledge="no.such_entry"),
                              "no.such_entry"),
        "oversized": (b"# " + b"x" * (2 << 20) + b"\n", "larger than 1 MiB"),
    }
    cases = [
        Case(f"rule-pack/{name}", "single", _pack({"team.r.yaml": content}), 3, (loaded.format(problem),), (),
             args=pack_args, checks=(_no_file("pwned"),))
        for name, (content, problem) in bad.items()
    ]
    cases += [
        Case("rule-pack/nested-repetition-regex", "single",
             _pack({"team.r.yaml": _rule("{dominant_overhead: {matches: '(a+)+b'}}")}), 3,
             (loaded.format("nests a repetition inside a repeated group"),), (), args=pack_args),
        Case("rule-pack/valid-pack-loads", "single", _pack({"team.r.yaml": _rule("{compute_ratio: {lt: 0.5}}")}), 0,
             args=pack_args),
        Case("rule-pack/lint-reports-every-file", "single",
             _pack({"team.a.yaml": b"id: [unclosed\n", "team.b.yaml": _rule("{compute_ratoi: {lt: 0.5}}", "b")}), 1,
             (r"team\.a\.yaml:\d+:\d+: invalid YAML", r"team\.b\.yaml:\d+:\d+: .*compute_ratoi"), None, command=("rules", "lint"), target="pack", args=()),
        Case("rule-pack/test-on-broken-pack", "single",
             _pack({"team.a.yaml": b"!!python/object/apply:os.system ['touch {dir}/pwned']\n"}), 2,
             (r"advisor: error: invalid rule or knowledge files", r"team\.a\.yaml:\d+:\d+: "), None, command=("rules", "test"),
             target="pack", args=(), checks=(_no_file("pwned"),)),
        Case("rule-pack/missing-directory", "single", _nothing, 3, (r"pack",), (),
             args=("--rules", "{dir}/no-such-pack", "-f", "json")),
    ]
    return cases


def _not_in_report(text: str) -> Check:
    def check(stdout: str, _stderr: str, _directory: Path) -> None:
        assert text not in stdout, f"the report has {text}"
    return check


def _no_file(name: str) -> Check:
    def check(_stdout: str, _stderr: str, directory: Path) -> None:
        assert not (directory / name).exists(), "a YAML tag in a rule pack ran code"
    return check


# --- settings the user gives ----------------------------------------------------------------------------

def _settings() -> list[Case]:
    def write(name: str, content: bytes) -> Callable[[Path], None]:
        def mutate(root: Path) -> None:
            (root.parent / name).write_bytes(content)
        return mutate

    context = ("--context", "{dir}/model.yaml", "-f", "json")
    env_file = ("--env-file", "{dir}/job.env", "-f", "json")
    return [
        Case("context/not-yaml", "single", write("model.yaml", b"micro_batch_size: [1,\n"), 2,
             (r"advisor: error: .*model\.yaml", ), None, args=context),
        Case("context/object-tag", "single", write("model.yaml", b"x: !!python/object/apply:os.system ['true']\n"), 2,
             (r"advisor: error: .*model\.yaml",), None, args=context),
        Case("context/list-document", "single", write("model.yaml", b"- 1\n- 2\n"), 2, (r"model\.yaml",), None,
             args=context),
        Case("context/wrong-types", "single", write("model.yaml", b"micro_batch_size: lots\n"), 2,
             (r"model\.yaml.*micro_batch_size",), None, args=context),
        Case("context/negative-values", "single", write("model.yaml", b"sequence_length: -8\n"), 2,
             (r"model\.yaml.*sequence_length",), None, args=context),
        Case("context/binary", "single", write("model.yaml", bytes(range(256))), 2, (r"model\.yaml",), None,
             args=context),
        Case("context/missing", "single", _nothing, 2, (r"model\.yaml",), None, args=context),
        Case("env-file/binary", "single", write("job.env", b"\x00\xff\xfe"), 2, (r"job\.env",), None, args=env_file),
        Case("env-file/line-without-equals", "single", write("job.env", b"TASK_QUEUE_ENABLE\n"), 2,
             (r"job\.env:1",), None, args=env_file),
        Case("env-file/export-and-comments", "single",
             write("job.env", b"# job\nexport TASK_QUEUE_ENABLE=2\n\nHCCL_BUFFSIZE='512'\n"), 0, args=env_file),
        Case("env/without-equals", "single", _nothing, 2, (r"TASK_QUEUE_ENABLE",), None,
             args=("--env", "TASK_QUEUE_ENABLE", "-f", "json")),
        Case("options/max-file-size-below-the-trace", "single", _nothing, 3,
             (skipped(f"{OUT}/trace_view.json", r"is 68\.2 KiB, over the 10\.0 KiB --max-file-size limit; rerun with "
                      r"--max-file-size 1M to read it"),), (f"{OUT}/trace_view.json",),
             args=("--max-file-size", "10K", "-f", "json")),
        Case("options/unknown-format", "single", _nothing, 2, (r"report\.docx: cannot tell the format",), None,
             args=("-o", "{dir}/report.docx")),
        Case("options/unwritable-output", "single", _nothing, 2, (r"cannot write the report",), None,
             args=("-o", "{dir}/no/such/dir/report.md")),
    ]


# --- hostile operator names -----------------------------------------------------------------------------

HOSTILE_NAMES = {
    "script-tag": "<script>alert(1)</script>",
    "img-onerror": '"><img src=x onerror=alert(1)>',
    "ansi-escapes": "\x1b[31mRED\x1b[0m\x1b]8;;https://evil.example\x07link\x1b]8;;\x07",
    "markdown-injection": "| x | [click](javascript:alert(1)) ![i](https://evil.example/x.png)",
    "very-long": "MatMul" + "Ж" * 20_000,
    "chinese": "矩阵乘法_融合算子",
    "rtl-override": "MatMul\u202egnp.exe",
    "zero-width-and-emoji": "Mat\u200bMul🔥",
    "template-syntax": "{{ 7*7 }}{% raw %}${7*7}",
    "bare-urls": "MatMul see https://evil.example/x or www.evil.example, mail ops@evil.example",
    "rich-markup": "[/bad][link=https://evil.example]MatMul[/link][bold]x",
}
AUTOLINKED = ("https://evil.example", "www.evil.example", "ops@evil.example")  # what GitHub would link by itself


def _poison_names(name: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        for file, column in (("kernel_details.csv", "Type"), ("op_statistic.csv", "OP Type"), ("kernel_details.csv", "Name")):
            _edit_csv(f"{OUT}/{file}", _set_column(column, name, every=3))(root)
    return mutate


def _escaped(name: str, fmt: str) -> Check:
    def check(stdout: str, _stderr: str, _directory: Path) -> None:
        if fmt in ("html", "md"):
            assert "<script>" not in stdout and "<img src=x" not in stdout, "raw markup from the input reached the report"
        if fmt == "md":
            assert not _markdown_links(stdout), "text from the input became a Markdown link or image"
            assert not [url for url in AUTOLINKED if url in stdout], "a bare URL from the input would become a link"
        if fmt == "terminal":
            assert "\x1b" not in stdout and "\u202e" not in stdout, "a control sequence from the input reached the terminal"
        if fmt == "json":
            assert _holds_text(json.loads(stdout), name), "the name was not kept as written"
    return check


def _markdown_links(markdown: str) -> list[str]:
    """The targets of every link and image in ``markdown`` that does not point inside the document."""
    from markdown_it import MarkdownIt

    targets = []
    for block in MarkdownIt("commonmark").enable("table").parse(markdown):
        for token in block.children or []:
            target = token.attrGet("href") or token.attrGet("src")
            if token.type in ("link_open", "image") and target and not str(target).startswith("#"):
                targets.append(str(target))
    return targets


def _holds_text(value: object, text: str) -> bool:
    if isinstance(value, str):
        return text in value
    if isinstance(value, dict):
        return any(_holds_text(v, text) for v in value.values())
    if isinstance(value, list):
        return any(_holds_text(v, text) for v in value)
    return False


def _hostile() -> list[Case]:
    cases = []
    for label, name in HOSTILE_NAMES.items():
        for fmt in ("json", "md", "html", "terminal"):
            args = ("-f", fmt) if fmt != "terminal" else ()
            cases.append(Case(f"hostile-name/{label}/{fmt}", "single", _poison_names(name), 0,
                              lost=None if fmt != "json" else (f"{OUT}/kernel_details.csv", f"{OUT}/op_statistic.csv"),
                              args=args, checks=(_escaped(name, fmt),)))
    return cases


DB_RANK = "localhost_2231054_20251127192733120_ascend_pt/ASCEND_PROFILER_OUTPUT"
PROFILER_DB = f"{DB_RANK}/ascend_pytorch_profiler_0.db"
ANALYSIS_DB = f"{DB_RANK}/analysis.db"
REAL_PROFILER_DB = "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
REAL_ANALYSIS_DB = "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/analysis.db"


def _sql(relative: str, statement: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        import sqlite3

        with sqlite3.connect(root / relative) as db:
            db.executescript(statement)
    return mutate


def _in_wal(relative: str, journal: str = "-wal") -> Callable[[Path], None]:
    """The database rewritten as a writer leaves it when its data has not reached the main file: in WAL mode with every
    table in its ``-wal`` (never checkpointed), or (``-journal``) with a hot rollback journal of a cut-off transaction
    that emptied every table — which SQLite must roll back."""
    def mutate(root: Path) -> None:
        import sqlite3

        path = root / relative
        original = path.with_name(path.name + ".orig")
        path.rename(original)
        writer = sqlite3.connect(path, isolation_level=None)
        tables = [row for row in sqlite3.connect(original).execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        if journal == "-wal":
            writer.execute("PRAGMA journal_mode = WAL")
            writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("ATTACH DATABASE ? AS source", (str(original),))
        writer.execute("BEGIN")
        for name, sql in tables:
            writer.execute(sql)
            writer.execute(f'INSERT INTO main."{name}" SELECT * FROM source."{name}"')
        writer.execute("COMMIT")
        writer.execute("DETACH DATABASE source")
        if journal == "-journal":  # a transaction that deletes everything, cut off before it committed
            writer.execute("PRAGMA cache_size = 1")  # spill: the deletions reach the main file mid-transaction
            writer.execute("BEGIN")
            for name, _sql in tables:
                writer.execute(f'DELETE FROM "{name}"')
        left = {file: file.read_bytes() for file in (path, path.with_name(path.name + journal)) if file.exists()}
        writer.close()  # a clean close checkpoints (or rolls back) and removes the log: put back what a crash leaves
        for file, data in left.items():
            file.write_bytes(data)
        original.unlink()
    return mutate


def _db_damage() -> list[Case]:
    """The DB export: files that are not SQLite, cut off, missing tables or with unexpected column contents."""
    cases = []
    for relative in (PROFILER_DB, ANALYSIS_DB):
        name = relative.rsplit("/", 1)[-1]
        lost = (relative,)
        cases += [
            Case(f"db/{name}/zero-bytes", "db", _write(relative, b""), 3, (skipped(relative, "is empty"),), lost),
            Case(f"db/{name}/data-in-its-wal", "db", _in_wal(relative), 0),
            Case(f"db/{name}/hot-rollback-journal", "db", _in_wal(relative, "-journal"), 0),
            Case(f"db/{name}/text", "db", _write(relative, b"SELECT 1;\n"), 3, (skipped(relative, "is not an SQLite database"),),
                 lost),
            Case(f"db/{name}/truncated", "db", _truncate(relative, 0.3), 3,
                 (skipped(relative, "is not a readable SQLite database|has a table that cannot be read"),), lost),
            Case(f"db/{name}/directory", "db", _replace_with_directory(relative), 3,
                 (skipped(relative, "is not a regular file"),), lost),
        ]
    cases += [
        Case("db/analysis.db/missing", "db", _remove(ANALYSIS_DB), 0, (), (ANALYSIS_DB,)),
        Case("db/no-step-trace-table", "db", _sql(ANALYSIS_DB, "DROP TABLE StepTraceTime"), 0, (), (ANALYSIS_DB,)),
        Case("db/no-task-table", "db", _sql(PROFILER_DB, "DROP TABLE TASK"), 0, (), (PROFILER_DB,)),
        Case("db/no-string-ids", "db", _sql(PROFILER_DB, "DROP TABLE STRING_IDS"), 0, (), (PROFILER_DB,)),
        # only that table is left out: analysis.db's communication tables are still read
        Case("db/step-trace-lacks-columns", "db",
             _sql(ANALYSIS_DB, "DROP TABLE StepTraceTime; CREATE TABLE StepTraceTime(deviceId INTEGER, step TEXT)"), 3,
             (rf"advisor: warning: read only part of {re.escape(ANALYSIS_DB)}: table StepTraceTime lacks the column",),
             (ANALYSIS_DB,)),
        Case("db/communication-op-without-device-id", "db",  # DB schema 1.0.0
             _sql(PROFILER_DB, "ALTER TABLE COMMUNICATION_OP DROP COLUMN deviceId"), 0, (), ()),
        Case("db/text-in-number-columns", "db", _sql(ANALYSIS_DB, "UPDATE StepTraceTime SET computing = 'lots'"), 0,
             (), (ANALYSIS_DB,)),
        Case("db/negative-times", "db", _sql(PROFILER_DB, "UPDATE TASK SET endNs = startNs - 5000"), 0,
             (), (PROFILER_DB,)),
        Case("db/unresolved-string-ids", "db", _sql(PROFILER_DB, "DELETE FROM STRING_IDS WHERE rowid % 2 = 0"), 0,
             (warned(PROFILER_DB, r"\d+ name id\(s\) \(column \w+\) are not in STRING_IDS and were read as missing names"),),
             (PROFILER_DB,)),
        Case("db/meta-data-nested-too-deeply", "db",
             _sql(PROFILER_DB, "UPDATE META_DATA SET value = '" + "[" * 100_000 + "]" * 100_000 + "'"), 3,
             (r"advisor: warning: read only part of .*ascend_pytorch_profiler_0\.db: table META_DATA: the value of "
              r"'\w+' nests arrays or objects too deeply to be read",), (PROFILER_DB,)),
        # the real DB export, its values damaged as other writers and hostile files store them
        Case("realdb/op-type-ids-unresolved", "realdb",
             _sql(REAL_PROFILER_DB, "DELETE FROM STRING_IDS WHERE id IN (SELECT opType FROM COMPUTE_TASK_INFO)"), 0,
             (warned(REAL_PROFILER_DB, r"\d+ name id\(s\) \(column opType\) are not in STRING_IDS"),), (REAL_PROFILER_DB,),
             checks=(_not_in_report("profiling.no_operator_types"),)),  # a Level1 capture: never "not collected (Level0)"
        Case("realdb/duplicate-string-ids", "realdb",
             _sql(REAL_PROFILER_DB, "ALTER TABLE STRING_IDS RENAME TO S0; CREATE TABLE STRING_IDS(id INTEGER, value TEXT); "
                                    "INSERT INTO STRING_IDS SELECT id, value FROM S0; INSERT INTO STRING_IDS "
                                    "SELECT id, value || '_again' FROM S0 WHERE id % 2 = 0"), 0,
             (warned(REAL_PROFILER_DB, r"\d+ id\(s\) of STRING_IDS appear more than once; the last value of each was "
                                       "used"),), (REAL_PROFILER_DB,)),
        Case("realdb/null-ids", "realdb", _sql(REAL_PROFILER_DB, "UPDATE COMPUTE_TASK_INFO SET opType = NULL, name = NULL "
                                                                 "WHERE rowid % 2 = 0; UPDATE PYTORCH_API SET name = NULL "
                                                                 "WHERE rowid % 3 = 0"), 0,
             (warned(REAL_PROFILER_DB, r"\d+ compute task\(s\) in COMPUTE_TASK_INFO have neither a name nor an operator "
                                       r"type \(NULL ids\)"),), (REAL_PROFILER_DB,),
             checks=(_not_in_report('"nan"'),)),
        Case("realdb/infinite-times-and-sizes", "realdb",
             _sql(REAL_PROFILER_DB, "UPDATE TASK SET startNs = 9e999 WHERE rowid % 5 = 0; "
                                    "UPDATE COMMUNICATION_OP SET startNs = -9e999 WHERE rowid % 2 = 0; "
                                    "UPDATE OP_MEMORY SET size = 9e999 WHERE rowid % 3 = 0; "
                                    "UPDATE CANN_API SET startNs = 9e999 WHERE rowid % 2 = 0; "
                                    "UPDATE NPU_MODULE_MEM SET totalReserved = 9e999; UPDATE STEP_TIME SET startNs = -9e999"),
             0, tuple(warned(REAL_PROFILER_DB, rf"\d+ infinite value\(s\) in column {column} of table {table} were treated "
                             "as missing") for column, table in (("startNs", "TASK"), ("startNs", "COMMUNICATION_OP"),
                                                                 ("size", "OP_MEMORY"), ("startNs", "STEP_TIME"))),
             (REAL_PROFILER_DB,)),
        Case("realdb/blobs-and-garbage-text", "realdb",
             _sql(REAL_PROFILER_DB, "UPDATE PYTORCH_API SET startNs = x'00ff' WHERE rowid % 3 = 0; "
                                    "UPDATE PYTORCH_API SET endNs = 'soon' WHERE rowid % 4 = 0; "
                                    "UPDATE MEMORY_RECORD SET totalReserved = 'lots' WHERE rowid % 2 = 0"),
             0, (warned(REAL_PROFILER_DB, r"\d+ non-numeric value\(s\) in column startNs of table PYTORCH_API"),
                 warned(REAL_PROFILER_DB, r"\d+ non-numeric value\(s\) in column totalReserved of table MEMORY_RECORD")),
             (REAL_PROFILER_DB,)),
        Case("realdb/analysis-db-infinite", "realdb",
             _sql(REAL_ANALYSIS_DB, "UPDATE StepTraceTime SET computing = 9e999; UPDATE CommAnalyzerMatrix SET "
                                    "transit_time = 9e999; UPDATE CommAnalyzerBandwidth SET transit_size = x'00'"),
             0, (warned(REAL_ANALYSIS_DB, r"1 infinite value\(s\) in column computing of table StepTraceTime"),),
             (REAL_ANALYSIS_DB,)),
        Case("realdb/generated-column", "realdb",
             _sql(REAL_PROFILER_DB, "ALTER TABLE TASK RENAME COLUMN startNs TO s0; ALTER TABLE TASK ADD COLUMN startNs "
                                    "INTEGER GENERATED ALWAYS AS (s0 + length(hex(zeroblob(100000000))) * 0) VIRTUAL"),
             3, (r"advisor: warning: read only part of .*ascend_pytorch_profiler_0\.db: table TASK computes the column\(s\) "
                 r"startNs on reading \(generated columns\), not data a profiler writes",), (REAL_PROFILER_DB,)),
        Case("realdb/virtual-table", "realdb",
             _sql(REAL_PROFILER_DB, "ALTER TABLE STRING_IDS RENAME TO S0; CREATE VIRTUAL TABLE STRING_IDS USING "
                                    "fts5(id, value); INSERT INTO STRING_IDS SELECT id, value FROM S0"),
             3, (r"advisor: warning: read only part of .*ascend_pytorch_profiler_0\.db: table STRING_IDS is a virtual "
                 r"table \(its rows are computed on reading\), not data a profiler writes: every name read as missing",),
             (REAL_PROFILER_DB,)),
        Case("db/hostile-names", "db", _sql(PROFILER_DB, "UPDATE STRING_IDS SET value = '<script>alert(1)</script>' "
                                                         "WHERE value LIKE 'aclnn%' OR value LIKE 'MatMul%'"), 0,
             (), None, args=("-f", "html"), checks=(_escaped("<script>alert(1)</script>", "html"),)),
    ]
    return cases


def _gzip_trace(transform: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    """Replace trace_view.json by trace_view.json.gz holding ``transform(gzip of the original)``."""
    def mutate(root: Path) -> None:
        import gzip

        plain = root / f"{OUT}/trace_view.json"
        (root / f"{OUT}/trace_view.json.gz").write_bytes(transform(gzip.compress(plain.read_bytes(), mtime=0)))
        plain.unlink()
    return mutate


def _bomb(_compressed: bytes) -> bytes:
    import gzip

    return gzip.compress(b"[" + b" " * (64 << 20) + b"]", mtime=0)  # 64 MiB of blanks in ~64 KB: 1000× expansion


def _corrupt_middle(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0xFF for b in data[middle:middle + 64]) + data[middle + 64:]


def _gzip_damage() -> list[Case]:
    """trace_view.json shipped gzip-compressed: read like the plain file, within the decompression limits."""
    gz = f"{OUT}/trace_view.json.gz"
    lost = (gz,)
    import gzip

    return [
        Case("gz/valid", "single", _gzip_trace(lambda d: d), 0, (), ()),
        Case("gz/not-gzip", "single", _gzip_trace(lambda d: b"this is not gzip data at all"), 3,
             (skipped(gz, r"is not a valid gzip file"),), lost),
        Case("gz/truncated", "single", _gzip_trace(lambda d: d[: len(d) // 2]), 3,
             (skipped(gz, r"is a truncated gzip file"),), lost),
        Case("gz/corrupt-middle", "single", _gzip_trace(_corrupt_middle), 3,
             (skipped(gz, r"is not a valid gzip file|is not a valid JSON array"),), lost),
        Case("gz/decompression-bomb", "single", _gzip_trace(_bomb), 3,
             (skipped(gz, r"expands past .* when decompressed .* decompression bomb"),), lost),
        Case("gz/empty-content", "single", _gzip_trace(lambda d: gzip.compress(b"", mtime=0)), 3,
             (skipped(gz, "is empty"),), lost),
        Case("gz/zero-bytes", "single", _gzip_trace(lambda d: b""), 3, (skipped(gz, "is empty|is not a valid gzip"),), lost),
    ]


KINETO_RANK = "rank1.pt.trace.json"


def _gzip_file(relative: str, transform: Callable[[bytes], bytes] = lambda d: d) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        import gzip

        plain = root / relative
        (root / f"{relative}.gz").write_bytes(transform(gzip.compress(plain.read_bytes(), mtime=0)))
        plain.unlink()
    return mutate


def _poison_kernels(name: str) -> Callable[[Path], None]:
    """Every third GPU kernel of every rank renamed to ``name``."""
    def mutate(root: Path) -> None:
        for path in sorted(root.glob("*.pt.trace.json")):
            document = json.loads(path.read_bytes())
            kernels = [e for e in document["traceEvents"] if e.get("cat") == "kernel"]
            for event in kernels[::3]:
                event["name"] = name
            path.write_text(json.dumps(document))
    return mutate


def _with_ascend_rank(root: Path) -> None:
    shutil.copytree(REAL / "rank0_ascend_pt", root / "rank0_ascend_pt")


def _kineto_damage() -> list[Case]:
    """PyTorch profiler traces (a 2-rank GPU job from tests/builders.py): one rank's trace broken each way."""
    rank, lost = KINETO_RANK, (KINETO_RANK,)
    import gzip

    cases = [
        Case("kineto/valid", "kineto", _nothing, 0, (), ()),
        Case("kineto/zero-bytes", "kineto", _write(rank, b""), 3, (skipped(rank, "is empty"),), lost),
        Case("kineto/binary", "kineto", _write(rank, b"\x00\x9f\x92binary"), 3,
             (skipped(rank, "is not a PyTorch profiler trace"),), lost),
        Case("kineto/json-array", "kineto", _write(rank, b"[1, 2]"), 3, (skipped(rank, "holds a bare JSON array of events"),), lost),
        Case("kineto/no-trace-events", "kineto", _write(rank, b'{"schemaVersion": 1}'), 3,
             (skipped(rank, "has no traceEvents"),), lost),
        Case("kineto/empty-trace-events", "kineto", _write(rank, b'{"traceEvents": []}'), 3,
             (skipped(rank, "has no traceEvents"),), lost),
        Case("kineto/cut-before-first-event", "kineto", _write(rank, b'{"traceEvents": [{"ph": "X"'), 3,
             (skipped(rank, r"is not a valid JSON array of events \(it is truncated before its first complete event"),), lost),
        Case("kineto/deep-nesting", "kineto", _write(rank, b'{"traceEvents": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"),
             3, (skipped(rank, "nests arrays or objects too deeply|is not a valid JSON array"),), lost),
        Case("kineto/bad-keys-before-events", "kineto", _write(rank, b'{"schemaVersion": oops, "traceEvents": []}'), 3,
             (skipped(rank, r"is not a PyTorch profiler trace \(the keys before traceEvents are not valid JSON"),), lost),
        Case("kineto/gz", "kineto", _gzip_file(rank), 0, (), ()),
        Case("kineto/gz-truncated", "kineto", _gzip_file(rank, lambda d: d[: len(d) // 2]), 3,
             (skipped(f"{rank}.gz", "is a truncated gzip file"),), (f"{rank}.gz",)),
        Case("kineto/gz-bomb", "kineto", _gzip_file(rank, lambda d: gzip.compress(b"{" + b" " * (64 << 20) + b"}", mtime=0)),
             3, (skipped(f"{rank}.gz", r"expands past .* when decompressed .* decompression bomb"),), (f"{rank}.gz",)),
        Case("kineto/no-rank-recorded", "kineto", _json_edit(rank, lambda d: {k: v for k, v in d.items() if k != "distributedInfo"}),
             0, (r"advisor: warning: rank1\.pt\.trace\.json: records no rank \(distributedInfo\); numbered rank 1",), ()),
        Case("kineto/negative-durations", "kineto", _json_edit(rank, lambda d: {**d, "traceEvents": _negate("dur")(
            d["traceEvents"])}), 0, (), lost),
        Case("kineto/nulls-everywhere", "kineto", _json_edit(rank, lambda d: {**d, "traceEvents": _nullify(d["traceEvents"])}),
             0, (), lost),
        Case("kineto/single-file", "kineto", _nothing, 0, (), (KINETO_RANK,), target="prof/rank0.pt.trace.json"),
        Case("kineto/ascend-rank-beside", "kineto", _with_ascend_rank, 0,
             (r"advisor: warning: 2 PyTorch trace\(s\) beside the Ascend output were not read \(e\.g\. rank0\.pt\.trace\.json\)",),
             None),
    ]
    cases += [Case(f"kineto/cut-{percent}", "kineto", _truncate(rank, percent / 100), 3,
                   (rf"advisor: warning: (read only part of {re.escape(rank)}: it is truncated|skipped {re.escape(rank)})",),
                   lost) for percent in (20, 50, 80, 99)]
    for label, name in HOSTILE_NAMES.items():
        for fmt in ("md", "html", "terminal"):
            cases.append(Case(f"kineto/hostile-name/{label}/{fmt}", "kineto", _poison_kernels(name), 0, lost=None,
                              args=("-f", fmt) if fmt != "terminal" else (), checks=(_escaped(name, fmt),)))
    return cases


# --- hardening, part 2 (issue 18) ----------------------------------------------------------------------

def _padded(relative: str, size: int, cut: float | None = None, single: bool = False) -> Callable[[Path], None]:
    """Grow a trace past ``size`` bytes with harmless events (or one event holding one huge string), then keep
    only the first ``cut`` of it."""
    def mutate(root: Path) -> None:
        path = root / relative
        document = json.loads(path.read_bytes())
        events = document["traceEvents"] if isinstance(document, dict) else document
        if single:
            events.append({"ph": "X", "cat": "padding", "name": "padding", "pid": 999, "tid": 1, "ts": 1, "dur": 1,
                           "args": {"text": "p" * size}})
        else:
            pad = {"ph": "i", "cat": "padding", "name": "padding", "pid": 999, "tid": 1, "ts": 1,
                   "args": {"stack": "s" * 4000}}
            events.extend([pad] * (size // 4000 + 1))
        data = json.dumps(document).encode()
        path.write_bytes(data if cut is None else data[: int(len(data) * cut)])
    return mutate


def _large_inputs() -> list[Case]:
    """Files larger than one read block (16 MiB): cut off, or holding one event larger than several blocks."""
    trace = f"{OUT}/trace_view.json"
    rank = KINETO_RANK
    cut_trace = rf"advisor: warning: read only part of {re.escape(trace)}: it is truncated at byte [\d,]+ \(no closing"
    cut_rank = rf"advisor: warning: read only part of {re.escape(rank)}: it is truncated at byte [\d,]+ \(no closing"
    return [
        # the padding is appended after the profile's own events: the cut keeps every one of them
        Case("large/trace_view.json-40MB-cut-at-90pct", "single", _padded(trace, 40 << 20, 0.9), 3, (cut_trace,), ()),
        Case("large/trace_view.json-20MB-cut-in-the-last-block", "single", _padded(trace, 20 << 20, 0.999), 3,
             (cut_trace,), ()),
        Case("large/kineto-30MB-cut-at-30MB", "kineto", _padded(rank, 32 << 20, 30 / 32), 3, (cut_rank,), ()),
        Case("large/trace_view.json-40MB-string-event", "single", _padded(trace, 40 << 20, single=True), 0),
        Case("large/kineto-40MB-string-event", "kineto", _padded(rank, 40 << 20, single=True), 0),
        Case("large/kineto-40MB-string-event-cut-inside-it", "kineto", _padded(rank, 40 << 20, 0.8, single=True), 3,
             (cut_rank,), ()),
    ]


def _special_file(name: str, kind: str) -> Callable[[Path], None]:
    """Put a FIFO, a link to /dev/zero or a 3 GiB sparse file at ``name`` beside the profile."""
    def mutate(root: Path) -> None:
        path = root.parent / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dev-zero":
            path.symlink_to("/dev/zero")
        else:
            with path.open("wb") as handle:
                handle.truncate(3 << 30)
    return mutate


def _non_regular_files() -> list[Case]:
    """Settings files and rule files that are FIFOs, devices or huge: refused by name, never read whole or waited on."""
    cases = []
    for option, name in (("--context", "model.yaml"), ("--env-file", "job.env")):
        args = (option, f"{{dir}}/{name}", "-f", "json")
        label = option.lstrip("-")
        cases += [
            Case(f"{label}/fifo", "single", _special_file(name, "fifo"), 2,
                 (rf"advisor: error: .*{re.escape(name)}: is not a regular file \(it is a FIFO\)",), None, args=args),
            Case(f"{label}/link-to-dev-zero", "single", _special_file(name, "dev-zero"), 2,
                 (rf"advisor: error: .*{re.escape(name)}: is not a regular file \(it is a character device\)",), None,
                 args=args),
            Case(f"{label}/sparse-3GiB", "single", _special_file(name, "sparse"), 2,
                 (rf"advisor: error: .*{re.escape(name)}: larger than 1 MiB",), None, args=args),
            Case(f"{label}/dev-zero", "single", _nothing, 2, (r"advisor: error: /dev/zero: is not a regular file",), None,
                 args=(option, "/dev/zero", "-f", "json")),
        ]
    pack_args = ("--rules", "{dir}/pack", "-f", "json")
    loaded = (r"advisor: warning: skipped .*pack/rules/team\.r\.yaml: rule file left out of rule pack 'pack', whose other "
              r"files were loaded: \d+ problem\(s\), first: .*team\.r\.yaml:1:1: {}")
    for kind, problem in (("fifo", r"is not a regular file \(it is a FIFO\)"),
                          ("dev-zero", r"is not a regular file \(it is a character device\)"),
                          ("sparse", "file is larger than 1 MiB")):
        cases.append(Case(f"rule-pack/rule-file-{kind}", "single", _special_file("pack/rules/team.r.yaml", kind), 3,
                          (loaded.format(problem),), (), args=pack_args))
    return cases


HOSTILE_RULE = """\
id: team.r
title: {{en: Compute is a small share of the step, zh: 计算占比低}}
category: host-dispatch
description: {{en: Fires when compute is under half of the step., zh: 计算占比低于一半时触发。}}
when:
  all:
    - fact: breakdown
      as: b
      where: {{compute_ratio: {{lt: 0.99}}}}
then:
  recommend: [host.task_queue_level]
  gain_us: {gain}
{extra}explain: {{en: "Compute is {{b.compute_ratio{spec}}}.", zh: "计算占比 {{b.compute_ratio{spec}}}。"}}
tests:
  - name: fires
    facts: [{{fact: breakdown, scope: rank, rank: 0, compute_ratio: {ratio}}}]
    expect: fire
  - name: quiet
    facts: [{{fact: breakdown, scope: rank, rank: 0, compute_ratio: 0.995}}]
    expect: quiet
"""


def _hostile_rule(gain: str = "unknown", spec: str = ":.1%", extra: str = "", ratio: str = "0.1") -> bytes:
    return HOSTILE_RULE.format(gain=gain, spec=spec, extra=extra, ratio=ratio).encode()


def _hostile_packs() -> list[Case]:
    """Rule packs built to break the run: each is refused by lint and skipped by diagnose (exit 3), never exit 70."""
    loaded = (r"advisor: warning: skipped .*pack/rules/team\.r\.yaml: rule file left out of rule pack 'pack', whose other "
              r"files were loaded: \d+ problem\(s\), first: .*team\.r\.yaml:\d+:\d+: .*(?:{})")
    bad = {
        "gain-overflows": (_hostile_rule(gain="'1e308*10'"), "not finite or larger than"),
        "gain-product-overflows": (_hostile_rule(gain="'1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15*1e15'"),
                                   "not a finite number of at most|overflows"),
        "gain-infinite-literal": (_hostile_rule(gain="'b.compute_us * 1e309'"), "not finite"),
        "gain-nan-literal": (_hostile_rule(gain=".nan"), "not allowed"),
        "gain-huge-integer-product": (_hostile_rule(gain="'99999999999999 * 99999999999999 * 99999999999999'"),
                                      "not a finite number of at most|larger than"),
        "gain-5000-digit-literal": (_hostile_rule(gain="'" + "9" * 5000 + "'"), "longer than|does not parse"),
        "gain-1000-unary-minus": (_hostile_rule(gain="'" + "-" * 1000 + "1'"), "longer than|levels deep"),
        "gain-400-unary-minus": (_hostile_rule(gain="'" + "-" * 400 + "b.compute_us'"), "parts, more than|levels deep"),
        "gain-deep-unary-minus": (_hostile_rule(gain="'" + "-" * 35 + "b.rank'"), "levels deep"),
        "gain-many-parts": (_hostile_rule(gain="'" + "+".join(["b.rank"] * 60) + "'"), "parts, more than"),
        "format-width": (_hostile_rule(spec=":>99999999999"), "width over"),
        "format-width-100MB": (_hostile_rule(spec=":>100000000"), "width over"),
        "format-precision": (_hostile_rule(spec=":.99999999f"), "precision over"),
        "key-format-width": (_hostile_rule(extra="  key: '{b.rank:>999999}'\n".replace("  key", "key_")
                                           .replace("key_", "") if False else ""), "width over"),
        "derived-literal-infinite": (HOSTILE_RULE.replace("  recommend: [host.task_queue_level]\n  gain_us: {gain}\n",
                                                         "  assert: {{fact: bottleneck, values: {{scope: profile, "
                                                         "kind: host, ratio: .inf}}}}\n")
                                     .format(gain="", spec=":.1%", extra="", ratio="0.1").encode(), "not a finite"),
    }
    del bad["key-format-width"]  # the key is covered below, where the template is the 'key' line itself
    bad["key-format-width"] = (HOSTILE_RULE.replace("  gain_us: {gain}\n", "  gain_us: {gain}\n  key: '{{b.rank:>999999}}'\n")
                               .format(gain="unknown", spec=":.1%", extra="", ratio="0.1").encode(), "width over")
    pack_args = ("--rules", "{dir}/pack", "-f", "json")
    cases = []
    for name, (content, problem) in bad.items():
        cases += [
            Case(f"hostile-pack/{name}", "single", _pack({"team.r.yaml": content}), 3, (loaded.format(problem),), (),
                 args=pack_args),
            Case(f"hostile-pack/{name}/lint", "single", _pack({"team.r.yaml": content}), 1,
                 (rf"team\.r\.yaml:\d+:\d+: .*(?:{problem})",), None, command=("rules", "lint"), target="pack", args=()),
        ]
    cases += [
        # lint refuses a test case holding NaN (the engine cannot take it); diagnose never runs test cases
        Case("hostile-pack/nan-test-fact/lint", "single", _pack({"team.r.yaml": _hostile_rule(ratio="0.1, compute_us: .inf")}), 1,
             (r"team\.r\.yaml:\d+:\d+: test 'fires': breakdown\.compute_us: .*not a finite number",), None,
             command=("rules", "lint"), target="pack", args=()),
        Case("hostile-pack/nan-test-fact/test", "single", _pack({"team.r.yaml": _hostile_rule(ratio="0.1, compute_us: .inf")}), 1,
             (r"FAIL team\.r: fires .*not a finite number",), None, command=("rules", "test"), target="pack", args=()),
        # valid at load time, fails at run time: the derived fact is out of its range (ratio 0..1); the pack is left out
        Case("hostile-pack/derived-fact-out-of-range", "single", _pack({"team.r.yaml": _derives_out_of_range()}), 3,
             (r"advisor: warning: skipped .*pack: rule pack not loaded: 1 problem\(s\), first: a rule failed while the "
              r"diagnosis ran \(EngineError: rule team\.r derived an invalid bottleneck fact",), (), args=pack_args),
        Case("hostile-pack/derived-fact-out-of-range/test", "single", _pack({"team.r.yaml": _derives_out_of_range()}), 1,
             (r"FAIL team\.r: fires .*the rule failed while it ran: rule team\.r derived an invalid bottleneck fact",),
             None, command=("rules", "test"), target="pack", args=()),
        Case("hostile-pack/derived-fact-out-of-range/compare", "single", _pack({"team.r.yaml": _derives_out_of_range()}),
             3, (r"advisor: warning: (base|target): rule pack .*pack: a rule failed while the diagnosis ran",), (),
             command=("compare",), target="prof", args=("{dir}/prof", "--rules", "{dir}/pack", "-f", "json")),
    ]
    return cases


def _regex_cases() -> list[Case]:
    """Patterns that backtrack exponentially are refused; long values are matched in bounded time."""
    pack_args = ("--rules", "{dir}/pack", "-f", "json")
    nested = {"plus-plus": "(a+)+b", "star-in-star": "(a*b?)*c", "counted-in-plus": "(x{1,5})+y", "deep": "((ab+)c)*d"}
    cases = []
    for label, pattern in nested.items():
        content = _rule(f"{{dominant_overhead: {{matches: '{pattern}'}}}}")
        cases += [
            Case(f"regex/nested-{label}/lint", "single", _pack({"team.r.yaml": content}), 1,
                 (r"team\.r\.yaml:\d+:\d+: .*nests a repetition inside a repeated group",), None, command=("rules", "lint"),
                 target="pack", args=()),
            Case(f"regex/nested-{label}/explain", "single", _pack({"team.r.yaml": content}), 2,
                 (r"invalid rule or knowledge files", r"nests a repetition"), None, command=("explain", "team.r"),
                 args=("--rules", "{dir}/pack")),
        ]
    cases.append(Case("regex/repeated-group-without-nesting", "single",
                      _pack({"team.r.yaml": _rule("{dominant_overhead: {matches: '(ab)+c.*'}}")}), 0, args=pack_args))

    def long_alloc_conf(root: Path) -> None:
        value = "expandable_segments:True," * 8000 + "roundup_power2_divisions:4"  # 200 KB, no conflicting option
        (root.parent / "job.env").write_text(f"PYTORCH_NPU_ALLOC_CONF={value}\n")

    cases += [
        Case("regex/long-alloc-conf/diagnose", "single", long_alloc_conf, 0, args=("--env-file", "{dir}/job.env", "-f", "json")),
        Case("regex/long-alloc-conf/explain", "single", long_alloc_conf, 0, command=("explain", "memory.alloc_conf_conflict"),
             args=("--env-file", "{dir}/job.env")),
    ]
    return cases


def _derives_out_of_range() -> bytes:
    return (HOSTILE_RULE.replace("  recommend: [host.task_queue_level]\n  gain_us: {gain}\n",
                                 "  assert: {{fact: bottleneck, values: {{scope: profile, kind: host, "
                                 "ratio: '= b.compute_ratio * 1000'}}}}\n")
            .format(gain="", spec=":.1%", extra="", ratio="0.1").encode())


HOSTILE_KNOWLEDGE = """\
id: team.k
title: {en: "Fix it ![t](https://tracker.example/t.png)", zh: 修复}
category: host-dispatch
problem:
  en: "Slow. <img src=x onerror=alert(1)> <javascript:alert(1)> [more](javascript:alert(1))"
  zh: 慢。
actions:
  - en: "Click [here](javascript:alert(document.cookie)) and see ![pixel](https://tracker.example/p.png); keep `x[0]` as is."
    zh: 点击。
gain:
  model: {en: "[model](javascript:alert(1))", zh: 模型}
references:
  - {title: "[ref](javascript:alert(1))", url: "javascript:alert(1)"}
"""


def _hostile_knowledge(root: Path) -> None:
    _pack({"team.r.yaml": HOSTILE_RULE.format(gain="unknown", spec=":.1%", extra="", ratio="0.1")
           .replace("[host.task_queue_level]", "[team.k]").encode()})(root)
    knowledge = root.parent / "pack" / "knowledge"
    knowledge.mkdir(parents=True)
    (knowledge / "team.k.yaml").write_text(HOSTILE_KNOWLEDGE, encoding="utf-8")


def _no_pack_links(fmt: str) -> Check:
    def check(stdout: str, _stderr: str, _directory: Path) -> None:
        assert "keep" in stdout and "x[0]" in stdout, "the pack's finding is not in the report"
        if fmt == "md":
            assert not _markdown_links(stdout), "knowledge from a pack became a Markdown link or image"
            assert "<img" not in stdout and "<javascript" not in stdout
        else:
            assert 'href="javascript' not in stdout and "<img src=x" not in stdout and 'src="https://tracker' not in stdout
    return check


def _rename_rank(name: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / RANK).rename(root / name)
        (root / name / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_bytes(b"x")  # a warning naming the directory
    return mutate


def _no_escapes_on_stderr(_stdout: str, stderr: str, _directory: Path) -> None:
    assert "\x1b" not in stderr and "\x07" not in stderr and "\u202e" not in stderr, "a control sequence reached stderr"


def _injection() -> list[Case]:
    pack_args = ("--rules", "{dir}/pack")
    cases = [Case(f"injection/pack-knowledge/{fmt}", "single", _hostile_knowledge, 0, (), None,
                  args=(*pack_args, "-f", fmt, "--detail", "full"), checks=(_no_pack_links(fmt),))
             for fmt in ("md", "html")]  # the full report: the pack's low finding and every action of its knowledge
    names = {"ansi": "rank\x1b[31mRED\x1b[0m_ascend_pt", "osc-link": "rank\x1b]8;;evil.example\x07x\x1b]8;;\x07_ascend_pt",
             "rich-markup": "rank[/bad][link=evil.example]x_ascend_pt",  # a directory "rank[" holding "bad][link=…"
             "bidi": "rank\u202egnp.exe_ascend_pt"}
    for label, name in names.items():
        cases.append(Case(f"injection/rank-directory-{label}", "single", _rename_rank(name), 3,
                          (r"advisor: warning: skipped rank.*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details\.csv",), None,
                          checks=(_no_escapes_on_stderr,)))
    return cases


def all_cases() -> list[Case]:
    """Every case of the corpus, with unique names."""
    cases = (_file_damage() + _csv_damage() + _json_damage() + _structure() + _packs() + _settings() + _hostile()
             + _db_damage() + _gzip_damage() + _kineto_damage() + _large_inputs()
             + _non_regular_files() + _hostile_packs() + _regex_cases() + _injection())
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    return cases


def write_corpus(out: Path) -> None:
    """Build every case under ``out`` and write ``manifest.json`` describing how each must behave."""
    manifest = []
    for case in all_cases():
        directory = out / case.name
        arguments = case.build(directory)
        manifest.append({"name": case.name, "command": ["advisor", *arguments], "exit": case.exit,
                         "stderr_matches": list(case.messages)})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False))
    print(f"{len(manifest)} cases written under {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/corpus/cases.py OUT_DIR")
    write_corpus(Path(sys.argv[1]))
