"""msServiceProfiler's analysis output (MindIE Service) in the shape its documentation gives, from a simulated run.

The shape is that of shared/formats/inference.md, "Service-level data (msServiceProfiler, MindIE)": ``request.csv``
(per request: ``first_token_latency(ms)``, ``queue_wait_time(ms)`` …), ``batch.csv`` (``batch_type`` prefill/decode,
``batch_size``, ``prefill_batch_size``, ``decode_batch_size``, ``kvcache_usage_rate`` …), ``kvcache.csv``,
``forward.csv`` and summary files with ``subsequent_token_latency`` and throughput. The other columns (the request id,
start times, token counts, end-to-end time, the KV-cache events' names) are the kind such output carries; the
summaries are metric tables (a row per metric, its statistics in columns) and a metric/value table. The batch-size limit
is written as a ``max_batch_size`` row of ``service_summary.csv`` — one of the spellings advisor reads where a version
records it.

The numbers come from a small simulation of a continuous-batching engine as MindIE and vLLM run one: requests arrive as
a Poisson process; each iteration either prefills the waiting requests that fit (prefill first, first come first
served, within the batch-size limit, a prefill batch limit, a prefill token budget and the free KV-cache blocks) or
advances every running request by one token; a request that needs a new KV block when none is free is preempted
(its blocks freed, recomputed later), as vLLM does. Iteration times grow with the tokens prefilled and the sequences
decoded. ``simulate`` returns every request's and batch's figures, so tests compare advisor's facts with what was
written; ``write_output`` writes the files. Run as a script to rewrite the checked-in fixture:

    .venv/bin/python tests/service_shapes.py tests/fixtures/inference/msserviceprofiler
"""

from __future__ import annotations

import csv
import math
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

EPOCH_MS = 1_764_230_400_000.0  # 2025-11-27 08:00 UTC: start times are wall-clock milliseconds


@dataclass
class Request:
    rid: int
    arrival_ms: float
    input_tokens: int
    output_tokens: int
    admitted_ms: float | None = None  # when its (last) prefill started
    first_token_ms: float | None = None
    token_ms: list[float] = field(default_factory=list)  # when each output token was produced
    blocks: int = 0
    generated: int = 0
    preempted: int = 0

    @property
    def queue_ms(self) -> float:
        return self.admitted_ms - self.arrival_ms

    @property
    def ttft_ms(self) -> float:
        return self.first_token_ms - self.arrival_ms

    @property
    def e2e_ms(self) -> float:
        return self.token_ms[-1] - self.arrival_ms


@dataclass
class Batch:
    start_ms: float
    end_ms: float
    phase: str
    prefill: int
    decode: int
    kv_usage: float


@dataclass
class ServiceRun:
    requests: list[Request]
    batches: list[Batch]
    kv_events: list[tuple[int, float, str, int, float]]  # rid, time, name, free blocks, usage
    max_batch_size: int
    total_blocks: int

    def column(self, name: str) -> np.ndarray:
        """A request figure for every request: queue_ms, ttft_ms, e2e_ms, input_tokens, output_tokens."""
        return np.array([getattr(r, name) for r in self.requests], dtype=float)

    def token_gaps(self) -> np.ndarray:
        """Every output token's time after the one before it, ms (what subsequent_token_latency measures)."""
        return np.concatenate([np.diff(r.token_ms) for r in self.requests if len(r.token_ms) > 1])


