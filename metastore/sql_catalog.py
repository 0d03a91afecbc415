"""Druid SQL's metadata tables: `INFORMATION_SCHEMA` and `sys`, in Druid's shapes.

Druid documents them in "SQL metadata tables" (docs/querying/sql-metadata-tables.md);
every table here has the columns it lists, in its order, with its types. They are
built for each query that names them, from the metastore read through the
selectors, and handed to the SQL engine as in-memory tables: the engine's own
catalog never answers.

How Strata's processes appear in `sys.servers` (Druid's node roles):

- the web process (`STRATA_ADVERTISED_ADDRESS`, host:port) is the COORDINATOR and
  the OVERLORD (both leaders: there is one metastore) and the BROKER; its embedded
  query engine, which reads the visible segment files straight from deep storage,
  is the HISTORICAL (tier `_default_tier`) -- the same host:port, so join
  `server_segments` to `servers` with `server_type = 'HISTORICAL'`;
- each live task worker (Celery, `host:pid`) is a MIDDLE_MANAGER, with no port.

`sys.server_segments` lists, for the HISTORICAL, every segment it serves: the
used segments the timeline shows at some instant (tombstones included, as Druid
loads them). A fully overshadowed segment is published but not served.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from metastore import selectors

CATALOG = "druid"
DRUID, SYS, INFORMATION_SCHEMA, LOOKUP = "druid", "sys", "INFORMATION_SCHEMA", "lookup"
SCHEMAS = (DRUID, LOOKUP, SYS, INFORMATION_SCHEMA)
_EPOCH_TEXT = "1970-01-01T00:00:00.000Z"
_STARTED = datetime.now(UTC)  # this process's start: sys.servers' start_time

# java.sql.Types codes of Druid's SQL types.
JDBC_TYPES = {
    "TIMESTAMP": 93,
    "VARCHAR": 12,
    "BIGINT": -5,
    "DOUBLE": 8,
    "FLOAT": 6,
    "BOOLEAN": 16,
    "DATE": 91,
    "OTHER": 1111,
    "ARRAY": 2003,
}
# Calcite's defaults for Druid's types, as Druid's INFORMATION_SCHEMA reports them.
_PRECISION = {"BIGINT": 19, "DOUBLE": 15, "FLOAT": 15}
_CHARSET, _COLLATION = "UTF-16LE", "UTF-16LE$en_US$primary"


@dataclass(frozen=True)
class Table:
    """A metadata table: its columns as (name, Druid SQL type), and its rows."""

    schema: str
    name: str
    columns: tuple[tuple[str, str], ...]
    rows: Callable[[], Iterable[tuple]]
    # Whether `rows` takes `as_of` (a commit): the tables of segments travel in time.
    travels: bool = False


def _cols(text: str) -> tuple[tuple[str, str], ...]:
    return tuple(tuple(c.split(":")) for c in text.split())  # type: ignore[misc]


# --- INFORMATION_SCHEMA -----------------------------------------------------------------


def _schemata_rows():
    return [(CATALOG, s, None, None, None, None, None) for s in SCHEMAS]


def _tables_rows():
    rows = [(CATALOG, DRUID, name, "TABLE", "NO", "NO") for name in datasource_names()]
    rows += [(CATALOG, t.schema, t.name, "SYSTEM_TABLE", "NO", "NO") for t in TABLES.values()]
    return rows


def column_row(schema: str, table: str, position: int, name: str, sql_type: str) -> tuple:
    """One INFORMATION_SCHEMA.COLUMNS row, Druid's 17 columns."""
    base = sql_type.split("<")[0]
    jdbc = JDBC_TYPES["ARRAY"] if base == "ARRAY" else JDBC_TYPES.get(base, JDBC_TYPES["OTHER"])
    numeric = base in _PRECISION
    character = base == "VARCHAR"
    return (
        CATALOG,
        schema,
        table,
        name,
        position,
        None,  # COLUMN_DEFAULT
        "NO" if name == "__time" and schema == DRUID else "YES",
        sql_type,
        None,  # CHARACTER_MAXIMUM_LENGTH
        None,  # CHARACTER_OCTET_LENGTH
        _PRECISION.get(base),
        10 if numeric else None,
        0 if base == "BIGINT" else None,
        3 if base == "TIMESTAMP" else None,
        _CHARSET if character else None,
        _COLLATION if character else None,
        jdbc,
    )


def _columns_rows():
    rows = []
    for name, columns in datasource_columns().items():
        rows += [column_row(DRUID, name, i, c, t) for i, (c, t) in enumerate(columns, 1)]
    for table in TABLES.values():
        rows += [
            column_row(table.schema, table.name, i, c, t)
            for i, (c, t) in enumerate(table.columns, 1)
        ]
    return rows


