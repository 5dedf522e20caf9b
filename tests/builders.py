"""Build Ascend profiler rank directories on disk, in the exact formats and variants real versions write.

The numbers are consistent the way the profiler's are: step_time = Computing + Communication(Not
Overlapped) + Free, Stage = that minus Bubble, op_statistic = kernel_details grouped by type. Variants
(reference §8) are switched on by keyword: CRLF/LF, UTF-8 BOM, trailing TAB on timestamps, a
``Device_id`` column, ``Block Dim``/``Block Num``, ``HCCL``/``COMMUNICATION``, ``rank_id`` as str or int,
Level0 (Type and Accelerator Core ``N/A``), no step info.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Kernel:
    step: int | None
    name: str
    op_type: str
    core: str
    duration_us: float
    shapes: str = "4096,1024;4096,1024"
    dtypes: str = "FLOAT16;FLOAT16"
    group: str = "5862276093215481612"  # the communicator hash of a collective or P2P kernel
    model_id: int = 4294967295  # kernel_details' Model ID (Level1): UINT32_MAX for a single op, a graph's id inside one


@dataclass
class StepRow:
    step: int | None
    computing: float
    comm_not_overlapped: float
    free: float
    overlapped: float = 0.0
    bubble: float = 0.0
    preparing: float = 2000.0  # the trace's ProfilerStep starts 2 ms before the step's first device task


@dataclass
class RankSpec:
    rank: int = 0
    device_id: int = 0
    steps: list[StepRow] = field(
        default_factory=lambda: [StepRow(5, 1344.32, 1921.46, 85.14, 66.46), StepRow(6, 1344.32, 1921.46, 85.14, 66.46)]
    )
    kernels: list[Kernel] = field(
        default_factory=lambda: [
            k
            for step in (5, 6)
            for k in (
                Kernel(step, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", 170.4),
                Kernel(step, "FlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 881.64),
                Kernel(step, "RmsNorm", "RmsNorm", "AI_VECTOR_CORE", 33.06),
                Kernel(step, "hcom_allReduce__612_0_1", "hcom_allReduce_", "COMMUNICATION", 1987.92),
            )
        ]
    )
    level: str = "Level1"
    crlf: bool = True
    bom: bool = False
    trailing_tab: bool = True
    device_id_column: bool = True
    block_header: str = "Block Dim"
    comm_core: str = "COMMUNICATION"
    rank_id: object = "0"
    info_name: str | None = None  # default profiler_info_{rank}.json
    dir_name: str | None = None  # default localhost_{pid}_{timestamp}_ascend_pt
    with_step_info: bool = True
    omit: tuple[str, ...] = ()
    # communication.json: share of each collective's time that moves data, the rest split wait/idle
    comm_transit_share: float = 0.855
    comm_wait_share: float = 0.117
    comm_size_mb: float = 33.554432  # per collective, over HCCS
    comm_transport: str = "HCCS"
    # as some captures write it: Time Info's Transit Time 0 (the rest idle) while Bandwidth Info has the transfer
    comm_time_info_without_transit: bool = False
    # memory_record.csv: how often Total Reserved drops inside each step; the allocator config recorded
    reserved_drops_per_step: int = 0
    reserved_mb: float = 6144.0  # Total Reserved beside 4096 MB allocated (6144: a third unused, fragmentation)
    alloc_conf: str = ""
    # trace_view.json: host activity injected into every step
    compiles_per_step: int = 0
    syncs_per_step: int = 1
    dataloader_us: float = 500.0
    gc_us: float = 0.0
    free_us: float = 0.0  # AscendCL@aclrtFree time injected into every step
    optimizer_us: float = 0.0  # an Optimizer.step#AdamW.step region in every step
    groups: dict | None = None  # profiler_metadata parallel_group_info
    kernel_spacing_us: float = 5000.0  # start-to-start distance of consecutive kernels in a step
    # communication_matrix.json: GB/s of each "src-dst" link (ranks inside group 5862276093215481612) per collective
    matrix_links: dict[str, float] | None = None


def build_rank(parent: Path, spec: RankSpec) -> Path:
    """Write one ``*_ascend_pt`` directory under ``parent`` and return its path."""
    name = spec.dir_name or f"localhost_{2231054 + spec.rank}_2025112719273312{spec.rank}_ascend_pt"
    rank_dir = parent / name
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True, exist_ok=True)
    files = {
        spec.info_name or f"profiler_info_{spec.rank}.json": lambda p: _write_info(p, spec),
        "profiler_metadata.json": lambda p: p.write_text(json.dumps(
            {"ENV_VARIABLES": {"ASCEND_LAUNCH_BLOCKING": "", "PYTORCH_NPU_ALLOC_CONF": spec.alloc_conf},
             **({"parallel_group_info": spec.groups} if spec.groups else {})})),
        "ASCEND_PROFILER_OUTPUT/step_trace_time.csv": lambda p: _write_csv(p, spec, *_step_trace(spec)),
        "ASCEND_PROFILER_OUTPUT/kernel_details.csv": lambda p: _write_csv(p, spec, *_kernel_details(spec)),
        "ASCEND_PROFILER_OUTPUT/op_statistic.csv": lambda p: _write_csv(p, spec, *_op_statistic(spec)),
        "ASCEND_PROFILER_OUTPUT/communication.json": lambda p: p.write_text(json.dumps(_communication(spec))),
        "ASCEND_PROFILER_OUTPUT/memory_record.csv": lambda p: _write_csv(p, spec, *_memory_record(spec)),
        "ASCEND_PROFILER_OUTPUT/trace_view.json": lambda p: p.write_text(json.dumps(_trace_view(spec))),
    }
    if spec.matrix_links is not None:
        files["ASCEND_PROFILER_OUTPUT/communication_matrix.json"] = lambda p: p.write_text(json.dumps(_matrix(spec)))
    for relative, write in files.items():
        if relative.rsplit("/", 1)[-1] not in spec.omit:
            write(rank_dir / relative)
    return rank_dir


def _write_info(path: Path, spec: RankSpec) -> None:
    info = {
        "config": {
            "common_config": {"activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"], "record_shapes": True,
                              "profile_memory": "memory_record.csv" not in spec.omit, "with_stack": False},
            "experimental_config": {"_profiler_level": spec.level,
                                    "_aic_metrics": "ACL_AICORE_NONE" if spec.level == "Level0" else "ACL_AICORE_PIPE_UTILIZATION",
                                    "_export_type": ["text"]},
        },
        "torch_npu_version": "2.7.1",
        "cann_version": "8.3.RC1",
    }
    if spec.rank_id is not None:
        info["rank_id"] = spec.rank_id
    path.write_text(json.dumps(info, indent=4))


BASE_US = 1764246877000000.0
STEP_SPACING_US = 100_000.0


def kernel_start(spec: RankSpec, kernel: Kernel) -> float:
    """Kernels of step s start at BASE + s × 100 ms, one every ``kernel_spacing_us`` (5 ms) in listed order."""
    index = next(i for i, k in enumerate(k for k in spec.kernels if k.step == kernel.step) if k is kernel)
    return BASE_US + (kernel.step or 0) * STEP_SPACING_US + index * spec.kernel_spacing_us


def _step_trace(spec: RankSpec) -> tuple[list[str], list[list[object]]]:
    header = ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage",
              "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
    rows = []
    for s in spec.steps:
        stage = s.computing + s.comm_not_overlapped + s.free - s.bubble
        rows.append(["" if s.step is None or not spec.with_step_info else s.step, s.computing, s.comm_not_overlapped,
                     s.overlapped, s.comm_not_overlapped + s.overlapped, s.free, stage, s.bubble,
                     max(s.comm_not_overlapped - s.bubble, 0), s.preparing])
    if spec.device_id_column:
        header = ["Device_id", *header]
        rows = [[spec.device_id, *r] for r in rows]
    return header, rows


def _kernel_details(spec: RankSpec) -> tuple[list[str], list[list[object]]]:
    level0 = spec.level == "Level0"
    header = ["Step Id", *([] if level0 else ["Model ID"]), "Name", "Type", "Accelerator Core", "Start Time(us)",
              "Duration(us)", "Wait Time(us)", spec.block_header]
    if not level0:
        header += ["Input Shapes", "Input Data Types", "aic_mac_ratio", "aiv_vec_ratio"]
    rows = []
    for k in spec.kernels:
        core = spec.comm_core if k.core == "COMMUNICATION" else k.core
        op_type = "N/A" if level0 and core != spec.comm_core else k.op_type
        core = "N/A" if level0 and core != spec.comm_core else core
        start = f"{kernel_start(spec, k):.3f}" + ("\t" if spec.trailing_tab else "")
        row: list[object] = ["" if not spec.with_step_info else k.step, *([] if level0 else [k.model_id]), k.name,
                             op_type, core, start, f"{k.duration_us:.3f}", "0", 20]
        if not level0:
            row += [f'"{k.shapes}"', k.dtypes, "0.78", "0.0"]
        rows.append(row)
    if not spec.with_step_info:
        header, rows = header[1:], [r[1:] for r in rows]
    if spec.device_id_column:
        header = header[:1] + ["Device_id"] + header[1:] if spec.with_step_info else ["Device_id", *header]
        rows = [r[:1] + [spec.device_id] + r[1:] if spec.with_step_info else [spec.device_id, *r] for r in rows]
    return header, rows


def _op_statistic(spec: RankSpec) -> tuple[list[str], list[list[object]]]:
    totals: dict[tuple[str, str], list[float]] = {}
    for k in spec.kernels:
        if k.core == "COMMUNICATION":
            continue
        totals.setdefault((k.op_type, k.core), []).append(k.duration_us)
    grand = sum(sum(v) for v in totals.values())
    header = ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
    rows = [
        [t, c, len(v), round(sum(v), 3), min(v), round(sum(v) / len(v), 3), max(v), round(sum(v) / grand * 100, 3)]
        for (t, c), v in sorted(totals.items(), key=lambda kv: -sum(kv[1]))
    ]
    if spec.device_id_column:
        header = ["Device_id", *header]
        rows = [[spec.device_id, *r] for r in rows]
    return header, rows


def _communication(spec: RankSpec) -> dict:
    """communication.json with one op per collective kernel, its times consistent with the kernel duration."""
    document: dict = {}
    for index, kernel in enumerate(k for k in spec.kernels if k.core == "COMMUNICATION"):
        step_key = f"step{kernel.step}" if spec.with_step_info and kernel.step is not None else "step"
        elapse = kernel.duration_us / 1000
        transit = elapse * spec.comm_transit_share
        wait = elapse * spec.comm_wait_share
        transports = {t: {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0,
                          "Size Distribution": {}} for t in ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")}
        moved = {"Transit Size(MB)": spec.comm_size_mb, "Transit Time(ms)": transit,
                 "Bandwidth(GB/s)": round(spec.comm_size_mb / transit, 4) if transit else 0, "Large Packet Ratio": 0.0,
                 "Size Distribution": {str(spec.comm_size_mb / 2): [2, transit]}}
        transports[spec.comm_transport] = moved
        if spec.comm_transport in ("HCCS", "PCIE", "SIO"):
            transports["SDMA"] = {**moved, "Size Distribution": {}}
        written = 0.0 if spec.comm_time_info_without_transit else transit
        op = {
            "Communication Time Info": {
                "Start Timestamp(us)": 1764246877001783.0 + index, "Elapse Time(ms)": elapse, "Transit Time(ms)": written,
                "Wait Time(ms)": wait, "Synchronization Time(ms)": wait * 0.9, "Idle Time(ms)": elapse - written - wait,
                "Wait Time Ratio": round(wait / (wait + transit), 4) if wait + transit else 0,
                "Synchronization Time Ratio": round(wait * 0.9 / (wait * 0.9 + transit), 4) if transit else 0,
            },
            "Communication Bandwidth Info": transports,
        }
        step = document.setdefault(step_key, {"p2p": {}, "collective": {}})
        kind = "p2p" if kernel.name.lower().startswith(("hcom_send", "hcom_receive")) else "collective"
        step[kind][f"{kernel.name}@{kernel.group}"] = op
    return document


def _matrix(spec: RankSpec) -> dict:
    """communication_matrix.json as torch_npu writes it: per step, '-top1' and '-total' of each op type per group."""
    document: dict = {}
    for kernel in (k for k in spec.kernels if k.core == "COMMUNICATION"):
        step_key = f"step{kernel.step}" if spec.with_step_info and kernel.step is not None else "step"
        links = {pair: {"Transport Type": spec.comm_transport, "Transit Size(MB)": spec.comm_size_mb,
                        "Transit Time(ms)": spec.comm_size_mb / bandwidth, "Bandwidth(GB/s)": round(bandwidth, 4)}
                 for pair, bandwidth in (spec.matrix_links or {}).items()}
        links["0-0"] = {"Transport Type": "LOCAL", "Transit Size(MB)": 4.0, "Transit Time(ms)": 0.008, "Bandwidth(GB/s)": 500.0}
        collective = document.setdefault(step_key, {"p2p": {}, "collective": {}})["collective"]
        for stat in ("top1", "total"):
            entry = collective.setdefault(f"allreduce-{stat}@5862276093215481612", {})
            for pair, link in links.items():
                if pair in entry and stat == "total":  # several ops of the type in one step: the total sums them
                    entry[pair] = {**link, "Transit Size(MB)": entry[pair]["Transit Size(MB)"] + link["Transit Size(MB)"],
                                   "Transit Time(ms)": entry[pair]["Transit Time(ms)"] + link["Transit Time(ms)"]}
                else:
                    entry[pair] = {**link, **({"Op Name": kernel.name} if stat != "total" else {})}
    return document


def _memory_record(spec: RankSpec) -> tuple[list[str], list[list[object]]]:
    """An APP sample, then PTA/PTA+GE rows: 4 GB allocated, ``reserved_mb`` reserved, with the requested drops per step."""
    header = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)", "Stream Ptr",
              "Device Type"]
    tab = "\t" if spec.trailing_tab else ""
    device = f"NPU:{spec.device_id}"
    rows: list[list[object]] = [["APP", f"{BASE_US:.3f}{tab}", "", 7000.0, "", "", device]]
    steps = sorted({k.step for k in spec.kernels if k.step is not None})
    for step in steps:
        start = BASE_US + step * STEP_SPACING_US
        samples = [(start + 100.0, 4096.0, spec.reserved_mb)]
        for drop in range(spec.reserved_drops_per_step):
            at = start + 200.0 + drop * 1000.0
            samples += [(at, 3000.0, spec.reserved_mb - 1024.0), (at + 500.0, 4096.0, spec.reserved_mb)]
        for time, allocated, reserved in samples:
            for component in ("PTA", "PTA+GE"):
                rows.append([component, f"{time:.3f}{tab}", allocated, reserved, allocated, 2, device])
    return header, rows


def _trace_view(spec: RankSpec) -> list[dict]:
    """A trace_view.json with the processes the facts read, one ProfilerStep per step and the injected host work.

    pids follow the bit-packed CANN encoding; as in real files only the process_name events give meaning.
    """
    python, gc, cann, hardware, overlap = 3096504, 3096505, (3096504 << 10) | (7 << 5) | 31, (3096504 << 10) | (14 << 5), (3096504 << 10) | (31 << 5)
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
        for pid, name in ((python, "Python"), (gc, "Python GC"), (cann, "CANN"), (hardware, "Ascend Hardware"),
                          (overlap, "Overlap Analysis"))
    ]

    def complete(pid: int, tid: int, name: str, ts: float, dur: float, cat: str | None = None, **args) -> None:
        event = {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": f"{ts:.3f}", "dur": dur}
        if cat:
            event["cat"] = cat
        if args:
            event["args"] = args
        events.append(event)

    flows = []

    def device_task(kernel: Kernel) -> None:
        """The kernel's launch, its task on the device and the HostToDevice flow joining them."""
        begin = kernel_start(spec, kernel)
        launch = begin - 80.0
        complete(cann, 2, "Node@launch", launch, 12.0)
        task_type = "COMMUNICATION" if kernel.core == "COMMUNICATION" else kernel.core
        complete(hardware, 2, kernel.name, begin, kernel.duration_us, None,
                 **{"Model Id": kernel.model_id, "Task Type": task_type})
        flows.append(kernel)
        flow = len(flows)
        events.append({"ph": "s", "name": f"HostToDevice{flow}", "cat": "HostToDevice", "id": str(flow),
                       "pid": cann, "tid": 2, "ts": f"{launch:.3f}"})
        events.append({"ph": "f", "bp": "e", "name": f"HostToDevice{flow}", "cat": "HostToDevice", "id": str(flow),
                       "pid": hardware, "tid": 2, "ts": f"{begin:.3f}"})

    for kernel in (k for k in spec.kernels if k.step is None):  # a capture without step info
        device_task(kernel)
    for step in sorted({k.step for k in spec.kernels if k.step is not None}):
        start = BASE_US + step * STEP_SPACING_US
        row = next((r for r in spec.steps if r.step == step), None)
        # the ProfilerStep starts the row's Preparing before the step's first device task (2 ms by default): the
        # host fetches the batch and does the injected host work in that stretch, as the real capture does
        before = row.preparing if row is not None else 2000.0
        complete(python, 1, f"ProfilerStep#{step}", start - before, STEP_SPACING_US - 1000.0, "cpu_op")
        complete(python, 1, "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", start - before * 0.95,
                 spec.dataloader_us, "cpu_op")
        cursor = start - before / 2
        for _ in range(spec.compiles_per_step):  # a compilation (opCompile) inside each call, as CANN records it
            complete(cann, 2, "AscendCL@aclopCompileAndExecute", cursor, 400.0)
            complete(cann, 2, "AscendCL@opCompile", cursor + 3.0, 350.0)
            cursor += 5.0
        for _ in range(spec.syncs_per_step):
            complete(cann, 1, "AscendCL@aclrtSynchronizeStream", cursor, 50.0)
            cursor += 5.0
        if spec.gc_us:
            complete(gc, 9, "GC", cursor, spec.gc_us, "GC")
        if spec.free_us:
            complete(cann, 1, "AscendCL@aclrtFree", cursor, spec.free_us)
        if spec.optimizer_us:
            complete(python, 1, "Optimizer.step#AdamW.step", cursor, spec.optimizer_us, "cpu_op")
        for kernel in (k for k in spec.kernels if k.step == step):
            device_task(kernel)
        if row is not None:  # the lanes carry the same totals as the step's step_trace_time row; the device is
            # free while the host fetches the batch and does the rest of the injected host work
            lanes = (("Computing", row.computing, start), ("Communication", row.comm_not_overlapped + row.overlapped, start + 10.0),
                     ("Communication(Not Overlapped)", row.comm_not_overlapped, start + 20.0),
                     ("Free", row.free, start - before * 0.95))
            for lane, (name, dur, ts) in enumerate(lanes):
                complete(overlap, lane, name, ts, dur)
    return events


