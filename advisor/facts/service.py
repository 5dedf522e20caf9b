"""The service family: a serving run's latencies, batches and KV cache, from msServiceProfiler's analysis output.

Computed once per profile (``facts.reduce``) from the service tables ``ingest.service`` read with the profile, as pure
functions of those tables. What an inference engineer reads from them: the time to first token and how much of it is
queueing, the time per output token, the throughput, the sizes of the prefill and decode batches against the engine's
limit, and how full the KV cache runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from advisor.facts.models import Fact, ServiceFact
from advisor.ingest.service import ServiceData, ServiceSummary, ServiceTable

if TYPE_CHECKING:
    from advisor.facts.reduce import ProfileScope

KV_FULL = 0.95  # KV-cache usage from which a batch counts as running with the cache full
_TPOT = ("subsequent_token_latency", "tpot", "time_per_output_token", "decode_token_latency")
_TOKEN_THROUGHPUT = ("output_token_throughput", "generate_token_throughput", "output_throughput", "token_throughput",
                     "throughput", "output_tokens_per_second", "generated_tokens_per_second")
_REQUEST_THROUGHPUT = ("request_throughput", "requests_per_second", "qps", "req_throughput")
_BATCH_LIMIT = ("max_batch_size", "maxbatchsize", "max_num_seqs")
_P50 = ("p50", "median")
_P90 = ("p90",)
_VALUE = ("value", "average")

Shown = Callable[[Path], str]


def service_facts(scope: ProfileScope) -> list[Fact]:
    """The profile's service fact, when service-level data was read with it."""
    data = scope.profile.service
    if data is None:
        return []
    fact = service_fact(data, scope.profile.shown)
    return [fact] if fact is not None else []


def service_fact(data: ServiceData, show: Shown) -> ServiceFact | None:
    """The service fact of ``data`` (None when its files give no statistic at all)."""
    sources: list[str] = []
    values: dict[str, object] = {}
    values.update(_request_values(data.request, show, sources))
    values.update(_tpot(data, show, sources))
    values.update(_throughput(data, values.pop("_span_s", None), values.pop("_output_tokens", None), show, sources))
    values.update(_batch_values(data, show, sources))
    values.update(_kv_values(data, show, sources))
    if not any(v is not None for v in values.values()) and not values.get("request_count"):
        return None
    return ServiceFact(id="service", sources=sources, **values)


def _request_values(table: ServiceTable | None, show: Shown, sources: list[str]) -> dict[str, object]:
    if table is None:
        return {}
    ttft, queue = table.get("ttft_ms"), table.get("queue_ms")
    used = [name for name in ("ttft_ms", "queue_ms") if table.get(name) is not None]
    values: dict[str, object] = {"request_count": table.rows}
    if ttft is not None:
        values.update(ttft_p50_ms=_pct(ttft, 50), ttft_p90_ms=_pct(ttft, 90), ttft_p99_ms=_pct(ttft, 99))
    if queue is not None:
        values.update(queue_wait_p50_ms=_pct(queue, 50), queue_wait_p90_ms=_pct(queue, 90))
    if ttft is not None and queue is not None:
        both = np.isfinite(ttft) & np.isfinite(queue)
        waited, latency = float(queue[both].sum()), float(ttft[both].sum())
        if latency > 0:
            share = waited / latency if waited <= latency else waited / (waited + latency)
            values["queue_share_of_ttft"] = min(share, 1.0)
    span = _span_s(table)
    if span is not None:
        values["duration_s"] = span
        used += [name for name in ("start_ms", "end_ms", "e2e_ms") if table.get(name) is not None]
    values["_span_s"] = span
    tokens = table.get("output_tokens")
    known = tokens is not None and np.isfinite(tokens).any()
    values["_output_tokens"] = float(np.nansum(tokens)) * table.stride if known else None  # a sample: scaled up
    sources.append(_source(show, table, used))
    return values


def _span_s(table: ServiceTable) -> float | None:
    """First arrival to last completion, s (completion: end_time, else start_time + execution_time)."""
    start = table.get("start_ms")
    if start is None:
        return None
    end = table.get("end_ms")
    if end is None:
        e2e = table.get("e2e_ms")
        if e2e is None:
            return None
        end = start + e2e
    first, last = _finite(start), _finite(end)
    if not first.size or not last.size:
        return None
    span = (float(last.max()) - float(first.min())) / 1000.0
    return span if span > 0 else None


def _tpot(data: ServiceData, show: Shown, sources: list[str]) -> dict[str, object]:
    found = _metric(data.summaries, _TPOT)
    if found is not None:
        summary, metric, stats = found
        p50, p90 = _stat(stats, _P50), _stat(stats, _P90)
        if p50 is not None or p90 is not None:
            sources.append(f"{show(summary.path)}[{summary.written[metric]}]")
            return {"tpot_p50_ms": p50, "tpot_p90_ms": p90, "tpot_from": "summary"}
    table = data.request
    if table is None:
        return {}
    per_request = table.get("tpot_ms")
    if per_request is None:
        e2e, ttft, tokens = table.get("e2e_ms"), table.get("ttft_ms"), table.get("output_tokens")
        if e2e is None or ttft is None or tokens is None:
            return {}
        with np.errstate(invalid="ignore", divide="ignore"):
            usable = (tokens >= 2) & (e2e >= ttft)
            per_request = np.where(usable, (e2e - ttft) / (tokens - 1), np.nan)
    if not np.isfinite(per_request).any():
        return {}
    return {"tpot_p50_ms": _pct(per_request, 50), "tpot_p90_ms": _pct(per_request, 90), "tpot_from": "requests"}