def _routines_rows():
    """Druid SQL's functions that Strata runs (metastore.sql_druid_rules), as Druid
    lists its own: the engine's other functions are not Druid SQL's."""
    from metastore.sql_druid_rules import RULES

    runs = [r for r in RULES.values() if not r.refused and not r.internal and r.kind != "operator"]
    return [
        (
            CATALOG,
            INFORMATION_SCHEMA,
            rule.name,
            "FUNCTION",
            "YES" if rule.kind == "aggregate" else "NO",
            None,
        )
        for rule in sorted(runs, key=lambda r: r.name)
    ]


# --- sys --------------------------------------------------------------------------------


def _ts(value) -> str:
    from metastore.intervals import format_ts

    return format_ts(value) if value is not None else _EPOCH_TEXT


def _names_json(items) -> str:
    return json.dumps([i.get("name") for i in items or () if isinstance(i, dict)])


def _segments_rows(as_of: int | None = None):
    """One row per used segment -- as of commit `as_of` when given -- in the order
    and with the overshadowed flag of the Coordinator's metadata API."""
    rows = []
    names = datasource_names() if as_of is None else selectors.datasource_names()
    for name in names:
        timeline = selectors.timeline_for(datasource=name, as_of=as_of)
        hidden = timeline.fully_overshadowed()
        if as_of is None:
            segments = selectors.segments_for(datasource=name)
        else:
            segments = selectors.segments_with_ids(ids={ref.id for ref in timeline.segments()})
        for seg in segments:
            overshadowed = seg.id in hidden
            served = int(not overshadowed and timeline.get(seg.id) is not None)
            schema = seg.schema or {}
            shard = seg.shard_spec or {"type": "numbered", "partitionNum": seg.partition}
            rows.append(
                (
                    seg.id,
                    name,
                    _ts(seg.start),
                    _ts(seg.end),
                    seg.size_bytes,
                    seg.version,
                    seg.partition,
                    served,  # num_replicas: the embedded engine is the one replica
                    seg.num_rows,
                    int(not overshadowed),  # is_active: published, not overshadowed
                    1,  # is_published: used in the metastore
                    served,  # is_available
                    0,  # is_realtime: Strata has no realtime ingestion
                    int(overshadowed),
                    json.dumps(shard),
                    _names_json(schema.get("dimensions")),
                    _names_json(schema.get("metrics")),
                    json.dumps(seg.compaction_state) if seg.compaction_state else None,
                    int(not overshadowed),  # replication_factor: one copy of what is visible
                )
            )
    return rows


_DRUID_STATUS = {
    "PENDING": ("RUNNING", "PENDING"),
    "WAITING": ("RUNNING", "WAITING"),
    "RUNNING": ("RUNNING", "RUNNING"),
    "SUCCESS": ("SUCCESS", "NONE"),
    "FAILED": ("FAILED", "NONE"),
    "CANCELED": ("FAILED", "NONE"),  # as Druid's task API shows a canceled task
}


def _tasks_rows():
    rows = []
    for task in selectors.tasks_list():
        code, runner = _DRUID_STATUS[task.status]
        duration = None
        if task.started_at is not None and task.ended_at is not None:
            duration = int((task.ended_at - task.started_at).total_seconds() * 1000)
        host = task.worker.rsplit(":", 1)[0] if task.worker else None
        error = task.error or None
        if task.status == "CANCELED":
            error = f"canceled: {task.error}" if task.error else "canceled"
        rows.append(
            (
                task.id,
                task.group_id,
                task.type,
                task.datasource,
                _ts(task.created_at),
                _ts(task.created_at),
                code,
                runner,
                duration,
                task.worker or None if code == "RUNNING" else None,
                host,
                -1,
                -1,
                error,
            )
        )
    return rows


def advertised_address() -> tuple[str, str, int]:
    """(host:port, host, port) of the web process, from STRATA_ADVERTISED_ADDRESS."""
    from django.conf import settings

    address = settings.STRATA_ADVERTISED_ADDRESS
    host, _, port = address.rpartition(":")
    return address, host, int(port) if port.isdigit() else -1


def _served_bytes() -> int:
    return sum(row[4] for row in _segments_rows() if row[11])


def _servers_rows():
    address, host, port = advertised_address()
    start = _ts(_STARTED)
    web = [
        (address, host, port, -1, role, None, 0, 0, leader, start)
        for role, leader in (("COORDINATOR", 1), ("OVERLORD", 1), ("BROKER", None))
    ]
    size = _served_bytes()
    web.append((address, host, port, -1, "HISTORICAL", "_default_tier", size, 0, None, start))
    workers = [
        (w.name, w.name.rsplit(":", 1)[0], -1, -1, "MIDDLE_MANAGER", None, 0, 0, None,
         _ts(w.started_at))
        for w in selectors.live_workers()
    ]  # fmt: skip
    return web + workers