def _write_csv(path: Path, spec: RankSpec, header: list[str], rows: list[list[object]]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n" if spec.crlf else "\n")
    writer.writerow(header)
    writer.writerows(rows)
    text = buffer.getvalue()
    path.write_bytes(("\ufeff" if spec.bom else "").encode() + text.encode("utf-8"))


def skipped_reason(parent: Path, relative: str, content: bytes) -> tuple[str, str]:
    """Build a rank, overwrite one of its files with ``content`` and return (file, reason) of the one skip."""
    from advisor.ingest import load_profile

    rank_dir = build_rank(parent, RankSpec())
    (rank_dir / relative).write_bytes(content)
    (skipped,) = load_profile(parent).coverage.skipped
    return skipped.file, skipped.reason


EVERY_CATEGORY_ENV = ["ASCEND_LAUNCH_BLOCKING=1", "TASK_QUEUE_ENABLE=1"]
# 7000 MB process peak on 7.5 GB devices (91 %); Atlas A3 in max-autotune; a 0.2 B model run with TP=2 where TP=1 fits.
EVERY_CATEGORY_CONTEXT = (
    "device_memory_gb: 7.5\nchip: Atlas A3\nexecution_mode: torchair-max-autotune\nparameters_billion: 0.2\n"
    "cards_per_node: 8\ntensor_parallel: 2\npipeline_parallel: 1\ndata_parallel: 1\n"
)


def build_every_category(parent: Path) -> Path:
    """A two-rank job with a problem in every category a full profile can show (all but 'profiling').

    Rank 0 idles longer than rank 1 (uneven ranks); both compile online, synchronise, collect garbage,
    wait for the DataLoader, run an unfused optimizer step, reorganise the allocator twice per step and
    mostly wait inside collectives over a slow link; their kernels include an AI CPU IndexPut, a
    decomposed RMSNorm (Cast, Square, ReduceMeanD, Add, Rsqrt, Mul, Mul), a MatMul followed by the AllReduce of its
    output and a hundred tiny kernels.
    Diagnose it with ``--env`` EVERY_CATEGORY_ENV and a ``--context`` of EVERY_CATEGORY_CONTEXT.
    """
    for rank, free in ((0, 900.0), (1, 400.0)):
        kernels = [
            k
            for step in (5, 6)
            for k in (
                Kernel(step, "FlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 881.64),
                Kernel(step, "IndexPutV2_1", "IndexPutV2", "AI_CPU", 300.0),
                *(Kernel(step, f"{op_type}_{norm}_{i}", op_type, "AI_VECTOR_CORE", 6.0)  # two decomposed RMSNorms
                  for norm in (1, 2)
                  for i, op_type in enumerate(("Cast", "Square", "ReduceMeanD", "Add", "Rsqrt", "Mul", "Mul"))),
                # its [4096, 1024] fp16 output (8.4 MB) is what the AllReduce carries (8 MB sent: an MC2 candidate;
                # long enough that overlapping the two pays after the seed's 1.15 contention factor)
                Kernel(step, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", 800.0,
                       shapes="4096,8192;8192,1024"),
                Kernel(step, "hcom_allReduce__612_0_1", "hcom_allReduce_", "COMMUNICATION", 1987.92),
                # the compiled graph's kernels (max-autotune: they carry its Model ID, not a single op's)
                *(Kernel(step, f"Cast_{i}", "Cast", "AI_VECTOR_CORE", 2.0, model_id=1) for i in range(110)),
            )
        ]
        build_rank(parent, RankSpec(
            rank=rank, rank_id=str(rank), steps=[StepRow(5, 1344.32, 1921.46, free, 66.46), StepRow(6, 1344.32, 1921.46, free, 66.46)],
            kernels=kernels, kernel_spacing_us=20.0, compiles_per_step=2, syncs_per_step=3, gc_us=100.0,
            dataloader_us=400.0, optimizer_us=600.0, reserved_drops_per_step=2, comm_transit_share=0.3, comm_size_mb=8.0,
        ))
    return parent


def build_rank_db(parent: Path, spec: RankSpec) -> Path:
    """Write the same rank as ``build_rank`` as a DB export (reference §7): profiler_info, the profiler DB, analysis.db.

    Every table is derived from the rows and events the text builder writes, so a text and a DB export of one
    spec must give equal facts. Times become integer ns, memory bytes, text columns STRING_IDS ids.
    """
    import sqlite3

    name = spec.dir_name or f"localhost_{2231054 + spec.rank}_2025112719273312{spec.rank}_ascend_pt"
    rank_dir = parent / name
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True, exist_ok=True)
    _write_info(rank_dir / (spec.info_name or f"profiler_info_{spec.rank}.json"), spec)
    strings: dict[str, int] = {}

    def sid(text: object) -> int | None:
        return None if text is None else strings.setdefault(str(text), len(strings) + 1)

    def ns(us: object) -> int:
        text = str(us).strip()
        whole, _, fraction = text.partition(".")
        return int(whole) * 1000 + int((fraction + "000")[:3])

    trace = _trace_view(spec)
    names = {e["pid"]: e["args"]["name"] for e in trace if e["ph"] == "M"}
    flows = [e for e in trace if e.get("cat") == "HostToDevice"]
    launch_of = {ns(f["ts"]): int(f["id"]) for f in flows if f["ph"] == "s"}
    task_of = {ns(f["ts"]): int(f["id"]) for f in flows if f["ph"] == "f"}
    header, kernel_rows = _kernel_details(spec)
    column = {h: i for i, h in enumerate(header)}

    db = sqlite3.connect(out / f"ascend_pytorch_profiler_{spec.rank}.db")
    db.executescript(
        "CREATE TABLE STRING_IDS(id INTEGER PRIMARY KEY, value TEXT);"
        "CREATE TABLE TASK(startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER,"
        " globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER);"
        f"CREATE TABLE COMPUTE_TASK_INFO(name INTEGER, globalTaskId INTEGER, {'blockNum' if spec.block_header == 'Block Num' else 'blockDim'}"
        " INTEGER, mixBlockNum INTEGER, taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER,"
        " inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER, attrInfo INTEGER,"
        " opState INTEGER, hf32Eligible INTEGER);"
        "CREATE TABLE TASK_PMU_INFO(globalTaskId INTEGER, name INTEGER, value REAL);"
        "CREATE TABLE COMMUNICATION_OP(opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER,"
        " groupName INTEGER, opId INTEGER, relay INTEGER, retry INTEGER, dataType INTEGER, algType INTEGER, count REAL,"
        " opType INTEGER, deviceId INTEGER);"
        "CREATE TABLE CANN_API(startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER, connectionId INTEGER,"
        " name INTEGER);"
        "CREATE TABLE PYTORCH_API(startNs INTEGER, endNs INTEGER, globalTid INTEGER, connectionId INTEGER, name INTEGER,"
        " sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER, callchainId INTEGER,"
        " type INTEGER);"
        "CREATE TABLE GC_RECORD(startNs INTEGER, endNs INTEGER, globalTid INTEGER);"
        "CREATE TABLE STEP_TIME(id INTEGER, startNs INTEGER, endNs INTEGER);"
        "CREATE TABLE OVERLAP_ANALYSIS(deviceId INTEGER, startNs INTEGER, endNs INTEGER, type INTEGER);"
        "CREATE TABLE MEMORY_RECORD(component INTEGER, timestamp INTEGER, totalAllocated INTEGER, totalReserved INTEGER,"
        " totalActive INTEGER, streamPtr INTEGER, deviceId INTEGER);"
        "CREATE TABLE META_DATA(name TEXT, value TEXT);"
    )
    lanes = {"Computing": 0, "Communication": 1, "Communication(Not Overlapped)": 2, "Free": 3}
    level0 = spec.level == "Level0"
    for task_id, (kernel, row) in enumerate(zip(spec.kernels, kernel_rows), start=1):
        start = ns(f"{kernel_start(spec, kernel):.3f}")
        end = start + round(kernel.duration_us * 1000)
        task_type = "COMMUNICATION" if kernel.core == "COMMUNICATION" else kernel.core
        db.execute("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                   (start, end, spec.device_id, task_of.get(start), task_id, 0, sid(task_type), 0, 2, task_id, kernel.model_id))
        if task_type == "COMMUNICATION":
            db.execute("INSERT INTO COMMUNICATION_OP VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       (sid(kernel.name), start, end, task_of.get(start), sid(kernel.group), task_id,
                        0, 0, sid("FP16"), sid("RING"), 0, sid(row[column["Type"]]), spec.device_id))
            continue
        shapes = None if level0 else str(row[column["Input Shapes"]]).strip('"')
        dtypes = None if level0 else row[column["Input Data Types"]]
        op_type = None if row[column["Type"]] == "N/A" else row[column["Type"]]
        core = None if row[column["Accelerator Core"]] == "N/A" else row[column["Accelerator Core"]]
        db.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   (sid(kernel.name), task_id, 20, 0, sid(core), sid(op_type), None, sid(dtypes), sid(shapes),
                    None, None, None, None, None, None))
        if not level0:
            db.executemany("INSERT INTO TASK_PMU_INFO VALUES (?,?,?)",
                           [(task_id, sid("aic_mac_ratio"), 0.78), (task_id, sid("aiv_vec_ratio"), 0.0)])
    for event in (e for e in trace if e["ph"] == "X"):
        process, start, end = names[event["pid"]], ns(event["ts"]), ns(event["ts"]) + round(float(event["dur"]) * 1000)
        if process == "Ascend Hardware":
            continue  # written from the kernel rows above
        elif process == "CANN":  # the DB keeps the bare name and its level in type: "Node@launch" is (10000, "launch")
            level, _, bare = event["name"].partition("@")
            db.execute("INSERT INTO CANN_API VALUES (?,?,?,?,?,?)",
                       (start, end, 10000 if level == "Node" else 20000, event["tid"], launch_of.get(start), sid(bare)))
        elif process == "Python":
            if event["name"].startswith("ProfilerStep#"):
                db.execute("INSERT INTO STEP_TIME VALUES (?,?,?)", (int(event["name"].split("#")[1]), start, end))
            db.execute("INSERT INTO PYTORCH_API VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                       (start, end, event["tid"], None, sid(event["name"]), -1, 0, None, None, None, 50001))
        elif process == "Python GC":
            db.execute("INSERT INTO GC_RECORD VALUES (?,?,?)", (start, end, event["tid"]))
        elif process == "Overlap Analysis":
            db.execute("INSERT INTO OVERLAP_ANALYSIS VALUES (?,?,?,?)", (spec.device_id, start, end, lanes[event["name"]]))
    if "memory_record.csv" not in spec.omit:
        memory_header, memory_rows = _memory_record(spec)
        at = {h: i for i, h in enumerate(memory_header)}
        db.executemany("INSERT INTO MEMORY_RECORD VALUES (?,?,?,?,?,?,?)", [
            (sid(r[at["Component"]]), ns(str(r[at["Timestamp(us)"]]).rstrip("\t")),
             None if r[at["Total Allocated(MB)"]] == "" else round(float(r[at["Total Allocated(MB)"]]) * 1024 * 1024),
             round(float(r[at["Total Reserved(MB)"]]) * 1024 * 1024),
             None if r[at["Total Active(MB)"]] == "" else round(float(r[at["Total Active(MB)"]]) * 1024 * 1024),
             None, spec.device_id) for r in memory_rows])
    metadata = {"ENV_VARIABLES": {"ASCEND_LAUNCH_BLOCKING": "", "PYTORCH_NPU_ALLOC_CONF": spec.alloc_conf},
                **({"parallel_group_info": spec.groups} if spec.groups else {})}
    db.executemany("INSERT INTO META_DATA VALUES (?,?)", [(k, json.dumps(v)) for k, v in metadata.items()])
    db.executemany("INSERT INTO STRING_IDS VALUES (?,?)", [(i, v) for v, i in strings.items()])
    db.commit()
    db.close()

    analysis = sqlite3.connect(out / "analysis.db")
    analysis.executescript(
        "CREATE TABLE StepTraceTime(deviceId INTEGER, step TEXT, computing REAL, communication_not_overlapped REAL,"
        " overlapped REAL, communication REAL, free REAL, stage REAL, bubble REAL,"
        " communication_not_overlapped_and_exclude_receive REAL, preparing REAL);"
        "CREATE TABLE CommAnalyzerTime(hccl_op_name TEXT, group_name TEXT, start_timestamp REAL, elapse_time REAL,"
        " transit_time REAL, wait_time REAL, synchronization_time REAL, idle_time REAL, step TEXT, type TEXT);"
        "CREATE TABLE CommAnalyzerMatrix(hccl_op_name TEXT, group_name TEXT, src_rank INTEGER, dst_rank INTEGER,"
        " transport_type TEXT, transit_size REAL, transit_time REAL, bandwidth REAL, step TEXT, type TEXT, op_name TEXT);"
        "CREATE TABLE CommAnalyzerBandwidth(hccl_op_name TEXT, group_name TEXT, transport_type TEXT, transit_size REAL,"
        " transit_time REAL, bandwidth REAL, large_packet_ratio REAL, package_size REAL, count REAL,"
        " total_duration REAL, step TEXT, type TEXT);"
    )
    step_header, step_rows = _step_trace(spec)
    at = {h: i for i, h in enumerate(step_header)}
    analysis.executemany("INSERT INTO StepTraceTime VALUES (?,?,?,?,?,?,?,?,?,?,?)", [
        (spec.device_id, str(r[at["Step"]]), *(float(r[at[c]]) for c in (
            "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage", "Bubble",
            "Communication(Not Overlapped and Exclude Receive)", "Preparing"))) for r in step_rows])
    if "communication.json" not in spec.omit:
        for step_key, groups in _communication(spec).items():
            for kind, ops in groups.items():
                for key, op in ops.items():
                    op_name, _, group = key.partition("@")
                    times = op["Communication Time Info"]
                    analysis.execute("INSERT INTO CommAnalyzerTime VALUES (?,?,?,?,?,?,?,?,?,?)", (
                        op_name, group, times["Start Timestamp(us)"], times["Elapse Time(ms)"], times["Transit Time(ms)"],
                        times["Wait Time(ms)"], times["Synchronization Time(ms)"], times["Idle Time(ms)"], step_key, kind))
                    for transport, values in op["Communication Bandwidth Info"].items():
                        analysis.execute("INSERT INTO CommAnalyzerBandwidth VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", (
                            op_name, group, transport, values["Transit Size(MB)"], values["Transit Time(ms)"],
                            values["Bandwidth(GB/s)"], values["Large Packet Ratio"], 0, 0, 0, step_key, kind))
    if spec.matrix_links is not None:
        for step_key, groups in _matrix(spec).items():
            for kind, ops in groups.items():
                for key, links in ops.items():
                    op_name, _, group = key.partition("@")
                    for pair, link in links.items():
                        src, dst = pair.split("-")
                        analysis.execute("INSERT INTO CommAnalyzerMatrix VALUES (?,?,?,?,?,?,?,?,?,?,?)", (
                            op_name, group, int(src), int(dst), link["Transport Type"], link["Transit Size(MB)"],
                            link["Transit Time(ms)"], link["Bandwidth(GB/s)"], step_key, kind, link.get("Op Name")))
    analysis.commit()
    analysis.close()
    return rank_dir


@dataclass
class GpuKernel:
    """One GPU activity of a Kineto trace and the runtime call that launched it (times in µs)."""

    name: str
    stream: int
    ts: float
    dur: float
    launch_ts: float
    category: str = "kernel"


def write_kineto_trace(path: Path, kernels: list[GpuKernel], *, rank: int | None = 0, ns: bool = False,
                       old_categories: bool = False, hip: bool = False, steps: int = 1, text_streams: bool = False,
                       host_ops: list[tuple[str, float, float]] = ()) -> Path:
    """A PyTorch profiler trace as Kineto writes it: kernels with their launches (linked by correlation),
    ProfilerStep windows covering them, and [memory] instants. ``ns`` declares displayTimeUnit "ns" (the values stay
    µs, as in real traces); ``old_categories`` the capitalised categories of old exporters; ``hip`` ROCm runtime
    names; ``text_streams`` streams written as text ("0x7"), as ROCm traces do; ``host_ops`` extra cpu_op events
    (name, ts, dur); a ``.gz`` suffix compresses the file.
    """
    launch_name = "hipLaunchKernel" if hip else "cudaLaunchKernel"
    events: list[dict] = []
    first = min(k.launch_ts for k in kernels) - 10.0
    last = max(k.ts + k.dur for k in kernels) + 10.0
    width = (last - first) / steps
    for step in range(steps):
        events.append(_cpu_op(f"ProfilerStep#{step + 1}", first + step * width, width))
    events.extend(_cpu_op(name, ts, dur) for name, ts, dur in host_ops)
    for correlation, kernel in enumerate(kernels, start=1):
        events.extend(_launched(kernel, correlation, launch_name))
    if text_streams:
        for event in events:
            if "stream" in event.get("args", {}):
                event["args"] = {**event["args"], "stream": hex(event["args"]["stream"])}
    events.append(_memory_event(first, 3 << 30, 4 << 30))
    return _write_kineto(path, events, rank=rank, ns=ns, old_categories=old_categories)


def _cpu_op(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _launched(kernel: GpuKernel, correlation: int, launch_name: str = "cudaLaunchKernel", launch_us: float = 5.0) -> list[dict]:
    """The runtime call, the GPU activity it launched and the flow linking them."""
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": launch_name, "pid": 1, "tid": 1, "ts": kernel.launch_ts,
         "dur": launch_us, "args": {"correlation": correlation}},
        {"ph": "X", "cat": kernel.category, "name": kernel.name, "pid": 0, "tid": kernel.stream, "ts": kernel.ts,
         "dur": kernel.dur, "args": {"stream": kernel.stream, "device": 0, "correlation": correlation}},
        {"ph": "f", "cat": "ac2g", "id": correlation, "pid": 0, "tid": kernel.stream, "ts": kernel.ts, "bp": "e"},
    ]


