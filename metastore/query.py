"""SQL over the visible rows (SPEC §7 `POST /api/v1/query`, Druid's `/druid/v2/sql`).

Each dataSource is a table with `__time`, its dimensions and its metrics, made of
exactly the rows its timeline shows as of the latest commit or `as_of`: for every
visible piece of the timeline the segment's Parquet file is read, filtered to the
piece's interval when the segment is only partly visible; tombstones hold no
rows. The files are read by an embedded DuckDB (the interactive engine chosen by
`bench/query.py`, see the README); `workers.query.spark_query` runs the same
tables on Spark SQL, the reference that scales on a cluster, and the tests check
that both return the same rows.

Read-only: one SELECT statement (a WITH ... SELECT, a VALUES, ...), anything
else is refused before it runs; within it only what `metastore.sql_guard`'s
allow-lists name (tables bound to dataSources and to Druid's metadata tables,
`metastore.sql_catalog`; value functions). DuckDB itself may open only deep
storage (no other file, no extension loading, no ATTACH). Every query runs
within a time limit, a result-size limit and a number of concurrent queries.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import decimal
import re
import threading
from dataclasses import dataclass, field

from metastore import (
    selectors,
    sketches,
    sql_catalog,
    sql_druid,
    sql_druid_syntax,
    sql_guard,
    time_stats,
)
from metastore.intervals import MAX_TS, MIN_TS, Interval
from metastore.models import DataSource
from metastore.selectors import retention as retention_selectors
from metastore.sql_macros import MACROS, macro_names
from metastore.sql_sources import TableSource, latest_commits, visible_source, within

# Longer or more deeply nested SQL is refused before DuckDB parses it: parsing
# takes seconds per megabyte, and subqueries nested ~100,000 deep crash the
# parser (and with it the web process) instead of raising an error.
MAX_SQL_CHARS = 100_000
MAX_SQL_NESTING = 200
MAX_SEQ = 10**18 - 1  # commit sequence numbers fit a database bigint
_EVERYTHING = Interval.parse("0001-01-01/9999-12-31")


class QueryError(ValueError):
    """A query that cannot run; `field` names the request field at fault."""

    def __init__(self, message: str, field: str = "sql") -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class QueryTimeout(QueryError):
    """The query ran past its time limit and was interrupted (Druid's 504)."""

    druid_error = "Query timeout"
    error_class = "org.apache.druid.query.QueryTimeoutException"
    category = "TIMEOUT"
    http_status = 504


class ResourceLimitExceeded(QueryError):
    """The result is larger than a query may return (Druid's 400)."""

    druid_error = "Resource limit exceeded"
    error_class = "org.apache.druid.query.ResourceLimitExceededException"
    category = "CAPACITY_EXCEEDED"
    http_status = 400


class QueryCapacityExceeded(QueryError):
    """Every query slot stayed busy for the whole wait (Druid's 429)."""

    druid_error = "Query capacity exceeded"
    error_class = "org.apache.druid.query.QueryCapacityExceededException"
    category = "CAPACITY_EXCEEDED"
    http_status = 429


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[list] = field(default_factory=list)
    types: list[str] = field(default_factory=list)


# --- what a query reads ------------------------------------------------------------------


def _check_size(sql: str) -> None:
    """Refuse SQL too long or too deeply parenthesized to hand to the parser."""
    import duckdb

    if len(sql) > MAX_SQL_CHARS:
        raise QueryError(f"{len(sql)} characters of SQL; at most {MAX_SQL_CHARS}")
    try:
        tokens = duckdb.tokenize(sql)
    except duckdb.Error as exc:
        raise QueryError(f"cannot parse the query: {_first_line(exc)}") from None
    depth = deepest = 0
    for i, (pos, kind) in enumerate(tokens):
        if kind != duckdb.token_type.operator:
            continue  # parentheses inside strings, quoted names and comments do not nest
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
        for char in sql[pos:end]:
            depth += (char == "(") - (char == ")")
            deepest = max(deepest, depth)
    if deepest > MAX_SQL_NESTING:
        raise QueryError(f"parentheses nested {deepest} deep; at most {MAX_SQL_NESTING}")


def _statements(sql: str):
    import duckdb

    if not isinstance(sql, str) or not sql.strip():
        raise QueryError("give the SQL text of a query")
    _check_size(sql)
    try:
        return duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"cannot parse the query: {_first_line(exc)}") from None


def check_read_only(sql: str) -> None:
    """Refuse anything but a single query, naming what was sent instead."""
    import duckdb

    statements = _statements(sql)
    if len(statements) != 1:
        raise QueryError(f"send one query at a time (got {len(statements)} statements)")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise QueryError(
            f"only queries (SELECT) are accepted; this is a {kind.name} statement, and "
            "the data is read-only here: change it through tasks"
        )


def _identifier(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].replace('""', '"')
    return text


def prepare(sql: str) -> tuple[str, list[str]]:
    """(the query with Druid's `druid.` schema prefix dropped, the dataSources it names).

    Names come from the query's tokens (identifiers, quoted or not, matched
    case-insensitively like SQL names), so string constants never count and a
    query with `?` parameters needs no binding to be read."""
    import duckdb

    try:
        tokens = duckdb.tokenize(sql)
    except duckdb.Error as exc:
        raise QueryError(f"cannot parse the query: {_first_line(exc)}") from None
    spans = []
    for i, (pos, kind) in enumerate(tokens):
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
        spans.append((pos, end, kind, sql[pos:end]))
    by_lower = {name.lower(): name for name in DataSource.objects.values_list("name", flat=True)}
    names, drop = set(), []
    identifier = (duckdb.token_type.identifier, duckdb.token_type.keyword)
    for i, (pos, _end, kind, text) in enumerate(spans):
        if kind not in identifier:
            continue
        name = _identifier(text).lower()
        if name in by_lower:
            names.add(by_lower[name])
        nxt = spans[i + 1] if i + 1 < len(spans) else None
        if name == "druid" and nxt is not None and nxt[3].strip() == ".":
            drop.append((pos, nxt[1]))
    for pos, end in reversed(drop):
        sql = sql[:pos] + sql[end:]
    return sql, sorted(names)


