"""Rows of a compiled native query (`metastore.druid.native.Plan`) in Druid's JSON shapes.

Druid's clients compare values exactly, so types follow Druid: longs (`count`,
`longSum`, ...) are integers, doubles are floats even when whole (`5.0`), a float
aggregator is a 32-bit float written as Java writes it (`0.1`, not
`0.10000000149011612`), and timestamps are ISO-8601 with milliseconds, in UTC
(`2013-08-31T01:02:33.000Z`) or in the granularity's time zone with its offset.
Pure: no Django, no I/O.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import numpy as np

from metastore.druid.native import ETERNITY_START_MS, Plan
from metastore.intervals import format_ts

__all__ = ["shape", "druid_timestamp", "to_json"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def druid_timestamp(ms: int | None, zone=None) -> str | None:
    """Epoch millis as Druid writes a timestamp: `2013-08-31T01:02:33.000Z`."""
    if ms is None:
        return None
    if ms == ETERNITY_START_MS:  # the start of Druid's eternity, as Joda writes it
        return "-146136543-09-08T08:23:32.096Z"
    t = _EPOCH + timedelta(milliseconds=int(ms))
    if zone is not None:
        t = t.astimezone(zone)
    text = (
        f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
        f".{t.microsecond // 1000:03d}"
    )
    minutes = int(t.utcoffset().total_seconds()) // 60
    if not minutes:  # Joda writes a zero offset as Z
        return text + "Z"
    sign = "+" if minutes > 0 else "-"
    return f"{text}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _value(value, kind: str):
    if value is None:
        return None
    if kind == "long":
        return int(value)
    if kind == "double":
        return float(value)
    if kind == "float":  # a 32-bit float, written with the fewest digits that read back
        return float(str(np.float32(value)))
    if kind == "string":
        return value if isinstance(value, str) else str(value)
    return value


def _values(plan: Plan, row: list, skip: int) -> dict:
    return {name: _value(v, kind) for (name, kind), v in zip(plan.columns, row[skip:], strict=True)}


def _timeseries(plan: Plan, rows: list[list]) -> list:
    zone = plan.granularity.render_zone()
    out = [
        {"timestamp": druid_timestamp(r[0], zone), "result": _values(plan, r, 2)}
        for r in rows
        if not r[1]
    ]
    limit = plan.options.get("limit")
    if limit is not None:
        out = out[:limit]
    # The grand total comes last, without a timestamp, whatever the order.
    out += [{"timestamp": None, "result": _values(plan, r, 2)} for r in rows if r[1]]
    return out


def _topn(plan: Plan, rows: list[list]) -> list:
    zone = plan.granularity.render_zone()
    out: list[dict] = []
    for r in rows:
        if not out or out[-1]["_bucket"] != r[0]:
            out.append({"_bucket": r[0], "timestamp": druid_timestamp(r[0], zone), "result": []})
        out[-1]["result"].append(_values(plan, r, 1))
    for item in out:
        del item["_bucket"]
    stamp = plan.options.get("stamp")
    if not out and stamp is not None:  # Druid: the bucket's result, of no values
        out = [{"timestamp": druid_timestamp(stamp, zone), "result": []}]
    return out


def _groupby(plan: Plan, rows: list[list]) -> list:
    zone = plan.granularity.render_zone()
    if plan.options.get("result_as_array"):
        # Array rows: the timestamp (millis) first unless the granularity is "all".
        stamp = plan.granularity.kind != "all"
        return [([int(r[0])] if stamp else []) + list(_values(plan, r, 1).values()) for r in rows]
    return [
        {"version": "v1", "timestamp": druid_timestamp(r[0], zone), "event": _values(plan, r, 1)}
        for r in rows
    ]


def _scan(plan: Plan, rows: list[list]) -> list:
    names = [name for name, _ in plan.columns]
    compact = plan.options["result_format"] == "compactedList"
    size = plan.options["batch_size"]
    batches = []
    for start in range(0, len(rows), size):
        events = [_values(plan, r, 0) for r in rows[start : start + size]]
        if compact:
            events = [list(e.values()) for e in events]
        # Rows come from the dataSource's visible rows as a whole, not segment by
        # segment, so no batch names a segment (as Druid's time-ordered scans do).
        batches.append({"segmentId": None, "columns": names, "events": events})
    return batches


def _time_boundary(plan: Plan, rows: list[list]) -> list:
    low, high = rows[0] if rows else (None, None)
    if low is None:
        return []
    bound = plan.options.get("bound")
    result = {}
    if bound in (None, "minTime"):
        result["minTime"] = druid_timestamp(low)
    if bound in (None, "maxTime"):
        result["maxTime"] = druid_timestamp(high)
    stamp = high if bound == "maxTime" else low
    return [{"timestamp": druid_timestamp(stamp), "result": result}]


def _datasource_metadata(plan: Plan, rows: list[list]) -> list:
    latest = rows[0][0] if rows else None
    if latest is None:
        return []
    stamp = druid_timestamp(latest)
    return [{"timestamp": stamp, "result": {"maxIngestedEventTime": stamp}}]


_TYPES = {
    "time": "LONG",
    "long": "LONG",
    "double": "DOUBLE",
    "float": "FLOAT",
    "string": "STRING",
    "json": "COMPLEX<json>",  # a json dimension, stored as JSON text
}


def _column_analyses(plan: Plan, row: list) -> dict:
    analyses = plan.options["analyses"]
    out, i = {}, 2
    for name, kind in plan.options["columns"]:
        has_nulls = bool(row[i])
        i += 1
        cardinality = low = high = None
        if kind == "string":
            cardinality, low, high = row[i : i + 3]
            i += 3
        type_name = _TYPES.get(kind, "COMPLEX")
        out[name] = {
            "typeSignature": type_name,
            "type": type_name,
            "hasMultipleValues": False,
            "hasNulls": has_nulls,
            "size": 0,
            "cardinality": int(cardinality)
            if "cardinality" in analyses and kind == "string"
            else None,
            "minValue": low if "minmax" in analyses else None,
            "maxValue": high if "minmax" in analyses else None,
            "errorMessage": None,
        }
    return dict(sorted(out.items()))


def _condensed(intervals: list) -> list[str]:
    out: list = []
    for iv in sorted(intervals):
        if out and iv.start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], iv.end)
        else:
            out.append([iv.start, iv.end])
    return [f"{format_ts(a)}/{format_ts(b)}" for a, b in out]


def _query_granularity(name):
    """A recorded queryGranularity as Druid writes it: a standard one by its name
    (`"HOUR"`), none and all as objects."""
    if not isinstance(name, str):
        return name
    name = name.upper()
    return {"type": name.lower()} if name in ("NONE", "ALL") else name


def _aggregators(schema) -> dict | None:
    """A segment's aggregators (the combining ones, as Druid's segment metadata holds
    them), None where the segment recorded none."""
    if not schema or "metrics" not in schema:
        return None
    return {m["name"]: m.get("combining") for m in schema["metrics"]}


def _merged_aggregators(each: list, lenient: bool) -> dict | None:
    """Strict: null on any unknown segment or conflict. Lenient: unknown segments are
    skipped, and a conflict nulls that column's aggregator only."""
    if not lenient and any(a is None for a in each):
        return None
    merged: dict = {}
    for aggs in each:
        for name, agg in (aggs or {}).items():
            if name not in merged:
                merged[name] = agg
            elif merged[name] is not None and (agg or {}).get("type") != merged[name].get("type"):
                if not lenient:
                    return None
                merged[name] = None
    return merged or None


