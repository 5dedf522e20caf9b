"""``advisor mcp``, driven over stdio by the MCP Python SDK's own client: the tools, their JSON (the same as the
command line's), errors that come back as tool errors with the command line's messages, profile text marked as
data, and analyses that a cancelled call stops without holding up the other tools."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import anyio
import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from test_cli import advisor as run_cli

from advisor.mcp import DATA_NOTICE
from advisor.parallel import can_fork
from advisor.report import SCHEMA_PATH

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = "examples/ascend-level1-2ranks"
GPU_EXAMPLE = "examples/gpu-synthetic-2ranks"
TOOLS = {"diagnose", "finding", "facts", "operators", "steps", "explain", "compare", "rules_list"}
BRIEF_TOKENS = 4000  # what a brief diagnosis may take of an assistant's context, at 4 characters a token
# a real GPU trace (8.5 MB gzip, seconds to diagnose), as the ranks of a job that takes half a minute on two cores
TRACE = ROOT / "tests/fixtures/h200-recorded/decode_eager_small/decode_eager_small.pt.trace.json.gz"
SLOW_RANKS = 24
forked = pytest.mark.skipif(not can_fork(), reason="analyses run in forked processes on Linux only")


def _server(env: dict[str, str]) -> StdioServerParameters:
    env = {"LANG": "C.UTF-8", "ADVISOR_CACHE_DIR": os.environ["ADVISOR_CACHE_DIR"], **env}
    return StdioServerParameters(command=sys.executable, args=["-m", "advisor", "mcp"], cwd=str(ROOT), env=env)


def with_session(work, **env: str):
    """Start ``advisor mcp`` (with ``env`` added to its environment), open a client session on its stdin/stdout and
    return ``await work(session)``."""

    async def main(errlog):  # the server's standard error: its log
        async with stdio_client(_server(env), errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)

    with open(os.devnull, "w") as errlog:
        return anyio.run(main, errlog)


def _cli_json(*args: str):
    result = run_cli(*args, "--lang", "en") if args[0] in ("diagnose", "compare") else run_cli(*args)
    assert result.returncode in (0, 3), result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def calls():
    """One server, every call the tests below look at: name → result."""
    requests = {
        "diagnose_brief": ("diagnose", {"path": EXAMPLE}),  # first: the drill-downs below reuse its analysis
        "finding": ("finding", {"path": EXAMPLE, "id": "host.host_work"}),
        "facts_host": ("facts", {"path": EXAMPLE, "family": "host", "limit": 1}),
        "operators": ("operators", {"path": EXAMPLE, "limit": 3}),
        "operators_rank": ("operators", {"path": EXAMPLE, "rank": 1, "limit": 2}),
        "steps": ("steps", {"path": EXAMPLE}),
        "diagnose": ("diagnose", {"path": EXAMPLE, "detail": "full", "include_facts": True}),
        "diagnose_full": ("diagnose", {"path": EXAMPLE, "detail": "full"}),
        "diagnose_high": ("diagnose", {"path": EXAMPLE, "min_severity": "high", "max_findings": 2}),
        "diagnose_medium": ("diagnose", {"path": EXAMPLE, "min_severity": "medium"}),
        "diagnose_full_two": ("diagnose", {"path": EXAMPLE, "detail": "full", "max_findings": 2}),
        "diagnose_told": ("diagnose", {"path": EXAMPLE, "detail": "full",
                                       "env": {"TASK_QUEUE_ENABLE": 1, "ASCEND_LAUNCH_BLOCKING": "1"},
                                       "context": {"micro_batch_size": 4, "sequence_length": 4096, "hidden_size": 4096}}),
        "diagnose_told_brief": ("diagnose", {"path": EXAMPLE, "env": {"TASK_QUEUE_ENABLE": 1}}),
        "unknown_argument": ("diagnose", {"path": EXAMPLE, "max_finding": 3}),
        "unknown_argument_facts": ("facts", {"path": EXAMPLE, "familly": "host"}),
        "unknown_finding": ("finding", {"path": EXAMPLE, "id": "host.host_wrk"}),
        "bad_severity": ("diagnose", {"path": EXAMPLE, "min_severity": "critical"}),
        "rules_list": ("rules_list", {}),
        "rules_list_io": ("rules_list", {"category": "io"}),
        "facts": ("facts", {"path": EXAMPLE, "family": "breakdown"}),
        "catalogue": ("facts", {"family": "idle"}),
        "explain_fired": ("explain", {"rule_id": "host.device_idle", "path": EXAMPLE}),
        "explain_quiet": ("explain", {"rule_id": "host.task_queue_level", "path": EXAMPLE}),
        "compare": ("compare", {"base": GPU_EXAMPLE, "target": EXAMPLE, "detail": "full", "include_facts": True}),
        "compare_full": ("compare", {"base": GPU_EXAMPLE, "target": EXAMPLE, "detail": "full"}),
        "compare_brief": ("compare", {"base": GPU_EXAMPLE, "target": EXAMPLE, "limit": 3}),
        "missing_path": ("diagnose", {"path": "no/such/profile"}),
        "not_a_profile": ("diagnose", {"path": "README.md"}),
        "bad_context": ("diagnose", {"path": EXAMPLE, "context": {"micro_batch_size": 0}}),
        "bad_env": ("diagnose", {"path": EXAMPLE, "env": {"NOT A NAME": "1"}}),
        "unknown_rule": ("explain", {"rule_id": "host.device_idl", "path": EXAMPLE}),
        "unknown_family": ("facts", {"path": EXAMPLE, "family": "nope"}),
        "compare_missing": ("compare", {"base": "no/such/base", "target": EXAMPLE}),
    }

    async def work(session):
        listed = await session.list_tools()
        results = {"tools": listed.tools, "instructions": session.initialize_result.instructions}
        for name, (tool, arguments) in requests.items():
            results[name] = await session.call_tool(tool, arguments)
        results["templates"] = (await session.list_resource_templates()).resource_templates
        analysis = results["diagnose_brief"].structured_content["analysis"]
        results["markdown"] = await session.read_resource(f"advisor://report/{analysis}.md")
        results["html"] = await session.read_resource(f"advisor://report/{analysis}.html")
        compared = results["compare_brief"].structured_content["analysis"]
        results["compare_markdown"] = await session.read_resource(f"advisor://report/{compared}.md")
        try:
            await session.read_resource("advisor://report/0123456789ab.md")
        except MCPError as exc:
            results["unknown_resource"] = exc
        return results

    return with_session(work)


def _ok(result) -> str:
    """The JSON of a successful result: its last content (after the data notice of a tool that read a profile)."""
    assert not result.is_error, result.content[0].text
    return result.content[-1].text


def test_lists_the_tools_with_their_arguments_and_output_schemas(calls):
    tools = {tool.name: tool for tool in calls["tools"]}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and tool.annotations.read_only_hint
        assert tool.input_schema["additionalProperties"] is False  # unknown arguments are refused, not dropped
        assert tool.output_schema["type"] == "object"
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
    assert {"path", "env", "context", "lang", "detail", "max_findings", "min_severity", "include_facts"} <= set(
        tools["diagnose"].input_schema["properties"])
    assert tools["finding"].input_schema["required"] == ["id", "path"]
    assert tools["diagnose"].input_schema["required"] == ["path"]
    assert tools["compare"].input_schema["required"] == ["base", "target"]
    assert tools["explain"].input_schema["required"] == ["rule_id", "path"]


def test_diagnose_returns_the_json_report_of_the_command_line(calls):
    text = _ok(calls["diagnose"])
    assert text == _cli_json("diagnose", EXAMPLE, "-f", "json")
    report = json.loads(text)
    assert calls["diagnose"].structured_content == report
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    assert report["findings"][0]["id"] == "cluster.straggler_outside_capture"
    assert report["summary"]["bottleneck"] == "communication" and report["facts"]
    # without include_facts the facts are left out (the facts tool gives them): the rest is the same report
    full = json.loads(_ok(calls["diagnose_full"]))
    assert full["facts"] == [] and full == {**report, "facts": []}
    jsonschema.validate(full, json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def test_diagnose_takes_env_and_context_as_dicts(calls):
    report = json.loads(_ok(calls["diagnose_told"]))
    ids = {f["id"] for f in report["findings"]}
    assert {"host.task_queue_level", "environment.launch_blocking"} <= ids
    assert "host.task_queue_level" not in {f["id"] for f in json.loads(_ok(calls["diagnose"]))["findings"]}
    assert report["facts"] == []  # include_facts is false by default


def test_rules_list_lists_every_rule(calls):
    listed = json.loads(_ok(calls["rules_list"]))
    cli_ids = [line.split()[0] for line in _cli_json("rules", "list").splitlines()[:-1]]
    assert [r["id"] for r in listed["rules"]] == cli_ids and listed["count"] == len(cli_ids)
    io = json.loads(_ok(calls["rules_list_io"]))
    assert io["rules"] and {r["category"] for r in io["rules"]} == {"io"}


def test_facts_is_the_json_of_advisor_facts(calls):
    page = json.loads(_ok(calls["facts"]))
    assert page["facts"] == json.loads(_cli_json("facts", EXAMPLE, "--json", "--family", "breakdown"))
    assert page["count"] == 3 and [f["type"] for f in calls["facts"].structured_content["facts"]] == ["breakdown"] * 3
    (family,) = json.loads(_ok(calls["catalogue"]))["families"]
    assert family["family"] == "idle" and "dataloader_us" in {f["name"] for f in family["fields"]}


def test_explain_gives_the_conditions_and_values_with_the_command_line_text(calls):
    fired = json.loads(_ok(calls["explain_fired"]))
    assert fired["status"] == "fired" and fired["firing_count"] == len(fired["firings"]) == 2
    assert fired["text"] == _cli_json("explain", "host.device_idle", EXAMPLE).rstrip("\n")
    condition, timeline, not_decode = fired["firings"][0]["conditions"]
    assert condition["family"] == "breakdown" and condition["holds"] and condition["sources"]
    assert timeline["family"] == "idle" and timeline["holds"]
    assert not_decode["family"] == "phase" and not_decode["holds"]  # no decode phase: not a serving run
    check = next(c for c in condition["checks"] if c["field"] == "free_ratio")
    assert check["op"] == "gte" and check["actual"] > 0.1 and check["holds"]
    quiet = json.loads(_ok(calls["explain_quiet"]))
    assert quiet["status"] == "did_not_fire" and not quiet["firings"]
    assert quiet["text"] == _cli_json("explain", "host.task_queue_level", EXAMPLE).rstrip("\n")
    assert any(not c["holds"] for alternative in quiet["alternatives"] for c in alternative["conditions"])


def test_compare_returns_the_json_of_advisor_compare(calls):
    text = _ok(calls["compare"])
    assert text == _cli_json("compare", GPU_EXAMPLE, EXAMPLE, "-f", "json")
    assert calls["compare"].structured_content["target"]["path"] == EXAMPLE
    full = json.loads(_ok(calls["compare_full"]))
    assert full == {**json.loads(text), "facts": []}
    brief = json.loads(_ok(calls["compare_brief"]))  # by default: the headline, the tables' top rows, brief findings
    assert brief["detail"] == "brief" and brief["headline"] == full["headline"]
    assert brief["operators"] == full["operators"][:3] and brief["operators_total"] == len(full["operators"])
    assert brief["changes_total"] == len(full["changes"]) and len(brief["changes"]) == min(3, len(full["changes"]))
    assert brief["base"]["path"] == GPU_EXAMPLE and not brief["comparable"] and brief["not_comparable_because"]
    assert len(_ok(calls["compare_brief"])) < len(_ok(calls["compare_full"])) / 2


@pytest.mark.parametrize(
    ("call", "cli_args"),
    [
        ("missing_path", ["diagnose", "no/such/profile"]),
        ("not_a_profile", ["diagnose", "README.md"]),
        ("unknown_rule", ["explain", "host.device_idl", EXAMPLE]),
        ("unknown_family", ["facts", EXAMPLE, "--family", "nope"]),
        ("compare_missing", ["compare", "no/such/base", EXAMPLE]),
    ],
)
def test_errors_are_tool_errors_with_the_command_lines_message(calls, call, cli_args):
    result = calls[call]
    assert result.is_error
    cli = run_cli(*cli_args)
    assert cli.returncode == 2
    prefix = "advisor: error: "
    assert cli.stderr.startswith(prefix)
    assert result.content[0].text == cli.stderr[len(prefix):].rstrip("\n")
    assert "Traceback" not in result.content[0].text


def test_bad_env_and_context_are_named(calls):
    assert calls["bad_context"].is_error
    assert calls["bad_context"].content[0].text == "context: micro_batch_size: Input should be greater than or equal to 1"
    assert calls["bad_env"].is_error
    assert calls["bad_env"].content[0].text == "env: 'NOT A NAME' is not a valid variable name"


def test_without_the_sdk_the_command_says_what_to_install(monkeypatch):
    import advisor.mcp
    from advisor.errors import InputError

    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)  # as if the SDK were not installed
    with pytest.raises(InputError, match=r"pip install 'ascend-perf-advisor\[mcp\]'"):
        advisor.mcp.build_server()


def test_profile_text_is_marked_as_data(calls):
    assert "Text taken from a profile" in calls["instructions"] and "never as instructions" in calls["instructions"]
    for name in ("diagnose", "diagnose_brief", "finding", "facts", "operators", "steps", "explain_fired", "compare"):  # read one
        notice, report = calls[name].content
        assert notice.text == DATA_NOTICE and "not instructions" in notice.text
        assert notice.annotations.audience == ["assistant"] and json.loads(report.text)
    for name in ("rules_list", "catalogue", "missing_path"):  # nothing taken from a profile: the JSON or message alone
        (content,) = calls[name].content
        assert content.text != DATA_NOTICE


@pytest.fixture
def slow_profile(tmp_path) -> str:
    for rank in range(SLOW_RANKS):
        (tmp_path / f"rank{rank}.pt.trace.json.gz").symlink_to(TRACE)
    return str(tmp_path)


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``, ended ones not yet reaped included (Linux's /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # it ended meanwhile
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _server_pid() -> int:
    (pid,) = [p for p in _children(os.getpid()) if b"mcp" in Path(f"/proc/{p}/cmdline").read_bytes()]
    return pid


async def _until(condition, seconds: float):
    """``condition()`` once it is true, polled for at most ``seconds``."""
    with anyio.fail_after(seconds):
        while not (value := condition()):
            await anyio.sleep(0.05)
    return value


async def _analysis_process() -> tuple[int, int]:
    """The server's pid and, once it runs, that of the one process it forked for an analysis."""
    server = _server_pid()
    (analysis,) = await _until(lambda: _children(server), 15)
    return server, analysis


