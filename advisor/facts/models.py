"""The fact families: flat, typed, JSON-safe records that rules are written against.

Every fact carries an ``id`` (unique within one diagnosis; the engine deduplicates facts with equal
content otherwise) and ``sources``: the files and columns it was computed from. Field descriptions are
the documentation rule authors read (``advisor facts``); units are in the field names (``_us`` = µs per
step unless stated, ``_ratio``/``share`` = 0..1).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.usercontext import ModelSettings
from advisor.vocabulary import Bottleneck, Micros, Platform

Ratio = Annotated[float, Field(ge=0.0, le=1.0)]
NonNegative = Annotated[float, Field(ge=0.0)]  # counts, sizes, bandwidths, ratios that may exceed 1
Duration = Annotated[Micros, Field(ge=0.0)]  # a time the profile measured: never negative


class TimeRange(BaseModel):
    """A stretch of one rank's timeline that a fact's figure is made of: where in the original trace to look.

    ``start_us`` and ``end_us`` are on the clock of ``file`` (its events' ``ts``, µs), so a viewer of that trace
    (Perfetto, chrome://tracing) shows the stretch where it happened (``advisor diagnose --annotate``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    field: str = Field(description="The fact's field whose time this is, e.g. dispatch_us, outlier_excess_us.")
    rank: int = Field(ge=0, description="Rank.")
    step: int | None = Field(None, description="The step (ProfilerStep#N) it lies in; None without step numbers.")
    start_us: float = Field(description="Start, µs on the trace's clock (its events' ts).")
    end_us: float = Field(description="End, µs on the same clock.")
    file: str = Field(description="The trace file whose clock and events it is on.")
    step_start_us: float | None = Field(None, description="The start of its step's window (ProfilerStep#N) on the "
                                        "same clock, so start_us − step_start_us is how far into the step it begins; "
                                        "None without a step.")
    step_start_from: Literal["ProfilerStep", "first collective"] = Field(
        "ProfilerStep", description="What step_start_us is: the ProfilerStep#N window's start, or — where the capture "
        "has no trace to give it (communication.json alone) — the start of the step's first collective.")


PROVENANCE_FIELDS = ("sources", "ranges")  # where a fact's figures come from, not figures a rule compares


class Fact(BaseModel):
    """Base of every fact family."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, defer_build=True)

    family: ClassVar[str]
    source: ClassVar[str]
    derived: ClassVar[bool] = False
    cross_rank: ClassVar[bool] = False  # about several ranks at once: the time it names is not one rank's

    id: str = Field(description="Unique id of this fact within one diagnosis.")
    sources: list[str] = Field(default_factory=list, description="Files (and columns) the fact was computed from.")


class ContextFact(Fact):
    """What was profiled and how: one per profile."""

    family: ClassVar[str] = "context"
    source: ClassVar[str] = ("profiler_info*.json (config, versions), PROF_*/device_*/info.json.* (cores, clock), "
                             "kernel_details.csv header (chip family), the DB export's NPU_INFO (chip); "
                             "*.pt.trace.json deviceProperties (GPU)")

    format: str = Field(description="Input format: ascend-pytorch, ascend-mindspore or pytorch-kineto (a PyTorch profiler trace).")
    platform: Platform = Field("ascend", description="ascend (NPU profiler output) or gpu (PyTorch profiler traces): which rules run.")
    profiler_level: str | None = Field(None, description="Level_none, Level0, Level1 or Level2 (profiler_info).")
    aic_metrics: str | None = Field(None, description="AI Core metric set collected, e.g. ACL_AICORE_PIPE_UTILIZATION.")
    torch_npu_version: str | None = Field(None, description="torch_npu version (profiler_info, torch_npu >= 2.5).")
    cann_version: str | None = Field(None, description="CANN version (profiler_info, or the device info.json).")
    hardware: str | None = Field(None, description="Chip family inferred from the PMU columns, e.g. 'Atlas A2/A3 (Ascend 910B/910C)'; the GPU's name from deviceProperties, e.g. 'NVIDIA H200'.")
    npu_name: str | None = Field(None, description="The NPU's name as the DB export records it (NPU_INFO), e.g. 'Ascend910B'; text exports do not record it.")
    chip: Literal["Atlas A2", "Atlas A3"] | None = Field(
        None, description="The Atlas generation npu_name tells: Ascend910B… is Atlas A2 (910B), Ascend910_93… or "
        "Ascend910C… Atlas A3; None where the profile does not say (text exports: the PMU columns of A2 and A3 are alike).")
    compute_capability: str | None = Field(None, description="The GPU's CUDA compute capability, e.g. '7.0' (Volta), '8.0' (Ampere), '9.0' (Hopper) (deviceProperties).")
    ai_core_count: int | None = Field(None, ge=0, description="AI (cube) cores per device (device info.json).")
    vector_core_count: int | None = Field(None, ge=0, description="AI vector cores per device (device info.json).")
    aic_frequency_mhz: float | None = Field(None, ge=0, description="AI Core clock in MHz (device info.json).")
    rank_count: int = Field(ge=1, description="Number of ranks in the profile.")
    step_count: int = Field(ge=0, description="Number of profiled steps (0 when the capture has no step info).")
    has_step_info: bool = Field(description="Whether ProfilerStep#N boundaries were recorded.")
    record_shapes: bool | None = Field(None, description="record_shapes was on (the settings, or a PyTorch trace's ops carry Input Dims).")
    profile_memory: bool | None = Field(None, description="profile_memory was on.")
    with_stack: bool | None = Field(None, description="with_stack was on (the settings, or a PyTorch trace's ops carry a Call stack).")
    serving: bool = Field(False, description="A serving run: a rank's steps are a serving engine's iterations (execute_context_… annotations, execute_model, SGLang's forward), not training steps; the phase facts describe them.")
    serving_engine: Literal["vLLM", "vLLM-Ascend", "SGLang", "none"] | None = Field(
        None, description="The serving engine a serving run's trace shows: the package of its with_stack Python frames "
        "(vllm, vllm_ascend, sglang), vLLM's execute_context_ annotations or SGLang's per-stage files; 'none' when "
        "with_stack frames show no engine (a generation loop of the user's own); None when nothing tells.")


class _TimeBreakdown(Fact):
    """Device time of a step split into compute, not-overlapped communication and free (idle) time."""

    rank: int | None = Field(None, ge=0, description="Rank; absent for the profile-wide breakdown.")
    step_time_us: Duration = Field(description="Computing + Communication(Not Overlapped) + Free + Preparing: the host step from its start, the device's span and the host's preparation before it.")
    compute_us: Duration = Field(description="Computing: union of compute-kernel time.")
    comm_not_overlapped_us: Duration = Field(description="Communication(Not Overlapped): collectives not hidden by compute.")
    free_us: Duration = Field(description="Free + Preparing: the device neither computing nor communicating, in its span and while the host prepares the step before its first task.")
    communication_us: Duration | None = Field(None, description="Communication: all collective time, overlapped or not.")
    overlapped_us: Duration | None = Field(None, description="Communication hidden behind compute.")
    bubble_us: Duration | None = Field(None, description="Bubble: pipeline-parallel receive waits (hcom_receive).")
    preparing_us: Duration | None = Field(None, description="Preparing: host step start to first device task (a part of free_us).")
    compute_ratio: Ratio = Field(description="compute_us / step_time_us.")
    communication_ratio: Ratio = Field(description="comm_not_overlapped_us / step_time_us.")
    free_ratio: Ratio = Field(description="free_us / step_time_us.")


class StepFact(_TimeBreakdown):
    """One profiled step of one rank (a row of step_trace_time.csv)."""

    family: ClassVar[str] = "step"
    source: ClassVar[str] = "step_trace_time.csv: Computing, Communication(Not Overlapped), Free, Communication, Overlapped, Bubble, Preparing, Stage"

    step: int | None = Field(None, description="Step number N of ProfilerStep#N; absent without step info.")
    stage_us: Duration | None = Field(None, description="Stage as written by the profiler (span minus bubble).")


class BreakdownFact(_TimeBreakdown):
    """The mean step of one rank (scope 'rank') or of the whole profile (scope 'profile')."""

    family: ClassVar[str] = "breakdown"
    source: ClassVar[str] = "step_trace_time.csv (the mean of a rank's step rows; the profile-wide one is the mean over ranks)"

    scope: Literal["rank", "profile"] = Field(description="'rank' for one rank, 'profile' for the mean over ranks.")
    steps: int = Field(ge=1, description="Number of step rows averaged.")
    ranges: list[TimeRange] = Field(default_factory=list, description="Where comm_not_overlapped_us lies on a GPU "
                                    "rank: the longest stretches of its steps in which communication kernels run under "
                                    "no compute kernel, at most a few, longest first.")
    dominant_overhead: Literal["communication", "free"] = Field(
        description="The larger of not-overlapped communication and free time."
    )


class OperatorFact(Fact):
    """Device kernels of one operator type on one core type, on one rank, per step."""

    family: ClassVar[str] = "operator"
    source: ClassVar[str] = "kernel_details.csv: Step Id, Type (or Name at Level0), Accelerator Core, Duration(us); op_statistic.csv when kernel_details is missing"

    rank: int = Field(ge=0, description="Rank.")
    op_type: str = Field(description="Operator type (kernel_details Type; the kernel Name when the type is unknown).")
    accelerator_core: str | None = Field(None, description="AI_CORE, AI_VECTOR_CORE, MIX_AIC, AI_CPU, …")
    type_source: Literal["type", "name"] = Field(description="'name' when Type was N/A (Level0) or 0 (some memset kernels) and Name was used.")
    count_per_step: NonNegative = Field(description="Kernel launches per step.")
    total_us_per_step: Duration = Field(description="Summed kernel duration per step, µs.")
    mean_us: Duration = Field(description="Mean kernel duration, µs.")
    max_us: Duration = Field(description="Longest kernel, µs.")
    share_of_compute: Ratio = Field(description="Share of all compute-kernel time (collectives excluded).")
    share_of_step: Ratio | None = Field(None, description="total_us_per_step / the rank's step_time_us (capped at 1).")
    table_coverage: Ratio | None = Field(
        None, description="The operator table's device time per step (every operator type of the rank) / the step "
                          "breakdown's compute time per step, capped at 1: the part of the compute the shares of compute "
                          "are of. None without a breakdown. Below 0.8 a finding on the operator says so, below 0.5 it is low."
    )
    position: int = Field(ge=1, description="1 for the operator type with the most time on this rank, 2 next, …")
    matrix_kernel: bool | None = Field(None, description="A GPU kernel doing matrix math (GEMM, convolution, attention) "
                                       "by its name (facts.matrix); None on Ascend, whose operator types say it.")
    block_dim: int | None = Field(None, ge=0, description="The usual Block Dim (cores the kernel is split over).")
    block_dim_remainder: int | None = Field(
        None, ge=0, description="block_dim modulo the device's AI Core (or vector core) count; > 0 leaves cores idle in the last wave."
    )
    busiest_pipe: str | None = Field(
        None, description="The PMU pipe busiest on average: aic_mac, aic_mte2, aiv_vec, aiv_mte2, … (PipeUtilization metrics)."
    )
    busiest_pipe_ratio: Ratio | None = Field(None, description="Its duration-weighted mean busy ratio; below 0.8 no pipe bounds the kernel.")
    input_dtypes: str | None = Field(None, description="The usual Input Data Types, e.g. 'FLOAT16;FLOAT16' (record_shapes).")
    rows_range: str | None = Field(None, description="MatMul types in three or more steps: the least and the most, over "
                                   "the steps, of the step's largest M (the left operand's rows, batch folded in: tokens "
                                   "in a language model), from Input Shapes, e.g. '4,096–7,680'.")
    rows_ratio: NonNegative | None = Field(None, description="The most / the least of rows_range: 1 when batches are padded "
                                           "to a fixed length, above 1 when their sequence length varies from step to step.")
    degenerate_us_per_step: Duration | None = Field(
        None, description="BatchMatMul only: time per step of its kernels whose Input Shapes are a batch of products of "
        "width 1 — [b, n, 1] (or [b, 1, n]) × [n, 1], which one 2-D MatMul on the reshaped operand replaces (the affinity "
        "guide's BatchMatMulV2 case); None without such kernels or without shapes.")
    misaligned_axis: str | None = Field(
        None, description="A MatMul inner axis not a multiple of 256, or a FlashAttention head dim not a multiple of 128, in the usual Input Shapes."
    )


class SequenceFact(Fact):
    """Two operator types that run back to back on the device (consecutive kernels of a step), on one rank."""

    family: ClassVar[str] = "sequence"
    source: ClassVar[str] = "kernel_details.csv: Step Id, Type, Start Time(us), Duration(us) (the 150 pairs with the most time)"

    rank: int = Field(ge=0, description="Rank.")
    first_type: str = Field(description="Operator type of the earlier kernel.")
    second_type: str = Field(description="Operator type of the kernel right after it.")
    count_per_step: NonNegative = Field(description="How often the pair occurs per step.")
    first_us_per_step: Duration = Field(description="Time of the first kernels of these pairs per step, µs.")
    second_us_per_step: Duration = Field(description="Time of the second kernels of these pairs per step, µs.")
    share_of_step: Ratio | None = Field(None, description="Both kernels' time / the rank's step time (capped at 1).")


class ChainFact(Fact):
    """A decomposed operator on one rank: the chains of kernels one fused operator replaces, found in each step's
    compute kernels in start order (forward pass).

    rms_norm: [Cast,] Pow/Square/Mul, [MemSet,] ReduceMean, Add, Rsqrt, [Cast,] Mul[, Mul] (KB-FU-02);
    rotary_embedding: [Mul,] Slice…, Neg, Slice…, Concat, [Cast,] [Mul, Add] (KB-FU-01); swiglu: [Slice, Slice,]
    SiLU (Swish) and the Mul that gates it — within the next three kernels, taking two tensors of the SiLU input's
    shape (KB-FU-04); a SiLU no such Mul follows is a plain activation, not SwiGLU.
    """

    family: ClassVar[str] = "chain"
    source: ClassVar[str] = "kernel_details.csv: Step Id, Type, Start Time(us), Duration(us), Input Shapes"

    rank: int = Field(ge=0, description="Rank.")
    pattern: Literal["rms_norm", "rotary_embedding", "swiglu"] = Field(description="The decomposed operator.")
    count_per_step: NonNegative = Field(description="Chains per step.")
    kernels_per_chain: NonNegative = Field(description="Mean number of kernels in a chain.")
    us_per_step: Duration = Field(description="Summed device time of every kernel of the chains per step, µs: what the "
                                "fused operator replaces (its own time not subtracted).")
    share_of_step: Ratio | None = Field(None, description="us_per_step / the rank's step time (capped at 1).")
    sequence: str = Field(description="The most common chain, e.g. 'Cast → Square → ReduceMeanD → Add → Rsqrt → Mul → Mul'.")
    adjacent_share: Ratio = Field(description="Share of chains whose kernels run back to back (swiglu: the Mul right "
                                  "after the SiLU; below 1 a separate up-projection runs between them).")


class Mc2Fact(Fact):
    """A MatMul and a collective on its output (or input) running one after the other: what MC2 fuses (the MC² best-practice article).

    One fact per pattern and MatMul shape; times are means per occurrence of that shape. A pair counts only when the
    collective carries the MatMul's data (its payload, from the MB it sent and the group's size, within 25 % of the
    MatMul's output, or input for AllGather) and its group is not known by a name other than a tensor-parallel one:
    a data-parallel gradient AllReduce after the last backward MatMul is not a candidate. For MatMul→AllReduce the
    MC2 tile planner gives the tiles and the predicted fused time; otherwise the gain is the upper bound
    min(MatMul, collective).
    """

    family: ClassVar[str] = "mc2"
    source: ClassVar[str] = ("kernel_details.csv: Name, Type, Start Time(us), Duration(us), Input Shapes, Input Data Types; "
                             "communication.json Bandwidth Info (the collective's data) and the group's name and size")

    rank: int = Field(ge=0, description="Rank.")
    pattern: Literal["matmul_all_reduce", "matmul_reduce_scatter", "all_gather_matmul"] = Field(
        description="Which fused operator applies: MatmulAllReduce, MatmulReduceScatter or AllGatherMatmul."
    )
    count_per_step: NonNegative = Field(description="Occurrences per step.")
    matmul_us: Duration = Field(description="Mean MatMul time per occurrence, µs.")
    comm_us: Duration = Field(description="Mean collective time per occurrence, µs.")
    m: int | None = Field(None, ge=1, description="M of the MatMul [M, K]×[K, N] (batch dimensions folded in).")
    k: int | None = Field(None, ge=1, description="K of the MatMul.")
    n: int | None = Field(None, ge=1, description="N of the MatMul.")
    dtype: str | None = Field(None, description="fp16, bf16, fp32 or int8, from Input Data Types.")
    group: str = Field(description="The collective's process-group name (tp, …), or its hash when unknown.")
    payload_mb: NonNegative = Field(description="The tensor the collective carries, MB (10^6 bytes), from the data it sent "
                               "and the group's size (the middle of the possible range when the size is unknown).")
    matmul_mb: NonNegative = Field(description="The MatMul's output (its input A for AllGather→MatMul), MB: M × N (M × K) × dtype bytes.")
    bound: Literal["compute", "communication"] = Field(description="The longer of MatMul and collective.")
    tiles: str | None = Field(None, description="The planner's split of M, e.g. '512,896,896,896,896' (MatmulAllReduce with shapes).")
    predicted_fused_us: Duration | None = Field(None, description="The planner's predicted fused time per occurrence, µs.")
    gain_us_per_step: Duration = Field(description="Predicted saving per step: (serial − fused) × count, or min(MatMul, collective) × count.")
    gain_share_of_step: Ratio | None = Field(None, description="gain_us_per_step / the rank's step time (capped at 1).")


class ContentionFact(Fact):
    """How much of a rank's collective kernel time runs while a MatMul kernel runs (kernel_details timeline)."""

    family: ClassVar[str] = "contention"
    source: ClassVar[str] = "kernel_details.csv: Type, Accelerator Core, Start Time(us), Duration(us)"

    rank: int = Field(ge=0, description="Rank.")
    matmul_overlap_share: Ratio = Field(description="Share of collective kernel time overlapped by MatMul kernels.")


class CommunicationFact(Fact):
    """Collective (or point-to-point) communication of one rank per step, split by what the time was spent on.

    From communication.json. The times are CANN's, on the master plane of each op: transit is moving
    data, wait is Notify_Wait (waiting for a peer), synchronization is the part of wait before the first
    transfer, idle is the rest (elapse − transit − wait).
    """

    family: ClassVar[str] = "communication"
    source: ClassVar[str] = "communication.json: Communication Time Info of every op, per step"

    rank: int = Field(ge=0, description="Rank.")
    kind: Literal["collective", "p2p"] = Field(description="collective, or p2p (send/receive/batchSendRecv).")
    ops_per_step: NonNegative = Field(description="Communication ops per step.")
    elapse_us: Duration = Field(description="Summed op time per step, µs (Elapse Time).")
    transit_us: Duration = Field(description="Time moving data per step, µs (Transit Time).")
    wait_us: Duration = Field(description="Time in Notify_Wait per step, µs (Wait Time).")
    synchronization_us: Duration = Field(description="Wait before the first transfer per step, µs (Synchronization Time).")
    idle_us: Duration = Field(description="Elapse − transit − wait per step, µs (Idle Time).")
    transit_share: Ratio = Field(description="transit_us / elapse_us: the share of communication time moving data.")
    wait_share: Ratio = Field(description="wait_us / elapse_us.")
    idle_share: Ratio = Field(description="idle_us / elapse_us.")
    wait_ratio: Ratio = Field(description="wait / (wait + transit), CANN's Wait Time Ratio over all ops.")
    transit_from_bandwidth_per_step: NonNegative = Field(
        0.0, description="Ops per step whose Time Info says 0 (or nothing) transit although Bandwidth Info moved data: "
        "their transit is the busiest transport's Bandwidth Info time, at most elapse − wait.")
    times_from: Literal["time_info", "spans"] = Field(
        "time_info", description="Where the time split comes from: CANN's Communication Time Info (communication.json, "
        "analysis.db), or — without it (Level0) — the collectives' spans on the trace's HCCL lane, matched across "
        "the profiled ranks by their order: synchronization is the time before the last profiled member arrived, "
        "transit at most the op's payload at the fastest rate its communicator reached in the capture plus its "
        "shortest op (an upper bound), wait the rest, idle 0.")
    times_note: str = Field("", description="For the explanations: how the split was measured where it is not CANN's "
                            "Communication Time Info (empty then), as a sentence that starts with a space.")
    communicator: str | None = Field(None, description="The communicator of group_size in words, e.g. 'the 8-rank "
                                     "communicator dp', or 'the communicator …868 of unrecorded size'.")
    group_size: int | None = Field(
        None, ge=1, description="Members of the communicator this rank waits in most (else the largest it uses): "
        "parallel_group_info global_ranks, else at least the local ranks its communication_matrix links reach.")
    group_ranks_profiled: int | None = Field(None, ge=1, description="How many of them are ranks of this profile.")
    missing_ranks: str | None = Field(
        None, description="The members not profiled: global ranks when parallel_group_info lists the group, else "
        "the communicator's local ranks (e.g. 'local ranks 2–7').")
    outside_wait_us: Duration = Field(
        0.0, description="Time per step inside collectives of groups not wholly profiled, after every profiled member "
        "had arrived, not moving data: waiting for members outside the profile, µs (0 when the group is complete "
        "or its size unknown; from the trace's spans, the ops every profiled member leaves together that last at "
        "least twice their transfer bound after the last arrival, also where the size is unknown).")
    outside_wait_share: Ratio = Field(0.0, description="outside_wait_us / elapse_us.")
    outside_wait_per_op_us: Duration = Field(0.0, description="outside_wait_us / ops_per_step: the mean wait for members "
                                             "outside the profile per collective, µs (a few tens of µs is a small "
                                             "collective's own handshake; milliseconds are a late member).")
    waited_peer: int | None = Field(None, ge=0, description="The communicator-local rank this rank's HCCL Notify_Wait tasks wait for longest (their 'dst rank', trace_view.json); None when the trace has none.")
    waited_peer_us: Duration | None = Field(None, description="Its Notify_Wait time per step, µs.")
    waited_peer_share: Ratio | None = Field(None, description="waited_peer_us / the Notify_Wait time per step for every peer.")
    straggler_hint: str = Field(
        " Nothing in the capture names the peer it waits for (the HCCL Notify_Wait tasks of a Level1 trace_view.json "
        "would): profile the whole communicator to see which member delays it.",
        description="For the explanations, a sentence that starts with a space: whom to profile first — the peer "
        "waited for longest, e.g. 'local rank 5 (101,683 µs per step, 90 % of the Notify_Wait time)', where known.")
    arrival: str | None = Field(
        None, description="For the explanations: who had arrived when the wait for members outside the profile began "
        "and for whom they wait, e.g. 'the 2 profiled members of the 8-rank communicator had arrived: they wait "
        "together, at the same time, for members that were not profiled (local ranks 2–7)'.")
    largest_tensor_mb: NonNegative | None = Field(
        None, description="Collectives only: the largest tensor one op of this rank carries, MB (10^6 bytes), from the "
        "data it sent (communication.json Bandwidth Info) and its kind — exact where parallel_group_info records its "
        "communicator's size, else the least it can be. HCCL stages it in a buffer of HCCL_BUFFSIZE MiB (200 by "
        "default) and splits what does not fit into rounds; None without Bandwidth Info.")
    largest_tensor_max_mb: NonNegative | None = Field(None, description="The most that tensor can be, MB: largest_tensor_mb "
                                                      "where the communicator's size is recorded, else what the fewest "
                                                      "members its links show give.")
    largest_tensor_op: str | None = Field(None, description="That op's name, e.g. 'hcom_allReduce__586_2_1'.")
    largest_tensor_kind: Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all"] | None = Field(
        None, description="That op's collective, from its name.")
    largest_tensor_sent_mb: NonNegative | None = Field(None, description="What that op sent over the links, MB (Bandwidth Info).")
    largest_tensor_buffsize_mb: int | None = Field(None, ge=1, description="The HCCL_BUFFSIZE that surely holds that "
                                                   "tensor: the most it can be, in MiB, rounded up.")
    communicators: int | None = Field(None, ge=1, description="The communicators (process groups) this rank's "
                                      "communication ops use; each reserves 2 × HCCL_BUFFSIZE of device memory.")
    hccl_buffer_savings_mb: int | None = Field(None, ge=0, description="Device memory, MiB, that HCCL_BUFFSIZE = "
                                               "largest_tensor_buffsize_mb would return: 2 × communicators × "
                                               "(hccl_buffsize_mb − largest_tensor_buffsize_mb), 0 when it is no smaller.")
    hccl_buffsize_mb: int | None = Field(None, ge=1, description="The HCCL_BUFFSIZE in force, MiB: as given with --env "
                                         "(or recorded in ENV_VARIABLES), else HCCL's default 200 — assumed: the profiler "
                                         "does not record it (None without Bandwidth Info).")
    largest_tensor_rounds: int | None = Field(None, ge=1, description="Rounds HCCL splits the largest tensor into at "
                                              "least: ⌈largest_tensor_mb × 10^6 / (hccl_buffsize_mb × 2^20)⌉ (1: it fits).")
    p2p_us: Duration = Field(0.0, description="Time per step of this rank's P2P ops (send, receive, batchSendRecv: the pipeline's transfers, "
                             "reported as its bubble by the stage facts), µs: the part of the exposed communication the collectives do not explain.")
    ranges: list[TimeRange] = Field(default_factory=list, description="Where outside_wait_us lies: the collectives "
                                    "that wait longest for members outside the profile, each from the last profiled "
                                    "member's arrival to the op's end on this rank (its transfer included), at most a "
                                    "few, longest first.")


class TransportFact(Fact):
    """Traffic of one rank over one transport (HCCS, PCIE, RDMA, SIO) per step, and its bandwidth."""

    family: ClassVar[str] = "transport"
    source: ClassVar[str] = "communication.json: Communication Bandwidth Info of every op, per step"

    rank: int = Field(ge=0, description="Rank.")
    transport: Literal["HCCS", "PCIE", "RDMA", "SIO", "SDMA"] = Field(
        description="Link type; SDMA appears only when the file does not split it into HCCS/PCIE/SIO."
    )
    size_mb_per_step: NonNegative = Field(description="Data moved per step, MB (10^6 bytes).")
    time_us_per_step: Duration = Field(description="Transfer time per step summed over all planes, µs.")
    bandwidth_gbps: NonNegative = Field(description="size / time, GB/s.")
    nominal_gbps: NonNegative | None = Field(None, description="The link's nominal bandwidth for the hardware, where known.")
    utilization: NonNegative | None = Field(None, description="bandwidth_gbps / nominal_gbps.")
    ops_per_step: NonNegative = Field(description="Communication ops per step that used this transport.")
    small_op_share: Ratio = Field(
        description="Share of those ops moving less than 16 MB (1 MB for RDMA) over this transport."
    )
    mean_op_mb: NonNegative | None = Field(None, description="size_mb_per_step / ops_per_step: what one op moves over "
                                           "this transport on average, MB (None without ops).")
    rdma_tc: int | None = Field(None, ge=0, le=255, description="RDMA only: the traffic class HCCL marks its packets "
                                "with — HCCL_RDMA_TC as the profiler recorded it (ENV_VARIABLES; --env wins), 132 (HCCL's "
                                "default) where recorded unset; None where not recorded.")
    rdma_sl: int | None = Field(None, ge=0, le=7, description="RDMA only: the service level, HCCL_RDMA_SL likewise "
                                "(default 4).")


class LinkFact(Fact):
    """Traffic over one link between two ranks of a communicator, per step, as one rank recorded it."""

    family: ClassVar[str] = "link"
    source: ClassVar[str] = (
        "communication_matrix.json: the '-total' entry of each op type per group and src-dst link; global ranks "
        "from profiler_metadata.json parallel_group_info (matched by the group hash)"
    )

    rank: int = Field(ge=0, description="The rank whose file recorded the link.")
    group: str = Field(description="The communicator's process-group name (dp, tp, pp, …), or its hash when unknown.")
    src_rank: int = Field(ge=0, description="Sending rank: global when ranks_are_global, else the rank inside the group.")
    dst_rank: int = Field(ge=0, description="Receiving rank, numbered like src_rank.")
    ranks_are_global: bool = Field(description="True when parallel_group_info mapped the group's local ranks to global ones.")
    transport: str = Field(description="HCCS, PCIE, RDMA, SIO (LOCAL on-chip copies are left out).")
    size_mb_per_step: NonNegative = Field(description="Data moved per step, MB (10^6 bytes).")
    time_us_per_step: Duration = Field(description="Transfer time per step, µs.")
    bandwidth_gbps: NonNegative = Field(description="size / time, GB/s.")
    nominal_gbps: NonNegative | None = Field(None, description="The link type's nominal bandwidth for the hardware, where known.")
    utilization: NonNegative | None = Field(None, description="bandwidth_gbps / nominal_gbps.")
    median_ratio: NonNegative | None = Field(
        None, description="bandwidth_gbps / the median bandwidth of all links of this transport in the profile (3 or more)."
    )


class MemoryFact(Fact):
    """Device memory of one rank as the framework's caching allocator saw it (memory_record.csv)."""

    family: ClassVar[str] = "memory"
    source: ClassVar[str] = (
        "memory_record.csv (PTA/PTA+GE/APP rows), kernel_details.csv (step windows), npu_module_mem.csv (HCCL), "
        "--context device_memory_gb (capacity)"
    )

    rank: int = Field(ge=0, description="Rank.")
    component: str = Field(description="The memory_record component used: PTA+GE when graph-mode memory exists, else PTA.")
    peak_allocated_mb: NonNegative = Field(description="Peak Total Allocated, MB (1024² bytes).")
    peak_reserved_mb: NonNegative = Field(description="Peak Total Reserved (allocator cache), MB.")
    reserved_unused_mb: NonNegative = Field(description="Reserved − allocated at the moment of peak allocation, MB.")
    reserved_unused_ratio: Ratio = Field(description="reserved_unused_mb / reserved at that moment.")
    reorganisations: int = Field(ge=0, description="Drops of Total Reserved inside the profiled steps (cache released).")
    reorganisations_per_step: NonNegative = Field(description="reorganisations / steps with a known time window.")
    reorganisation_times_us: list[Micros] = Field(
        default_factory=list, description="Timestamps of the first reorganisations (µs, local Unix time)."
    )
    steps_observed: int = Field(ge=0, description="Steps whose time window was known (from kernel_details); 0 = whole capture.")
    process_peak_reserved_mb: NonNegative | None = Field(None, description="Peak device memory of the whole process (APP rows), MB.")
    hccl_reserved_mb: NonNegative | None = Field(None, description="Peak memory reserved by HCCL (npu_module_mem.csv), MB.")
    largest_allocation_mb: int | None = Field(None, ge=0, description="The largest single allocation of the capture, MB, "
                                              "rounded down (operator_memory.csv), where above 20 MB (the least max_split_size_mb the allocator accepts): the "
                                              "first max_split_size_mb to try.")
    split_size_trials_mb: str | None = Field(None, description="The sizes of the largest single allocations, MB, distinct, "
                                             "largest first, at most four, above 20 MB, e.g. '1,024, 512, 256': the max_split_size_mb values "
                                             "to try from large to small, keeping the one with the lowest peak (the "
                                             "performance-analysis guide's procedure); None without operator_memory.csv.")
    capacity_mb: NonNegative | None = Field(None, description="Device memory, MB (from --context device_memory_gb).")
    peak_share_of_capacity: Ratio | None = Field(
        None, description="Peak device memory (process peak, else allocator peak) / capacity_mb, capped at 1."
    )
    timeline_us: list[Micros] = Field(
        default_factory=list, description="Times of the memory timeline (µs, local Unix time), at most 240 points."
    )
    timeline_allocated_mb: list[float] = Field(
        default_factory=list, description="Total Allocated at each timeline point (the maximum within its interval), MB."
    )
    timeline_reserved_mb: list[float] = Field(
        default_factory=list, description="Total Reserved at each timeline point (the maximum within its interval), MB."
    )


class AllocationFact(Fact):
    """One of the operators that allocate the most device memory on a rank (operator_memory.csv)."""

    family: ClassVar[str] = "allocation"
    source: ClassVar[str] = "operator_memory.csv: Name, Size(KB)"

    rank: int = Field(ge=0, description="Rank.")
    op_name: str = Field(description="The framework op that requested the memory, e.g. aten::empty_strided.")
    allocations: int = Field(ge=0, description="Allocations in the capture.")
    allocated_mb: NonNegative = Field(description="Memory allocated in the capture, MB.")
    largest_mb: NonNegative = Field(description="Largest single allocation, MB.")
    share_of_allocated: Ratio = Field(description="allocated_mb / all operators' allocated_mb.")
    position: int = Field(ge=1, description="1 for the operator allocating the most.")


class EnvironmentFact(Fact):
    """An environment variable of the profiled process: recorded by the profiler, or given with --env/--env-file."""

    family: ClassVar[str] = "environment"
    source: ClassVar[str] = "profiler_metadata.json: ENV_VARIABLES (nine variables); --env KEY=VALUE and --env-file (any)"

    name: str = Field(description="Variable name, verbatim.")
    value: str = Field(description="Its value, verbatim ('' when unset).")
    is_set: bool = Field(description="Whether the value is non-empty.")
    number: float | None = Field(None, description="The value as a number, when it is one.")


class HostFact(Fact):
    """What the host did during the profiled steps of one rank (trace_view.json): dispatch, compilation,
    synchronisation, garbage collection. Counts and times are per step."""

    family: ClassVar[str] = "host"
    source: ClassVar[str] = (
        "trace_view.json: CANN process (AscendCL@*, Node@launch), Python and Python GC processes, "
        "Ascend Hardware tasks, HostToDevice flows; per ProfilerStep#N window. On GPUs, *.pt.trace.json: "
        "cuda_runtime calls (cuda*/hip*), cpu_op events, kernels linked to their launches by correlation"
    )

    rank: int = Field(ge=0, description="Rank.")
    steps: int = Field(ge=1, description="ProfilerStep windows in the trace (1 = the whole capture).")
    compile_calls_per_step: NonNegative = Field(description="Online operator compilations: AscendCL@opCompile spans (else AscendCL@aclopCompileAndExecute calls, which also run the operator); GPU: nvrtc/hiprtc compilations.")
    compile_us_per_step: Duration = Field(description="Their total time, µs.")
    sync_calls_per_step: NonNegative = Field(description="AscendCL@aclrtSynchronizeStream/Device/Event calls (host waits for the device); GPU: cuda/hip Device/Stream/EventSynchronize.")
    sync_us_per_step: Duration = Field(description="Their total time, µs.")
    item_sync_calls_per_step: NonNegative = Field(0.0, description="Of them, the calls made by .item() reads (inside aten::item / aten::_local_scalar_dense).")
    copy_sync_calls_per_step: NonNegative = Field(0.0, description="Of them, the calls made by blocking copies between host and device (inside aten::_to_copy: .to(device) from pageable memory, .cpu()).")
    allocator_sync_calls_per_step: NonNegative = Field(0.0, description="Synchronisations inside the allocator's own free/malloc calls (not counted in sync_calls_per_step).")
    free_calls_per_step: NonNegative = Field(0.0, description="AscendCL@aclrtFree / aclrtFreePhysical calls per step (memory returned to the device); GPU: cudaFree/hipFree.")
    free_us_per_step: Duration = Field(0.0, description="Their total time, µs.")
    launch_calls_per_step: NonNegative = Field(description="Node@launch calls (kernel launches); GPU: cudaLaunchKernel and the like.")
    device_sync_calls_per_step: NonNegative = Field(0.0, description="Device-wide synchronisations per step (cudaDeviceSynchronize / hipDeviceSynchronize, aclrtSynchronizeDevice): torch.cuda.synchronize() and the like.")
    graph_launches_per_step: NonNegative = Field(0.0, description="Graph launches per step: cudaGraphLaunch / hipGraphLaunch (CUDA/HIP graphs replayed), AscendCL@aclmdlRIExecute(Async) (aclgraph) or aclmdlExecute (a GE graph). Above 0 the step already runs graphs.")
    dataloader_calls_per_step: NonNegative = Field(0.0, description="Outermost DataLoader calls (enumerate(DataLoader)#…__next__) per step; 0 when the trace shows no DataLoader.")
    launch_us_mean: Duration | None = Field(None, description="Mean launch call time: the host cost of one launch, µs. Where only the task queue's per-operator launches are recorded (Ascend Level0: Dequeue@, each the operator's whole host path), at most 50 µs, eager dispatch's per-kernel host time at the high end.")
    launch_latency_us_median: Duration | None = Field(None, description="Median launch → device start delay (HostToDevice flows; GPU: correlation ids), µs.")
    launch_latency_us_p90: Duration | None = Field(None, description="90th percentile of that delay, µs.")
    tiny_kernel_share: Ratio | None = Field(None, description="Share of compute tasks shorter than launch_us_mean.")
    replays_aclgraph_only: bool = Field(
        False, description="The steps replay graphs and every replay is an aclgraph one (AscendCL@aclmdlRIExecute"
        "[Async]: TorchAir reduce-overhead), none a GE graph's (aclmdlExecute: max-autotune).")
    single_op_kernels_only: bool = Field(
        False, description="Every compute kernel (kernel_details.csv, the DB's TASK; at Level0, whose kernel_details has "
        "no Model ID, the trace's device tasks) carries the Model ID 4294967295 of an operator launched on its own: "
        "none ran inside a graph, the rank ran eagerly. False where one ran in a graph, or where nothing records the "
        "Model ID (Ascend only).")
    gc_calls_per_step: NonNegative = Field(description="Python GC pauses (recorded only with gc_detect_threshold).")
    gc_us_per_step: Duration = Field(description="Their total time, µs.")
    gc_share_of_step: Ratio | None = Field(None, description="gc_us_per_step / the rank's step time (capped at 1).")
    optimizer_us_per_step: Duration = Field(description="Host time in Optimizer.step#… regions, µs.")
    optimizer_share_of_step: Ratio | None = Field(None, description="optimizer_us_per_step / the rank's step time (capped at 1).")
    sync_batch_norm_calls_per_step: NonNegative = Field(description="Framework events named SyncBatchNorm.")
    stream_gap_us_per_step: Duration | None = Field(
        None, description="Idle time between consecutive tasks on the busiest device stream per step, µs.")
    stream_gap_max_us: Duration | None = Field(None, description="The longest such gap, µs.")
    stream_gaps_per_step: NonNegative | None = Field(None, description="Gaps of 50 µs or more on that stream per step.")
    host_gap_us_per_step: Duration | None = Field(
        None, description="Host stretches of 1 ms or more inside a step with no runtime call (launch, sync, compile, free), µs per step.")
    host_gap_max_us: Duration | None = Field(None, description="The longest stretch between runtime calls inside a step, µs.")
    optimizer_kernels_per_step: NonNegative | None = Field(
        None, description="Device tasks launched from inside Optimizer.step regions per step (HostToDevice flows).")
    optimizer_kernel_us_per_step: Duration | None = Field(None, description="Their device time per step, µs.")
    optimizer_foreach_kernels_per_step: NonNegative | None = Field(None, description="How many of them are multi-tensor kernels (Foreach*, multi_tensor_apply, fused optimizer kernels): the optimizer is already foreach or fused. Where none is (the task queue can launch them after Optimizer.step returns), the capture's multi-tensor kernels per step.")


class CaptureFact(Fact):
    """Whether one rank's GPU capture shows steady state: where its steps come from and which of them warm up."""

    family: ClassVar[str] = "capture"
    source: ClassVar[str] = ("*.pt.trace.json: ProfilerStep#N, serving iterations (execute_model) or Optimizer.step "
                             "events; cuda_runtime launches, event synchronisations and cudaMalloc calls; cpu_op "
                             "convolutions")

    rank: int = Field(ge=0, description="Rank.")
    step_source: Literal["ProfilerStep", "iteration", "read-back", "Optimizer.step", "none"] = Field(
        description="What marks the steps: ProfilerStep#N, a serving engine's iterations (execute_model), a generation "
                    "loop's iterations cut at each read-back of its sampled tokens (the trace marks none), "
                    "Optimizer.step events (two or more, each ending a training iteration), or none (the capture is "
                    "one window).")
    steps_described: str = Field(description="step_source in words, for explanations.")
    steps: int = Field(ge=0, description="Step windows in the capture that launched GPU work (a marker around none, "
                                         "such as a last ProfilerStep the capture ends in, is not counted); 1 "
                                         "without step markers (the whole capture).")
    warmup_steps: str | None = Field(None, description="The steps that warm up, e.g. '1' or '2, 3' (None: none found).")
    steady_steps: int = Field(0, ge=0, description="Steps after the last warm-up step (0 without step markers).")
    steady_state: bool = Field(description="Whether a step follows the last warm-up step; false when the trace marks no steps.")
    warmup_evidence: str | None = Field(None, description="What warms up, per step, in words (None: nothing).")
    first_call_launches: int = Field(0, ge=0, description="Kernel launches of 1 ms or more that launched a kernel's first appearance (lazy module loading, library handles created on first use).")
    first_call_launch_us: Duration = Field(0.0, description="Their time, µs.")
    autotune_syncs: int = Field(0, ge=0, description="Event synchronisations inside convolution ops: cudnn.benchmark timing its algorithms.")
    device_allocations: int = Field(0, ge=0, description="cudaMalloc/hipMalloc calls in the capture (the caching allocator growing its pool).")


class PhaseFact(Fact):
    """One phase of a serving run on one rank — its prefill, decode or mixed iterations (``ingest.serving``) — and what
    an inference engineer reads from them: the time to first token and per output token, tokens per second, the
    batch, how busy the device is, how the host launches the work, and where the device time goes."""

    family: ClassVar[str] = "phase"
    source: ClassVar[str] = ("*.pt.trace.json: iteration annotations (execute_context_…) or execute_model events; "
                             "kernel, gpu_memcpy (HtoD sizes, DtoH), cudaGraphLaunch/hipGraphLaunch and kernel launches "
                             "per iteration")

    rank: int = Field(ge=0, description="Rank.")
    phase: Literal["prefill", "decode", "mixed"] = Field(description="prefill: only prompts; decode: only generated "
                                                         "tokens; mixed: a chunked prefill batched with decodes.")
    phase_from: str = Field(description="What told the phase: capture (a per-stage file or directory), annotation, or "
                            "kernel sequence (decode iterations repeat the run's most common kernel set).")
    iterations: int = Field(ge=1, description="Iterations of this phase in the capture.")
    iterations_marked_by: str = Field(description="What marks the iterations, in words: the serving engine's markers, "
                                      "or read-backs of the sampled tokens where the trace marks none.")
    covered_by_breakdown: bool = Field(description="Whether the step breakdown (and every per-step fact) covers this "
                                       "phase: the one that takes more of the capture, decode when it is at least half.")
    duration_us: Duration = Field(description="Median iteration duration, µs (its window: from the marker's start to "
                                  "the end of the GPU work it launched).")
    first_duration_us: Duration = Field(description="The first iteration's duration, µs: for prefill, the time to first "
                                        "token of the capture's first request without its queueing (a TTFT proxy).")
    start_to_start_us: Duration | None = Field(None, description="Median start-to-start time of consecutive iterations "
                                               "of the phase, µs: for decode, the time per output token (TPOT). None "
                                               "without two consecutive ones.")
    tokens_per_iteration: NonNegative | None = Field(None, description="Median tokens per iteration (None unknown): for "
                                                     "decode, the decode batch (one token per running request).")
    batch_words: str = Field("a batch the profile does not record", description="tokens_per_iteration in words, for "
                             "explanations: 'a batch of N token(s) per iteration', else that it is not recorded.")
    tokens_from: str | None = Field(None, description="annotation, or input copies (input_ids int32 beside positions "
                                    "int64: 4 bytes per token); None unknown.")
    requests_per_iteration: NonNegative | None = Field(None, description="Median requests per iteration, from the "
                                                       "annotation (None unknown).")
    tokens_per_s: NonNegative | None = Field(None, description="tokens_per_iteration / start_to_start_us: the phase's "
                                             "throughput on this rank (None unknown).")
    busy_share: Ratio = Field(description="Median share of an iteration the device computes or communicates.")
    idle_share: Ratio = Field(description="Median share of an iteration the device does neither.")
    graph_launches_per_iteration: NonNegative = Field(description="Median graph replays launched per iteration "
                                                      "(cudaGraphLaunch, hipGraphLaunch): > 0 means graph mode.")
    kernel_launches_per_iteration: NonNegative = Field(description="Median kernels launched one by one (eagerly) per "
                                                       "iteration, graph launches not counted.")
    graph_mode: Literal["graphs", "piecewise graphs", "eager"] = Field(
        description="graphs: the iteration replays one graph (with at most its input preparation launched eagerly); "
                    "piecewise graphs: two or more graph pieces with kernels launched eagerly between them (vLLM leaves "
                    "attention out of its pieces); eager: no graph launch.")
    compiles_after_first: NonNegative = Field(0, description="Online compilations (AscendCL@opCompile, nvrtc/hiprtc, "
                                              "torch.compile frame compilations) that start in this phase's iterations "
                                              "after its first: none in a steady state.")
    compile_us_after_first_per_iteration: Duration = Field(0.0, description="Their time, µs, per iteration after the "
                                                           "first.")
    copies_to_host_per_iteration: NonNegative = Field(description="Median device-to-host copies per iteration: one "
                                                      "(the sampled tokens) is expected, each more is another sync.")
    device_us: Duration = Field(description="Median device kernel time per iteration (collectives included), µs.")
    attention_share: Ratio = Field(description="Share of device_us in attention kernels (flash/paged attention, "
                                   "FusedInferAttentionScore, IncreFlashAttention…).")
    kv_cache_share: Ratio = Field(description="Share of device_us writing the KV cache (reshape_and_cache…).")
    sampling_share: Ratio = Field(description="Share of device_us in sampling (argmax, top-k/top-p, sort…).")
    collective_share: Ratio = Field(description="Share of device_us in collective kernels (tensor-parallel "
                                    "all-reduce, custom all-reduce).")
    weight_read_tbps: NonNegative | None = Field(
        None, description="The rank's weights (--context parameters_billion × the dtype's bytes ÷ tensor_parallel) read "
        "once per iteration, over the iteration's device time outside attention, KV-cache writes, sampling and "
        "collectives (its GEMMs, norms and activations), TB/s. None without parameters_billion.")
    peak_memory_tbps: NonNegative | None = Field(None, description="The device's peak memory bandwidth, TB/s "
                                                 "(facts.hardware; None for a device not listed).")
    weight_read_share_of_peak: NonNegative | None = Field(
        None, description="weight_read_tbps / peak_memory_tbps: near 1, the iteration is bound by reading the weights, "
        "and only a larger batch (more tokens per weight read) makes it faster per token.")


class GpuFact(Fact):
    """GPU time of one rank of a PyTorch trace, with Holistic Trace Analysis' definitions and default scope: the
    GPU activity launched before the last ProfilerStep began (the whole capture when there are fewer than 2 steps)."""

    family: ClassVar[str] = "gpu"
    source: ClassVar[str] = ("*.pt.trace.json: kernel, gpu_memcpy, gpu_memset events (args.stream, correlation) and "
                             "the cuda_runtime calls that launched them")

    rank: int = Field(ge=0, description="Rank.")
    device: str | None = Field(None, description="GPU name (deviceProperties).")
    steps: int = Field(ge=1, description="ProfilerSteps analysed: all but the last (1 = the whole capture).")
    span_us: Duration = Field(description="Kernel span: first GPU activity start to last end in the analysed steps, µs.")
    idle_ratio: Ratio = Field(description="Share of the span with no GPU activity at all (HTA idle time).")
    compute_ratio: Ratio = Field(description="Share of the span running compute kernels (HTA compute time).")
    non_compute_ratio: Ratio = Field(description="Share running only communication or memory copies (HTA non-compute time).")
    communication_ratio: Ratio = Field(description="Share of the span with an NCCL/RCCL kernel running.")
    comm_comp_overlap: Ratio | None = Field(None, description="Share of NCCL time during which compute kernels run (HTA); absent without NCCL.")
    idle_host_wait_ratio: Ratio = Field(description="Share of the streams' idle gaps where the next kernel was launched only after the stream drained (the host was late).")
    idle_kernel_wait_ratio: Ratio = Field(description="Share of gaps under 30 µs between kernels launched in advance (launch overhead between kernels).")
    idle_other_ratio: Ratio = Field(description="Share of the remaining gaps (waiting on events, other streams, synchronisation).")
    host_wait_us_per_step: Duration = Field(description="Idle time per step on all streams caused by late launches, µs.")
    matrix_share_of_compute: Ratio = Field(0.0, description="Share of compute-kernel time in matrix math: GEMM, GEMV, convolution and attention kernels (cuBLAS, cuBLASLt nvjet, CUTLASS, cuDNN, xmma/gmma, FlashAttention, rocBLAS/hipBLASLt Cijk_).")
    fp32_gemm_share: Ratio = Field(description="Share of compute-kernel time in matrix math known to run in FP32/FP64 on CUDA cores: the kernel's name says so (sgemm, ffma, simt, scudnn, f32f32_f32f32_f32, gemv of float…), or its op's operands are float, or the GPU has no tensor cores (compute capability < 7.0). Math whose unit cannot be told is not counted here (unknown_matrix_share).")
    low_precision_matrix_share: Ratio = Field(0.0, description="Share of compute-kernel time in matrix math on tensor cores in FP8, INT8, BF16 or FP16, from the kernel's name (fp8/e4m3, bf16, f16, h884, wgmma…) or its op's operand types (record_shapes).")
    low_precision_share_of_matrix: Ratio | None = Field(None, description="low_precision_matrix_share / matrix_share_of_compute: how much of the matrix math already runs in low precision on tensor cores (None without matrix math).")
    tf32_matrix_share: Ratio = Field(0.0, description="Share of compute-kernel time in TF32 matrix math on tensor cores (tf32, s1688 kernels).")
    unknown_matrix_share: Ratio = Field(0.0, description="Share of compute-kernel time in matrix math whose unit and precision neither the kernel's name nor its op tells (e.g. a Hopper nvjet kernel replayed from a CUDA graph, or a trace without record_shapes).")
    matrix_precision: str | None = Field(None, description="The precision most matrix-math time runs in (≥ 60 %): fp8, int8, bf16, fp16, tf32, fp32, fp64, unknown — or mixed; None without matrix math.")
    tensor_cores: bool | None = Field(None, description="Whether the GPU has tensor cores (NVIDIA compute capability ≥ 7.0); None when the trace does not record it or the GPU is AMD's.")
    pageable_memcpy_per_step: NonNegative = Field(description="Host↔device copies from or to pageable memory per step (Memcpy … (Pageable -> Device) / (Device -> Pageable)): staged through a driver buffer, not overlappable; pinned memory avoids them.")
    pageable_htod_per_step: NonNegative = Field(0.0, description="Of them, copies to the device (Memcpy HtoD (Pageable -> Device)): batches and tensors built on the host, what pinning the source fixes.")
    pageable_dtoh_per_step: NonNegative = Field(0.0, description="Of them, copies back to the host (Memcpy DtoH (Device -> Pageable)): .item(), .cpu(), .tolist() reads, synchronous by nature; a pinned destination with non_blocking=True, or fewer reads, fixes them.")
    pageable_copy_us_per_step: Duration = Field(0.0, description="GPU time of those pageable copies per step, µs.")
    cast_us_per_step: Duration = Field(0.0, description="GPU time per step in dtype-conversion kernels (LoadWithCast/StoreWithCast copies, bfloat16/float16 copy kernels): autocast's per-op casts, .to(dtype), .float(), µs.")
    cast_share_of_compute: Ratio = Field(0.0, description="cast_us_per_step as a share of compute-kernel time.")
    layout_us_per_step: Duration = Field(0.0, description="GPU time per step in layout transposes around convolutions (cuDNN nchwToNhwc / nhwcToNchw), µs.")
    layout_share_of_compute: Ratio = Field(0.0, description="layout_us_per_step as a share of compute-kernel time.")
    fused_attention_share_of_compute: Ratio = Field(0.0, description="Share of compute-kernel time in fused attention kernels (FlashAttention, cuDNN/CUTLASS fmha, SDPA backends, paged attention).")
    softmax_share_of_compute: Ratio = Field(0.0, description="Share of compute-kernel time in softmax kernels: attention computed from separate matmul and softmax kernels shows here.")
    exposed_collective_kind: str | None = Field(None, description="The collective that takes most of the communication no compute overlaps: all-reduce, all-gather, reduce-scatter, all-to-all (incl. DeepEP dispatch/combine), send/recv, broadcast or other (None without exposed communication).")
    exposed_gradient_sync_share: Ratio | None = Field(None, description="Share of the exposed communication in all-reduce, reduce-scatter and all-gather kernels — what data parallelism (DDP, FSDP, ZeRO) runs; the rest is all-to-all, send/recv or broadcast.")
    sparse_dist_pipelined: bool = Field(False, description="Whether TorchRec's TrainPipelineSparseDist already pipelines the embedding input distribution (its '## sparse_data_dist ##' / '## wait_sparse_data_dist ##' stages are in the trace).")
    fused_embedding_lookups: bool = Field(False, description="Whether FBGEMM's table-batched embedding kernels run (split_/dense_embedding_[nobag_][backward_]codegen_*): the embedding tables are already looked up together.")
    exposed_by_kind: str | None = Field(None, description="Exposed communication per step by collective kind, largest first, e.g. 'send/recv 10,120 µs; all-reduce 4,530 µs'.")
    copies_by_kind: str | None = Field(None, description="GPU copy time and count per step by kind, largest first, e.g. 'HtoD pinned 8,443 µs (25 per step); DtoH pageable 18 µs (10 per step)'.")
    memcpy_us_per_step: Duration = Field(description="GPU time of memory copies and sets per step, µs.")
    max_queue_length: int = Field(0, ge=0, description="Most launches waiting to start on one stream (HTA queue length); at 1024 the CPU blocks on launches.")


class ApiFact(Fact):
    """Calls of one framework op per step on a rank (trace_view.json cpu_op events), for the ops rules look at.

    aten::item and aten::_local_scalar_dense read a device value on the host (each is a synchronisation);
    the others are ops that a fused kernel replaces (softmax, rsqrt, neg, cat, silu, gelu, layer/group norm)
    or that run slowly on Ascend (index_put, nonzero, masked_fill, one_hot, repeat_interleave, gather).
    """

    family: ClassVar[str] = "api"
    source: ClassVar[str] = "trace_view.json: Python cpu_op events named aten::…, per ProfilerStep#N window"

    rank: int = Field(ge=0, description="Rank.")
    name: str = Field(description="The op, e.g. aten::item.")
    calls_per_step: NonNegative = Field(description="Calls per step.")
    us_per_step: Duration = Field(description="Host time in those calls per step, µs.")


IdlePart = Literal["dataloader", "compile", "allocator", "gc", "optimizer", "zero_grad", "sync", "copy", "dispatch", "host"]


class IdleFact(Fact):
    """Where a rank's device idle time goes: each idle stretch inside the steps, charged to what the host was doing.

    Idle is step time with neither compute nor communication on the device (the breakdown's free time). In this
    order, a stretch is charged to: the host fetching a batch (DataLoader), compiling an operator online, freeing or
    allocating device memory, collecting garbage, running the optimizer's step or its zero_grad; waiting after a
    synchronisation (from the sync call until the device gets work again: the drained queue refilling); a memory
    copy on the device or the host inside a copy call; the next kernel launched
    only after the device had drained (dispatch: the host is too slow to keep it fed); else other host work.

    The per-step figures are means over the typical steps: from three steps on, the steps longer than 1.2 × the
    median step are left out (a stall in one step would otherwise set a part's gain for every step); what they add
    to the mean step is ``outlier_excess_us``.
    """

    family: ClassVar[str] = "idle"
    source: ClassVar[str] = ("trace_view.json or *.pt.trace.json: device tasks (compute, communication, copies), "
                             "host events (DataLoader, GC) and runtime calls (compile, sync, free, launch), per step")
    PARTS: ClassVar[tuple[str, ...]] = ("dataloader", "compile", "allocator", "gc", "optimizer", "zero_grad", "sync", "copy",
                                        "dispatch", "host")

    rank: int = Field(ge=0, description="Rank.")
    steps: int = Field(ge=1, description="Steps the per-step figures are averaged over: the typical steps (from 3 steps on, those not longer than 1.2 × the median step).")
    step_us: Duration = Field(description="Mean length of those steps' windows (the breakdown's mean step when no step is an outlier), µs.")
    idle_us: Duration = Field(description="Device idle time per typical step inside its window, µs.")
    idle_share_of_step: Ratio = Field(description="idle_us / step_us.")
    dataloader_us: Duration = Field(description="Idle while the host is inside a DataLoader call, µs per step.")
    compile_us: Duration = Field(description="Idle while the host compiles an operator online, µs per step.")
    allocator_us: Duration = Field(description="Idle while the host frees or allocates device memory, µs per step.")
    gc_us: Duration = Field(description="Idle while Python's garbage collector runs, µs per step.")
    optimizer_us: Duration = Field(0.0, description="Idle while the host is inside Optimizer.step (a per-parameter loop launches its kernels one by one), µs per step.")
    zero_grad_us: Duration = Field(0.0, description="Idle while the host is inside Optimizer.zero_grad (zeroing each gradient with its own kernel), µs per step.")
    sync_us: Duration = Field(description="Idle from a host synchronisation until the device gets its next task, µs per step.")
    item_sync_us: Duration = Field(0.0, description="The part of sync_us after the synchronisations of .item() reads, µs per step.")
    copy_sync_us: Duration = Field(0.0, description="The part of sync_us after the synchronisations of blocking copies between host and device (.to(), .cpu()), µs per step.")
    copy_sync_after_return_us: Duration = Field(0.0, description="The part of copy_sync_us after those calls had returned, until the device's next work started: the host queueing new work, which would also go only where the host then ran ahead of the device, µs per step.")
    copy_us: Duration = Field(description="Idle except for memory copies on the device, µs per step.")
    pageable_copy_us: Duration = Field(0.0, description="The part of copy_us under copies from or to pageable host memory and the host's calls that make them, µs per step: what pinned memory would take away.")
    dispatch_us: Duration = Field(description="Idle before a task launched only after the device had drained, µs per step.")
    launches_per_step: NonNegative = Field(0.0, description="Kernel launch calls per typical step (cudaLaunchKernel…, cudaGraphLaunch, Node@launch).")
    dispatch_per_launch_us: Duration | None = Field(None, description="(dispatch_us − dispatch_in_first_calls_us) / launches_per_step: the wait per launched kernel — eager dispatch costs 10–50 µs of host time per kernel; far more means other host work (None without launches).")
    launch_explained_us: Duration = Field(0.0, description="The part of dispatch_us that launching can explain, µs per step: the larger of launches_per_step × the host time one launch costs — on a GPU 50 µs, eager PyTorch's per-kernel host time at the high end (Python, dispatcher, launch call); on Ascend the launch call's measured time, Node@launch, else (Level0, no CANN lane) the task queue's Dequeue@ events less any aclop compile-and-execute inside them, at most 50 µs each since each spans the operator's whole host path (the task queue launches on a thread of its own) — and the time measured inside launch calls (dispatch_in_launch_calls_us; not at Level0, where those are the operators' whole host path). First-call launches of a millisecond or more (set-up, ingest.warmup) are left out. What graph mode or fewer, larger kernels would take away.")
    launch_explained_share: Ratio | None = Field(None, description="launch_explained_us / (dispatch_us − dispatch_in_first_calls_us) (None without dispatch idle, or where the capture records no launch): below ~0.5 the host is busy with other work than launching.")
    dispatch_in_launch_calls_us: Duration = Field(0.0, description="The part of dispatch_us the host spends inside launch calls (cudaLaunchKernel…, cudaGraphLaunch, Node@launch, else the task queue's Dequeue@ events outside aclop), µs per step.")
    dispatch_outside_launches_us: Duration = Field(0.0, description="dispatch_us less dispatch_in_launch_calls_us and dispatch_in_first_calls_us: the device waits while the host does other work than launching — Python, framework operators, the scheduler between a serving engine's graph replays —, µs per step.")
    dispatch_outside_launches_share_of_step: Ratio = Field(0.0, description="dispatch_outside_launches_us / step_us.")
    host_wait_outside_launches_us: Duration = Field(0.0, description="dispatch_outside_launches_us + sync_us: all the time the device waits for a host that is not launching — after its synchronisations too. In a serving loop, whose every iteration ends reading the sampled tokens back, this is the host's work between iterations, µs per step.")
    host_wait_outside_launches_share_of_step: Ratio = Field(0.0, description="host_wait_outside_launches_us / step_us.")
    dispatch_in_graph_launches_us: Duration = Field(0.0, description="The part of dispatch_us the host spends inside graph launches (cudaGraphLaunch, aclmdlRIExecuteAsync): a replay's launch cost the device waits for, µs per step.")
    dispatch_in_first_calls_us: Duration = Field(0.0, description="The part of dispatch_us the host spends inside first-call launches of a millisecond or more (a kernel's module loaded on its first use, once per process: ingest.warmup), µs per step: set-up a steady step does not repeat, neither launching nor the operators' host work.")
    dispatch_in_aclop_us: Duration = Field(0.0, description="Ascend: the part of dispatch_us the host spends inside AscendCL@aclopCompileAndExecute, the legacy aclop operator path (operator selection, compile-cache lookup and launch on the host; jit_compile=True), µs per step.")
    dispatch_in_task_queue_us: Duration = Field(0.0, description="Ascend, where the runtime's launch calls are recorded: the part of dispatch_us the task queue's launch thread spends in its per-operator launches (Dequeue@ events: each operator's host path and launch), µs per step.")
    dispatch_in_operators_us: Duration | None = Field(None, description="The part of dispatch_us the host spends inside framework operators (aten:: ops) while no task-queue launch runs, µs per step; None where the trace does not record the operators.")
    dispatch_top_operator: str | None = Field(None, description="The framework operator the host is inside for most of the dispatch idle, e.g. aten::linear.")
    dispatch_top_operator_us: Duration | None = Field(None, description="Dispatch idle per step while the host is inside that operator, µs.")
    dispatch_host_activity: str | None = Field(None, description="What the host does during the dispatch idle, in words: time inside framework operators (the top one named) and outside any recorded operator; on Ascend, that the trace cannot tell.")
    host_wait_python: str = Field("what runs there is not named", description="What the host runs while the device waits for it outside launch calls (after a synchronisation, between launches), in words: the innermost with_stack Python function of a PyTorch trace it is in for at least half of that time, with its µs per step; else why none is named.")
    host_us: Duration = Field(description="The rest: idle with the next task already queued, or at the step's end, µs per step.")
    dataloader_share_of_step: Ratio = Field(description="dataloader_us / step_us.")
    compile_share_of_step: Ratio = Field(description="compile_us / step_us.")
    allocator_share_of_step: Ratio = Field(description="allocator_us / step_us.")
    gc_share_of_step: Ratio = Field(description="gc_us / step_us.")
    optimizer_share_of_step: Ratio = Field(0.0, description="optimizer_us / step_us.")
    zero_grad_share_of_step: Ratio = Field(0.0, description="zero_grad_us / step_us.")
    sync_share_of_step: Ratio = Field(description="sync_us / step_us.")
    copy_share_of_step: Ratio = Field(description="copy_us / step_us.")
    dispatch_share_of_step: Ratio = Field(description="dispatch_us / step_us.")
    host_share_of_step: Ratio = Field(description="host_us / step_us.")
    largest_part: IdlePart | None = Field(None, description="The part with the most idle time (None without idle time).")
    largest_share_of_idle: Ratio = Field(description="That part's share of idle_us.")
    dataloader_share_of_idle: Ratio = Field(description="dataloader_us / idle_us: how much of the idle time data loading explains.")
    step_median_us: Duration | None = Field(None, description="The median step window, µs (None below 3 steps).")
    slowest_step: int | None = Field(None, description="The number of the slowest step (ProfilerStep#N).")
    first_step: int | None = Field(None, description="The number of the first profiled step: a stall there alone can be warm-up.")
    slowest_step_us: Duration | None = Field(None, description="Its window, µs.")
    slowest_idle_part: IdlePart | None = Field(None, description="The part with the most idle time in the slowest step.")
    slowest_idle_part_us: Duration | None = Field(None, description="That part's idle time in the slowest step, µs.")
    outlier_steps: str | None = Field(None, description="The steps longer than 1.2 × the median step, e.g. '5, 9' (None when none is).")
    outlier_excess_us: Duration | None = Field(None, description="What the outlier steps add to the mean step: the sum of their excess over the median / steps, µs.")
    outlier_cause_differs: bool | None = Field(None, description="Whether the slowest outlier step's largest idle part differs from the typical steps' (False: the outliers are more of the same cause, which the findings on that part address); None without outliers.")
    warmup_steps: str | None = Field(None, description="The steps that warm up (facts.capture), left out of the typical steps and of the outliers, e.g. '2'.")
    warmup_excess_us: Duration | None = Field(None, description="What the warm-up steps add to the mean step: their excess over the median / steps, µs.")
    outlier_excess_share_of_step: Ratio | None = Field(None, description="outlier_excess_us / the mean step over every step (the breakdown's), not step_us.")

    ranges: list[TimeRange] = Field(default_factory=list, description="The longest stretches of the figures above "
                                    "(each part's idle, the synchronisations' and copies' sub-parts, the outlier and "
                                    "slowest steps), at most a few per field, longest first.")

    def part_us(self, part: str) -> float:
        return float(getattr(self, f"{part}_us"))


class DataLoaderFact(Fact):
    """Time the training loop spends waiting for the next batch (trace_view.json DataLoader events)."""

    family: ClassVar[str] = "dataloader"
    source: ClassVar[str] = (
        "trace_view.json: outermost events whose name contains 'dataloader' (e.g. "
        "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__), per ProfilerStep#N window"
    )

    rank: int = Field(ge=0, description="Rank.")
    calls_per_step: NonNegative = Field(description="Batches fetched per step.")
    us_per_step: Duration = Field(description="Time waiting for batches per step, µs.")
    share_of_step: Ratio | None = Field(None, description="us_per_step / the rank's step time (capped at 1).")
    iterator: Literal["multi-process", "single-process", "unknown"] = Field(
        description="The DataLoader iterator: single-process means num_workers=0."
    )
    slowest_step: int | None = Field(None, description="The profiled step that waits longest for its batches (three or "
                                     "more numbered steps; else None).")
    slowest_step_us: Duration | None = Field(None, description="Its DataLoader time, µs.")
    median_step_us: Duration | None = Field(None, description="The median step's DataLoader time, µs.")
    others_us_per_step: Duration | None = Field(None, description="The median DataLoader time per step of the other ranks "
                                                "with a host timeline (0 for one that fetches no batch), µs; None with fewer than two.")
    others_ratio: NonNegative | None = Field(None, description="others_us_per_step / us_per_step: near 0 when this rank "
                                             "loads alone — rank 0 reading for all and broadcasting.")
    ranks_compared: int | None = Field(None, ge=2, description="The ranks with a host timeline compared.")
    broadcasts_per_step: NonNegative | None = Field(None, description="This rank's broadcast collectives per step "
                                                    "(communication ops), None without communication data.")
    slowest_to_median: NonNegative | None = Field(None, description="slowest_step_us / median_step_us (the median taken "
                                                  "as at least 1 µs).")
    excess_us_per_step: Duration | None = Field(None, description="(slowest_step_us − median_step_us) / steps: what the "
                                                "slowest step's wait adds to every step on average, µs.")
    ranges: list[TimeRange] = Field(default_factory=list, description="Where us_per_step and excess_us_per_step lie: "
                                    "the longest DataLoader calls, and the longest of the slowest step's, at most a "
                                    "few each, longest first.")


class SpreadFact(Fact):
    """How one part of the step (compute, exposed communication, free) differs across ranks."""

    family: ClassVar[str] = "spread"
    cross_rank: ClassVar[bool] = True
    source: ClassVar[str] = "the per-rank breakdown facts (step_trace_time.csv of every rank)"

    dimension: Literal["compute", "communication", "free"] = Field(description="The part of the step compared; communication is "
                                                                   "the exposed communication less each rank's P2P ops (the pipeline's sends and receives).")
    max_rank: int = Field(ge=0, description="The rank with the most of it.")
    min_rank: int = Field(ge=0, description="The rank with the least of it.")
    max_us: Duration = Field(description="Its time per step on max_rank, µs.")
    min_us: Duration = Field(description="Its time per step on min_rank, µs.")
    spread_us: Duration = Field(description="max_us − min_us.")
    spread_ratio: Ratio = Field(description="spread_us / the mean step time over ranks.")
    rank: int = Field(
        ge=0,
        description="The slow rank, the one the others wait for: max_rank for compute and free, min_rank for "
        "communication (the late rank waits least inside the collectives).",
    )
    slow_ranks: str = Field("", description="Every rank within 1 % of the mean step of the slow rank's value, e.g. "
                            "'2, 3': ranks that are alike are named together, not one of them.")
    ranks: int = Field(ge=2, description="Number of ranks compared.")
    p2p_excluded_us: Duration | None = Field(None, description="The most P2P time per step left out of one rank's exposed "
                                             "communication (communication dimension; 0 without P2P ops).")
    slow_rank_waits: bool | None = Field(None, description="Communication dimension: whether the rank that waits least is itself "
                                         "mostly waiting (its collectives move data less than half their time, or its HCCL "
                                         "Notify_Wait fills half of them); None when its communication.json is missing.")
    slow_rank_note: str | None = Field(None, description="The same in words, for the explanations (communication dimension).")


class StragglerFact(Fact):
    """The rank the others wait for in the collectives of one communicator (data-parallel stragglers)."""

    family: ClassVar[str] = "straggler"
    cross_rank: ClassVar[bool] = True
    source: ClassVar[str] = (
        "communication.json of every rank: Wait Time(ms) of the collectives, per group hash; the group's name "
        "from profiler_metadata.json parallel_group_info"
    )

    group: str = Field(description="The communicator's process-group name (dp, tp, …), or its hash when unknown.")
    group_id: str = Field(description="The communicator's hash in communication.json (names like dp or mp repeat "
                          "across communicators; the hash does not).")
    communicator: str | None = Field(None, description="The HCCL communicator name (group_name_5), from parallel_group_info.")
    group_ranks: str | None = Field(None, description="The profiled ranks holding collectives of this group, e.g. '0, 1'.")
    group_size: int | None = Field(None, ge=2, description="Members of the communicator (parallel_group_info, else at "
                                   "least the local ranks its communication_matrix links reach).")
    ranks: int = Field(ge=2, description="Ranks whose files hold collectives of this group.")
    rank: int = Field(ge=0, description="The straggler: the rank that waits least, because the others wait for it.")
    straggler_wait_us: Duration = Field(description="Its wait inside the group's collectives per step, µs.")
    others_wait_us: Duration = Field(description="The other ranks' mean wait per step, µs.")
    lost_us: Duration = Field(description="others_wait_us − straggler_wait_us: time per step the others lose to it, µs.")
    lost_share_of_step: Ratio | None = Field(None, description="lost_us / the mean step time (capped at 1).")
    max_wait_rank: int = Field(ge=0, description="The rank that waits most.")
    straggler_transit_share: Ratio | None = Field(None, description="The share of its own time in the group's collectives that moves data.")
    straggler_waits: bool = Field(False, description="It is itself mostly waiting (its collectives in the group move data less than "
                                  "half their time, or its HCCL Notify_Wait fills half of its collective time): it waits least but is "
                                  "not the rank the others wait for.")
    ranges: list[TimeRange] = Field(default_factory=list, description="Where lost_us lies: on each other rank, the "
                                    "collectives it waits longest in for this rank, each from its own arrival to this "
                                    "rank's (the op's start on both), at most a few per rank, longest first.")


class PipelineFact(Fact):
    """One pipeline-parallel group: compute time per stage and how unevenly the layers are spread."""

    family: ClassVar[str] = "pipeline"
    cross_rank: ClassVar[bool] = True
    source: ClassVar[str] = (
        "profiler_metadata.json parallel_group_info (groups named 'pp') or distributed_args, else communication.json "
        "P2P ops (hcom_send/hcom_receive, their group and Wait Time); the ranks' step breakdowns"
    )

    group: str = Field(description="The HCCL communicator name of the pp group.")
    rank: int | None = Field(None, ge=0, description="The rank of this pipeline's slowest stage (= slowest_rank): the "
                             "one whose compute a rebalance shortens.")
    stages: int = Field(ge=2, description="Pipeline stages (ranks in the group).")
    slowest_stage: int = Field(ge=0, description="Stage index (0 = first) with the most compute per step.")
    slowest_rank: int = Field(ge=0, description="Its global rank.")
    fastest_stage: int = Field(ge=0, description="Stage index with the least compute per step.")
    max_compute_us: Duration = Field(description="Compute per step of the slowest stage, µs.")
    mean_compute_us: Duration = Field(description="Mean compute per step over the stages, µs.")
    min_compute_us: Duration = Field(description="Compute per step of the fastest stage, µs.")
    compute_spread_ratio: NonNegative = Field(description="(max − min) / mean compute over the stages.")
    grouping: Literal["parallel_group_info", "distributed_args", "p2p"] = Field(
        "parallel_group_info",
        description="How the stages were found: the 'pp' groups of parallel_group_info, MindSpeed's distributed_args, "
        "or inferred from which ranks share send/receive communicators (ordered from the lower-numbered end).")
    max_p2p_wait_rank: int | None = Field(None, ge=0, description="The stage rank that waits longest in P2P receives.")
    max_p2p_wait_us: Duration | None = Field(None, description="Its receive wait per step, µs.")
    waits_on_rank: int | None = Field(None, ge=0, description="The neighbour it waits for (the other rank of that P2P group).")
    pipeline_ranks: str = Field("", description="This pipeline's ranks in stage order, e.g. '0 → 2'.")
    stage_ranks: str = Field("", description="The ranks holding each stage over all pipelines of the profile, e.g. "
                             "'stage 0: 0, 1; stage 1: 2, 3'.")
    slowest_stage_ranks: str = Field("", description="The ranks holding the slowest stage over all pipelines, e.g. '2, 3'.")
    fastest_stage_ranks: str = Field("", description="The ranks holding the fastest stage over all pipelines.")
    explains_rank_spread: bool = Field(
        False, description="Every rank is in a pipeline and ranks holding the same stage differ by less than 5 % of the "
        "mean step in compute, exposed communication and free time: the ranks differ by stage, not one slow rank.")


class StageFact(Fact):
    """One rank as a pipeline stage: its neighbours, micro-batches per step and the time it waits for them (the bubble).

    Found for every rank with P2P ops or in a pipeline group, also when it is the only rank of its pipeline profiled.
    """

    family: ClassVar[str] = "stage"
    source: ClassVar[str] = (
        "communication.json P2P ops (hcom_send/hcom_receive/hcom_batchSendRecv: count, order, Wait Time), "
        "communication_matrix.json P2P links (src-dst), profiler_metadata.json parallel_group_info 'pp' or "
        "distributed_args; step_trace_time.csv (step time, Bubble)"
    )

    rank: int = Field(ge=0, description="Rank.")
    pipeline: str = Field(description="The pipeline: its pp communicator, 'pp<first rank>' (distributed_args), "
                          "'p2p:<ends>' (P2P chains) or 'rank <r>' (this rank's own P2P ops only).")
    grouping: Literal["parallel_group_info", "distributed_args", "p2p", "own_ops"] = Field(
        description="How the stage was found: a 'pp' group of parallel_group_info, distributed_args, a chain of P2P "
        "communicators shared by profiled ranks, or this rank's own sends and receives.")
    evidence: str = Field(description="The same in words, for the explanations.")
    position: Literal["first", "middle", "last", "unknown"] = Field(
        description="first (sends activations, receives nothing before it), middle, last; unknown where neither the "
        "groups nor the sends and receives tell.")
    stage: int | None = Field(None, ge=0, description="Stage index (0 = first), where the pipeline's ranks are known.")
    stages: int | None = Field(None, ge=2, description="Stages of the pipeline, where its ranks are known.")
    stages_at_least: int = Field(ge=2, description="The fewest stages the pipeline can have: stages where known, else 3 "
                                 "for a middle stage and 2 otherwise.")
    prev_rank: int | None = Field(None, ge=0, description="The stage before it (activations come from it).")
    next_rank: int | None = Field(None, ge=0, description="The stage after it (activations go to it).")
    neighbours: str = Field(description="Its neighbours in words, e.g. 'rank 8 after it' ('communicator-local rank 8' "
                            "where parallel_group_info does not map the communicator to global ranks).")
    sends_per_step: NonNegative = Field(description="hcom_send ops per step.")
    receives_per_step: NonNegative = Field(description="hcom_receive ops per step.")
    batched_per_step: NonNegative = Field(description="hcom_batchSendRecv ops per step (send and receive in one op).")
    p2p_pattern: Literal["schedule", "inconsistent", "none"] = Field(
        description="Whether the P2P ops fit a pipeline schedule: 'schedule' when in every step the stage sends to and "
        "receives from each P2P communicator as often (activations forward, gradients back), or exchanges both in "
        "batchSendRecv; 'inconsistent' when not (e.g. one send and no receive) — the schedule cannot be told, so "
        "micro_batches, schedule_bubble_share and bubble_share_of_step are None; 'none' without P2P ops (a pipeline "
        "group of the metadata, its bubble step_trace_time.csv's).")
    schedule_note: str = Field(description="The same in words, for the explanations.")
    micro_batches: NonNegative | None = Field(
        None, description="Micro-batches per step: sends or receives per step to one neighbour (each micro-batch "
        "crosses it forward and back); None with batchSendRecv alone, whose ops do not say their direction, and "
        "where the P2P ops fit no schedule.")
    bubble_us: Duration = Field(description="Time per step waiting in receives (Wait Time of hcom_receive and "
                                "hcom_batchSendRecv; step_trace_time.csv Bubble without communication.json), µs.")
    bubble_from: Literal["communication.json", "step_trace_time.csv"] = Field(description="Where bubble_us comes from.")
    step_time_us: Duration | None = Field(None, description="The rank's mean step, µs.")
    bubble_share_of_step: Ratio | None = Field(None, description="bubble_us / step_time_us; None where the P2P ops fit "
                                               "no schedule (their receive waits are then no pipeline's bubble).")
    schedule_bubble_share: Ratio | None = Field(
        None, description="The share of a 1F1B step a stage idles, (p − 1) / (m + p − 1), with p = stages_at_least and "
        "m = micro_batches (GPipe, Huang et al. 2019; 1F1B, Narayanan et al. 2021); None without micro_batches.")


class ModelFact(Fact, ModelSettings):
    """Model and parallel settings the user gave with --context (the profile does not record them)."""

    family: ClassVar[str] = "model"
    source: ClassVar[str] = "--context FILE.yaml"

    tp_crosses_nodes: bool | None = Field(None, description="tensor_parallel > cards_per_node (both given).")
    activation_mb: NonNegative | None = Field(
        None, description="One micro-batch activation [b, s, h] in MiB (micro_batch_size, sequence_length, hidden_size, dtype; bf16 when unknown)."
    )
    hccl_buffsize_mb: int | None = Field(None, ge=1, description="Recommended HCCL_BUFFSIZE: activation_mb rounded up (the large-model performance-analysis guide).")


class LayoutFact(Fact):
    """The parallel layout the large-model performance-analysis guide's decision order gives for the model and hardware in --context, next to the one in use."""

    family: ClassVar[str] = "layout"
    source: ClassVar[str] = "--context (parameters_billion, device_memory_gb, cards_per_node, tensor/pipeline/data_parallel) and the rank count"

    nodes: int = Field(ge=1, description="Servers: ranks (TP×PP×DP when given) / cards_per_node, rounded up.")
    recommended_tp: int = Field(ge=1, description="Tensor-parallel size the planner chooses.")
    recommended_pp: int = Field(ge=1, description="Pipeline stages the planner chooses.")
    recommended_dp: int = Field(ge=1, description="Data-parallel size the planner chooses.")
    zero1: bool = Field(description="Whether the plan needs ZeRO-1.")
    recompute: bool = Field(description="Whether the plan needs selective recomputation.")
    fits: bool = Field(description="Whether the estimated memory per card fits in 90 % of the device.")
    per_card_gb: NonNegative = Field(description="Estimated memory per card of the plan, GB (16 bytes per parameter, see advisor plan parallel).")
    plan: str = Field(description="The plan as text, e.g. 'TP=8 PP=3 DP=1'.")
    reasons: str = Field(description="Why, step by step.")
    current_tp: int | None = Field(None, ge=1, description="tensor_parallel in use (from --context).")
    current_pp: int | None = Field(None, ge=1, description="pipeline_parallel in use (from --context).")
    matches: bool | None = Field(None, description="Whether the TP and PP in use are the planner's (unknown without them).")


class ServiceFact(Fact):
    """A serving run as msServiceProfiler's analysis output records it (MindIE Service): its requests' latencies, its
    batches and its KV cache. One per profile, from the service CSVs diagnosed on their own or found beside a profile
    (``ingest.service``). Percentiles are linear between rows (numpy's default); a statistic whose column the files do
    not have is None."""

    family: ClassVar[str] = "service"
    source: ClassVar[str] = ("msServiceProfiler's analysis output: request.csv (first_token_latency(ms), "
                             "queue_wait_time(ms), execution_time(ms), reply_token_size, start_time(ms)), batch.csv "
                             "(batch_type, batch_size, prefill_batch_size, decode_batch_size, kvcache_usage_rate), "
                             "kvcache.csv (kvcache_usage_rate), forward.csv (batch_type, batch_size) and the *summary.csv "
                             "files (subsequent_token_latency, throughput), each column by any of its names")

    request_count: int = Field(0, ge=0, description="Requests: rows of request.csv.")
    ttft_p50_ms: NonNegative | None = Field(None, description="Median time to first token (first_token_latency), ms: from "
                                            "the request's arrival, its queueing included.")
    ttft_p90_ms: NonNegative | None = Field(None, description="90th percentile of the time to first token, ms.")
    ttft_p99_ms: NonNegative | None = Field(None, description="99th percentile of the time to first token, ms.")
    queue_wait_p50_ms: NonNegative | None = Field(None, description="Median time a request waits to be scheduled "
                                                  "(queue_wait_time), ms.")
    queue_wait_p90_ms: NonNegative | None = Field(None, description="90th percentile of the queue wait, ms.")
    queue_share_of_ttft: Ratio | None = Field(
        None, description="Summed queue wait / summed time to first token over the requests that have both: the part of "
        "the first-token latency spent waiting, not computing (queue / (queue + TTFT) where the queue waits exceed the "
        "latencies: a version whose first-token latency starts at scheduling).")
    tpot_p50_ms: NonNegative | None = Field(None, description="Median time per output token after the first "
                                            "(subsequent_token_latency), ms.")
    tpot_p90_ms: NonNegative | None = Field(None, description="90th percentile of the time per output token, ms.")
    tpot_from: Literal["summary", "requests"] | None = Field(
        None, description="summary: the summary file's subsequent_token_latency (over tokens); requests: per request, "
        "its subsequent_token_latency column, else (end-to-end − first-token latency) / (output tokens − 1), over the "
        "requests of two tokens or more.")
    output_tokens_per_s: NonNegative | None = Field(None, description="Output tokens per second over the run "
                                                    "(throughput): the summary's, else the requests' output tokens over "
                                                    "the span from the first arrival to the last completion.")
    requests_per_s: NonNegative | None = Field(None, description="Completed requests per second over the same span (the "
                                               "summary's request throughput when it has one).")
    duration_s: NonNegative | None = Field(None, description="The span of the requests, s: first arrival to last "
                                           "completion (start_time + execution_time, or end_time).")
    batches: int = Field(0, ge=0, description="Batches scheduled: rows of batch.csv (else of forward.csv).")
    batch_source: Literal["batch", "forward"] | None = Field(None, description="Which file gave the batch sizes.")
    prefill_batch_mean: NonNegative | None = Field(None, description="Mean requests per batch that prefills any "
                                                   "(prefill_batch_size; batch_size of a prefill batch).")
    prefill_batch_p90: NonNegative | None = Field(None, description="90th percentile of the prefill batch size.")
    prefill_batch_max: NonNegative | None = Field(None, description="Largest prefill batch seen.")
    decode_batch_mean: NonNegative | None = Field(None, description="Mean requests per batch that decodes any "
                                                  "(decode_batch_size; batch_size of a decode batch): the sequences "
                                                  "each decode step advances.")
    decode_batch_p90: NonNegative | None = Field(None, description="90th percentile of the decode batch size.")
    decode_batch_max: NonNegative | None = Field(None, description="Largest decode batch seen.")
    max_batch_size: NonNegative | None = Field(None, description="The engine's batch size limit where the files record "
                                               "it (a max_batch_size / maxBatchSize column or summary metric).")
    decode_batch_fill: NonNegative | None = Field(None, description="decode_batch_mean / max_batch_size: how much of "
                                                  "the allowed batch the decode steps use (None without the limit).")
    kv_usage_p50: Ratio | None = Field(None, description="Median KV-cache usage (kvcache_usage_rate, 0..1; a column in "
                                       "percent is read as such).")
    kv_usage_p90: Ratio | None = Field(None, description="90th percentile of the KV-cache usage.")
    kv_usage_max: Ratio | None = Field(None, description="Highest KV-cache usage seen.")
    kv_full_share: Ratio | None = Field(None, description="Share of batches (of kvcache.csv's records, when batch.csv "
                                        "has no usage column) at 95 % KV-cache usage or more.")
    kv_usage_source: Literal["batch", "kvcache"] | None = Field(None, description="Which file gave the KV-cache usage.")


class BottleneckFact(Fact):
    """The verdict on where step time goes; derived by the bottleneck rules, matched by others."""

    family: ClassVar[str] = "bottleneck"
    source: ClassVar[str] = "derived by the bottleneck.* rules from breakdown facts"
    derived: ClassVar[bool] = True

    scope: Literal["rank", "profile"] = Field(description="'rank' or 'profile', as the breakdown it came from.")
    rank: int | None = Field(None, ge=0, description="Rank; absent for the profile verdict.")
    kind: Bottleneck = Field(description="compute, communication, host, io, memory or balanced.")
    ratio: Ratio = Field(description="Share of step time of the deciding component.")


class _Delta(Fact):
    """A measure on the base and the target profile of ``advisor compare`` (per step, mean over ranks)."""

    base_us: Duration = Field(description="Its time per step on BASE, µs.")
    target_us: Duration = Field(description="Its time per step on TARGET, µs.")
    diff_us: Micros = Field(description="target_us − base_us (negative: TARGET is faster), µs.")
    ratio: NonNegative | None = Field(None, description="target_us / base_us; absent when BASE has none of it.")
    share_of_base_step: float = Field(description="diff_us / BASE's step time (negative when TARGET is faster).")


class StepDeltaFact(_Delta):
    """One component of the step breakdown, BASE vs TARGET (advisor compare)."""

    family: ClassVar[str] = "step_delta"
    source: ClassVar[str] = "the profile-wide breakdown facts of BASE and TARGET"

    component: Literal["step_time", "compute", "communication", "free"] = Field(
        description="step_time, compute, communication (not overlapped) or free.")


class OperatorDeltaFact(_Delta):
    """One operator matched across BASE and TARGET (advisor compare), by type on one platform, by class across vendors."""

    family: ClassVar[str] = "operator_delta"
    source: ClassVar[str] = "kernel_details.csv / the Kineto kernels of BASE and TARGET, compute kernels only"

    key: str = Field(description="What was matched: the operator type (same platform) or its class, e.g. matmul, attention.")
    matched_by: Literal["type", "class"] = Field(description="type: identical operator types; class: normalised classes across vendors.")
    base_types: str = Field(description="BASE's operator types under the key (comma-separated, longest first).")
    target_types: str = Field(description="TARGET's operator types under the key.")
    base_count: NonNegative = Field(description="Launches per step on BASE.")
    target_count: NonNegative = Field(description="Launches per step on TARGET.")
    position: int = Field(ge=1, description="1 for the largest regression (diff_us), 2 for the next, …")
    operator_class: str = Field(description="The key's vendor-neutral class, e.g. convolution, matmul (the key itself when matched by class).")
    class_diff_us: Micros = Field(description="target − base of the whole class per step, µs: near zero when a library only "
                                             "swapped kernels of one class for others (cuDNN picking another algorithm).")
    class_share_of_base_step: float = Field(description="class_diff_us / BASE's step time.")


class CollectiveDeltaFact(_Delta):
    """One collective type (AllReduce, AllGather, …) across BASE and TARGET (advisor compare)."""

    family: ClassVar[str] = "collective_delta"
    source: ClassVar[str] = "communication kernels (hcom_*, nccl*) of BASE and TARGET"

    collective: str = Field(description="allreduce, allgather, reducescatter, broadcast, alltoall, send, recv or reduce.")


class MemoryDeltaFact(Fact):
    """Peak device memory, BASE vs TARGET (advisor compare; the largest rank of each)."""

    family: ClassVar[str] = "memory_delta"
    source: ClassVar[str] = "the memory facts of BASE and TARGET"

    base_peak_mb: NonNegative = Field(description="Peak reserved memory on BASE, MB.")
    target_peak_mb: NonNegative = Field(description="Peak reserved memory on TARGET, MB.")
    diff_mb: float = Field(description="target_peak_mb − base_peak_mb, MB.")
    ratio: NonNegative | None = Field(None, description="target_peak_mb / base_peak_mb.")


FACT_FAMILIES: dict[str, type[Fact]] = {
    model.family: model
    for model in (
        ContextFact,
        EnvironmentFact,
        StepFact,
        BreakdownFact,
        OperatorFact,
        SequenceFact,
        ChainFact,
        Mc2Fact,
        ContentionFact,
        CommunicationFact,
        TransportFact,
        LinkFact,
        StragglerFact,
        MemoryFact,
        AllocationFact,
        HostFact,
        GpuFact,
        CaptureFact,
        PhaseFact,
        DataLoaderFact,
        IdleFact,
        ApiFact,
        SpreadFact,
        ModelFact,
        LayoutFact,
        PipelineFact,
        StageFact,
        ServiceFact,
        BottleneckFact,
        StepDeltaFact,
        OperatorDeltaFact,
        CollectiveDeltaFact,
        MemoryDeltaFact,
    )
}