def sources_for(sql: str, *, as_of: int | None = None) -> list[TableSource]:
    """The tables `sql` reads, each cut to the times its filter reaches (as `run_query`
    binds them); every visible file of each dataSource it names if it cannot be bound."""
    from django.conf import settings

    con = duckdb_database(str(settings.STRATA_DEEP_STORAGE)).cursor()
    try:
        return bind_query(con, sql, as_of=as_of).sources
    except QueryError:
        return [visible_source(datasource=name, as_of=as_of) for name in prepare(sql)[1]]
    finally:
        con.close()


# --- the DuckDB engine -------------------------------------------------------------------

_db_lock = threading.Lock()
_db: tuple[str, object] | None = None


def duckdb_database(root: str):
    """One in-memory DuckDB per process (its Parquet metadata cache stays warm), with
    file access limited to deep storage; each query runs on its own connection
    (cursor), whose temporary views no other query sees."""
    global _db
    import duckdb

    with _db_lock:
        if _db is not None and _db[0] == root:
            return _db[1]
        db = duckdb.connect(":memory:", config={"threads": 2})
        db.execute("SET TimeZone = 'UTC'")
        db.execute("SET memory_limit = '2GB'")
        db.execute("SET parquet_metadata_cache = true")
        db.execute("SET autoinstall_known_extensions = false")
        db.execute("SET autoload_known_extensions = false")
        db.execute("SET allowed_directories = ?", [[root.rstrip("/") + "/"]])
        db.execute("SET enable_external_access = false")
        for macro in MACROS:
            db.execute(macro)
        sketches.register(db)
        db.execute("SET lock_configuration = true")
        _db = (root, db)
        return db


def quote_name(name: str) -> str:
    """A table or column name quoted for DuckDB (as `run_query` reads it)."""
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _files(files) -> str:
    return "[" + ", ".join(_literal(f) for f in files) + "]"


def _ts(t: dt.datetime) -> str:
    return f"TIMESTAMPTZ {_literal(t.isoformat())}"


def table_sql(source: TableSource) -> str:
    """The SELECT that yields exactly a table's visible rows.

    `__time` is Druid SQL's TIMESTAMP: UTC, without a zone (zone-aware values
    would make every time function go through the time zone library)."""
    # Files written with other dimensions are matched by column name; reading the
    # schema of every file at each query would cost more than the query itself.
    mixed = source.mixed
    option = ", union_by_name = true" if mixed else ""
    # Each part casts `__time` itself, with no subquery around it: DuckDB then still
    # pushes a filter on `__time` into the Parquet scan (skipping row groups).
    read = "SELECT * REPLACE (CAST(__time AS TIMESTAMP) AS __time) FROM read_parquet"
    parts = []
    if source.whole:
        parts.append(f"{read}({_files(source.whole)}{option})")
    by_intervals: dict[tuple[Interval, ...], list[str]] = {}
    for location, intervals in source.partial:
        by_intervals.setdefault(intervals, []).append(location)
    for intervals, files in sorted(by_intervals.items()):
        cond = " OR ".join(
            f"(__time >= {_ts(iv.start)} AND __time < {_ts(iv.end)})" for iv in intervals
        )
        parts.append(f"{read}({_files(files)}{option}) WHERE {cond}")
    if not parts:
        if source.schema_file:
            parts.append(f"{read}({_literal(source.schema_file)}) WHERE false")
        else:
            return "SELECT NULL::TIMESTAMP AS __time WHERE false"
    return (" UNION ALL BY NAME " if mixed else " UNION ALL ").join(parts)


def allowed_functions() -> frozenset[str]:
    return sql_guard.FUNCTIONS | frozenset(macro_names())


@dataclass
class BoundQuery:
    """A checked query whose table names are bound to the tables registered for it:
    dataSources by name, metadata tables under `$<schema>.<name>`."""

    sql: str
    sources: list[TableSource]
    system: dict[str, sql_catalog.Table]
    as_of: int | None = None


def _refuse_expired(datasource: str, as_of: int | None) -> None:
    """Time travel reaches back STRATA_HISTORY_RETENTION only (older segments may be killed)."""
    if as_of is not None:
        refusal = retention_selectors.as_of_refusal(datasource=datasource, as_of=as_of)
        if refusal:
            raise QueryError(refusal, field="as_of")


def _bind_system(name: sql_guard.TableName, as_of: int | None, system: dict) -> tuple | None:
    """(view, name) of a `sys.` or `INFORMATION_SCHEMA.` table, added to `system`."""
    table = sql_catalog.find_table(name.schema.lower(), name.table)
    if table is None:
        return None
    if table.travels and as_of is not None:  # every dataSource's past
        for datasource in selectors.datasource_names():
            _refuse_expired(datasource, as_of)
    view = f"${table.schema}.{table.name}"
    system[view] = table
    return view, name.table