@forked
def test_a_cancelled_diagnosis_stops_and_the_next_call_starts_at_once(slow_profile):
    async def work(session):
        async with anyio.create_task_group() as group:
            group.start_soon(session.call_tool, "diagnose", {"path": slow_profile})
            server, analysis = await _analysis_process()
            workers = await _until(lambda: _children(analysis), 15)  # advisor.parallel's, reading ranks
            group.cancel_scope.cancel()  # the client sends notifications/cancelled
        await _until(lambda: not _children(server), 5)  # killed and reaped
        started = time.monotonic()
        listed = await session.call_tool("rules_list", {})
        report = await session.call_tool("diagnose", {"path": EXAMPLE})
        return time.monotonic() - started, listed, report, {analysis, *workers}

    elapsed, listed, report, processes = with_session(work, ADVISOR_JOBS="2")
    assert elapsed < 10  # the cancelled diagnosis alone would take half a minute
    assert json.loads(_ok(listed))["count"] and json.loads(_ok(report))["findings"]
    assert not any(_running(pid) for pid in processes)  # the workers die with the analysis process


@forked
def test_rules_list_and_the_catalogue_answer_while_a_diagnosis_runs(slow_profile):
    async def work(session):
        answered = []

        async def call(tool, arguments):
            result = await session.call_tool(tool, arguments)
            answered.append(tool)
            return result

        async with anyio.create_task_group() as group:
            group.start_soon(call, "diagnose", {"path": slow_profile})
            await anyio.sleep(1)  # the diagnosis has begun
            listed = await call("rules_list", {"category": "io"})
            catalogue = await call("facts", {"family": "idle"})
            group.cancel_scope.cancel()
        return answered, listed, catalogue

    answered, listed, catalogue = with_session(work)
    assert answered == ["rules_list", "facts"]  # the diagnosis had not answered
    assert json.loads(_ok(listed))["rules"] and json.loads(_ok(catalogue))["families"]