def _memory_event(ts: float, allocated: int, reserved: int) -> dict:
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Total Allocated": allocated, "Total Reserved": reserved, "Bytes": 1024, "Device Id": 0,
                     "Device Type": 1}}


_OLD_CATEGORIES = {"kernel": "Kernel", "gpu_memcpy": "Memcpy", "cuda_runtime": "Runtime", "cpu_op": "Operator"}


def _write_kineto(path: Path, events: list[dict], *, rank: int | None, ns: bool = False, old_categories: bool = False,
                  device: str = "NVIDIA H100", world_size: int = 2) -> Path:
    """Write events (µs) as a Kineto trace document: displayTimeUnit "ns" (which only sets how viewers display the
    µs values), old categories and gzip by request."""
    import gzip

    out: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}]
    for event in events:
        event = dict(event)
        if old_categories:
            event["cat"] = _OLD_CATEGORIES.get(event.get("cat"), event.get("cat"))
        out.append(event)
    document = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": device}],
                **({"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world_size}} if rank is not None else {}),
                "traceEvents": out, "traceName": str(path.name),
                **({"displayTimeUnit": "ns"} if ns else {"displayTimeUnit": "ms"})}
    data = json.dumps(document).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    return path


TENSOR_CORE_GEMM = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel"
CUDA_CORE_GEMM = "ampere_sgemm_128x64_nn"
NCCL_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"


@dataclass
class GpuJob:
    """A data-parallel training job on GPUs, to be written as one Kineto trace per rank, with injectable problems.

    Per step and rank the host fetches a batch (``dataloader_us``), makes ``pageable_copies`` host→device
    copies, launches ``gemms`` GEMMs and ``elementwise`` element-wise kernels (one launch every ``launch_gap_us``
    of host time; a gap longer than the kernel makes the GPU wait for launches), synchronises ``syncs`` times,
    (logging the value read: 300 µs of host time each), launches ``optimizer_kernels`` kernels inside
    Optimizer.step, then one NCCL AllReduce of ``nccl_us`` that no compute overlaps (``nccl_overlapped``: launched
    after the GEMMs instead, running beside the element-wise kernels, as DDP's bucketed reduction does). ``slow_rank`` computes ``slow_extra_us`` more per step, so the others wait that long in the
    AllReduce. ``memory_drops`` reserved-memory decreases per step.
    """

    ranks: int = 1
    steps: int = 3
    gemms: int = 20
    gemm_us: float = 400.0
    gemm_name: str = TENSOR_CORE_GEMM
    elementwise: int = 60
    elementwise_us: float = 30.0
    launch_gap_us: float = 8.0
    dataloader_us: float = 0.0
    pageable_copies: int = 0
    syncs: int = 0
    optimizer_kernels: int = 0
    nccl_us: float = 0.0
    nccl_overlapped: bool = False
    slow_rank: int | None = None
    slow_extra_us: float = 0.0
    memory_drops: int = 0
    memory: bool = True
    step_markers: bool = True


def write_gpu_job(root: Path, job: GpuJob, *, suffix: str = ".pt.trace.json") -> list[Path]:
    """One trace per rank under ``root`` (``rank{r}{suffix}``); returns their paths."""
    return [_write_kineto(root / f"rank{rank}{suffix}", _gpu_rank_events(job, rank), rank=rank if job.ranks > 1 or rank else 0,
                          world_size=job.ranks) for rank in range(job.ranks)]


def _gpu_rank_events(job: GpuJob, rank: int) -> list[dict]:
    events: list[dict] = []
    host = 1_000_000.0
    free = {7: host, 20: host, 21: host}  # when each stream is next free
    correlation = 0
    allocated, reserved = 20 << 30, 24 << 30

    def launch(name: str, dur: float, stream: int = 7, category: str = "kernel", gap: float | None = None) -> None:
        nonlocal host, correlation
        correlation += 1
        start = max(host + 5.0, free[stream])
        if stream == 20:  # the collective waits for the step's compute
            start = max(start, free[7])
        free[stream] = start + dur
        events.extend(_launched(GpuKernel(name, stream, start, dur, host, category), correlation))
        host += max(job.launch_gap_us if gap is None else gap, 5.0)

    for step in range(1, job.steps + 1):
        step_start = host
        if job.dataloader_us:
            events.append(_cpu_op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", host, job.dataloader_us))
            host += job.dataloader_us
        for _ in range(job.pageable_copies):
            launch("Memcpy HtoD (Pageable -> Device)", 40.0, stream=21, category="gpu_memcpy")
        per_sync = (job.gemms + job.elementwise) // (job.syncs + 1)
        extra = job.slow_extra_us / max(job.gemms, 1) if rank == job.slow_rank else 0.0
        for index in range(job.gemms + job.elementwise):
            if index < job.gemms:
                launch(job.gemm_name, job.gemm_us + extra)
            else:
                if index == job.gemms and job.nccl_us and job.nccl_overlapped:
                    launch(NCCL_ALLREDUCE, job.nccl_us, stream=20)
                launch(ELEMENTWISE, job.elementwise_us)
            if job.syncs and index % per_sync == per_sync - 1 and index // per_sync < job.syncs:
                events.append({"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1, "ts": host,
                               "dur": max(free[7] - host, 0.0) + 4.0})
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1,
                               "ts": host + 1.0, "dur": max(free[7] - host, 0.0) + 2.0})
                host = max(host, free[7]) + 300.0  # the value read is logged before launching goes on
        if job.optimizer_kernels:
            opt_start = host
            for _ in range(job.optimizer_kernels):
                launch("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<float>", 6.0)
            events.append(_cpu_op("Optimizer.step#AdamW.step", opt_start, host - opt_start))
        if job.nccl_us and not job.nccl_overlapped:
            wait = job.slow_extra_us if job.slow_rank is not None and rank != job.slow_rank else 0.0
            launch(NCCL_ALLREDUCE, job.nccl_us + wait, stream=20)
            free[7] = max(free[7], free[20])  # the next forward needs the reduced gradients
        if job.memory:
            events.append(_memory_event(step_start + 1.0, allocated, reserved))
            for drop in range(job.memory_drops):
                at = step_start + 2.0 + drop
                events.append(_memory_event(at, allocated, reserved - (1 << 30)))
                events.append(_memory_event(at + 0.5, allocated, reserved))
        if job.step_markers:
            events.append(_cpu_op(f"ProfilerStep#{step}", step_start, host - step_start))
        host += 10.0
    return events