def bind_query(
    con,
    sql: str,
    *,
    as_of: int | None = None,
    druid_names: bool = False,
    druid_sql: bool = False,
    commits: dict[str, int] | None = None,
    params: list | None = None,
    cuts: dict[str, list[Interval]] | None = None,
) -> BoundQuery:
    """Parse `sql` with DuckDB, refuse what Strata does not run (metastore.sql_guard),
    and bind the tables it reads: a bare or `druid.` name is a dataSource (its
    visible rows, as of `as_of`), `sys.` and `INFORMATION_SCHEMA.` names Druid's
    metadata tables (metastore.sql_catalog). Anything else is not found.
    `druid_sql`: the query is Druid SQL (its functions translated, metastore.sql_druid).
    `commits`: `latest_commits()` if the caller has just read it. `params`: Druid SQL's
    parameters, bound into the query as literals (sql_druid.bind_parameters). `cuts`:
    dataSource -> intervals its files are cut to (time_stats.cut_to), unsaid in `sql`."""
    known: list[dict[str, int]] = [] if commits is None else [commits]  # or read at 1st table named
    sources: dict[str, TableSource] = {}
    system: dict[str, sql_catalog.Table] = {}

    def find(table: str) -> str | None:
        if not known:
            known.append(latest_commits())
        if table in known[0]:
            return table
        return {n.lower(): n for n in known[0]}.get(table.lower())

    def bind(name: sql_guard.TableName) -> tuple[str, str]:
        schema = name.schema.lower()
        if name.catalog.lower() in ("", sql_catalog.CATALOG) and schema in ("", "druid"):
            real = find(name.table)
            if real is not None:
                if real not in sources:
                    _refuse_expired(real, as_of)
                    sources[real] = visible_source(datasource=real, as_of=as_of, seq=known[0][real])
                return real, name.table
        elif name.catalog.lower() in ("", sql_catalog.CATALOG):
            bound = _bind_system(name, as_of, system)
            if bound is not None:
                return bound
        raise sql_guard.SqlRefused(
            f"table {name} not found: query a dataSource, sys.<table> or INFORMATION_SCHEMA.<table>"
        )

    def kinds(name):  # for Druid SQL's implicit casts and multi-value strings
        real, _ = bind(name)
        return sql_druid.table_kinds(sources[real].files) if real in sources else {}

    def prune(tree: dict) -> None:
        _prune(con, tree, sources)

    options = {"druid_names": druid_names, "druid_sql": druid_sql, "params": params}
    text = _guarded(con, sql, bind, columns=kinds, checked=prune, **options)
    for name in set(cuts or ()) & set(sources):
        sources[name] = time_stats.cut_to(sources[name], cuts[name])
    return BoundQuery(sql=text, sources=list(sources.values()), system=system, as_of=as_of)


def _prune(con, tree: dict, sources: dict[str, TableSource]) -> None:
    """Each table bound to the files its query's time filter can reach, and that
    filter left out where those files prove it (`drop_proven_time_filter`)."""
    for name, (start, end, included) in time_ranges(con, tree, set(sources)).items():
        sources[name] = within(sources[name], start, end, end_included=included)
    drop_proven_time_filter(con, tree, sources)


# --- reading only the files a query's time filter can reach ------------------------------
# `__time` is a cast of the files' zone-aware column (table_sql), so DuckDB cannot
# push a filter on it into the Parquet scan: a month's query would open every file.
# Where every reference to a dataSource is the FROM of a SELECT whose WHERE bounds
# `__time` by constants (ANDed comparisons, BETWEEN: what native queries and
# dashboards send), its table is bound to the files whose intervals meet those
# bounds only (metastore.sql_sources.within); the query's own filter still applies.

_LOWER, _UPPER, _BEFORE = "lower", "upper", "before"  # >= or >, <=, <
_SIDES = {
    "COMPARE_GREATERTHAN": (_LOWER,),
    "COMPARE_GREATERTHANOREQUALTO": (_LOWER,),
    "COMPARE_LESSTHAN": (_BEFORE,),
    "COMPARE_LESSTHANOREQUALTO": (_UPPER,),
    "COMPARE_EQUAL": (_LOWER, _UPPER),
}
_MIRRORED = {  # `constant op __time` is `__time mirrored-op constant`
    "COMPARE_GREATERTHAN": "COMPARE_LESSTHAN",
    "COMPARE_GREATERTHANOREQUALTO": "COMPARE_LESSTHANOREQUALTO",
    "COMPARE_LESSTHAN": "COMPARE_GREATERTHAN",
    "COMPARE_LESSTHANOREQUALTO": "COMPARE_GREATERTHANOREQUALTO",
    "COMPARE_EQUAL": "COMPARE_EQUAL",
}