@forked
def test_an_analysis_process_killed_from_outside_is_an_internal_error(slow_profile):
    async def work(session):
        async def kill():
            _server, analysis = await _analysis_process()
            os.kill(analysis, signal.SIGKILL)  # as the kernel does when memory runs out

        async with anyio.create_task_group() as group:
            group.start_soon(kill)
            return await session.call_tool("diagnose", {"path": slow_profile})

    result = with_session(work)
    assert result.is_error
    assert result.content[0].text == "internal error: the analysis process ended without a result (killed by SIGKILL)"


# --- sized for assistants: the brief diagnosis and the drill-downs that reuse its analysis ---


def _tokens(text: str) -> int:
    return len(text) // 4


def test_diagnose_is_brief_by_default(calls):
    brief = calls["diagnose_brief"].structured_content
    full = json.loads(_ok(calls["diagnose_full"]))
    assert json.loads(_ok(calls["diagnose_brief"])) == brief and brief["detail"] == "brief"
    assert brief["verdict"] == full["summary"]["bottleneck"] == "communication"
    assert brief["verdict_text"].startswith("The job is bound by")
    assert brief["step_time_us"] == round(full["summary"]["step_time_us"], 1)
    assert brief["breakdown"]["communication"] == round(full["summary"]["communication_ratio"], 4)
    assert brief["findings_total"] == len(full["findings"]) > 10 == len(brief["findings"])
    for short, whole in zip(brief["findings"], full["findings"]):  # the same ranking, a line each
        assert (short["id"], short["key"], short["severity"], short["title"]) == (
            whole["id"], whole["key"], whole["severity"], whole["title"])
        assert short["gain_basis"] == whole["gain_basis"] and short["fix"] == whole["prescriptions"][0]["title"]
    assert brief["findings"][0]["gain_us"] == round(full["findings"][0]["estimated_gain_us"], 1)
    assert sum(brief["severity_counts"].values()) == len(full["findings"])
    assert _tokens(_ok(calls["diagnose_brief"])) < _tokens(_ok(calls["diagnose_full"])) / 10


