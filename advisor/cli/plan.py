"""``advisor plan``: concrete settings computed from shapes, sizes and measured times (advisor/planners/)."""

from __future__ import annotations

import math
from typing import Annotated, Optional

import typer

from advisor import errors
from advisor.cli.options import command
from advisor.cli.output import guard

plan_app = typer.Typer(help="""Planners: concrete settings computed from shapes, sizes and measured times.

\b
Examples:
  advisor plan mc2 --m 4096 --k 3072 --n 8192 --matmul-us 803 --comm-us 1071
  advisor plan hccl-buffsize --micro-batch 4 --seq-len 8192 --hidden 8192
  advisor plan parallel --params-b 70 --memory-gb 64 --nodes 4
""", no_args_is_help=True)
JsonOption = Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")]
# Every option is bounded well beyond a real job, so what is computed from it stays finite and small enough to print
_ROWS = 1 << 20  # a matrix dimension
_MICROSECONDS = 1e9  # a measured time (over 16 minutes)
_CARDS = 1 << 20  # ranks, nodes


def _shown(bound: float) -> str:
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def _bounded(low: float, high: float):
    """A float option's parser: a finite number from ``low`` to ``high`` (click's ranges let nan through)."""
    def parse(text: str | float) -> float:
        try:
            value = float(text)
        except ValueError:
            raise typer.BadParameter(f"{text!r} is not a number.") from None
        if not math.isfinite(value):
            raise typer.BadParameter(f"{text!r} is not a finite number.")
        if not low <= value <= high:
            raise typer.BadParameter(f"{value:g} is not in the range {_shown(low)} to {_shown(high)}.")
        return value
    return parse