def _nodes(tree):
    """Every dict in the tree (iteratively: trees may be deep)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, dict | list))


def _is_time(node, alias: str) -> bool:
    names = node.get("column_names") if node.get("class") == "COLUMN_REF" else None
    if not names or names[-1].lower() != "__time":
        return False
    return len(names) == 1 or (len(names) == 2 and names[0].lower() == alias.lower())


def _is_constant(node) -> bool:
    while node.get("class") == "CAST" and not node.get("try_cast"):
        node = node.get("child") or {}
    return node.get("class") == "CONSTANT"


def _conjuncts(where):
    terms, stack = [], [where]
    while stack:
        term = stack.pop()
        if isinstance(term, dict) and term.get("type") == "CONJUNCTION_AND":
            stack.extend(term.get("children") or [])
        elif isinstance(term, dict):
            terms.append(term)
    return terms


def _time_bounds(where, alias: str) -> list[tuple[str, dict]]:
    """(lower, upper or before, constant expression) bounding `__time` in an ANDed WHERE."""
    bounds = []
    for term in _conjuncts(where):
        if term.get("class") == "COMPARISON" and term.get("type") in _SIDES:
            left, right = term.get("left") or {}, term.get("right") or {}
            if _is_time(left, alias) and _is_constant(right):
                bounds += [(side, right) for side in _SIDES[term["type"]]]
            elif _is_time(right, alias) and _is_constant(left):  # `constant op __time`
                bounds += [(side, left) for side in _SIDES[_MIRRORED[term["type"]]]]
        elif term.get("type") == "COMPARE_BETWEEN" and _is_time(term.get("input") or {}, alias):
            for side, key in ((_LOWER, "lower"), (_UPPER, "upper")):
                if _is_constant(term.get(key) or {}):
                    bounds.append((side, term[key]))
    return bounds


_PLAIN_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}( [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?)?")


def _plain_timestamp(node) -> dt.datetime | None:
    """`TIMESTAMP '2013-06-01 00:00:00'` (or the bare string) read without the engine."""
    while node.get("class") == "CAST":
        kind = node.get("type_expr") or {}
        if kind.get("type_name", "").upper() != "TIMESTAMP" or kind.get("children"):
            return None
        node = node.get("child") or {}
    literal = node.get("literal") or {}
    text = literal.get("text")
    if literal.get("kind") != "STRING" or not isinstance(text, str):
        return None
    return dt.datetime.fromisoformat(text) if _PLAIN_TIME.fullmatch(text) else None


def _timestamps(con, expressions: list[dict]) -> list | None:
    """The constant expressions as TIMESTAMPs (what `__time` is compared with),
    evaluated by DuckDB unless plain; None if any cannot be."""
    import copy

    import duckdb

    plain = [_plain_timestamp(e) for e in expressions]
    if None not in plain:
        return plain
    tree = sql_guard.parse(con, "SELECT CAST(NULL AS TIMESTAMP)")
    node = tree["statements"][0]["node"]
    template = node["select_list"][0]
    node["select_list"] = [{**copy.deepcopy(template), "child": e} for e in expressions]
    try:
        values = con.execute(sql_guard.deparse(con, tree)).fetchall()[0]
    except (duckdb.Error, ValueError, OverflowError):
        return None
    if any(not isinstance(v, dt.datetime) for v in values):
        return None
    return list(values)


def time_ranges(con, tree: dict, datasources: set[str]) -> dict[str, tuple]:
    """dataSource -> (earliest, latest, whether latest is included): the `__time`s
    the bound query can read of it (naive UTC, None: unbounded), for those it reads
    only within bounds."""
    nodes = list(_nodes(tree))  # one walk of the tree, not one per question
    cte_names = {
        entry["key"].lower()
        for node in nodes
        for entry in (node.get("cte_map") or {}).get("map") or ()
        if isinstance(entry, dict) and isinstance(entry.get("key"), str)
    }
    tables = {
        id(n): n
        for n in nodes
        if n.get("type") == "BASE_TABLE" and n.get("table_name") in datasources
    }
    bounded = {
        id(n["from_table"]): _time_bounds(n.get("where_clause"), n["from_table"].get("alias", ""))
        for n in nodes
        if n.get("type") == "SELECT_NODE" and id(n.get("from_table")) in tables
    }
    refs: dict[str, list[list]] = {}  # dataSource -> the bounds of each reference to it
    for key, table in tables.items():
        refs.setdefault(table["table_name"], []).append(bounded.get(key) or [])
    wanted = {
        name: bounds
        for name, bounds in refs.items()
        if name.lower() not in cte_names and all(bounds)
    }
    expressions = [e for bounds in wanted.values() for per_ref in bounds for _, e in per_ref]
    values = _timestamps(con, expressions) if expressions else None
    if values is None:
        return {}
    found = iter(values)
    return {
        name: _span([[(side, next(found)) for side, _ in per_ref] for per_ref in bounds])
        for name, bounds in wanted.items()
    }


def _span(references: list[list[tuple[str, dt.datetime]]]) -> tuple:
    """(earliest, latest, latest included) covering every reference, each bounded by
    the tightest of its (side, value) bounds; None where one is unbounded."""
    lowers, uppers = [], []
    for bounds in references:
        lo = [v for side, v in bounds if side == _LOWER]
        # (value, 1) for `<=`, (value, 0) for `<`: the smaller is the tighter.
        hi = [(v, int(side == _UPPER)) for side, v in bounds if side in (_UPPER, _BEFORE)]
        lowers.append(max(lo) if lo else None)
        uppers.append(min(hi) if hi else None)
    start = None if None in lowers else min(lowers)
    end = None if None in uppers else max(uppers)
    return start, end and end[0], bool(end is None or end[1])


# --- a time filter the files prove --------------------------------------------------------
# Where a single table's query bounds `__time` by constants at the top of its WHERE
# and the Parquet footers (metastore.time_stats) prove that every row of the files
# left after pruning lies within those bounds, the bounds are dropped from the SQL:
# they would keep every row, at the cost of reading and casting `__time` per row.

_STRICT = {  # comparison -> (side, strict): `>` and `<` exclude their bound
    "COMPARE_GREATERTHAN": ((_LOWER, True),),
    "COMPARE_GREATERTHANOREQUALTO": ((_LOWER, False),),
    "COMPARE_LESSTHAN": ((_UPPER, True),),
    "COMPARE_LESSTHANOREQUALTO": ((_UPPER, False),),
    "COMPARE_EQUAL": ((_LOWER, False), (_UPPER, False)),
}
# The types a constant compared with `__time` (a TIMESTAMP) may have for the
# comparison to be the one of its value as a TIMESTAMP (not TIMESTAMP_NS's, say).
_EXACT_TYPES = {"TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE", "DATE"}


def _exact_constant(node) -> bool:
    if node.get("class") == "CAST":
        kind = node.get("type_expr") or {}
        exact = kind.get("type_name", "").upper() in _EXACT_TYPES and not kind.get("children")
        return exact and _is_constant(node)
    return node.get("class") == "CONSTANT" and (node.get("literal") or {}).get("kind") == "STRING"


def _is_time_value(node, alias: str) -> bool:
    """`__time`, or it cast to TIMESTAMP (what it is: TIME_IN_INTERVAL's translation)."""
    kind = (node.get("type_expr") or {}).get("type_name", "").upper()
    if node.get("class") == "CAST" and kind == "TIMESTAMP" and not node.get("try_cast"):
        node = node.get("child") or {}
    return _is_time(node, alias)


def _flat_conjuncts(where: dict) -> list[dict]:
    """The ANDed terms of a WHERE, in order."""
    if where.get("type") != "CONJUNCTION_AND":
        return [where]
    return [t for child in where.get("children") or () for t in _flat_conjuncts(child)]


def _range_term(term: dict, alias: str) -> list[tuple[str, bool, dict]] | None:
    """(side, strict, constant) of each bound a WHERE conjunct puts on `__time`, if
    that is all it is; None otherwise."""
    if term.get("class") == "COMPARISON" and term.get("type") in _STRICT:
        left, right = term.get("left") or {}, term.get("right") or {}
        kind = term["type"]
        if _is_time_value(right, alias) and _exact_constant(left):
            left, right, kind = right, left, _MIRRORED[kind]
        if _is_time_value(left, alias) and _exact_constant(right):
            return [(side, strict, right) for side, strict in _STRICT[kind]]
    elif term.get("type") == "COMPARE_BETWEEN" and _is_time_value(term.get("input") or {}, alias):
        lower, upper = term.get("lower") or {}, term.get("upper") or {}
        if _exact_constant(lower) and _exact_constant(upper):
            return [(_LOWER, False, lower), (_UPPER, False, upper)]
    return None


def _single_table(tree: dict, sources: dict) -> dict | None:
    """The SELECT of a query that reads one dataSource's table, directly in its FROM,
    and nothing else (no other table, join, subquery or CTE); None otherwise."""
    statements = tree.get("statements") or []
    node = statements[0].get("node") if len(statements) == 1 else None
    if not node or node.get("type") != "SELECT_NODE":
        return None
    table = node.get("from_table") or {}
    if table.get("type") != "BASE_TABLE" or table.get("table_name") not in sources:
        return None
    for other in _nodes(tree):
        if other is not table and other.get("type") in ("BASE_TABLE", "SUBQUERY", "JOIN"):
            return None
        if other.get("class") == "SUBQUERY" or (other.get("cte_map") or {}).get("map"):
            return None
    return node


def _proven_interval(values: list[tuple[str, bool, dt.datetime]]) -> Interval | None:
    """The `__time`s the bounds keep, as a half-open interval (µs), if within time."""
    tick = dt.timedelta(microseconds=1)
    start, end = MIN_TS, MAX_TS
    for side, strict, value in values:
        at = value.replace(tzinfo=dt.UTC)
        if not MIN_TS < at < MAX_TS - tick:
            return None
        if side == _LOWER:
            start = max(start, at + tick if strict else at)
        else:
            end = min(end, at if strict else at + tick)
    return Interval(start, end) if start < end else None


def drop_proven_time_filter(con, tree: dict, sources: dict[str, TableSource]) -> None:
    """Remove, in place, the bounds on `__time` at the top of a single table's WHERE
    (ANDed comparisons with constants, BETWEEN) when every row of its files (as
    bound) is within them: they would keep every row."""
    node = _single_table(tree, sources)
    if node is None or not node.get("where_clause"):
        return
    alias = node["from_table"].get("alias", "")
    where = node["where_clause"]
    terms = _flat_conjuncts(where)
    ranges = [_range_term(t, alias) for t in terms]
    bounds = [b for r in ranges if r for b in r]
    if not bounds:
        return
    values = _timestamps(con, [e for _, _, e in bounds])
    if values is None:
        return
    interval = _proven_interval([(s, x, v) for (s, x, _), v in zip(bounds, values, strict=True)])
    source = sources[node["from_table"]["table_name"]]
    if interval is None or not time_stats.rows_within([source], [interval]):
        return
    rest = [t for t, r in zip(terms, ranges, strict=True) if r is None]
    if len(rest) > 1:
        node["where_clause"] = {**where, "type": "CONJUNCTION_AND", "children": rest}
    else:
        node["where_clause"] = next(iter(rest), None)


def _guarded(
    con,
    sql: str,
    bind,
    *,
    druid_names: bool = False,
    druid_sql: bool = False,
    columns=None,
    checked=None,
    params: list | None = None,
) -> str:
    """The SQL to run for `sql`, checked and bound by metastore.sql_guard (with its
    unnamed columns named as Druid SQL names them, if asked; with Druid SQL's
    functions translated first when it is Druid SQL). `checked(tree)` is called
    with the checked, bound tree."""
    from metastore.sql_druid_rules import RULES

    try:
        tree = sql_guard.parse(con, sql)
        if druid_names or druid_sql:
            sql_guard.name_columns_like_druid(tree)
        if druid_sql:
            sql_druid.bind_parameters(con, tree, params)
            sql_druid.translate(con, sql, tree, RULES, columns)
        sql_guard.check(tree, functions=allowed_functions(), bind=bind)
        if checked is not None:
            checked(tree)
        return sql_guard.deparse(con, tree)
    except sql_guard.SqlRefused as exc:
        raise QueryError(str(exc)) from None


def _given_tables(sources: list[TableSource]):
    """A binder that knows only `sources`, by name (bare or `druid.`)."""
    by_lower = {s.name.lower(): s.name for s in sources}

    def bind(name: sql_guard.TableName) -> tuple[str, str]:
        known = by_lower.get(name.table.lower())
        if name.catalog.lower() in ("", "druid") and name.schema.lower() in ("", "druid") and known:
            return known, name.table
        raise sql_guard.SqlRefused(f"table {name} not found")

    return bind


def _register(
    con, sources: list[TableSource], system=None, as_of: int | None = None, views=None
) -> None:
    """The tables on `con`; `views` (name -> source) are the views it holds already."""
    for source in sources:
        if views is not None and views.get(source.name) == source:
            continue
        try:
            view = table_sql(source)
        except OSError:  # its metadata says a file is there; deep storage does not have it
            raise QueryError(
                f"a segment file of dataSource {source.name!r} is missing from deep storage; "
                "the dataSource cannot be read until it is restored or its segments reingested"
            ) from None
        con.execute(f"CREATE OR REPLACE TEMP VIEW {quote_name(source.name)} AS {view}")
        if views is not None:
            views[source.name] = source
    for view, table in (system or {}).items():
        con.register(view, sql_catalog.arrow_table(table, as_of=as_of))


# A query's connection (cursor) is kept afterwards with the views it holds, so the
# next query over the same files does not bind a view of them again (~10 ms for 366
# files). Views are temporary: no other connection sees them, and the guard binds
# only the names of the query at hand. A connection whose query failed or was
# interrupted (timeout, cancel) is closed instead: an interrupt must not reach a
# later query.

_IDLE_KEPT = 8
_idle_lock = threading.Lock()
_idle: list[tuple[object, object, dict[str, TableSource]]] = []  # (database, cursor, views)


def _lease(root: str) -> tuple[object, object, dict[str, TableSource]]:
    db = duckdb_database(root)
    with _idle_lock:
        for i, lease in enumerate(_idle):
            if lease[0] is db:
                return _idle.pop(i)
    return db, db.cursor(), {}


def kept_views() -> list[dict[str, TableSource]]:
    """The views each kept connection holds (by table name), oldest first: what
    the next queries over the same files reuse instead of binding again."""
    with _idle_lock:
        return [views for _, _, views in _idle]


def kept_connections_close() -> None:
    """Close every kept connection: the next query starts on a fresh one."""
    with _idle_lock:
        leases = list(_idle)
        _idle.clear()
    for lease in leases:
        lease[1].close()


def _release(lease, ok: bool) -> None:
    con = lease[1]
    with _running_lock:
        interrupted = id(con) in _interrupted
        _interrupted.discard(id(con))
    if ok and not interrupted:
        with _idle_lock:
            if len(_idle) < _IDLE_KEPT:
                _idle.append(lease)
                return
    con.close()


# --- bounds ------------------------------------------------------------------------------
# Every query holds one of STRATA_QUERY_CONCURRENCY slots while it runs (waiting at
# most STRATA_QUERY_QUEUE_MS for one), and a timer interrupts its DuckDB connection
# at its deadline: DuckDB stops the query's work and the call returns, so a timed
# out query leaves nothing running behind it.

_slots_lock = threading.Lock()
_slots: tuple[int, threading.BoundedSemaphore] | None = None
_running_lock = threading.Lock()
_running: set = set()  # the connections a query is running on now
_interrupted: set[int] = set()  # ids of connections interrupted (never kept for reuse)


def _interrupt(con) -> None:
    """Interrupt `con` (with `_running_lock` held: once a query leaves `_running` or
    `_by_id` under that lock, nothing interrupts its connection any more)."""
    _interrupted.add(id(con))
    con.interrupt()


def _slot_semaphore() -> threading.BoundedSemaphore:
    global _slots
    from django.conf import settings

    size = max(1, int(settings.STRATA_QUERY_CONCURRENCY))
    with _slots_lock:
        if _slots is None or _slots[0] != size:
            _slots = (size, threading.BoundedSemaphore(size))
        return _slots[1]


def timeout_for(requested) -> int:
    """The time limit in ms of a query asking for `requested` (Druid's context.timeout:
    absent means the default, 0 means the longest allowed)."""
    from django.conf import settings

    default, longest = settings.STRATA_QUERY_TIMEOUT_MS, settings.STRATA_QUERY_MAX_TIMEOUT_MS
    if requested is None:
        return min(default, longest)
    if isinstance(requested, str) and re.fullmatch(r"\s*[0-9]+\s*", requested):
        requested = int(requested)  # Druid reads context numbers given as strings too
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 0:
        raise QueryError("give a whole number of milliseconds, 0 or more", "context.timeout")
    if requested > longest:
        raise QueryError(
            f"context.timeout {requested} ms is more than the limit of {longest} ms "
            "(STRATA_QUERY_MAX_TIMEOUT_MS)",
            "context.timeout",
        )
    return requested or longest


def queries_in_engine() -> int:
    """How many queries are running on DuckDB in this process now."""
    with _running_lock:
        return len(_running)


def interrupt_all() -> None:
    """Interrupt every query running in this process (their callers get an error)."""
    with _running_lock:
        for con in _running:
            _interrupt(con)


def _fetch(con, sql: str, params: list | None) -> QueryResult:
    """Run on `con`, refusing a result over STRATA_QUERY_MAX_ROWS rows or
    STRATA_QUERY_MAX_BYTES bytes (as Arrow) as soon as it gets there."""
    import pyarrow as pa
    from django.conf import settings

    max_rows, max_bytes = settings.STRATA_QUERY_MAX_ROWS, settings.STRATA_QUERY_MAX_BYTES
    relation = con.sql(sql, params=params or None)
    if relation is None:
        return QueryResult(columns=[], rows=[])
    json_columns = {i for i, kind in enumerate(relation.types) if str(kind) in ("JSON", "JSON[]")}
    reader = relation.to_arrow_reader(10_000)
    batches, count, size = [], 0, 0
    try:
        for batch in reader:
            count, size = count + batch.num_rows, size + batch.nbytes
            if count > max_rows:
                raise ResourceLimitExceeded(
                    f"the result has more than {max_rows} rows (STRATA_QUERY_MAX_ROWS): "
                    "add a LIMIT or aggregate"
                )
            if size > max_bytes:
                raise ResourceLimitExceeded(
                    f"the result has more than {max_bytes} bytes (STRATA_QUERY_MAX_BYTES): "
                    "select fewer columns, add a LIMIT or aggregate"
                )
            batches.append(batch)
    finally:
        reader.close()
    result = arrow_result(pa.Table.from_batches(batches, schema=reader.schema))
    return _parse_json_columns(result, json_columns)


def _parse_json_columns(result: QueryResult, columns: set[int]) -> QueryResult:
    """JSON values (Druid's COMPLEX<json>) as the JSON they hold, not as its text."""
    import json

    def parsed(value):
        if isinstance(value, list):
            return [parsed(v) for v in value]
        return json.loads(value) if isinstance(value, str) else value

    for row in result.rows if columns else ():
        for i in columns:
            row[i] = parsed(row[i])
    for i in columns:
        result.types[i] = "json"
    return result


def _bounded(con, timeout_ms: int, work):
    """`work()` on `con` in a query slot, interrupted at `timeout_ms`."""
    import duckdb
    from django.conf import settings

    slots = _slot_semaphore()
    if not slots.acquire(timeout=settings.STRATA_QUERY_QUEUE_MS / 1000):
        raise QueryCapacityExceeded(
            f"all {settings.STRATA_QUERY_CONCURRENCY} query slots stayed busy for "
            f"{settings.STRATA_QUERY_QUEUE_MS} ms (STRATA_QUERY_CONCURRENCY): try again"
        )
    expired = threading.Event()

    def expire() -> None:
        with _running_lock:
            if con in _running:  # not once the work is over
                expired.set()
                _interrupt(con)

    timer = threading.Timer(timeout_ms / 1000, expire)
    timer.daemon = True
    with _running_lock:
        _running.add(con)
    timer.start()
    try:
        return work()
    except duckdb.Error as exc:
        if expired.is_set():
            raise QueryTimeout(f"the query timed out after {timeout_ms} ms") from None
        raise QueryError(_first_line(exc)) from None
    finally:
        timer.cancel()
        with _running_lock:
            _running.discard(con)
        with contextlib.suppress(ValueError):  # the slot count changed while it ran
            slots.release()


def duckdb_query(
    sql: str,
    sources: list[TableSource],
    *,
    root: str,
    params: list | None = None,
    timeout_ms: int | None = None,
) -> QueryResult:
    """Run a query on DuckDB over the given tables, named as the dataSources: checked
    as every query is (metastore.sql_guard), within the bounds (time, size,
    concurrency) every query has."""
    limit = timeout_for(timeout_ms)
    con = duckdb_database(root).cursor()
    try:
        text = _guarded(con, sql, _given_tables(sources))
        _register(con, sources)
        return _bounded(con, limit, lambda: _fetch(con, text, params))
    finally:
        con.close()


def run_query(
    *,
    sql: str,
    as_of: int | None = None,
    params: list | None = None,
    timeout_ms: int | None = None,
    druid_names: bool = False,
    druid_sql: bool = False,
    explain: bool = False,
    query_id: str | None = None,
    commits: dict[str, int] | None = None,
    cuts: dict[str, list[Interval]] | None = None,
) -> QueryResult:
    """SQL over the visible rows of the dataSources it names and Druid's metadata
    tables, on DuckDB, within the time limit `timeout_ms` (Druid's context.timeout;
    None: STRATA_QUERY_TIMEOUT_MS) and the size and concurrency limits.
    `druid_names`: computed columns without an alias are named as Druid SQL names
    them (`EXPR$<position>`), for Druid's SQL endpoint. `druid_sql`: the query is
    Druid SQL -- Druid's syntax, functions and names, `EXPLAIN PLAN FOR` answered
    as Druid answers it (metastore.sql_druid); otherwise the engine's dialect. `explain`: DuckDB's
    plan (and the SQL Strata runs) instead of the rows. `query_id`: a name under which
    `query_cancel` can interrupt it. `commits`: `latest_commits()` if just read. `cuts`: see `bind_query`."""
    from django.conf import settings

    if as_of is not None and (
        isinstance(as_of, bool) or not isinstance(as_of, int) or not 0 <= as_of <= MAX_SEQ
    ):
        raise QueryError("as_of must be a commit sequence number", field="as_of")
    limit = timeout_for(timeout_ms)
    druid_explain = False
    if druid_sql:
        druid_explain, sql = _druid_text(sql)
    lease = _lease(str(settings.STRATA_DEEP_STORAGE))
    con, ok = lease[1], False
    try:
        check_read_only(sql)
        druid = {"druid_names": druid_names, "druid_sql": druid_sql, "commits": commits}
        druid["cuts"] = cuts
        bound = bind_query(con, sql, as_of=as_of, params=params if druid_sql else None, **druid)
        params = None if druid_sql else params  # bound into the Druid SQL already
        _register(con, bound.sources, bound.system, as_of=bound.as_of, views=lease[2])
        if druid_explain:
            result = _bounded(con, limit, lambda: explain_plan(con, bound))
        else:
            text = f"EXPLAIN {bound.sql}" if explain else bound.sql
            with _known_as(query_id, con):
                result = _bounded(con, limit, lambda: _fetch(con, text, params))
            if explain:  # the SQL Strata runs for it (the dataSources' views), then the plan
                result.rows = [["strata_sql", bound.sql], *result.rows]
        ok = True
        return result
    except QueryError as exc:
        if druid_sql and not hasattr(exc, "druid_error"):
            exc.message = sql_druid.engine_message(exc.message)
            exc.args = (exc.message,)
        raise
    finally:
        _release(lease, ok)


def _druid_text(sql: str) -> tuple[bool, str]:
    """(whether it asks EXPLAIN PLAN FOR, the query in the engine's syntax) of Druid SQL."""
    if not isinstance(sql, str) or not sql.strip():
        raise QueryError("give the SQL text of a query")
    _check_size(sql)
    try:
        explain, sql = sql_druid_syntax.split_explain(sql)
        return explain, sql_druid_syntax.rewrite(sql)
    except sql_druid_syntax.SyntaxRefused as exc:
        raise QueryError(str(exc)) from None


def _native_type(engine_type: str) -> str:
    """Druid's native type name for a result column of this engine type."""
    name = engine_type.upper()
    if name.endswith("[]"):
        return f"ARRAY<{_native_type(name[:-2])}>"
    if name in ("BIGINT", "INTEGER", "SMALLINT", "TINYINT", "HUGEINT", "BOOLEAN", "UBIGINT"):
        return "LONG"
    if name.startswith("TIMESTAMP") or name == "DATE":
        return "LONG"
    if name == "VARCHAR":
        return "STRING"
    if name == "FLOAT":
        return "FLOAT"
    if name == "DOUBLE" or name.startswith("DECIMAL"):
        return "DOUBLE"
    return "COMPLEX<json>"


def explain_plan(con, bound: BoundQuery) -> QueryResult:
    """Druid's answer to `EXPLAIN PLAN FOR`: one row of PLAN (the query as it runs
    here -- SQL on the embedded engine, not a native query -- with the signature of
    its result), RESOURCES (the dataSources read) and ATTRIBUTES, each JSON text.
    The query is planned (bound), not run."""
    import json

    relation = con.sql(bound.sql)
    signature = [
        {"name": name, "type": _native_type(str(kind))}
        for name, kind in zip(relation.columns, relation.types, strict=True)
    ]
    plan = [
        {
            "query": {"queryType": "sql", "engine": "duckdb", "sql": bound.sql},
            "signature": signature,
            "columnMappings": [{"queryColumn": c, "outputColumn": c} for c in relation.columns],
        }
    ]
    resources = sorted(
        [{"name": s.name, "type": "DATASOURCE"} for s in bound.sources],
        key=lambda r: r["name"],
    )
    attributes = {"statementType": "SELECT"}
    row = [json.dumps(plan), json.dumps(resources), json.dumps(attributes)]
    return QueryResult(
        columns=["PLAN", "RESOURCES", "ATTRIBUTES"], rows=[row], types=["string"] * 3
    )


# --- cancel by id: the console's workbench names its queries ---------------------------------

_by_id: dict[str, object] = {}  # query id -> the connection it runs on, in this process
_canceled: set[str] = set()


class QueryCanceled(QueryError):
    """The query was canceled by its user (query_cancel)."""

    error_class = "org.apache.druid.query.QueryInterruptedException"


@contextlib.contextmanager
def _known_as(query_id: str | None, con):
    if query_id is None:
        yield
        return
    with _running_lock:
        _by_id[query_id] = con
    try:
        yield
    except QueryError:
        with _running_lock:
            canceled = query_id in _canceled
        if canceled:
            raise QueryCanceled("the query was canceled") from None
        raise
    finally:
        with _running_lock:
            _by_id.pop(query_id, None)
            _canceled.discard(query_id)


def query_cancel(query_id: str) -> bool:
    """Interrupt the query run as `query_id` in this process (`run_query(query_id=)`):
    whether it was running here."""
    with _running_lock:
        con = _by_id.get(query_id)
        if con is None:
            return False
        _canceled.add(query_id)
        _interrupt(con)
    return True


# --- results -----------------------------------------------------------------------------


def _json_value(value):
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def arrow_result(table) -> QueryResult:
    """Columns and JSON-ready rows from an Arrow table: timestamps as Druid writes
    them (`2013-01-01T05:00:00.000Z`, UTC), whole decimals as integers."""
    import pyarrow as pa

    columns, types = [], []
    for i, f in enumerate(table.schema):
        col = table.column(i)
        if pa.types.is_timestamp(f.type):
            # Through naive UTC: converting zone-aware values needs no time zone database.
            micros = col.cast(pa.timestamp("us", tz=f.type.tz)).cast(pa.int64())
            col = micros.cast(pa.timestamp("us"))
        columns.append(col)
        types.append(str(f.type))
    names = list(table.schema.names)
    pylists = [_floats(c) if pa.types.is_float32(c.type) else c.to_pylist() for c in columns]
    rows = [[_json_value(v) for v in row] for row in zip(*pylists, strict=True)] if names else []
    return QueryResult(columns=names, rows=rows, types=types)


def _floats(column) -> list:
    """A FLOAT column's values as Druid writes a float: its shortest decimal (0.1, not
    the 0.10000000149011612 of the same float read as a double)."""
    import numpy as np

    return [None if v is None else float(str(np.float32(v))) for v in column.to_pylist()]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