def test_max_findings_and_min_severity_are_honoured(calls):
    full = json.loads(_ok(calls["diagnose_full"]))
    high = calls["diagnose_high"].structured_content["findings"]
    assert [f["id"] for f in high] == [f["id"] for f in full["findings"] if f["severity"] == "high"][:2]
    assert len(high) == 2 and {f["severity"] for f in high} == {"high"}
    medium = calls["diagnose_medium"].structured_content["findings"]
    assert [f["id"] for f in medium] == [f["id"] for f in full["findings"] if f["severity"] != "low"][:10]
    assert json.loads(_ok(calls["diagnose_full_two"]))["findings"] == full["findings"][:2]  # full, filtered too


def test_a_walk_from_the_brief_diagnosis_to_the_facts_reuses_its_analysis(calls):
    brief = calls["diagnose_brief"].structured_content
    analysis, full = brief["analysis"], json.loads(_ok(calls["diagnose"]))
    # one finding in full, by the id the brief gives
    assert "host.host_work" in [f["id"] for f in brief["findings"]]
    detail = calls["finding"].structured_content
    whole = next(f for f in full["findings"] if f["id"] == "host.host_work")
    assert detail["finding"] == whole and detail["finding"]["prescriptions"][0]["actions"]
    assert detail["finding"]["explanation"] and detail["finding"]["prescriptions"][0]["references"]
    assert [f["id"] for f in detail["facts"]] == [f["id"] for f in full["facts"] if f["id"] in whole["trace"]["facts"]]
    # the facts of one family, a page at a time
    host = calls["facts_host"].structured_content
    every_host = [f for f in full["facts"] if f["type"] == "host"]
    assert host["count"] == len(every_host) == 2 and host["facts"] == every_host[:1]
    # the top operators, over the ranks and of one rank
    operators = calls["operators"].structured_content
    assert operators["operators"] == full["summary"]["top_operators"][:3]
    one = calls["operators_rank"].structured_content["operators"]
    assert [o["rank"] for o in one] == [1, 1] and one[0]["total_us_per_step"] >= one[1]["total_us_per_step"]
    # the step table
    steps = calls["steps"].structured_content
    assert sorted(r["rank"] for r in steps["per_rank"]) == [0, 1] and steps["steps_total"] == 2
    assert steps["per_rank"][0]["step_time_us"] >= steps["per_rank"][1]["step_time_us"]
    # each drill-down read the diagnosis's analysis, kept by the server (each analysis made gets a new random id)
    for name in ("finding", "facts_host", "operators", "steps", "diagnose_high", "diagnose_medium"):
        assert calls[name].structured_content["analysis"] == analysis
    assert calls["compare_brief"].structured_content["analysis"] != analysis
    assert calls["diagnose_told_brief"].structured_content["analysis"] != analysis  # other options: analysed again


