"""What differs between platforms, as data the fact families read instead of branching on the platform's name.

Each platform's PlatformTraits says which runtime calls count as what (``RuntimeNames``), which trace process holds
the host's operators, where allocator events are timed, and whether its collectives carry their traffic. A new
platform is a new PlatformTraits in ``PLATFORM_TRAITS`` (and its input format in ``ingest.formats``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from advisor.ingest.trace import ASCEND_COMPUTE_TASK, ASCEND_GRAPH_LAUNCH, ASCEND_LAUNCH, ASCEND_QUEUED_LAUNCH
from advisor.ingest.warmup import KERNEL_LAUNCH
from advisor.vocabulary import Platform


@dataclass(frozen=True)
class RuntimeNames:
    """Which runtime calls are online compilation, synchronisation, kernel launch, device free and memory copy,
    and which device task types are compute and copy."""

    compile: re.Pattern[str]
    graph_launch: re.Pattern[str]  # the replay of a captured graph (the step then runs as one launch, or a few)
    operator_execution: re.Pattern[str]  # the runtime's own per-operator host path, when it records one
    compile_step: re.Pattern[str]  # the compilation itself inside a compile call, where the runtime records it
    sync: re.Pattern[str]
    launch: re.Pattern[str]
    queued_launch: re.Pattern[str]  # a host-lane event per operator launched from a task queue: the launches where the
    # runtime's own launch calls are not recorded (torch_npu's Dequeue@ events, at Level0 which has no CANN lane)
    free: re.Pattern[str]
    allocator: re.Pattern[str]
    compute_task: re.Pattern[str]
    copy_task: re.Pattern[str]
    copy_call: re.Pattern[str]


ASCEND_RUNTIME = RuntimeNames(
    compile=re.compile(r"^AscendCL@aclopCompileAndExecute$"),
    graph_launch=ASCEND_GRAPH_LAUNCH,
    operator_execution=re.compile(r"^AscendCL@aclopCompileAndExecute$"),  # the legacy aclop path
    compile_step=re.compile(r"^AscendCL@opCompile$"),  # aclopCompileAndExecute also runs the operator
    sync=re.compile(r"^AscendCL@aclrtSynchronize(Stream|Device|Event)"),
    launch=ASCEND_LAUNCH,
    queued_launch=ASCEND_QUEUED_LAUNCH,
    free=re.compile(r"^AscendCL@aclrtFree(Physical)?$"),
    allocator=re.compile(r"^AscendCL@aclrt(Malloc|Free)(Physical|Host|Align32)?$"),
    compute_task=ASCEND_COMPUTE_TASK,
    copy_task=re.compile(r"^(PCIE_DMA_SQE|SDMA_SQE|MEMCPY_ASYNC)$"),
    copy_call=re.compile(r"^AscendCL@aclrtMemcpy(Async)?(2d)?$"),
)
GPU_RUNTIME = RuntimeNames(
    compile=re.compile(r"^(nvrtc|hiprtc)Compile"),
    graph_launch=re.compile(r"^(cuda|hip)GraphLaunch(_v\d+)?$"),
    operator_execution=re.compile(r"(?!)"),  # CUDA has no such call
    compile_step=re.compile(r"^(nvrtc|hiprtc)Compile"),
    sync=re.compile(r"^(cuda|hip)(Device|Stream|Event)Synchronize$"),
    launch=KERNEL_LAUNCH,
    queued_launch=re.compile(r"(?!)"),  # CUDA launches from the calling thread: its launch calls are recorded
    free=re.compile(r"^(cuda|hip)Free(Async)?$"),
    allocator=re.compile(r"^(cuda|hip)(Malloc|Free)(Async|Host|Managed)?$"),
    compute_task=re.compile(r"^compute$"),
    copy_task=re.compile(r"^memory$"),
    copy_call=re.compile(r"^(cuda|hip)Memcpy(2D|3D)?(Async|Peer|PeerAsync|ToSymbol|FromSymbol)?(_v\d+)?$|^cuMemcpy"),
)


# What eager PyTorch spends on the host per CUDA kernel it launches — Python, the dispatcher, the launch call — at the
# high end: eager dispatch costs ~10–20 µs per op, and under the profiler's record_shapes/with_stack the eager decode
# trace in tests/fixtures/h200-recorded spends ~35 µs per kernel. Host time beyond launches × this is not launch
# overhead: the host is doing other work. (torch_npu's task queue, on by default, launches from a thread of its own,
# whose per-kernel cost is the launch call the trace times: Node@launch.)
EAGER_GPU_US_PER_LAUNCH = 50.0
# Where only the task queue's per-operator launches are recorded (torch_npu's Dequeue@ events at Level0, no CANN lane),
# each spans the operator's whole host path on the launch thread (its API's tiling and set-up, then the launch), not
# the launch alone: a launch is counted at most this, eager dispatch's per-kernel host time at the high end. The real
# Level1 capture of the same job measures 22 µs per launch (Node@launch) where its Level0 Dequeue@ events average 121.
QUEUED_LAUNCH_US_CAP = EAGER_GPU_US_PER_LAUNCH


@dataclass(frozen=True)
class PlatformTraits:
    """How one platform's profiles differ where the fact families read them."""

    runtime: RuntimeNames
    host_process: str  # the trace process whose events are the host's operators and DataLoader calls (named in sources)
    allocator_on_host: bool  # allocator events are host calls, counted in ProfilerStep windows (else device windows)
    collectives_carry_traffic: bool  # its communication tables say what each collective moved (HCCL's do; NCCL
    # kernels matched across ranks do not), which the MC2 candidates and the bandwidth facts need
    host_us_per_launch: float | None  # the host time one kernel costs on the thread that launches it; None: the
    # launch call's own measured time (torch_npu's task queue launches on a thread of its own)
    types_are_kernels: bool  # an operator's type is its kernel's name (a Kineto trace), which names the math unit
    # (MATRIX_KERNEL); Ascend's operator types say nothing of it


PLATFORM_TRAITS: dict[Platform, PlatformTraits] = {
    "ascend": PlatformTraits(runtime=ASCEND_RUNTIME, host_process="Python", allocator_on_host=False,
                             collectives_carry_traffic=True, host_us_per_launch=None,
                             types_are_kernels=False),
    "gpu": PlatformTraits(runtime=GPU_RUNTIME, host_process="cpu_op", allocator_on_host=True,
                          collectives_carry_traffic=False, host_us_per_launch=EAGER_GPU_US_PER_LAUNCH,
                          types_are_kernels=True),
}


def traits(platform: Platform) -> PlatformTraits:
    """The traits of ``platform``."""
    return PLATFORM_TRAITS[platform]