def _agreed(values: list):
    return values[0] if values and all(v == values[0] for v in values) else None


def _segment_facts(plan: Plan, schemas: list) -> dict:
    """aggregators, timestampSpec, queryGranularity, rollup: where asked for, from what
    each segment recorded, merged as Druid merges them."""
    analyses = plan.options["analyses"]
    facts: dict = {}
    if "aggregators" in analyses:
        each = [_aggregators(s) for s in schemas]
        facts["aggregators"] = _merged_aggregators(each, plan.options.get("lenient", False))
    for key in ("timestampSpec", "queryGranularity", "rollup"):
        if key in analyses:
            facts[key] = _agreed([(s or {}).get(key) for s in schemas])
    if facts.get("queryGranularity") is not None:
        facts["queryGranularity"] = _query_granularity(facts["queryGranularity"])
    return facts


def _segment_metadata(plan: Plan, rows: list[list]) -> list:
    segments = plan.options["segments"]
    schemas = plan.options.get("schemas") or [None] * len(segments)
    with_intervals = "interval" in plan.options["analyses"]
    out = []
    for row in rows:
        if plan.options["merge"]:
            seg_id, intervals, recorded = "merged", [iv for _, iv in segments], schemas
        else:
            seg_id, interval = segments[row[0]]
            intervals, recorded = [interval], [schemas[row[0]]]
        out.append(
            {
                "id": seg_id,
                "intervals": _condensed(intervals) if with_intervals else None,
                "columns": _column_analyses(plan, row),
                "size": 0,
                "numRows": int(row[1]),
                "aggregators": None,
                "timestampSpec": None,
                "queryGranularity": None,
                "rollup": None,
                **_segment_facts(plan, recorded),
            }
        )
    return out


_SHAPES = {
    "timeseries": _timeseries,
    "topN": _topn,
    "groupBy": _groupby,
    "scan": _scan,
    "timeBoundary": _time_boundary,
    "search": _topn,  # the same nesting: per bucket, a list of hits
    "dataSourceMetadata": _datasource_metadata,
    "segmentMetadata": _segment_metadata,
}


def shape(plan: Plan, rows: list[list]) -> list:
    """The JSON result Druid returns for `plan`'s query, from the rows of its SQL."""
    return _SHAPES[plan.query_type](plan, rows)


def _quoted_non_finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [_quoted_non_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _quoted_non_finite(v) for k, v in value.items()}
    return value


def _has_non_finite(value) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list | tuple):
        return any(_has_non_finite(v) for v in value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    return False


def finite_json(result):
    """`result` with each NaN or infinite double as the string Jackson writes for it
    ("NaN", "Infinity", "-Infinity"), so that it can be sent as strict JSON (Druid
    SQL's results as the native ones); `result` itself when it holds none."""
    return _quoted_non_finite(result) if _has_non_finite(result) else result


def to_json(result) -> str:
    """`result` as the JSON text Druid sends: Jackson writes a double that is NaN or
    infinite as the string "NaN", "Infinity" or "-Infinity" (the bare words are not
    JSON, and JavaScript clients refuse them)."""
    try:
        return json.dumps(result, allow_nan=False)
    except ValueError:  # rare: walk the result only when it holds such a number
        return json.dumps(_quoted_non_finite(result))