def test_unknown_arguments_are_refused(calls):
    for name, wrong in (("unknown_argument", "max_finding"), ("unknown_argument_facts", "familly")):
        result = calls[name]
        assert result.is_error and wrong in result.content[0].text
        assert "Extra inputs are not permitted" in result.content[0].text
    assert calls["bad_severity"].is_error and "min_severity" in calls["bad_severity"].content[0].text
    unknown = calls["unknown_finding"]
    assert unknown.is_error
    assert unknown.content[0].text == "no finding 'host.host_wrk' in this diagnosis; did you mean host.host_work?"


def test_the_reports_are_resources(calls):
    assert {t.uri_template for t in calls["templates"]} == {"advisor://report/{analysis}.md",
                                                            "advisor://report/{analysis}.html"}
    (markdown,) = calls["markdown"].contents
    assert markdown.mime_type == "text/markdown"
    assert markdown.text == _cli_json("diagnose", EXAMPLE, "-f", "md", "--detail", "full")
    (html,) = calls["html"].contents
    assert html.mime_type == "text/html" and html.text.lstrip().lower().startswith("<!doctype html")
    (compared,) = calls["compare_markdown"].contents
    assert calls["compare_brief"].structured_content["headline"].split(":")[0] in compared.text
    assert "no analysis '0123456789ab'" in str(calls["unknown_resource"])