@command(plan_app, "mc2")
def plan_mc2_command(
    m: Annotated[int, typer.Option("--m", metavar="ROWS", min=1, max=_ROWS, help="Rows of the left matrix [M, K].")],
    k: Annotated[int, typer.Option("--k", metavar="K", min=1, max=_ROWS, help="The shared axis K.")],
    n: Annotated[int, typer.Option("--n", metavar="COLS", min=1, max=_ROWS, help="Columns of the right matrix [K, N].")],
    matmul_us: Annotated[float, typer.Option("--matmul-us", metavar="US", parser=_bounded(0.001, _MICROSECONDS), help="Measured un-fused MatMul time of the whole M, µs: decides the bound (and CostMM, proportional to the rows, without --matmul-point).")],
    comm_us: Annotated[Optional[float], typer.Option("--comm-us", metavar="US", parser=_bounded(0.001, _MICROSECONDS), help="Measured un-fused AllReduce time of the whole M, µs: decides the bound (and scales the MC² article's curve without --comm-point).")] = None,
    dtype: Annotated[str, typer.Option("--dtype", metavar="DTYPE", help="fp16, bf16, fp32 or int8.")] = "fp16",
    ranks: Annotated[int, typer.Option("--ranks", metavar="N", min=2, max=_CARDS, help="Ranks in the communication group (TilingData rankDim).")] = 8,
    factor: Annotated[float, typer.Option("--factor", metavar="X", parser=_bounded(1, 10), help="Contention factor: t0 = CostMM(m0)·X, t1 = CostComm(m0)·X, and every block's times in the predicted fused time.")] = 1.15,
    short: Annotated[Optional[int], typer.Option("--short", metavar="ROWS", min=1, max=_ROWS, help="Override the short block length.")] = None,
    matmul_point: Annotated[Optional[list[str]], typer.Option("--matmul-point", metavar="ROWS=US", help="A block's measured un-fused MatMul time (repeatable, e.g. 256=50.2 512=100.4 …): CostMM through these points instead of proportional to the rows.")] = None,
    comm_point: Annotated[Optional[list[str]], typer.Option("--comm-point", metavar="ROWS=US", help="A block's measured un-fused AllReduce time (repeatable, e.g. 256=107.5 512=170.2 …): CostComm through these points instead of the MC² article's fitted curve.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Tile a MatmulAllReduce along M so MatMul and AllReduce overlap (the tiling procedure of Ascend's MC²
    best-practice guide), and map the tiles onto its TilingData (rankDim, tileM, tileNum, tailM, tailNum).

    Measured points are joined by straight lines through 0 rows = 0 µs; past the longest measured block the
    last segment's line continues.

    \b
    Examples:
      advisor plan mc2 --m 4096 --k 3072 --n 8192 --matmul-us 803 --comm-us 1071
      advisor plan mc2 --m 4096 --k 3072 --n 8192 --matmul-us 803 --comm-point 512=170 --comm-point 1024=279
    """
    with guard(False):
        from advisor.planners.mc2 import Point, parse_points, plan_mc2

        def points(texts: list[str] | None, option: str) -> list[Point]:
            return parse_points(texts or [], option, max_rows=_ROWS, max_us=_MICROSECONDS)

        plan = _planned(lambda: plan_mc2(m, k, n, dtype=dtype, ranks=ranks, matmul_us=matmul_us, comm_us=comm_us,
                                         factor=factor, short=short,
                                         matmul_points=points(matmul_point, "--matmul-point"),
                                         comm_points=points(comm_point, "--comm-point")))
        if as_json:
            _print_json({**_fields(plan), "tiling": plan.tiling, "predicted_gain_us": plan.predicted_gain_us,
                         "predicted_gain_ratio": plan.predicted_gain_ratio})
            return
        typer.echo(f"bound: {plan.bound} (MatMul {matmul_us:,.0f} µs, AllReduce {plan.serial_us - matmul_us:,.0f} µs)")
        typer.echo(f"CostMM: {plan.matmul_curve}")
        typer.echo(f"CostComm: {plan.comm_curve}")
        typer.echo("short-block candidates: " + ", ".join(f"{k}={v}" for k, v in plan.candidates.items())
                   + f" → m0 = {'max(a, b, c)' if short is None else '--short'} = {plan.short_initial}")
        typer.echo(f"short block: t0 = CostMM(m0) × {plan.factor:g} = {plan.short_mm_us:,.1f} µs, "
                   f"t1 = CostComm(m0) × {plan.factor:g} = {plan.short_comm_us:,.1f} µs")
        balance = "CostMM(m1) = t1" if plan.bound == "communication" else "CostComm(m1) = t0"
        typer.echo(f"long block before alignment: {plan.long_exact:,.1f} rows ({balance})")
        typer.echo(f"tiles: {{{', '.join(map(str, plan.tiles))}}}")
        typer.echo("TilingData: " + ", ".join(f"{name} = {value}" for name, value in plan.tiling.items()))
        typer.echo(f"predicted fused time: {plan.predicted_fused_us:,.0f} µs of {plan.serial_us:,.0f} µs serial "
                   f"(gain {plan.predicted_gain_us:,.0f} µs, {plan.predicted_gain_ratio:.1%}) with every block's times "
                   f"× {plan.factor:g}; measure it, splitting inflates blocks")
        for warning in plan.warnings:
            typer.echo(f"warning: {warning}")
        for note in plan.notes:
            typer.echo(f"note: {note}")


@command(plan_app, "hccl-buffsize")
def plan_hccl_command(
    micro_batch: Annotated[int, typer.Option("--micro-batch", metavar="N", min=1, max=1 << 20, help="Samples per micro-batch per card.")],
    sequence_length: Annotated[int, typer.Option("--seq-len", metavar="N", min=1, max=1 << 30, help="Tokens per sample.")],
    hidden_size: Annotated[int, typer.Option("--hidden", metavar="N", min=1, max=1 << 20, help="Hidden size.")],
    dtype: Annotated[str, typer.Option("--dtype", metavar="DTYPE", help="fp16, bf16, fp32, fp8 or int8.")] = "bf16",
    current: Annotated[int, typer.Option("--current", metavar="MB", min=1, max=1 << 20, help="The HCCL_BUFFSIZE in use, MB.")] = 200,
    communicators: Annotated[Optional[int], typer.Option("--communicators", metavar="N", min=1, max=1024, help="Communication groups per rank.")] = None,
    as_json: JsonOption = False,
) -> None:
    """HCCL_BUFFSIZE from the size of one micro-batch activation.

    \b
    Example:
      advisor plan hccl-buffsize --micro-batch 4 --seq-len 8192 --hidden 8192
    """
    with guard(False):
        from advisor.planners.hccl import DTYPE_BYTES, plan_buffsize

        if dtype not in DTYPE_BYTES:
            raise errors.InputError(f"unknown dtype {dtype!r}; one of {', '.join(DTYPE_BYTES)}")
        plan = _planned(lambda: plan_buffsize(micro_batch, sequence_length, hidden_size, DTYPE_BYTES[dtype], current, communicators))
        if as_json:
            _print_json(_fields(plan))
            return
        typer.echo(f"HCCL_BUFFSIZE={plan.recommended_mb}")
        typer.echo(plan.explain())


@command(plan_app, "parallel")
def plan_parallel_command(
    params_b: Annotated[float, typer.Option("--params-b", metavar="BILLIONS", parser=_bounded(1e-6, 1_000_000), help="Model parameters, billions.")],
    memory_gb: Annotated[float, typer.Option("--memory-gb", metavar="GB", parser=_bounded(0.001, 1 << 20), help="Device memory per card, GB.")],
    cards_per_node: Annotated[int, typer.Option("--cards-per-node", metavar="N", min=1, max=1024, help="NPUs per server.")] = 8,
    nodes: Annotated[int, typer.Option("--nodes", metavar="N", min=1, max=_CARDS, help="Servers available.")] = 1,
    activation_gb: Annotated[float, typer.Option("--activation-gb", metavar="GB", parser=_bounded(0, 1 << 20), help="Activations of one micro-batch without parallelism, GB.")] = 0.0,
    as_json: JsonOption = False,
) -> None:
    """TP, PP, DP, ZeRO-1 and recomputation from model size and hardware: tensor parallelism within a server
    first, then pipeline stages across servers, data parallelism with what is left.

    \b
    Example:
      advisor plan parallel --params-b 70 --memory-gb 64 --nodes 4
    """
    with guard(False):
        from advisor.planners.parallel import plan_parallel

        plan = _planned(lambda: plan_parallel(params_b, memory_gb, cards_per_node, nodes, activation_gb))
        if as_json:
            _print_json({**_fields(plan), "layout": _fields(plan.layout)})
            return
        layout = plan.layout
        typer.echo(f"TP={layout.tp} PP={layout.pp} DP={layout.dp} ZeRO-1={'on' if layout.zero1 else 'off'} "
                   f"recompute={'on' if layout.recompute else 'off'}: {plan.per_card_gb:,.1f} GB per card of "
                   f"{plan.usable_gb:,.1f} GB usable{'' if plan.fits else ' (does not fit)'}")
        for reason in plan.reasons:
            typer.echo(f"- {reason}")


def _planned(build):
    try:
        return build()
    except ValueError as exc:
        raise errors.InputError(str(exc)) from exc


def _fields(value) -> dict:
    import dataclasses

    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


def _print_json(data: dict) -> None:
    from advisor.jsontext import json_text

    typer.echo(json_text(data, default=_fields), nl=False)
