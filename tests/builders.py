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


@dataclass
class StepRow:
    step: int | None
    computing: float
    comm_not_overlapped: float
    free: float
    overlapped: float = 0.0
    bubble: float = 0.0
    preparing: float = 100.0


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
    # memory_record.csv: how often Total Reserved drops inside each step; the allocator config recorded
    reserved_drops_per_step: int = 0
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
    header = ["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)",
              spec.block_header]
    if not level0:
        header += ["Input Shapes", "Input Data Types", "aic_mac_ratio", "aiv_vec_ratio"]
    rows = []
    for k in spec.kernels:
        core = spec.comm_core if k.core == "COMMUNICATION" else k.core
        op_type = "N/A" if level0 and core != spec.comm_core else k.op_type
        core = "N/A" if level0 and core != spec.comm_core else core
        start = f"{kernel_start(spec, k):.3f}" + ("\t" if spec.trailing_tab else "")
        row: list[object] = ["" if not spec.with_step_info else k.step, k.name, op_type, core, start,
                             f"{k.duration_us:.3f}", "0", 20]
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
        op = {
            "Communication Time Info": {
                "Start Timestamp(us)": 1764246877001783.0 + index, "Elapse Time(ms)": elapse, "Transit Time(ms)": transit,
                "Wait Time(ms)": wait, "Synchronization Time(ms)": wait * 0.9, "Idle Time(ms)": elapse - transit - wait,
                "Wait Time Ratio": round(wait / (wait + transit), 4) if wait + transit else 0,
                "Synchronization Time Ratio": round(wait * 0.9 / (wait * 0.9 + transit), 4) if transit else 0,
            },
            "Communication Bandwidth Info": transports,
        }
        step = document.setdefault(step_key, {"p2p": {}, "collective": {}})
        step["collective"][f"{kernel.name}@5862276093215481612"] = op
    return document


def _memory_record(spec: RankSpec) -> tuple[list[str], list[list[object]]]:
    """An APP sample, then PTA/PTA+GE rows: 4 GB allocated, 6 GB reserved, with the requested drops per step."""
    header = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)", "Stream Ptr",
              "Device Type"]
    tab = "\t" if spec.trailing_tab else ""
    device = f"NPU:{spec.device_id}"
    rows: list[list[object]] = [["APP", f"{BASE_US:.3f}{tab}", "", 7000.0, "", "", device]]
    steps = sorted({k.step for k in spec.kernels if k.step is not None})
    for step in steps:
        start = BASE_US + step * STEP_SPACING_US
        samples = [(start + 100.0, 4096.0, 6144.0)]
        for drop in range(spec.reserved_drops_per_step):
            at = start + 200.0 + drop * 1000.0
            samples += [(at, 3000.0, 5120.0), (at + 500.0, 4096.0, 6144.0)]
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

    flow = 0
    for step in sorted({k.step for k in spec.kernels if k.step is not None}):
        start = BASE_US + step * STEP_SPACING_US
        complete(python, 1, f"ProfilerStep#{step}", start - 2000.0, STEP_SPACING_US - 1000.0, "cpu_op")
        complete(python, 1, "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", start - 1900.0,
                 spec.dataloader_us, "cpu_op")
        cursor = start - 1000.0
        for _ in range(spec.compiles_per_step):
            complete(cann, 2, "AscendCL@aclopCompileAndExecute", cursor, 400.0)
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
            begin = kernel_start(spec, kernel)
            launch = begin - 80.0
            complete(cann, 2, "Node@launch", launch, 12.0)
            task_type = "COMMUNICATION" if kernel.core == "COMMUNICATION" else kernel.core
            complete(hardware, 2, kernel.name, begin, kernel.duration_us, None, **{"Task Type": task_type})
            flow += 1
            events.append({"ph": "s", "name": f"HostToDevice{flow}", "cat": "HostToDevice", "id": str(flow),
                           "pid": cann, "tid": 2, "ts": f"{launch:.3f}"})
            events.append({"ph": "f", "bp": "e", "name": f"HostToDevice{flow}", "cat": "HostToDevice", "id": str(flow),
                           "pid": hardware, "tid": 2, "ts": f"{begin:.3f}"})
        row = next((r for r in spec.steps if r.step == step), None)
        if row is not None:  # the lanes carry the same totals as the step's step_trace_time row
            lanes = (("Computing", row.computing), ("Communication", row.comm_not_overlapped + row.overlapped),
                     ("Communication(Not Overlapped)", row.comm_not_overlapped), ("Free", row.free))
            for lane, (name, dur) in enumerate(lanes):
                complete(overlap, lane, name, start + 10.0 * lane, dur)
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
    decomposed RMSNorm (Rsqrt→Mul), a MatMul followed by its AllReduce and a hundred tiny kernels.
    Diagnose it with ``--env`` EVERY_CATEGORY_ENV and a ``--context`` of EVERY_CATEGORY_CONTEXT.
    """
    for rank, free in ((0, 900.0), (1, 400.0)):
        kernels = [
            k
            for step in (5, 6)
            for k in (
                Kernel(step, "FlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 881.64),
                Kernel(step, "IndexPutV2_1", "IndexPutV2", "AI_CPU", 300.0),
                Kernel(step, "Rsqrt_1", "Rsqrt", "AI_VECTOR_CORE", 20.0),
                Kernel(step, "Mul_1", "Mul", "AI_VECTOR_CORE", 20.0),
                Kernel(step, "Rsqrt_2", "Rsqrt", "AI_VECTOR_CORE", 20.0),
                Kernel(step, "Mul_2", "Mul", "AI_VECTOR_CORE", 20.0),
                Kernel(step, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", 170.4),
                Kernel(step, "hcom_allReduce__612_0_1", "hcom_allReduce_", "COMMUNICATION", 1987.92),
                *(Kernel(step, f"Cast_{i}", "Cast", "AI_VECTOR_CORE", 2.0) for i in range(110)),
            )
        ]
        build_rank(parent, RankSpec(
            rank=rank, rank_id=str(rank), steps=[StepRow(5, 1344.32, 1921.46, free, 66.46), StepRow(6, 1344.32, 1921.46, free, 66.46)],
            kernels=kernels, kernel_spacing_us=20.0, compiles_per_step=2, syncs_per_step=3, gc_us=100.0,
            dataloader_us=400.0, optimizer_us=600.0, reserved_drops_per_step=2, comm_transit_share=0.3, comm_size_mb=8.0,
        ))
    return parent