def _server_segments_rows():
    address = advertised_address()[0]
    return [(address, row[0]) for row in _segments_rows() if row[11]]


TABLES: dict[tuple[str, str], Table] = {
    (t.schema.lower(), t.name.lower()): t
    for t in (
        Table(
            INFORMATION_SCHEMA,
            "SCHEMATA",
            _cols(
                "CATALOG_NAME:VARCHAR SCHEMA_NAME:VARCHAR SCHEMA_OWNER:VARCHAR "
                "DEFAULT_CHARACTER_SET_CATALOG:VARCHAR DEFAULT_CHARACTER_SET_SCHEMA:VARCHAR "
                "DEFAULT_CHARACTER_SET_NAME:VARCHAR SQL_PATH:VARCHAR"
            ),
            _schemata_rows,
        ),
        Table(
            INFORMATION_SCHEMA,
            "TABLES",
            _cols(
                "TABLE_CATALOG:VARCHAR TABLE_SCHEMA:VARCHAR TABLE_NAME:VARCHAR "
                "TABLE_TYPE:VARCHAR IS_JOINABLE:VARCHAR IS_BROADCAST:VARCHAR"
            ),
            _tables_rows,
        ),
        Table(
            INFORMATION_SCHEMA,
            "COLUMNS",
            _cols(
                "TABLE_CATALOG:VARCHAR TABLE_SCHEMA:VARCHAR TABLE_NAME:VARCHAR "
                "COLUMN_NAME:VARCHAR ORDINAL_POSITION:BIGINT COLUMN_DEFAULT:VARCHAR "
                "IS_NULLABLE:VARCHAR DATA_TYPE:VARCHAR CHARACTER_MAXIMUM_LENGTH:BIGINT "
                "CHARACTER_OCTET_LENGTH:BIGINT NUMERIC_PRECISION:BIGINT "
                "NUMERIC_PRECISION_RADIX:BIGINT NUMERIC_SCALE:BIGINT DATETIME_PRECISION:BIGINT "
                "CHARACTER_SET_NAME:VARCHAR COLLATION_NAME:VARCHAR JDBC_TYPE:BIGINT"
            ),
            _columns_rows,
        ),
        Table(
            INFORMATION_SCHEMA,
            "ROUTINES",
            _cols(
                "ROUTINE_CATALOG:VARCHAR ROUTINE_SCHEMA:VARCHAR ROUTINE_NAME:VARCHAR "
                "ROUTINE_TYPE:VARCHAR IS_AGGREGATOR:VARCHAR SIGNATURES:VARCHAR"
            ),
            _routines_rows,
        ),
        Table(
            SYS,
            "segments",
            _cols(
                "segment_id:VARCHAR datasource:VARCHAR start:VARCHAR end:VARCHAR size:BIGINT "
                "version:VARCHAR partition_num:BIGINT num_replicas:BIGINT num_rows:BIGINT "
                "is_active:BIGINT is_published:BIGINT is_available:BIGINT is_realtime:BIGINT "
                "is_overshadowed:BIGINT shard_spec:VARCHAR dimensions:VARCHAR metrics:VARCHAR "
                "last_compaction_state:VARCHAR replication_factor:BIGINT"
            ),
            _segments_rows,
            travels=True,
        ),
        Table(
            SYS,
            "servers",
            _cols(
                "server:VARCHAR host:VARCHAR plaintext_port:BIGINT tls_port:BIGINT "
                "server_type:VARCHAR tier:VARCHAR current_size:BIGINT max_size:BIGINT "
                "is_leader:BIGINT start_time:VARCHAR"
            ),
            _servers_rows,
        ),
        Table(
            SYS,
            "server_segments",
            _cols("server:VARCHAR segment_id:VARCHAR"),
            _server_segments_rows,
        ),
        Table(
            SYS,
            "tasks",
            _cols(
                "task_id:VARCHAR group_id:VARCHAR type:VARCHAR datasource:VARCHAR "
                "created_time:VARCHAR queue_insertion_time:VARCHAR status:VARCHAR "
                "runner_status:VARCHAR duration:BIGINT location:VARCHAR host:VARCHAR "
                "plaintext_port:BIGINT tls_port:BIGINT error_msg:VARCHAR"
            ),
            _tasks_rows,
        ),
        Table(
            SYS,
            "supervisors",
            _cols(
                "supervisor_id:VARCHAR state:VARCHAR detailed_state:VARCHAR healthy:BIGINT "
                "type:VARCHAR source:VARCHAR suspended:BIGINT spec:VARCHAR"
            ),
            list,  # Strata runs no streaming supervisors
        ),
    )
}


