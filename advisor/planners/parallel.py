"""Parallel layout from model size and hardware (the Ascend large-model performance-analysis guide §1 as a decision table; seed-formulas.md §C).

Order of decisions: tensor parallelism first, never beyond the cards of one node (its collectives need
the fast intra-node links); then pipeline parallelism across nodes with as few stages as fit (every
stage adds pipeline bubbles); data parallelism over what is left; ZeRO-1 and selective recomputation
when the model still does not fit on the hardware available.

The Ascend large-model performance-analysis guide gives no memory formula, so this planner uses the usual estimate for mixed-precision Adam:
16 bytes per parameter (2 weights + 2 gradients + 12 fp32 master weights and moments), divided by
TP·PP; ZeRO-1 shards the 12 optimizer bytes over DP; activations per card (``activation_gb``, for one
micro-batch without parallelism, 0 when unknown) divide by TP, and selective recomputation keeps a fifth
of them. 10 % of device memory is held back for fragmentation, HCCL buffers and the runtime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

BYTES_PER_PARAM = 16.0
OPTIMIZER_BYTES = 12.0
RECOMPUTE_KEEPS = 0.2
HEADROOM = 0.9


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    dp: int
    zero1: bool = False
    recompute: bool = False


@dataclass
class ParallelPlan:
    layout: Layout
    per_card_gb: float
    usable_gb: float
    fits: bool
    reasons: list[str] = field(default_factory=list)
    nodes_needed: int | None = None


def per_card_gb(params_b: float, layout: Layout, activation_gb: float = 0.0) -> float:
    """Estimated device memory per card (GB) for a model of ``params_b`` billion parameters."""
    optimizer = OPTIMIZER_BYTES / layout.dp if layout.zero1 else OPTIMIZER_BYTES
    states = params_b * (BYTES_PER_PARAM - OPTIMIZER_BYTES + optimizer) / (layout.tp * layout.pp)
    activations = activation_gb / layout.tp * (RECOMPUTE_KEEPS if layout.recompute else 1.0)
    return states + activations


def plan_parallel(
    params_b: float, memory_gb: float, cards_per_node: int, nodes: int, activation_gb: float = 0.0
) -> ParallelPlan:
    """Walk the decision table and return the first layout that fits, with the reason for each choice."""
    if min(params_b, memory_gb, cards_per_node, nodes) <= 0 or activation_gb < 0:
        raise ValueError("model size, memory, cards per node and nodes must be positive")
    usable = memory_gb * HEADROOM
    cards = cards_per_node * nodes
    reasons: list[str] = []

    def fits(layout: Layout) -> bool:
        return per_card_gb(params_b, layout, activation_gb) <= usable

    def done(layout: Layout, ok: bool = True, needed: int | None = None) -> ParallelPlan:
        return ParallelPlan(layout, per_card_gb(params_b, layout, activation_gb), usable, ok, reasons, needed)

    if fits(Layout(1, 1, cards)):
        reasons.append(f"the model fits on one card ({per_card_gb(params_b, Layout(1, 1, cards), activation_gb):.1f} of "
                       f"{usable:.1f} GB usable): pure data parallelism over all {cards} cards")
        return done(Layout(1, 1, cards))
    tp_choices = [t for t in (2**i for i in range(1, 11)) if t <= cards_per_node] or [1]
    for tp in tp_choices:
        if fits(Layout(tp, 1, cards // tp)):
            reasons.append(f"TP={tp}: the smallest tensor-parallel size within one node that fits")
            reasons.append(_dp_reason(tp, 1, cards // tp, cards))
            return done(Layout(tp, 1, cards // tp))
    tp = tp_choices[-1]
    reasons.append(f"TP={tp}: tensor parallelism at the cards of one node is not enough, and it never crosses nodes")
    for pp in range(2, nodes + 1):
        layout = Layout(tp, pp, cards // (tp * pp))
        if fits(layout):
            reasons.append(f"PP={pp}: the fewest pipeline stages across nodes that fit (each stage adds bubbles)")
            reasons.append(_dp_reason(tp, pp, layout.dp, cards))
            return done(layout)
    for recompute in (False, True):
        for pp in range(1, nodes + 1):
            dp = max(cards // (tp * pp), 1)
            layout = Layout(tp, pp, dp, zero1=dp > 1, recompute=recompute)
            if (layout.zero1 or recompute) and fits(layout):
                why = " and ".join(w for w, on in (("ZeRO-1 (optimizer states sharded over DP)", layout.zero1),
                                                   ("selective recomputation", recompute)) if on)
                reasons.append(f"TP={tp} with up to {nodes} pipeline stage(s) does not fit on {nodes} node(s): {why} "
                               f"makes PP={pp}, DP={dp} fit")
                return done(layout)
    pp = nodes
    dp = max(cards // (tp * pp), 1)
    layout = Layout(tp, pp, dp, dp > 1, True)
    needed = _nodes_needed(params_b, usable, tp, cards_per_node, activation_gb)
    reasons.append(f"even TP={tp}, PP={pp} with recomputation{' and ZeRO-1' if dp > 1 else ''} need {per_card_gb(params_b, layout, activation_gb):.1f} GB "
                   f"per card of {usable:.1f} GB: " + (f"use more nodes (about {needed}) or a smaller model" if needed else
                                                       "the activations alone fill a card, so no number of nodes fits: "
                                                       "use a smaller micro-batch or sequence"))
    return done(layout, ok=False, needed=needed)


def _dp_reason(tp: int, pp: int, dp: int, cards: int) -> str:
    """Why DP is what it is: the replicas of TP×PP cards that fit in ``cards``, and the cards left over if any."""
    used = tp * pp * dp
    if used == cards:
        return f"DP={dp}: data parallelism over the remaining cards ({dp} replica(s) of TP×PP = {tp * pp} cards)"
    return (f"DP={dp}: {dp} replica(s) of TP×PP = {tp * pp} cards use {used} of the {cards} cards; the other "
            f"{cards - used} stay idle (add a pipeline stage, or give them to another job)")


def _nodes_needed(params_b: float, usable: float, tp: int, cards_per_node: int, activation_gb: float) -> int | None:
    """Nodes for a TP×PP layout (PP = nodes) that fits without ZeRO (one replica); None when none can (the
    activations alone fill a card)."""
    per_node_states = params_b * BYTES_PER_PARAM / tp
    room = usable - activation_gb / tp * RECOMPUTE_KEEPS
    return math.ceil(per_node_states / room) if room > 0 else None