# A MindSpeed-style 4-rank job with TP=1, PP=2, DP=2 as profiler_metadata.json records it: every rank lists the
# communicators it belongs to. Megatron names several of them alike — the model-parallel group "mp" is [0, 2] on
# ranks 0 and 2 and [1, 3] on ranks 1 and 3 — so only the communicator (and its hash) tells them apart.
PP2_GROUPS = {
    "group_name_0": ("default_group", [0, 1, 2, 3]),
    "group_name_1": ("dp", [0, 1]),
    "group_name_2": ("dp", [2, 3]),
    "group_name_3": ("mp", [0, 2]),
    "group_name_4": ("mp", [1, 3]),
    "group_name_5": ("pp", [0, 2]),
    "group_name_6": ("pp", [1, 3]),
}


def build_pp2_job(parent: Path, compute_us: dict[int, float] | None = None,
                  waits: dict[int, float] | None = None) -> Path:
    """Four ranks of a TP=1 PP=2 DP=2 job: stage 0 on ranks 0 and 1, stage 1 on ranks 2 and 3.

    Each step every rank runs a MatMul, a gradient AllReduce in its dp group, a grad-norm AllReduce in its mp
    group, and sends activations to (stage 0) or receives them from (stage 1) its pp peer. By default stage 1
    (ranks 2 and 3, identical) computes 40 % more than stage 0, and the stage-0 ranks wait for it.
    """
    from advisor.ingest.groups import group_hash

    compute_us = compute_us or {0: 10000.0, 1: 10000.0, 2: 14000.0, 3: 14000.0}
    waits = waits or {0: 0.55, 1: 0.55, 2: 0.05, 3: 0.05}
    for rank in range(4):
        mine = {name: (label, ranks) for name, (label, ranks) in PP2_GROUPS.items() if rank in ranks}
        by_label = {label: name for name, (label, ranks) in mine.items()}
        p2p = (f"hcom_send__{rank}_0_1" if rank < 2 else f"hcom_receive__{rank}_0_1",
               "hcom_send_" if rank < 2 else "hcom_receive_")
        kernels = [
            k
            for step in (5, 6)
            for k in (
                Kernel(step, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", compute_us[rank] / 2),
                Kernel(step, p2p[0], p2p[1], "COMMUNICATION", 1500.0, group=group_hash(by_label["pp"])),
                Kernel(step, "hcom_allReduce__1_0_1", "hcom_allReduce_", "COMMUNICATION", 2000.0,
                       group=group_hash(by_label["dp"])),
                Kernel(step, "hcom_allReduce__3_0_1", "hcom_allReduce_", "COMMUNICATION", 800.0,
                       group=group_hash(by_label["mp"])),
            )
        ]
        groups = {name: {"group_name": label, "group_rank": ranks.index(rank), "global_ranks": ranks}
                  for name, (label, ranks) in mine.items()}
        rank_dir = build_rank(parent, RankSpec(
            rank=rank, device_id=rank, rank_id=str(rank), kernels=kernels, groups=groups,
            steps=[StepRow(s, compute_us[rank], 3000.0, 800.0) for s in (5, 6)],
            comm_wait_share=waits[rank], comm_transit_share=0.3))
        metadata = json.loads((rank_dir / "profiler_metadata.json").read_text())
        metadata["distributed_args"] = {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 2,
                                        "data_parallel_size": 2, "context_parallel_size": 1,
                                        "expert_model_parallel_size": 1, "sequence_parallel": False,
                                        "rank": rank, "world_size": 4}
        (rank_dir / "profiler_metadata.json").write_text(json.dumps(metadata))
    return parent


def drop_db_columns(database: Path, table: str, *columns: str) -> None:
    """Remove columns from a table of a DB export, as older or newer schemas lack them (COMMUNICATION_OP of schema
    1.0.0 has no deviceId)."""
    import sqlite3

    with sqlite3.connect(database) as db:
        for column in columns:
            db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")


def build_cluster(parent: Path, ranks: int = 32, group_size: int = 8, slow_rank: int | None = None,
                  idle_rank: int | None = None) -> Path:
    """A data-parallel job of ``ranks`` small ranks under ``parent``: communicators of ``group_size`` consecutive ranks
    (``group_name_{g}`` in parallel_group_info, their hash on each collective), each rank's compute, exposed
    communication and free time a little different (a fixed sequence), one slow rank (by default ranks * 3 // 7)
    whose group waits for it in its AllReduces, and one rank with three times the free time (ranks // 5)."""
    from advisor.ingest.groups import group_hash

    slow_rank = ranks * 3 // 7 if slow_rank is None else slow_rank
    idle_rank = ranks // 5 if idle_rank is None else idle_rank
    for rank in range(ranks):
        group = rank // group_size
        members = list(range(group * group_size, min((group + 1) * group_size, ranks)))
        hashed = group_hash(f"group_name_{group}")
        wiggle = ((rank * 7919) % 13 - 6) / 300  # within ±2 %
        compute = 1344.32 * (1 + wiggle) * (1.25 if rank == slow_rank else 1.0)
        free = 85.14 * (1 - wiggle) * (3.0 if rank == idle_rank else 1.0)
        kernels = [k for step in (5, 6) for k in (
            Kernel(step, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", 170.4 * (1 + wiggle)),
            Kernel(step, "FlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 881.64),
            Kernel(step, "RmsNorm", "RmsNorm", "AI_VECTOR_CORE", 33.06),
            Kernel(step, "hcom_allReduce__612_0_1", "hcom_allReduce_", "COMMUNICATION", 1987.92, group=hashed),
        )]
        build_rank(parent, RankSpec(
            rank=rank, device_id=rank % 8, rank_id=str(rank), kernels=kernels,
            # a host that prepares each step in 100 µs (the ranks' step rows are what the cluster facts read)
            steps=[StepRow(s, compute, 1921.46 * (1 + wiggle / 2), free, 66.46, preparing=100.0) for s in (5, 6)],
            groups={f"group_name_{group}": {"group_name": "dp", "group_rank": rank - members[0], "global_ranks": members}},
            comm_wait_share=0.01 if rank == slow_rank else 0.117 + wiggle,
            dir_name=f"node{rank // 8}_{2231054 + rank}_20251127192733{rank:03d}_ascend_pt"))
    return parent


@dataclass
class PipelineAction:
    """One action of a pipeline stage: compute ("F"/"B" of micro-batch ``micro``) or a P2P op ("send"/"receive",
    ``peer`` the stage on the other side), from ``start_us`` (in the step) for ``duration_us``, ``wait_us`` of it
    waiting for the peer."""

    kind: str
    micro: int
    start_us: float
    duration_us: float
    peer: int | None = None
    wait_us: float = 0.0


def one_f_one_b(stages: int, micro: int, forward_us: list[float], backward_us: list[float],
                transfer_us: float) -> list[list[PipelineAction]]:
    """Megatron's non-interleaved 1F1B schedule run per stage: each stage's actions in order with their times.

    Stage s runs min(p − s − 1, m) warm-up forwards, then alternates one forward and one backward, then the remaining
    backwards; it receives activations from s − 1 before a forward and sends them to s + 1 after it, and receives
    gradients from s + 1 before a backward and sends them to s − 1 after it. A send takes ``transfer_us`` from the
    sender's clock; a receive ends ``transfer_us`` after both sides are there, its wait the time the receiver was first.
    """
    programs = []
    for s in range(stages):
        warm = min(stages - s - 1, micro)
        forward = [a for i in range(micro) for a in ((("receive", s - 1, i),) if s else ()) + (("F", None, i),)
                   + ((("send", s + 1, i),) if s < stages - 1 else ())]
        backward = [a for i in range(micro) for a in ((("receive", s + 1, i),) if s < stages - 1 else ())
                    + (("B", None, i),) + ((("send", s - 1, i),) if s else ())]
        per_f = len(forward) // micro
        per_b = len(backward) // micro
        order = forward[:warm * per_f]
        for i in range(micro - warm):
            order += forward[(warm + i) * per_f:(warm + i + 1) * per_f] + backward[i * per_b:(i + 1) * per_b]
        order += backward[(micro - warm) * per_b:]
        programs.append(order)
    sent: dict[tuple[int, int, int], float] = {}  # (from, to, micro) → the send's start
    clocks, done = [0.0] * stages, [[] for _ in range(stages)]
    while any(len(done[s]) < len(programs[s]) for s in range(stages)):
        for s in range(stages):
            while len(done[s]) < len(programs[s]):
                kind, peer, i = programs[s][len(done[s])]
                if kind == "receive" and (peer, s, i) not in sent:
                    break
                start = clocks[s]
                if kind == "receive":
                    arrival = sent[(peer, s, i)]
                    action = PipelineAction(kind, i, start, max(start, arrival) + transfer_us - start, peer,
                                            max(arrival - start, 0.0))
                elif kind == "send":
                    sent[(s, peer, i)] = start
                    action = PipelineAction(kind, i, start, transfer_us, peer)
                else:
                    action = PipelineAction(kind, i, start, (forward_us if kind == "F" else backward_us)[s])
                clocks[s] = start + action.duration_us
                done[s].append(action)
    return done


def build_1f1b_job(parent: Path, stages: int = 4, micro: int = 4, profiled: list[int] | None = None,
                   forward_us: list[float] | None = None, backward_us: list[float] | None = None,
                   transfer_us: float = 100.0, batched: bool = False, layout: str = "pairs",
                   metadata: str | None = None, matrix: bool = True, collective_us: float = 300.0,
                   collective_exposed_us: float | None = None, collective_wait_share: float = 0.117) -> Path:
    """One pipeline of ``stages`` ranks (rank s holds stage s) running ``micro`` micro-batches per step by 1F1B, in
    steps 5 and 6; only the ``profiled`` ranks (default all) are written.

    communication.json holds each P2P op as torch_npu writes it — hcom_send/hcom_receive, or with ``batched`` every op
    as hcom_batchSendRecv (Megatron's batch_isend_irecv) — with the wait the schedule gives it, plus one AllReduce of
    the loss in the world group; communication_matrix.json their src-dst links (ranks local to the communicator).
    ``layout`` "pairs" gives each neighbouring pair its own communicator, "pp" puts every P2P op in the pp group.
    ``metadata`` "pp" lists that group in parallel_group_info, "distributed_args" writes MindSpeed's arguments.
    The AllReduce takes ``collective_us`` (``collective_exposed_us`` of it not overlapped, default all), waiting
    ``collective_wait_share`` of it.
    """
    from advisor.ingest.groups import group_hash

    forward_us = forward_us or [1000.0] * stages
    backward_us = backward_us or [2000.0] * stages
    schedule = one_f_one_b(stages, micro, forward_us, backward_us, transfer_us)
    world, pp = group_hash("group_name_0"), group_hash("group_name_9")

    def communicator(a: int, b: int) -> tuple[str, int, int]:
        """The hash of the communicator of stages a and b, and their ranks inside it."""
        if layout == "pp":
            return pp, a, b
        return group_hash(f"p2p_{min(a, b)}_{max(a, b)}"), int(a > b), int(b > a)

    for rank in (range(stages) if profiled is None else profiled):
        p2p, links, kernels, index = {}, {}, [], 0
        for step in (5, 6):
            for action in schedule[rank]:
                if action.kind in ("F", "B"):
                    kernels.append(Kernel(step, f"MatMul_{action.kind}", "MatMulV3", "AI_CORE", action.duration_us))
                    continue
                group, own, peer = communicator(rank, action.peer)
                op = "batchSendRecv" if batched else action.kind
                name = f"hcom_{op}__{group[-3:]}_{index}_1"
                index += 1
                kernels.append(Kernel(step, name, f"hcom_{op}_", "COMMUNICATION", action.duration_us, group=group))
                start = BASE_US + step * STEP_SPACING_US + action.start_us
                p2p.setdefault(f"step{step}", {})[f"{name}@{group}"] = _p2p_op(start, action, transfer_us)
                src, dst = (own, peer) if action.kind == "send" else (peer, own)
                kind = "batchsendrecv" if batched else action.kind
                entry = links.setdefault(f"step{step}", {}).setdefault(f"{kind}-total@{group}", {})
                entry[f"{src}-{dst}"] = {"Transport Type": "HCCS", "Transit Size(MB)": 16.0,
                                         "Transit Time(ms)": transfer_us / 1000, "Bandwidth(GB/s)": 160.0}
                entry[f"{own}-{own}"] = {"Transport Type": "LOCAL", "Transit Size(MB)": 16.0,
                                         "Transit Time(ms)": 0.01, "Bandwidth(GB/s)": 1600.0}
            kernels.append(Kernel(step, f"hcom_allReduce__{world[-3:]}_{step}_1", "hcom_allReduce_", "COMMUNICATION",
                                  collective_us, group=world))
        mine = schedule[rank]
        compute = sum(a.duration_us for a in mine if a.kind in ("F", "B"))
        waiting = sum(a.duration_us for a in mine if a.kind in ("send", "receive"))
        receives = 0.0 if batched else sum(a.duration_us for a in mine if a.kind == "receive")
        groups = {"group_name_0": {"group_name": "default_group", "group_rank": rank, "global_ranks": list(range(stages))}}
        if metadata == "pp":
            groups["group_name_9"] = {"group_name": "pp", "group_rank": rank, "global_ranks": list(range(stages))}
        exposed = collective_us if collective_exposed_us is None else collective_exposed_us
        rank_dir = build_rank(parent, RankSpec(
            rank=rank, device_id=rank, rank_id=str(rank), kernels=kernels, groups=groups, kernel_spacing_us=50.0,
            comm_wait_share=collective_wait_share, comm_transit_share=min(0.855, 1 - collective_wait_share),
            steps=[StepRow(s, compute, waiting + exposed, 300.0, collective_us - exposed, bubble=receives)
                   for s in (5, 6)]))
        out = rank_dir / "ASCEND_PROFILER_OUTPUT"
        document = json.loads((out / "communication.json").read_text())
        for step, ops in p2p.items():  # the base writer files only send/receive as P2P: the ops are rewritten
            collective = {key: op for key, op in document[step]["collective"].items() if key.startswith("hcom_allReduce")}
            document[step] = {"p2p": {**ops, "Total Op Info": _p2p_total(ops.values())}, "collective": collective}
        (out / "communication.json").write_text(json.dumps(document))
        if matrix:
            (out / "communication_matrix.json").write_text(json.dumps(
                {step: {"p2p": entries, "collective": {}} for step, entries in links.items()}))
        if metadata == "distributed_args":
            info = json.loads((rank_dir / "profiler_metadata.json").read_text())
            info["distributed_args"] = {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": stages,
                                        "data_parallel_size": 1, "context_parallel_size": 1,
                                        "expert_model_parallel_size": 1, "sequence_parallel": False,
                                        "rank": rank, "world_size": stages}
            (rank_dir / "profiler_metadata.json").write_text(json.dumps(info))
    return parent


def _p2p_op(start_us: float, action: PipelineAction, transfer_us: float) -> dict:
    """A P2P op of communication.json: its wait from the schedule, the transfer over HCCS."""
    elapse, wait = action.duration_us / 1000, action.wait_us / 1000
    transit = transfer_us / 1000
    moved = {"Transit Size(MB)": 16.0, "Transit Time(ms)": transit, "Bandwidth(GB/s)": round(16.0 / transit, 4),
             "Large Packet Ratio": 0.0, "Size Distribution": {"16.0": [1, transit]}}
    idle = {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0,
            "Size Distribution": {}}
    return {"Communication Time Info": {
                "Start Timestamp(us)": start_us, "Elapse Time(ms)": elapse, "Transit Time(ms)": transit,
                "Wait Time(ms)": wait, "Synchronization Time(ms)": wait, "Idle Time(ms)": max(elapse - transit - wait, 0.0),
                "Wait Time Ratio": round(wait / (wait + transit), 4), "Synchronization Time Ratio": round(wait / (wait + transit), 4)},
            "Communication Bandwidth Info": {"RDMA": idle, "HCCS": moved, "PCIE": idle, "SDMA": {**moved, "Size Distribution": {}},
                                             "SIO": idle}}


def _p2p_total(ops) -> dict:
    """torch_npu's Total Op Info of a step's P2P ops: the times summed, the ratios recomputed."""
    times = [op["Communication Time Info"] for op in ops]
    total = {key: sum(t[key] for t in times) for key in ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
                                                          "Synchronization Time(ms)", "Idle Time(ms)")}
    waited = total["Wait Time(ms)"] + total["Transit Time(ms)"]
    total["Wait Time Ratio"] = round(total["Wait Time(ms)"] / waited, 4) if waited else 0
    total["Synchronization Time Ratio"] = total["Wait Time Ratio"]
    return {"Communication Time Info": total, "Communication Bandwidth Info": {}}


@dataclass
class Span:
    """A collective op on its communicator's op-level lane: where it starts in its step (µs after the step's first
    device task), how long it runs, and its payload as its args give it."""

    step: int
    name: str
    offset_us: float
    duration_us: float
    count: int = 4_000_000
    data_type: str = "FP32"


def add_collective_spans(rank_dir: Path, spans: list[Span], process: str = "HCCL") -> None:
    """Append the communicator lane a Level0 capture keeps to a built rank's trace_view.json: the ``process`` (HCCL;
    Communication in newer CANN) with its 'Group 0 Communication' thread and one X event per op, args as CANN writes
    them (connection_id, model id, data_type, alg_type, count). Starts are BASE_US + step × 100 ms + offset."""
    path = rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    events = json.loads(path.read_text())
    pid = (3096504 << 10) | (15 << 5)
    events += [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": process}},
               {"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "Group 0 Communication"}}]
    for index, span in enumerate(spans):
        start = BASE_US + span.step * STEP_SPACING_US + span.offset_us
        events.append({"ph": "X", "name": span.name, "pid": pid, "tid": 0, "ts": f"{start:.3f}", "dur": span.duration_us,
                       "args": {"connection_id": 500 + index, "model id": 4294967295, "data_type": span.data_type,
                                "alg_type": "MESH-RING", "count": span.count}})
    path.write_text(json.dumps(events))