def _throughput(data: ServiceData, span: float | None, tokens: float | None, show: Shown, sources: list[str]
                ) -> dict[str, object]:
    values: dict[str, object] = {}
    for field, names in (("output_tokens_per_s", _TOKEN_THROUGHPUT), ("requests_per_s", _REQUEST_THROUGHPUT)):
        found = _metric(data.summaries, names)
        if found is not None and (value := _stat(found[2], _VALUE)) is not None:
            values[field] = value
            sources.append(f"{show(found[0].path)}[{found[0].written[found[1]]}]")
    if span is not None:
        if "output_tokens_per_s" not in values and tokens is not None:
            values["output_tokens_per_s"] = tokens / span
        if "requests_per_s" not in values and data.request is not None:
            values["requests_per_s"] = data.request.rows / span
    return values


def _batch_values(data: ServiceData, show: Shown, sources: list[str]) -> dict[str, object]:
    values: dict[str, object] = {}
    table, source = (data.batch, "batch") if _has_sizes(data.batch) else (data.forward, "forward")
    if _has_sizes(table):
        assert table is not None
        prefill, decode = _phase_sizes(table)
        values.update(batches=table.rows, batch_source=source)
        for phase, sizes in (("prefill", prefill), ("decode", decode)):
            kept = sizes[np.isfinite(sizes) & (sizes > 0)]
            if kept.size:
                values.update({f"{phase}_batch_mean": float(kept.mean()), f"{phase}_batch_p90": _pct(kept, 90),
                               f"{phase}_batch_max": float(kept.max())})
        sources.append(_source(show, table, [n for n in ("phase", "batch_size", "prefill_batch_size",
                                                         "decode_batch_size") if table.get(n) is not None]))
    limit = _batch_limit(data, show, sources)
    if limit is not None:
        values["max_batch_size"] = limit
        mean = values.get("decode_batch_mean")
        if isinstance(mean, float):
            values["decode_batch_fill"] = mean / limit
    return values


def _has_sizes(table: ServiceTable | None) -> bool:
    return table is not None and any(table.get(n) is not None for n in ("batch_size", "prefill_batch_size",
                                                                         "decode_batch_size"))


def _phase_sizes(table: ServiceTable) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the requests it prefills and those it decodes: prefill_batch_size and decode_batch_size where the file
    has them, else batch_size split by the batch type (a mixed batch's split unknown: NaN)."""
    rows = len(next(iter(table.columns.values())))
    size = table.get("batch_size")
    phase = table.get("phase")
    if size is None or phase is None:
        by_type = (np.full(rows, np.nan), np.full(rows, np.nan))
    else:
        by_type = tuple(np.where(phase == name, size, np.where((phase == other), 0.0, np.nan))
                        for name, other in (("prefill", "decode"), ("decode", "prefill")))
    prefill = table.get("prefill_batch_size")
    decode = table.get("decode_batch_size")
    prefill = by_type[0] if prefill is None else np.where(np.isfinite(prefill), prefill, by_type[0])
    decode = by_type[1] if decode is None else np.where(np.isfinite(decode), decode, by_type[1])
    return prefill.astype(float), decode.astype(float)


def _batch_limit(data: ServiceData, show: Shown, sources: list[str]) -> float | None:
    for table in (data.batch, data.forward):
        limits = table.get("max_batch_size") if table is not None else None
        if limits is not None and np.isfinite(limits).any() and (limit := float(np.nanmax(limits))) >= 1:
            sources.append(_source(show, table, ["max_batch_size"]))
            return limit
    found = _metric(data.summaries, _BATCH_LIMIT)
    if found is not None and (value := _stat(found[2], _VALUE + ("max",))) is not None and value >= 1:
        sources.append(f"{show(found[0].path)}[{found[0].written[found[1]]}]")
        return value
    return None


def _kv_values(data: ServiceData, show: Shown, sources: list[str]) -> dict[str, object]:
    for table, source in ((data.batch, "batch"), (data.kvcache, "kvcache")):
        usage = table.get("kv_usage") if table is not None else None
        if usage is None:
            continue
        kept = _finite(usage)
        if not kept.size:
            continue
        sources.append(_source(show, table, ["kv_usage"]))
        return {"kv_usage_p50": min(_pct(kept, 50), 1.0), "kv_usage_p90": min(_pct(kept, 90), 1.0),
                "kv_usage_max": min(float(kept.max()), 1.0), "kv_full_share": float((kept >= KV_FULL).mean()),
                "kv_usage_source": source}
    return {}


def _metric(summaries: tuple[ServiceSummary, ...], names: tuple[str, ...]
            ) -> tuple[ServiceSummary, str, dict[str, float]] | None:
    """The first summary metric of one of ``names`` (in the order of ``names``, then of the files)."""
    for name in names:
        for summary in summaries:
            if name in summary.metrics:
                return summary, name, summary.metrics[name]
    return None


def _stat(stats: dict[str, float], names: tuple[str, ...]) -> float | None:
    return next((stats[n] for n in names if n in stats), None)


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def _pct(values: np.ndarray, q: float) -> float | None:
    kept = _finite(values)
    return float(np.percentile(kept, q)) if kept.size else None


def _source(show: Shown, table: ServiceTable, names: list[str]) -> str:
    """``file[its own names of the columns used]``."""
    columns = ", ".join(dict.fromkeys(table.headers[n] for n in names if n in table.headers))
    return f"{show(table.path)}[{columns}]" if columns else show(table.path)