def find_table(schema: str, name: str) -> Table | None:
    """The metadata table `schema.name`, matched like SQL names (case-insensitively)."""
    return TABLES.get((schema.lower(), name.lower()))


def arrow_table(table: Table, as_of: int | None = None):
    """The table's rows as Arrow, typed as Druid declares its columns; a table of
    segments as of commit `as_of` when given (the others are always the latest)."""
    import pyarrow as pa

    types = {"VARCHAR": pa.string(), "BIGINT": pa.int64()}
    schema = pa.schema([(c, types[t]) for c, t in table.columns])
    rows = list(table.rows(as_of) if table.travels else table.rows())
    columns = [[row[i] for row in rows] for i in range(len(table.columns))]
    return pa.table([pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)],
                    schema=schema)  # fmt: skip


# --- dataSources ------------------------------------------------------------------------


def datasource_names() -> list[str]:
    """The dataSources a query can read: those with used segments (Druid's Broker
    knows a dataSource by its served segments)."""
    return [s.name for s in selectors.datasources_list() if s.segments]


_COMPLEX = {
    "json": "COMPLEX<json>",  # a json dimension, stored as JSON text
    "hyperUnique": "COMPLEX<hyperUnique>",
    "thetaSketch": "COMPLEX<thetaSketch>",
    "HLLSketchBuild": "COMPLEX<HLLSketch>",
    "HLLSketchMerge": "COMPLEX<HLLSketch>",
    "quantilesDoublesSketch": "COMPLEX<quantilesDoublesSketch>",
    "quantilesDoublesSketchMerge": "COMPLEX<quantilesDoublesSketch>",
    **{
        f"Kll{k}Sketch{m}": f"COMPLEX<Kll{k}Sketch>"
        for k in ("Doubles", "Floats")
        for m in ("", "Merge")
    },
    "variance": "COMPLEX<variance>",
    "varianceFold": "COMPLEX<variance>",
    "fixedBucketsHistogram": "COMPLEX<fixedBucketsHistogram>",
    "approxHistogram": "COMPLEX<approximateHistogram>",
    "approxHistogramFold": "COMPLEX<approximateHistogram>",
    **{
        f"{kind}{end}": f"COMPLEX<serializablePairLong{kind.title()}>"
        for kind in ("string", "long", "double", "float")
        for end in ("First", "Last")
    },
}


def druid_type(arrow_type: str, metric_type: str | None = None) -> str:
    """Druid's SQL type of a column stored as `arrow_type` (pyarrow's type text)."""
    if metric_type in _COMPLEX:
        return _COMPLEX[metric_type]
    if arrow_type.startswith("timestamp"):
        return "TIMESTAMP"
    if arrow_type in ("string", "large_string", "bool"):
        return "VARCHAR" if arrow_type != "bool" else "BIGINT"
    if arrow_type.startswith(("int", "uint")):
        return "BIGINT"
    if arrow_type in ("double", "float", "halffloat"):
        return "FLOAT" if arrow_type in ("float", "halffloat") else "DOUBLE"
    if arrow_type.startswith(("list<", "large_list<")):
        element = druid_type(arrow_type.split(": ", 1)[1].rstrip(">"))
        # A list of strings is a multi-value string dimension: Druid types it VARCHAR.
        return "VARCHAR" if element == "VARCHAR" else f"ARRAY<{element}>"
    if arrow_type in ("binary", "large_binary"):
        return "COMPLEX<unknown>"
    return "COMPLEX<json>"


def datasource_columns() -> dict[str, list[tuple[str, str]]]:
    """Every queryable dataSource's columns as (name, Druid SQL type), `__time`
    first, then in the order `SELECT *` shows them: the columns of its visible
    files (all of its files when nothing is visible), by name."""
    from metastore.sql_sources import file_schema, visible_source

    metric_types = selectors.metric_types()
    out = {}
    for name in datasource_names():
        source = visible_source(datasource=name)
        files = source.files or ([source.schema_file] if source.schema_file else [])
        columns: dict[str, str] = {}
        for path in files:
            for column, arrow_type in file_schema(path):
                columns.setdefault(column, arrow_type)
        metrics = metric_types.get(name, {})
        typed = [(c, druid_type(t, metrics.get(c))) for c, t in columns.items()]
        typed.sort(key=lambda ct: ct[0] != "__time")
        out[name] = typed or [("__time", "TIMESTAMP")]
    return out