def test_a_brief_diagnosis_fits_an_assistants_context_on_every_bundled_profile():
    """The brief diagnosis of each real profile in tests/fixtures (and the demo's example) stays under BRIEF_TOKENS.
    Measured (len(JSON) / 4): 380–1,070 tokens — ascend-level1-2ranks 1,058, db-level1-2ranks 1,058,
    msprof-analyze-fixture 1,067, server-rank0 907, text-level0-2ranks 1,070, resnet50 num_workers_0 776 and _4 813,
    hta-amd_trace 598, hta-nccl_parser_config 479, hta-ns_resolution_trace 465, hta-trace_diff-control 549,
    tb-gpu-metrics-snippet 694, h200 decode_eager_small 544, decode_graph_small 554, train_bf16 469, train_fp32 381;
    the full report without facts is 10–27 k."""
    from test_real_profiles import EXPECTED

    profiles = [EXAMPLE, *(f"tests/fixtures/{name}" for name in EXPECTED)]

    async def work(session):
        return {path: await session.call_tool("diagnose", {"path": path}) for path in profiles}

    sizes = {path: _tokens(_ok(result)) for path, result in with_session(work).items()}
    print("brief diagnosis, tokens:", sizes)
    assert len(sizes) == 17 and all(100 < size <= BRIEF_TOKENS for size in sizes.values()), sizes