def simulate(*, requests: int = 300, rate_per_s: float = 3.3, max_batch_size: int = 200, max_prefill_batch: int = 16,
             max_prefill_tokens: int = 8192, total_blocks: int = 360, block_tokens: int = 128,
             input_median: float = 900.0, output_median: float = 250.0, seed: int = 27) -> ServiceRun:
    """A serving run of ``requests`` requests arriving at ``rate_per_s`` on an engine with these limits."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1000.0 / rate_per_s, requests))
    inputs = np.clip(rng.lognormal(math.log(input_median), 0.6, requests), 32, 6000).astype(int)
    outputs = np.clip(rng.lognormal(math.log(output_median), 0.5, requests), 8, 1024).astype(int)
    everyone = [Request(i, float(a), int(n), int(m)) for i, (a, n, m) in enumerate(zip(arrivals, inputs, outputs))]
    pending = deque(everyone)
    waiting: deque[Request] = deque()
    running: list[Request] = []
    batches: list[Batch] = []
    events: list[tuple[int, float, str, int, float]] = []
    free = total_blocks
    now = 0.0
    done = 0

    def usage() -> float:
        return (total_blocks - free) / total_blocks

    def note(request: Request, name: str, at: float) -> None:
        events.append((request.rid, at, name, free, usage()))

    while done < requests:
        while pending and pending[0].arrival_ms <= now:
            waiting.append(pending.popleft())
        if not waiting and not running:
            now = pending[0].arrival_ms
            continue
        admitted: list[Request] = []
        tokens = 0
        while waiting and len(running) + len(admitted) < max_batch_size and len(admitted) < max_prefill_batch:
            candidate = waiting[0]
            context = candidate.input_tokens + candidate.generated
            need = math.ceil((context + 1) / block_tokens)
            if tokens + context > max_prefill_tokens and admitted or need > free:
                break
            waiting.popleft()
            free -= need
            candidate.blocks = need
            if candidate.admitted_ms is None:  # a preempted request's queue wait is its first
                candidate.admitted_ms = now
            tokens += context
            admitted.append(candidate)
            note(candidate, "Allocate", now)
        if admitted:
            duration = 18.0 + 0.055 * tokens + rng.normal(0, 0.6)
            end = now + duration
            for request in admitted:
                if request.first_token_ms is None:
                    request.first_token_ms = end
                    request.token_ms.append(end)
                    request.generated = 1
            running.extend(admitted)
            batches.append(Batch(now, end, "prefill", len(admitted), 0, usage()))
        else:
            duration = 21.0 + 0.22 * len(running) + rng.normal(0, 0.4)
            end = now + duration
            for request in list(running):
                if request not in running:
                    continue
                if (request.input_tokens + request.generated) % block_tokens == 0:  # the next token starts a block
                    while free == 0 and running:
                        victim = max(running, key=lambda r: r.arrival_ms)
                        running.remove(victim)
                        free += victim.blocks
                        victim.blocks = 0
                        victim.preempted += 1
                        waiting.appendleft(victim)
                        note(victim, "Free", now)
                    if request not in running:
                        continue
                    free -= 1
                    request.blocks += 1
                    note(request, "AppendSlot", now)
            decoded = list(running)
            for request in decoded:
                request.generated += 1
                request.token_ms.append(end)
            batches.append(Batch(now, end, "decode", 0, len(decoded), usage()))
            for request in decoded:
                if request.generated >= request.output_tokens:
                    running.remove(request)
                    free += request.blocks
                    request.blocks = 0
                    done += 1
                    note(request, "Free", end)
        now = end
    return ServiceRun(everyone, batches, events, max_batch_size, total_blocks)


def write_output(directory: Path, run: ServiceRun, *, limit_in_summary: bool = True) -> Path:
    """The run as msServiceProfiler's analysis output in ``directory`` (created); returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = [[r.rid, _ms(EPOCH_MS + r.arrival_ms), r.input_tokens, len(r.token_ms), _ms(r.e2e_ms), _ms(r.queue_ms),
             _ms(r.ttft_ms)] for r in run.requests]
    _write(directory / "request.csv", ["http_rid", "start_time(ms)", "recv_token_size", "reply_token_size",
                                       "execution_time(ms)", "queue_wait_time(ms)", "first_token_latency(ms)"], rows)
    rows = [[_ms(EPOCH_MS + b.start_ms), _ms(EPOCH_MS + b.end_ms), b.prefill + b.decode, b.phase, b.prefill, b.decode,
             f"{b.kv_usage:.6f}", _ms(b.end_ms - b.start_ms)] for b in run.batches]
    _write(directory / "batch.csv", ["start_time(ms)", "end_time(ms)", "batch_size", "batch_type", "prefill_batch_size",
                                     "decode_batch_size", "kvcache_usage_rate", "during_time(ms)"], rows)
    rows = [[rid, _ms(EPOCH_MS + at), name, left, f"{used:.6f}"] for rid, at, name, left, used in run.kv_events]
    _write(directory / "kvcache.csv", ["rid", "timestamp(ms)", "name", "device_kvcache_left", "kvcache_usage_rate"], rows)
    rows = [["forward", _ms(EPOCH_MS + b.start_ms + 1.5), _ms(EPOCH_MS + b.end_ms - 0.5), _ms(b.end_ms - b.start_ms - 2.0),
             "0.000" if i == 0 else _ms(b.start_ms - run.batches[i - 1].end_ms + 2.0), b.prefill + b.decode, b.phase, i, 0]
            for i, b in enumerate(run.batches)]
    _write(directory / "forward.csv", ["name", "start_time(ms)", "end_time(ms)", "during_time(ms)", "bubble_time(ms)",
                                       "batch_size", "batch_type", "forward_iter", "dp_rank"], rows)
    stats = ["Metric", "Average", "Max", "Min", "P50", "P90", "P99"]
    _write(directory / "request_summary.csv", stats, [
        _stat_row("first_token_latency(ms)", run.column("ttft_ms")),
        _stat_row("subsequent_token_latency(ms)", run.token_gaps()),
        _stat_row("queue_wait_time(ms)", run.column("queue_ms")),
        _stat_row("execution_time(ms)", run.column("e2e_ms")),
        _stat_row("input_token_num", run.column("input_tokens")),
        _stat_row("generated_token_num", np.array([len(r.token_ms) for r in run.requests], dtype=float)),
    ])
    prefill = np.array([b.prefill for b in run.batches if b.prefill], dtype=float)
    decode = np.array([b.decode for b in run.batches if b.decode], dtype=float)
    _write(directory / "batch_summary.csv", stats, [
        _stat_row("prefill_batch_size", prefill), _stat_row("decode_batch_size", decode),
        _stat_row("kvcache_usage_rate", np.array([b.kv_usage for b in run.batches]))])
    span_s = service_span_s(run)
    tokens = sum(len(r.token_ms) for r in run.requests)
    rows = [["total_requests", len(run.requests)], ["duration(s)", f"{span_s:.3f}"],
            ["request_throughput(req/s)", f"{len(run.requests) / span_s:.4f}"],
            ["output_token_throughput(tokens/s)", f"{tokens / span_s:.4f}"]]
    if limit_in_summary:
        rows.append(["max_batch_size", run.max_batch_size])
    _write(directory / "service_summary.csv", ["Metric", "Value"], rows)
    return directory


def service_span_s(run: ServiceRun) -> float:
    """First arrival to last completion, s."""
    return (max(r.token_ms[-1] for r in run.requests) - min(r.arrival_ms for r in run.requests)) / 1000.0


def _stat_row(name: str, values: np.ndarray) -> list:
    return [name, _ms(values.mean()), _ms(values.max()), _ms(values.min())] + [_ms(np.percentile(values, q))
                                                                              for q in (50, 90, 99)]


def _ms(value: float) -> str:
    return f"{value:.3f}"


def _write(path: Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


if __name__ == "__main__":
    write_output(Path(sys.argv[1]), simulate())
