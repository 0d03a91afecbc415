"""One rule per function of Druid's SQL function reference (apache/druid
docs/querying/sql-functions.md and the pages it links): the engine's SQL with
Druid's meaning, or why it is refused. `docs/druid-sql-function-status.md` is
written from this table (`python -m metastore.sql_druid_rules`), and a test checks
that the checked-in file is what the table says. No Django."""

from __future__ import annotations

import re

from metastore import sql_druid_sketches as sk
from metastore import sql_druid_time as tm
from metastore.sql_druid import Call, DruidFunctionRefused, Rule

_SKETCH = (
    "Strata stores HLL, theta and quantiles (KLL) sketches only; tuple sketches, T-Digest, "
    "Bloom filters, fixed-bucket histograms and sketch texts other than quantiles' are "
    "not available"
)
RULES: dict[str, Rule] = {}


def _add(kind: str, category: str, names: str, arity=(0, None), sql=None, **extra) -> None:
    for name in names.split():
        RULES[name] = Rule(name=name, kind=kind, arity=arity, sql=sql, category=category, **extra)


def _refuse(kind: str, category: str, names: str, reason: str) -> None:
    _add(kind, category, names, refused=reason)


# --- numeric -----------------------------------------------------------------------------

_add("scalar", "numeric", "ABS ACOS ASIN ATAN COS COT DEGREES EXP LN LOG10 RADIANS", (1, 1))
_add("scalar", "numeric", "SIN SQRT TAN FLOOR CEIL", (1, 1))
_add("scalar", "numeric", "CEILING", (1, 1), "ceil($a0)", internal=False)
_add("scalar", "numeric", "ATAN2 MOD POWER", (2, 2))
_add("scalar", "numeric", "ROUND", (1, 2))
_add("scalar", "numeric", "TRUNCATE TRUNC", (1, 2), lambda c: f"trunc({_args(c)})")
_add("scalar", "numeric", "DIV", (2, 2), "(CAST($a0 AS BIGINT) // CAST($a1 AS BIGINT))")
_add("scalar", "numeric", "SAFE_DIVIDE", (2, 2), "CASE WHEN $a1 = 0 THEN NULL ELSE $a0 // $a1 END")
_add("scalar", "numeric", "BITWISE_AND", (2, 2), "(CAST($a0 AS BIGINT) & CAST($a1 AS BIGINT))")
_add("scalar", "numeric", "BITWISE_OR", (2, 2), "(CAST($a0 AS BIGINT) | CAST($a1 AS BIGINT))")
_add("scalar", "numeric", "BITWISE_XOR", (2, 2), "xor(CAST($a0 AS BIGINT), CAST($a1 AS BIGINT))")
_add("scalar", "numeric", "BITWISE_COMPLEMENT", (1, 1), "(~CAST($a0 AS BIGINT))")
_add("scalar", "numeric", "BITWISE_SHIFT_LEFT", (2, 2), "(CAST($a0 AS BIGINT) << $a1)")
_add("scalar", "numeric", "BITWISE_SHIFT_RIGHT", (2, 2), "(CAST($a0 AS BIGINT) >> $a1)")
_refuse(
    "scalar",
    "numeric",
    "BITWISE_CONVERT_DOUBLE_TO_LONG_BITS BITWISE_CONVERT_LONG_BITS_TO_DOUBLE",
    "the engine has no reinterpretation of a double's bits as a long",
)


def _args(call: Call) -> str:
    return ", ".join(f"$a{i}" for i in range(len(call.args)))


def _human(units: list[str], base: int, small: str):
    """Druid's HUMAN_READABLE_*_FORMAT: below `base` the number as is, else divided
    by the largest power of `base` it reaches, with `precision` decimals and the unit."""

    def sql(call: Call) -> str:
        precision = call.literal(1, "the precision") if call.given(1) else 2
        if not isinstance(precision, int) or not 0 <= precision <= 3:
            raise DruidFunctionRefused(f"{call.name}: precision must be an integer from 0 to 3")
        value = "CAST($a0 AS BIGINT)"
        cases = [f"WHEN abs({value}) < {base} THEN {small.format(v=value)}"]
        for power in range(len(units) - 1, 0, -1):
            # Druid cuts the digits past the precision off (1048576 B is 1.04 MB).
            scaled = f"trunc({value} / {float(base**power)} * {10**precision}) / {10**precision}"
            cases.append(
                f"WHEN abs({value}) >= {base**power} THEN "
                f"printf('%.{precision}f {units[power]}', {scaled})"
            )
        return "CASE " + " ".join(cases[1:]) + " " + cases[0] + " END"

    return sql


_add(
    "scalar",
    "numeric",
    "HUMAN_READABLE_BINARY_BYTE_FORMAT",
    (1, 2),
    _human(["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"], 1024, "CAST({v} AS VARCHAR) || ' B'"),
)
_add(
    "scalar",
    "numeric",
    "HUMAN_READABLE_DECIMAL_BYTE_FORMAT",
    (1, 2),
    _human(["B", "KB", "MB", "GB", "TB", "PB", "EB"], 1000, "CAST({v} AS VARCHAR) || ' B'"),
)
_add(
    "scalar",
    "numeric",
    "HUMAN_READABLE_DECIMAL_FORMAT",
    (1, 2),
    _human(["", "K", "M", "G", "T", "P", "E"], 1000, "CAST({v} AS VARCHAR)"),
)

# --- strings -----------------------------------------------------------------------------


def _concat(call: Call) -> str:
    nulls = " OR ".join(f"$a{i} IS NULL" for i in range(len(call.args)))
    return f"CASE WHEN {nulls} THEN NULL ELSE concat({_args(call)}) END"


def _pad(engine: str):
    # An empty pad adds nothing but still cuts the text to the length, as in Druid.
    def sql(call: Call) -> str:
        text, length = "CAST($a0 AS VARCHAR)", "CAST($a1 AS INTEGER)"
        if not call.given(2):
            return f"{engine}({text}, {length}, ' ')"
        return (
            f"CASE WHEN $a2 = '' THEN left({text}, {length}) "
            f"ELSE {engine}({text}, {length}, $a2) END"
        )

    return sql


def _regexp_replace(call: Call) -> str:
    # Druid (Java) writes groups in the replacement as $1; the engine (RE2) as \1.
    try:
        replacement = call.literal(2, "the replacement")
    except DruidFunctionRefused:
        return "regexp_replace($a0, $a1, $a2, 'g')"
    if replacement is None:
        return "CAST(NULL AS VARCHAR)"
    text = str(replacement).replace("\\", "\\\\")
    text = __import__("re").sub(r"\$(\d)", r"\\\1", text).replace("'", "''")
    return f"regexp_replace($a0, $a1, '{text}', 'g')"


def _parse_long(call: Call) -> str:
    radix = call.literal(1, "the radix") if call.given(1) else 10
    prefixes = {10: "", 16: "0x", 2: "0b"}
    if radix not in prefixes:
        raise DruidFunctionRefused(f"PARSE_LONG: radix {radix!r} is not supported (2, 10, 16)")
    return f"TRY_CAST('{prefixes[radix]}' || trim(CAST($a0 AS VARCHAR)) AS BIGINT)"


_add("scalar", "string", "CONCAT", (1, None), _concat)
_add("scalar", "string", "TEXTCAT", (2, 2), _concat)
_add("scalar", "string", "BTRIM", (1, 2), lambda c: f"trim({_args(c)})")
_add("scalar", "string", "LTRIM RTRIM TRIM", (1, 2))
_add("scalar", "string", "LOWER UPPER REVERSE", (1, 1))
_add("scalar", "string", "LEFT RIGHT REPEAT", (2, 2))
_add("scalar", "string", "REPLACE", (3, 3))
_add("scalar", "string", "STRPOS", (2, 2))
_add("scalar", "string", "POSITION", (2, 2))
_add(
    "scalar",
    "string",
    "DRUID_POSITION_FROM",
    (3, 3),
    "CASE WHEN $a2 <= 1 THEN strpos($a1, $a0) WHEN strpos(substring($a1, $a2), $a0) = 0 THEN 0 "
    "ELSE strpos(substring($a1, $a2), $a0) + $a2 - 1 END",
    internal=True,
)
# Druid's substring is null, not empty, when it starts past the end of the text.
_add(
    "scalar",
    "string",
    "SUBSTRING SUBSTR",
    (2, 3),
    lambda c: f"CASE WHEN $a1 > length($a0) THEN NULL ELSE substring({_args(c)}) END",
)
_add("scalar", "string", "LENGTH CHAR_LENGTH CHARACTER_LENGTH STRLEN", (1, 1), "length($a0)")
_add("scalar", "string", "LPAD", (2, 3), _pad("lpad"))
_add("scalar", "string", "RPAD", (2, 3), _pad("rpad"))
_add("scalar", "string", "CONTAINS_STRING", (2, 2), "contains(CAST($a0 AS VARCHAR), $a1)")
_add(
    "scalar",
    "string",
    "ICONTAINS_STRING",
    (2, 2),
    "contains(lower(CAST($a0 AS VARCHAR)), lower($a1))",
)
_add(
    "scalar",
    "string",
    "DECODE_BASE64_UTF8",
    (1, 1),
    "CASE WHEN regexp_full_match($a0, '[A-Za-z0-9+/]*={0,2}') THEN decode(from_base64($a0)) END",
)
_add("scalar", "string", "PARSE_LONG", (1, 2), _parse_long)
_add(
    "scalar",
    "string",
    "REGEXP_EXTRACT",
    (2, 3),
    lambda c: (
        "CASE WHEN regexp_matches($a0, $a1) THEN regexp_extract($a0, $a1"
        + (", $a2" if c.given(2) else "")
        + ") END"
    ),
)


def _regexp_like(call: Call) -> str:
    """REGEXP_LIKE(expr, pattern): the pattern a string literal, as Druid requires."""
    node = call.args[1]
    literal = node.get("literal", {}) if node.get("class") == "CONSTANT" else {}
    if literal.get("kind") == "NULL_LITERAL":
        raise DruidFunctionRefused("Illegal use of 'NULL'")
    if not literal:
        raise DruidFunctionRefused("Argument to function 'REGEXP_LIKE' must be a literal")
    if literal.get("kind") != "STRING":
        raise DruidFunctionRefused(
            "Cannot apply 'REGEXP_LIKE' to arguments of type 'REGEXP_LIKE(<CHAR>, <INTEGER>)'"
        )
    return "regexp_matches($a0, $a1)"


_add("scalar", "string", "REGEXP_LIKE", (2, 2), _regexp_like)
_add("scalar", "string", "REGEXP_REPLACE", (3, 3), _regexp_replace)
_add("scalar", "string", "STRING_FORMAT", (1, None), lambda c: f"printf({_args(c)})")
_refuse(
    "scalar",
    "string",
    "LOOKUP",
    "Strata has no query-time lookups (the lookup schema is empty)",
)

# --- other scalars -----------------------------------------------------------------------

_add("scalar", "other", "NULLIF", (2, 2))
_add("scalar", "other", "NVL", (2, 2), "coalesce($a0, $a1)")
_add("scalar", "other", "GREATEST LEAST", (0, None))
_add("scalar", "other", "COALESCE", (1, None))
_refuse("scalar", "other", "BLOOM_FILTER_TEST", _SKETCH)
_refuse(
    "scalar", "other", "DECODE_BASE64_COMPLEX", "complex (sketch) values are not available in SQL"
)
_add("scalar", "ip", "IPV4_PARSE", (1, 1), "druid_ipv4_parse($a0)")
_add(
    "scalar",
    "ip",
    "IPV4_STRINGIFY",
    (1, 1),
    "CASE WHEN druid_ipv4_parse($a0) IS NOT NULL THEN concat_ws('.', "
    "druid_ipv4_parse($a0) >> 24, (druid_ipv4_parse($a0) >> 16) & 255, "
    "(druid_ipv4_parse($a0) >> 8) & 255, druid_ipv4_parse($a0) & 255) END",
)


def _ipv4_match(call: Call) -> str:
    import ipaddress

    subnet = call.literal(1, "the subnet")
    try:
        network = ipaddress.IPv4Network(str(subnet), strict=False)
    except ValueError:
        raise DruidFunctionRefused(f"IPV4_MATCH: {subnet!r} is not an IPv4 subnet") from None
    shift = 32 - network.prefixlen
    base = int(network.network_address) >> shift
    return f"coalesce((druid_ipv4_parse($a0) >> {shift}) = {base}, false)"


_add("scalar", "ip", "IPV4_MATCH", (2, 2), _ipv4_match)
_refuse("scalar", "ip", "IPV6_MATCH", "the engine here has no IPv6 address type")

# --- date and time -----------------------------------------------------------------------

_TS = "CAST($a0 AS TIMESTAMP)"


def _zone_of(call: Call, index: int | None) -> str | None:
    """The time zone a call works in: its time zone argument, else the session's
    (`sqlTimeZone`); None for UTC by default."""
    if index is not None and call.given(index):
        return tm.zone(call.literal(index, "the time zone"), call.name)
    zone = tm.session_zone()
    return None if zone == "UTC" else zone


def _floor_sql(call: Call, width_index: int = 1) -> str:
    """TIME_FLOOR's SQL: buckets of the period counted from the origin (Druid's
    default: the epoch, and Monday for weeks), in the time zone if one is given."""
    fields = tm.period(call.literal(width_index, "the period"), call.name)
    width = tm.interval_text(fields)
    zone = _zone_of(call, 3)
    if call.given(2):
        origin = "CAST($a2 AS TIMESTAMP)"
        origin = tm.to_local(origin, zone) if zone else origin
    else:  # the epoch of the time zone's wall clock
        weeks_only = set(fields) == {"weeks"}
        origin = "TIMESTAMP '1970-01-05'" if weeks_only else "TIMESTAMP '1970-01-01'"
    if zone is None:
        return f"time_bucket({width}, {_TS}, {origin})"
    return tm.from_local(f"time_bucket({width}, {tm.to_local('$a0', zone)}, {origin})", zone)


def _time_ceil(call: Call) -> str:
    floor = _floor_sql(call)
    width = tm.interval_text(tm.period(call.literal(1, "the period"), call.name))
    return f"CASE WHEN {floor} = {_TS} THEN {_TS} ELSE {floor} + {width} END"


def _time_shift(call: Call) -> str:
    width = tm.interval_text(tm.period(call.literal(1, "the period"), call.name))
    zone = _zone_of(call, 3)
    if zone is None:
        return f"{_TS} + CAST($a2 AS BIGINT) * {width}"
    return tm.from_local(f"{tm.to_local('$a0', zone)} + CAST($a2 AS BIGINT) * {width}", zone)


# TIME_EXTRACT's units as Druid's TimestampExtractExprMacro computes them.
_EXTRACT = {
    "EPOCH": "CAST(epoch_ms({t}) // 1000 AS BIGINT)",
    "MICROSECOND": "CAST(epoch_ms({t}) // 1000 // 1000 AS BIGINT)",
    "MILLISECOND": "CAST(millisecond({t}) % 1000 AS BIGINT)",
    "SECOND": "second({t})",
    "MINUTE": "minute({t})",
    "HOUR": "hour({t})",
    "DAY": "day({t})",
    "DOW": "isodow({t})",
    "ISODOW": "isodow({t})",
    "DOY": "dayofyear({t})",
    "WEEK": "week({t})",
    "MONTH": "month({t})",
    "QUARTER": "quarter({t})",
    "YEAR": "year({t})",
    "ISOYEAR": "isoyear({t})",
    "DECADE": "(year({t}) // 10)",
    "CENTURY": "ceil(year({t}) / 100.0)",
    "MILLENNIUM": "ceil(year({t}) / 1000.0)",
}


def _extract_sql(call: Call, unit, time: str, zone_index: int | None) -> str:
    unit = str(unit or "MILLISECOND").upper()
    if unit not in _EXTRACT and unit.endswith("S") and unit[:-1] in _EXTRACT:
        unit = unit[:-1]  # the engine reads EXTRACT(MILLISECOND ...) as 'milliseconds'
    if unit not in _EXTRACT:
        raise DruidFunctionRefused(
            f"{call.name}: unit {unit!r} is not one of {', '.join(_EXTRACT)}"
        )
    zone = _zone_of(call, zone_index)
    t = tm.to_local(time, zone) if zone else f"CAST({time} AS TIMESTAMP)"
    if unit == "EPOCH":  # an instant: the same in every time zone
        t = f"CAST({time} AS TIMESTAMP)"
    return _EXTRACT[unit].format(t=t)


def _time_extract(call: Call) -> str:
    unit = call.literal(1, "the unit") if call.given(1) else "MILLISECOND"
    return _extract_sql(call, unit, "$a0", 2)


def _extract(call: Call) -> str:  # EXTRACT(unit FROM t), read by the engine as date_part
    return _extract_sql(call, call.literal(0, "the unit"), "$a1", None)


_ISO_OUT = "'%Y-%m-%dT%H:%M:%S.%gZ'"


def _time_format(call: Call) -> str:
    zone = _zone_of(call, 2)
    local = f"timezone('{zone}', CAST($a0 AS TIMESTAMPTZ))" if zone else _TS
    if call.given(1):
        pattern = tm.strftime_pattern(call.literal(1, "the pattern"), call.name)
        if not zone:
            return f"strftime({local}, '{pattern}')".replace("%z", "+0000")
        minutes = f"date_diff('minute', {_TS}, {local})"  # Joda's Z: the zone's offset, -0800
        offset = (
            f"printf('%s%02d%02d', CASE WHEN {minutes} < 0 THEN '-' ELSE '+' END, "
            f"abs({minutes}) // 60, abs({minutes}) % 60)"
        )
        parts: list[str] = []
        for i, part in enumerate(pattern.split("%z")):
            parts += ([offset] if i else []) + ([f"strftime({local}, '{part}')"] if part else [])
        return " || ".join(parts)
    if zone is None or zone == "UTC":
        return f"strftime({_TS}, {_ISO_OUT})"
    minutes = f"date_diff('minute', {_TS}, {local})"
    offset = (
        f"printf('%s%02d:%02d', CASE WHEN {minutes} < 0 THEN '-' ELSE '+' END, "
        f"abs({minutes}) // 60, abs({minutes}) % 60)"
    )
    return (
        f"strftime({local}, '%Y-%m-%dT%H:%M:%S.%g') || "
        f"CASE WHEN {minutes} = 0 THEN 'Z' ELSE {offset} END"
    )


def _time_parse(call: Call) -> str:
    text = "trim(CAST($a0 AS VARCHAR))"
    zone = _zone_of(call, 2)
    if call.given(1):
        pattern = tm.strftime_pattern(call.literal(1, "the pattern"), call.name)
        parsed = f"try_strptime({text}, '{pattern}')"
        if "%z" in pattern:
            return f"CAST({parsed} AS TIMESTAMP)"
        return f"CAST(timezone('{zone}', {parsed}) AS TIMESTAMP)" if zone else parsed
    if zone is None:
        return f"CAST(TRY_CAST({text} AS TIMESTAMPTZ) AS TIMESTAMP)"
    has_offset = f"regexp_matches({text}, '(Z|[+-][0-9]{{2}}(:?[0-9]{{2}})?)$')"
    return (
        f"CASE WHEN {has_offset} THEN CAST(TRY_CAST({text} AS TIMESTAMPTZ) AS TIMESTAMP) "
        f"ELSE CAST(timezone('{zone}', TRY_CAST({text} AS TIMESTAMP)) AS TIMESTAMP) END"
    )


def _time_in_interval(call: Call) -> str:
    start, end = tm.interval_bounds(call.literal(1, "the interval"), call.name)
    return f"({_TS} >= {start} AND {_TS} < {end})"


_UNITS = {
    "MILLISECOND": "1 millisecond",
    "SECOND": "1 second",
    "MINUTE": "1 minute",
    "HOUR": "1 hour",
    "DAY": "1 day",
    "WEEK": "7 days",
    "MONTH": "1 month",
    "QUARTER": "3 months",
    "YEAR": "1 year",
}


def _unit(call: Call, index: int) -> str:
    unit = str(call.literal(index, "the time unit", word=True) or "").upper()
    unit = {"SQL_TSI_" + k: k for k in _UNITS}.get(unit, unit)
    if unit not in _UNITS:
        raise DruidFunctionRefused(f"{call.name}: unit {unit!r} is not one of {', '.join(_UNITS)}")
    return unit


def _truncated(unit: str, time: str = "$a0") -> str:
    """`time` cut down to the unit (SQL text), on the session time zone's wall clock."""
    zone = tm.session_zone()
    if zone == "UTC":
        return f"date_trunc({unit}, CAST({time} AS TIMESTAMP))"
    return tm.from_local(f"date_trunc({unit}, {tm.to_local(time, zone)})", zone)


def _floor_to(call: Call) -> str:
    return _truncated(f"'{_unit(call, 1).lower()}'")


def _ceil_to(call: Call) -> str:
    unit = _unit(call, 1)
    floor = _truncated(f"'{unit.lower()}'")
    if tm.session_zone() != "UTC":  # the next unit on the wall clock, not a fixed width
        step = f"date_trunc('{unit.lower()}', {tm.to_local('$a0', tm.session_zone())})"
        up = tm.from_local(f"{step} + INTERVAL '{_UNITS[unit]}'", tm.session_zone())
        return f"CASE WHEN {floor} = {_TS} THEN {_TS} ELSE {up} END"
    return f"CASE WHEN {floor} = {_TS} THEN {_TS} ELSE {floor} + INTERVAL '{_UNITS[unit]}' END"


_CALENDAR = ("MONTH", "QUARTER", "YEAR")  # Druid shifts and counts these in the session's zone


def _timestampadd(call: Call) -> str:
    """TIMESTAMPADD as Druid plans it: months, quarters and years on the wall clock
    of the session's `sqlTimeZone` (timestamp_shift), shorter units as a fixed width."""
    unit, zone = _unit(call, 0), tm.session_zone()
    step = f"CAST($a1 AS BIGINT) * INTERVAL '{_UNITS[unit]}'"
    if unit in _CALENDAR and zone != "UTC":
        return tm.from_local(f"{tm.to_local('$a2', zone)} + {step}", zone)
    return f"CAST($a2 AS TIMESTAMP) + {step}"


def _timestampdiff(call: Call) -> str:
    """TIMESTAMPDIFF as Druid plans it: whole months (quarters, years) between the
    wall-clock times of the session's zone, else whole units of fixed width."""
    unit, zone = _unit(call, 0), tm.session_zone()
    first, second = "CAST($a1 AS TIMESTAMP)", "CAST($a2 AS TIMESTAMP)"
    if unit in _CALENDAR and zone != "UTC":
        first, second = tm.to_local("$a1", zone), tm.to_local("$a2", zone)
    return f"CAST(date_sub('{unit.lower()}', {first}, {second}) AS INTEGER)"


_add("scalar", "time", "TIME_FLOOR", (2, 4), _floor_sql)
_add("scalar", "time", "TIME_CEIL", (2, 4), _time_ceil)
_add("scalar", "time", "TIME_SHIFT", (3, 4), _time_shift)
_add("scalar", "time", "TIME_EXTRACT", (1, 3), _time_extract)
_add("scalar", "time", "EXTRACT", (2, 2), _extract)
_add("scalar", "time", "TIME_PARSE", (1, 3), _time_parse)
_add("scalar", "time", "TIME_FORMAT", (1, 3), _time_format)
_add("scalar", "time", "TIME_IN_INTERVAL", (2, 2), _time_in_interval)
_add("scalar", "time", "MILLIS_TO_TIMESTAMP", (1, 1), "epoch_ms(CAST($a0 AS BIGINT))")
_add("scalar", "time", "TIMESTAMP_TO_MILLIS", (1, 1), f"epoch_ms({_TS})")
_add("scalar", "time", "DATE_TRUNC", (2, 2), lambda c: _truncated("lower($a0)", "$a1"))
_add("scalar", "time", "TIMESTAMPADD", (3, 3), _timestampadd)
_add("scalar", "time", "TIMESTAMPDIFF", (3, 3), _timestampdiff)
_add("scalar", "time", "DRUID_FLOOR_TO", (2, 2), _floor_to, internal=True)
_add("scalar", "time", "DRUID_CEIL_TO", (2, 2), _ceil_to, internal=True)

# --- aggregations ------------------------------------------------------------------------


def _limited(engine: str, size_of: str, default: int = 1024):
    """An aggregation with Druid's size limit in bytes (its last argument, 1024 when
    absent): a result over it fails the query, as in Druid."""

    def sql(call: Call) -> str:
        limit_index = {"string_agg": 2, "array_agg": 1, "flatten": 1}[engine]
        limit = call.literal(limit_index, "the size") if call.given(limit_index) else default
        if not isinstance(limit, int) or limit <= 0:
            raise DruidFunctionRefused(f"{call.name}: the size must be a positive integer")
        if engine == "string_agg":
            separator = "$a1" if call.given(1) else "','"
            value = f"string_agg(CAST($a0 AS VARCHAR), {separator})"
        elif engine == "array_agg":
            value = "array_agg($a0)"
        else:
            value = "flatten(list_filter(array_agg($a0), lambda v: v IS NOT NULL))"
            if call.node.get("distinct"):
                value = f"list_distinct({value})"
        if engine != "string_agg" and call.node.get("distinct"):
            # Druid's DISTINCT arrays are sorted sets (array_set_add), nulls first
            value = f"list_sort({value}, 'ASC', 'NULLS FIRST')"
        message = (
            f"{call.name}: the result is larger than {limit} bytes (the size argument); "
            "give a larger size"
        )
        return (
            f"CASE WHEN strlen({size_of.format(v=value)}) > {limit} "
            f"THEN error('{message}') ELSE {value} END"
        )

    return sql


def _first_last(engine: str, by: bool):
    """EARLIEST/LATEST(_BY): the value at the earliest (latest) time, null or not, as
    Druid's numeric first/last aggregators answer in SQL-compatible null handling; with
    a size (the string form), the earliest (latest) value that is not null."""

    def sql(call: Call) -> str:
        time = "$a1" if by else "__time"
        size_index = 2 if by else 1
        if call.given(size_index):
            value = f"{engine.removesuffix('_null')}($a0, CAST({time} AS TIMESTAMP))"
            return f"left(CAST({value} AS VARCHAR), CAST($a{size_index} AS INTEGER))"
        return f"{engine}($a0, CAST({time} AS TIMESTAMP))"

    return sql


_AGG = "aggregate"
_add(_AGG, "aggregation", "COUNT", (1, 1))
_add(_AGG, "aggregation", "SUM MIN MAX AVG BIT_AND BIT_OR BIT_XOR", (1, 1))
for _name, _population, _root in (
    ("VARIANCE", False, False),
    ("VAR_SAMP", False, False),
    ("VAR_POP", True, False),
    ("STDDEV", False, True),
    ("STDDEV_SAMP", False, True),
    ("STDDEV_POP", True, True),
):
    _add(_AGG, "aggregation", _name, (1, 1), sk.variance(population=_population, root=_root))
_add(_AGG, "aggregation", "GROUPING", (1, None))
_SKETCH_AGGS = frozenset({"approx_count_distinct", "quantile_disc", "list", "any_value"})
_add(
    _AGG,
    "aggregation",
    "APPROX_COUNT_DISTINCT APPROX_COUNT_DISTINCT_BUILTIN",
    (1, 1),
    sk.count_distinct("hll"),
    engine=_SKETCH_AGGS,
)
_add(
    _AGG,
    "aggregation",
    "APPROX_COUNT_DISTINCT_DS_HLL",
    (1, 3),
    sk.count_distinct("hll"),
    engine=_SKETCH_AGGS,
)
_add(
    _AGG,
    "aggregation",
    "APPROX_COUNT_DISTINCT_DS_THETA",
    (1, 2),
    sk.count_distinct("theta"),
    engine=_SKETCH_AGGS,
)
_add(
    _AGG,
    "aggregation",
    "APPROX_QUANTILE APPROX_QUANTILE_DS",
    (2, 3),
    sk.approx_quantile,
    engine=_SKETCH_AGGS,
)
_add(_AGG, "aggregation", "DS_HLL", (1, 3), sk.build("hll"), engine=_SKETCH_AGGS)
_add(_AGG, "aggregation", "DS_THETA", (1, 2), sk.build("theta"), engine=_SKETCH_AGGS)
_add(_AGG, "aggregation", "DS_QUANTILES_SKETCH", (1, 2), sk.build("kll"), engine=_SKETCH_AGGS)
for _name, (_arity, _sql) in sk.SCALARS.items():
    _add("scalar", "sketch", _name, _arity, _sql)
_add(
    _AGG,
    "aggregation",
    "EARLIEST",
    (1, 2),
    _first_last("arg_min_null", False),
    engine=frozenset({"arg_min_null", "arg_min"}),
)
_add(
    _AGG,
    "aggregation",
    "EARLIEST_BY",
    (2, 3),
    _first_last("arg_min_null", True),
    engine=frozenset({"arg_min_null", "arg_min"}),
)
_add(
    _AGG,
    "aggregation",
    "LATEST",
    (1, 2),
    _first_last("arg_max_null", False),
    engine=frozenset({"arg_max_null", "arg_max"}),
)
_add(
    _AGG,
    "aggregation",
    "LATEST_BY",
    (2, 3),
    _first_last("arg_max_null", True),
    engine=frozenset({"arg_max_null", "arg_max"}),
)
_add(
    _AGG,
    "aggregation",
    "ANY_VALUE",
    (1, 3),
    # The first value read, null or not; with a size, the string form.
    lambda c: (
        "left(CAST(first($a0) AS VARCHAR), CAST($a1 AS INTEGER))" if c.given(1) else "first($a0)"
    ),
    engine=frozenset({"first"}),
)
_add(
    _AGG,
    "aggregation",
    "STRING_AGG LISTAGG",
    (1, 3),
    _limited("string_agg", "{v}"),
    engine=frozenset({"string_agg"}),
)
_add(
    _AGG,
    "aggregation",
    "ARRAY_AGG",
    (1, 2),
    _limited("array_agg", "CAST(to_json({v}) AS VARCHAR)"),
    engine=frozenset({"array_agg"}),
)
_add(
    _AGG,
    "aggregation",
    "ARRAY_CONCAT_AGG",
    (1, 2),
    _limited("flatten", "CAST(to_json({v}) AS VARCHAR)"),
    engine=frozenset({"array_agg"}),
)
_refuse(
    _AGG,
    "aggregation",
    "APPROX_QUANTILE_FIXED_BUCKETS BLOOM_FILTER DS_TUPLE_DOUBLES TDIGEST_GENERATE_SKETCH "
    "TDIGEST_QUANTILE",
    _SKETCH,
)
_refuse(
    "scalar",
    "sketch",
    "DS_TUPLE_DOUBLES_INTERSECT DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE DS_TUPLE_DOUBLES_NOT "
    "DS_TUPLE_DOUBLES_UNION HLL_SKETCH_TO_STRING THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS",
    _SKETCH,
)

# --- window functions --------------------------------------------------------------------

_add("window", "window", "ROW_NUMBER RANK DENSE_RANK PERCENT_RANK CUME_DIST", (0, 0))
_add("window", "window", "NTILE FIRST_VALUE LAST_VALUE", (1, 1))
_add("window", "window", "LAG LEAD", (1, 3))

# --- arrays ------------------------------------------------------------------------------


def _is_array(node: dict) -> bool:
    if node.get("class") == "OPERATOR" and node.get("type") == "ARRAY_CONSTRUCTOR":
        return True
    if node.get("class") == "CAST" and str(node.get("cast_type", {}).get("id")) == "LIST":
        return True
    name = str(node.get("function_name", "")).lower()
    return name.startswith(("list_", "array_", "druid_mv", "flatten", "regexp_split"))


def _contains(call: Call) -> str:
    if _is_array(call.args[1]):
        return "list_has_all($a0, $a1)"
    return "list_contains($a0, $a1)"


_ARR = "array"
_add("scalar", _ARR, "ARRAY_LENGTH", (1, 1), "len($a0)")
_add(
    "scalar", _ARR, "ARRAY_OFFSET", (2, 2), "CASE WHEN $a1 >= 0 THEN list_extract($a0, $a1 + 1) END"
)
_add("scalar", _ARR, "ARRAY_ORDINAL", (2, 2), "CASE WHEN $a1 >= 1 THEN list_extract($a0, $a1) END")
_add("scalar", _ARR, "ARRAY_OFFSET_OF", (2, 2), "list_position($a0, $a1) - 1")
_add("scalar", _ARR, "ARRAY_ORDINAL_OF", (2, 2), "list_position($a0, $a1)")
_add("scalar", _ARR, "ARRAY_CONTAINS", (2, 2), _contains)
_add("scalar", _ARR, "ARRAY_OVERLAP", (2, 2), "list_has_any($a0, $a1)")
_add(
    "scalar",
    _ARR,
    "SCALAR_IN_ARRAY",
    (2, 2),
    "CASE WHEN $a0 IS NULL THEN NULL ELSE list_contains($a1, $a0) END",
)
_add("scalar", _ARR, "ARRAY_APPEND", (2, 2), "list_append($a0, $a1)")
_add("scalar", _ARR, "ARRAY_PREPEND", (2, 2), "list_prepend($a0, $a1)")
_add("scalar", _ARR, "ARRAY_CONCAT", (2, 2), "list_concat($a0, $a1)")
_add(
    "scalar",
    _ARR,
    "ARRAY_SLICE",
    (3, 3),
    "CASE WHEN $a1 < 0 OR $a1 > len($a0) OR $a1 > $a2 THEN NULL "
    "ELSE list_slice($a0, $a1 + 1, $a2) END",
)
_add("scalar", _ARR, "ARRAY_TO_STRING", (2, 2), "array_to_string($a0, $a1)")
_add("scalar", _ARR, "STRING_TO_ARRAY", (2, 2), "regexp_split_to_array($a0, $a1)")
_add("scalar", _ARR, "ARRAY_TO_MV", (1, 1), "druid_mv_out(CAST($a0 AS VARCHAR[]))")


def _unnest(call: Call) -> str | None:
    """A multi-value string's row without values (null) unnests to one null row in
    Druid (its unnest cursor over the dimension); the engine's unnest drops it."""
    if call.args[0].get("function_name") == "druid_mv":
        return "unnest(coalesce($a0, [NULL::VARCHAR]))"
    return None


_add("table", _ARR, "UNNEST", (1, 1), _unnest)

# --- multi-value strings -----------------------------------------------------------------

_MV = "multi-value string"


def _mv_to_array(call: Call) -> str:
    if call.args[0].get("class") != "COLUMN_REF":  # Druid reads only a column as stored
        raise DruidFunctionRefused(
            "Function[mv_to_array] argument should be an identifier expression (a column). "
            "Use array() instead"
        )
    return "druid_mv($a0)"


_add("scalar", _MV, "MV_TO_ARRAY", (1, 1), _mv_to_array)
_add("scalar", _MV, "MV_TO_STRING", (2, 2), "array_to_string(druid_mv($a0), $a1)")
_add("scalar", _MV, "MV_LENGTH", (1, 1), "len(druid_mv($a0))")
_add(
    "scalar",
    _MV,
    "MV_OFFSET",
    (2, 2),
    "CASE WHEN $a1 >= 0 THEN list_extract(druid_mv($a0), $a1 + 1) END",
)
_add(
    "scalar",
    _MV,
    "MV_ORDINAL",
    (2, 2),
    "CASE WHEN $a1 >= 1 THEN list_extract(druid_mv($a0), $a1) END",
)
_add(
    "scalar", _MV, "MV_OFFSET_OF", (2, 2), "list_position(druid_mv($a0), CAST($a1 AS VARCHAR)) - 1"
)
_add("scalar", _MV, "MV_ORDINAL_OF", (2, 2), "list_position(druid_mv($a0), CAST($a1 AS VARCHAR))")
# A null value matches a null (Druid's array_contains / array_overlap): the values are
# compared with nulls made a marker. Against literals Druid filters natively, where a
# row without values is one null value; against other values the row is null.
_MV_VALUES = "list_transform({0}, lambda druid_v: coalesce(druid_v, chr(0)))"
_MV_OR_NULL = "CASE WHEN len(druid_mv({0})) > 0 THEN druid_mv({0}) ELSE [NULL::VARCHAR] END"


def _mv_match(engine: str):
    def sql(call: Call) -> str:
        literal = call.args[1].get("type") == "ARRAY_CONSTRUCTOR" and all(
            c.get("class") == "CONSTANT" for c in call.args[1].get("children") or []
        )
        values = (
            _MV_OR_NULL if literal or call.args[1].get("class") == "CONSTANT" else "druid_mv({0})"
        )
        first = _MV_VALUES.format(values.format("$a0"))
        return f"{engine}({first}, {_MV_VALUES.format('druid_mv($a1)')})"

    return sql


_add("scalar", _MV, "MV_CONTAINS", (2, 2), _mv_match("list_has_all"))
_add("scalar", _MV, "MV_OVERLAP", (2, 2), _mv_match("list_has_any"))


def _mv_slice(call: Call) -> str:
    """MV_SLICE(mv, start[, end]): an empty slice is `[]`, as Druid writes it."""
    end = "$a2" if len(call.args) == 3 else "len(druid_mv($a0))"
    part = f"list_slice(druid_mv($a0), $a1 + 1, {end})"
    return (
        f"CASE WHEN druid_mv($a0) IS NULL OR $a1 < 0 OR $a1 > len(druid_mv($a0)) OR $a1 > {end} THEN NULL "
        f"WHEN len({part}) = 0 THEN '[]' ELSE druid_mv_out({part}) END"
    )


_add("scalar", _MV, "MV_SLICE", (2, 3), _mv_slice)
_add(
    "scalar",
    _MV,
    "MV_APPEND",
    (2, 2),
    "druid_mv_out(CASE WHEN druid_mv($a0) IS NOT NULL THEN list_append(druid_mv($a0), CAST($a1 AS VARCHAR)) END)",
)
_add(
    "scalar",
    _MV,
    "MV_PREPEND",
    (2, 2),
    "druid_mv_out(CASE WHEN druid_mv($a1) IS NOT NULL THEN list_prepend(CAST($a0 AS VARCHAR), druid_mv($a1)) END)",
)
_add(
    "scalar",
    _MV,
    "MV_CONCAT",
    (2, 2),
    "druid_mv_out(CASE WHEN druid_mv($a0) IS NOT NULL AND druid_mv($a1) IS NOT NULL "
    "THEN list_concat(druid_mv($a0), druid_mv($a1)) END)",
)
_add(
    "scalar",
    _MV,
    "MV_FILTER_ONLY",
    (2, 2),
    "druid_mv_out(list_filter(druid_mv($a0), lambda v: list_contains(druid_mv($a1), v)))",
)
_add(
    "scalar",
    _MV,
    "MV_FILTER_NONE",
    (2, 2),
    "druid_mv_out(list_filter(druid_mv($a0), lambda v: NOT list_contains(druid_mv($a1), v)))",
)
_add("scalar", _MV, "STRING_TO_MV", (2, 2), "druid_mv_out(regexp_split_to_array($a0, $a1))")

# --- JSON --------------------------------------------------------------------------------

_JSON = "JSON"
_JSON_TEXT = "CAST($a0 AS VARCHAR)"
_VALUE = (  # a scalar is stored as itself (workers.jobs.parsing): the root path reads it
    f"CASE WHEN NOT json_valid({_JSON_TEXT}) THEN CASE WHEN $a1 = '$' THEN {_JSON_TEXT} END "
    f"WHEN json_type({_JSON_TEXT}, $a1) IN ('OBJECT', 'ARRAY') THEN NULL "
    f"ELSE json_extract_string({_JSON_TEXT}, $a1) END"
)
_SQL_TYPES = {
    "VARCHAR": "VARCHAR",
    "BIGINT": "BIGINT",
    "INTEGER": "BIGINT",
    "DOUBLE": "DOUBLE",
    "FLOAT": "FLOAT",
    "REAL": "FLOAT",
    "DECIMAL": "DOUBLE",
    "BOOLEAN": "BOOLEAN",
}


_ON_CLAUSE = re.compile(r"\s+(NULL|ERROR|DEFAULT\s+\S+)\s+ON\s+(EMPTY|ERROR)\b", re.I)


def _json_path(call: Call, name: str) -> None:
    """A literal path must be JSONPath (`$...`), as Druid's nested-field reader checks."""
    arg = call.args[1] if len(call.args) > 1 else {}
    path = arg.get("literal", {}).get("text") if arg.get("class") == "CONSTANT" else None
    if path == "$.":  # Druid reads `$.` as the root, as `$`
        arg["literal"]["text"] = "$"
    elif isinstance(path, str) and not path.startswith("$"):
        raise DruidFunctionRefused(
            f"Cannot use [{name}]: [Bad format, '{path}' is not a valid JSONPath path: "
            "must start with '$']"
        )


def _json_value(call: Call) -> str:
    _json_path(call, "JSON_VALUE_VARCHAR")
    return f"druid_json_value({_VALUE})"


def _without_on_clauses(text: str) -> str:
    """`RETURNING t NULL ON EMPTY NULL ON ERROR`: Druid's (undocumented) default,
    accepted; any other ON EMPTY / ON ERROR behaviour is refused as Druid refuses it."""
    for match in _ON_CLAUSE.finditer(text):
        if match.group(1).upper() != "NULL":
            raise DruidFunctionRefused(
                f"Unsupported JSON_VALUE parameter 'ON {match.group(2).upper()}' defined - "
                "please re-issue this query without this argument"
            )
    return _ON_CLAUSE.sub("", text)


def _json_value_returning(call: Call) -> str:
    _json_path(call, "JSON_VALUE")
    sql_type = _without_on_clauses(str(call.literal(2, "the type"))).upper().split()
    if not sql_type or sql_type[0] not in _SQL_TYPES or sql_type[1:] not in ([], ["ARRAY"]):
        raise DruidFunctionRefused(
            f"JSON_VALUE: RETURNING {' '.join(sql_type)} is not supported; "
            f"give one of {', '.join(_SQL_TYPES)}, or one of them followed by ARRAY"
        )
    engine = _SQL_TYPES[sql_type[0]]
    if sql_type[1:]:
        return (
            f"CASE WHEN json_valid({_JSON_TEXT}) AND json_type({_JSON_TEXT}, $a1) = 'ARRAY' "
            f"THEN TRY_CAST(json_extract({_JSON_TEXT}, $a1) AS {engine}[]) END"
        )
    return f"TRY_CAST({_VALUE} AS {engine})"


_add("scalar", _JSON, "JSON_VALUE", (2, 2), _json_value)
_add("scalar", _JSON, "DRUID_JSON_VALUE_RETURNING", (3, 3), _json_value_returning, internal=True)
# Druid's undocumented JSON_VALUE_ANY (NestedDataOperatorConversions): JSON_VALUE typed
# by the value; kept out of the catalog and the function list as Druid's docs leave it out.
_add("scalar", _JSON, "JSON_VALUE_ANY", (2, 2), _json_value, internal=True)
_add(
    "scalar",
    _JSON,
    "JSON_QUERY",
    (2, 2),
    lambda call: (
        _json_path(call, "JSON_QUERY")
        or (
            f"CASE WHEN json_valid({_JSON_TEXT}) THEN json_extract({_JSON_TEXT}, $a1) "
            f"WHEN $a1 = '$' THEN to_json({_JSON_TEXT}) END"  # a scalar stored as itself
        )
    ),
)
_add(
    "scalar",
    _JSON,
    "JSON_QUERY_ARRAY",
    (2, 2),
    f"CASE WHEN NOT json_valid({_JSON_TEXT}) THEN NULL "
    f"WHEN json_type({_JSON_TEXT}, $a1) = 'ARRAY' "
    f"THEN CAST(json_extract({_JSON_TEXT}, $a1) AS JSON[]) "
    f"WHEN json_extract({_JSON_TEXT}, $a1) IS NOT NULL THEN [json_extract({_JSON_TEXT}, $a1)] END",
)
_add(
    "scalar",
    _JSON,
    "JSON_KEYS",
    (2, 2),
    lambda call: (
        _json_path(call, "JSON_KEYS")
        or (
            f"CASE WHEN json_valid({_JSON_TEXT}) AND json_type({_JSON_TEXT}, $a1) = 'OBJECT' "
            f"THEN json_keys({_JSON_TEXT}, $a1) END"
        )
    ),
)
_add("scalar", _JSON, "JSON_OBJECT", (0, None), lambda c: f"json_object({_args(c)})")
_add(
    "scalar",
    _JSON,
    "PARSE_JSON",
    (1, 1),
    f"CASE WHEN $a0 IS NULL THEN NULL WHEN json_valid({_JSON_TEXT}) THEN json({_JSON_TEXT}) "
    "ELSE error('PARSE_JSON: the input is not valid JSON') END",
)
_add(
    "scalar",
    _JSON,
    "TRY_PARSE_JSON",
    (1, 1),
    f"CASE WHEN json_valid({_JSON_TEXT}) THEN json({_JSON_TEXT}) END",
)
_add("scalar", _JSON, "TO_JSON_STRING", (1, 1), "CAST(to_json($a0) AS VARCHAR)")
_refuse(
    "scalar",
    _JSON,
    "JSON_PATHS",
    "the engine has no function listing a JSON value's paths",
)

# --- operators: Druid's implicit casts ---------------------------------------------------

# Division as Calcite types it: a long by a long is a long (truncated), anything
# else a double -- what the engine's `//` does (its `/` always gives a double).
RULES["/"] = Rule(name="/", kind="operator", arity=(2, 2), sql="($a0 // $a1)", internal=True)

# LIKE on a number compares its text (Druid casts both sides to VARCHAR).
for _op in ("~~", "!~~", "~~*", "!~~*"):
    RULES[_op] = Rule(
        name=_op,
        kind="operator",
        arity=(2, 3),
        sql=(lambda op: lambda c: _like(c, op))(_op),
        internal=True,
    )
_LIKE = {"~~": "LIKE", "!~~": "NOT LIKE", "~~*": "ILIKE", "!~~*": "NOT ILIKE"}


def _like(call: Call, op: str) -> str:
    escape = " ESCAPE $a2" if len(call.args) > 2 else ""
    return f"(CAST($a0 AS VARCHAR) {_LIKE[op]} CAST($a1 AS VARCHAR){escape})"


# --- what the status table says of some ---------------------------------------------------

_NOTES = {
    "APPROX_COUNT_DISTINCT": "approximate, as in Druid: over values, the engine's HyperLogLog; "
    "over a column of stored sketches, their HLL union's estimate (estimates can differ from "
    "Druid's; COUNT(DISTINCT x) is exact)",
    "APPROX_COUNT_DISTINCT_BUILTIN": "as APPROX_COUNT_DISTINCT",
    "APPROX_COUNT_DISTINCT_DS_HLL": "as APPROX_COUNT_DISTINCT (an HLL sketch of lgK over values); "
    "tgtHllType accepted, stored as HLL_4",
    "APPROX_COUNT_DISTINCT_DS_THETA": "a theta sketch of `size` (default 16384) over values, or "
    "the union of stored ones",
    "APPROX_QUANTILE": "over values, exact (an item of the data); over stored sketches "
    "(quantiles, KLL doubles or floats, approxHistogram), their KLL merge's quantile",
    "APPROX_QUANTILE_DS": "as APPROX_QUANTILE",
    **dict.fromkeys(
        ("VARIANCE", "VAR_SAMP", "VAR_POP", "STDDEV", "STDDEV_SAMP", "STDDEV_POP"),
        "druid-stats' variance (0 over one value, null over none), over values or merging "
        "a column of stored variance states as Druid folds them",
    ),
    "DS_HLL": "an HLL sketch (base64 in results), over values or unioning stored sketches",
    "DS_THETA": "a theta sketch (base64 in results), over values or unioning stored sketches",
    "DS_QUANTILES_SKETCH": "a KLL doubles sketch (Strata's quantiles sketch; base64 in results)",
    "EARLIEST": "value at the earliest `__time`, null or not (with maxBytesPerValue, the string "
    "form: the earliest value not null, cut to the size)",
    "EARLIEST_BY": "value at the earliest time of the second argument",
    "LATEST": "value at the latest `__time`, null or not (with maxBytesPerValue, the string "
    "form: the latest value not null, cut to the size)",
    "LATEST_BY": "value at the latest time of the second argument",
    "ANY_VALUE": "the first value read, null or not; maxBytesPerValue cuts strings, "
    "aggregateMultipleValues accepted, unused",
    "STRING_AGG": "nulls skipped; a result over the size (bytes, default 1024) fails the query",
    "LISTAGG": "as STRING_AGG",
    "ARRAY_AGG": "nulls kept; a result over the size (bytes of its JSON, default 1024) fails",
    "ARRAY_CONCAT_AGG": "null arrays skipped; size as ARRAY_AGG",
    "TIME_FLOOR": (
        "ISO 8601 period from the epoch (weeks from a Monday), origin and time zone (else the "
        "session's `sqlTimeZone`, as for every time function and timestamp literal)"
    ),
    "TIME_CEIL": "as TIME_FLOOR, rounding up",
    "TIME_SHIFT": "ISO 8601 period times step, in the time zone if given",
    "TIME_EXTRACT": "Druid's units and values (DOW 1 = Monday, EPOCH in seconds, CENTURY)",
    "EXTRACT": "as TIME_EXTRACT",
    "TIME_PARSE": "ISO 8601, or a Joda pattern; unparseable text is null",
    "TIME_FORMAT": "ISO 8601 with milliseconds, or a Joda pattern; time zone names and offsets",
    "TIME_IN_INTERVAL": "start/end, start/period or period/end; end excluded",
    "DRUID_FLOOR_TO": "`FLOOR(t TO unit)`, SECOND to YEAR, in the session's `sqlTimeZone`",
    "DRUID_CEIL_TO": "`CEIL(t TO unit)`, SECOND to YEAR, in the session's `sqlTimeZone`",
    "CONCAT": "null if any argument is null",
    "REGEXP_EXTRACT": "null when nothing matches",
    "REGEXP_REPLACE": "every match; `$1` in the replacement is group 1",
    "LPAD": "two or three arguments; an empty pad only cuts",
    "RPAD": "two or three arguments; an empty pad only cuts",
    "PARSE_LONG": "radix 2, 10 or 16; text that is not a number is null",
    "JSON_VALUE": "a literal at the path, else null; `RETURNING <type> [ARRAY]`",
    "JSON_OBJECT": "`KEY k VALUE v` and `k: v` forms",
    "MV_TO_ARRAY": "a multi-value string as stored (JSON array text, or one value) to an ARRAY",
    "UNNEST": "of arrays, and of multi-value strings through MV_TO_ARRAY",
    "SUBSTRING": "null when it starts past the end of the text, as Druid's substring",
    "SAFE_DIVIDE": "null when dividing by 0; a long by a long is a long (truncated), as in Druid",
    "POSITION": "`POSITION(x IN y [FROM n])`: 1-based, 0 when not found",
    "DIV": "integer division of the arguments as longs",
    "HUMAN_READABLE_DECIMAL_FORMAT": "digits past the precision cut off, as in Druid",
}
for _name, _note in _NOTES.items():
    RULES[_name] = __import__("dataclasses").replace(RULES[_name], note=_note)

# --- Druid's reference, heading by heading -------------------------------------------------

# Every function of docs/querying/sql-functions.md ("All Druid SQL functions"), by its
# heading there, with LISTAGG (an alias on the aggregations page). Syntax rather than
# a call: ARRAY[], CASE, CAST, COALESCE, CURRENT_DATE, CURRENT_TIMESTAMP.
REFERENCE = """
ABS ACOS ANY_VALUE APPROX_COUNT_DISTINCT APPROX_COUNT_DISTINCT_BUILTIN
APPROX_COUNT_DISTINCT_DS_HLL APPROX_COUNT_DISTINCT_DS_THETA APPROX_QUANTILE APPROX_QUANTILE_DS
APPROX_QUANTILE_FIXED_BUCKETS ARRAY[] ARRAY_AGG ARRAY_APPEND ARRAY_CONCAT ARRAY_CONCAT_AGG
ARRAY_CONTAINS ARRAY_LENGTH ARRAY_OFFSET ARRAY_OFFSET_OF ARRAY_ORDINAL ARRAY_ORDINAL_OF
ARRAY_OVERLAP SCALAR_IN_ARRAY ARRAY_PREPEND ARRAY_SLICE ARRAY_TO_MV ARRAY_TO_STRING ASIN ATAN
ATAN2 AVG BIT_AND BIT_OR BIT_XOR BITWISE_AND BITWISE_COMPLEMENT
BITWISE_CONVERT_DOUBLE_TO_LONG_BITS BITWISE_CONVERT_LONG_BITS_TO_DOUBLE BITWISE_OR
BITWISE_SHIFT_LEFT BITWISE_SHIFT_RIGHT BITWISE_XOR BLOOM_FILTER BLOOM_FILTER_TEST BTRIM CASE CAST
CEIL_(date_and_time) CEIL_(numeric) CHAR_LENGTH CHARACTER_LENGTH COALESCE CONCAT CONTAINS_STRING
COS COT COUNT CUME_DIST CURRENT_DATE CURRENT_TIMESTAMP DATE_TRUNC DECODE_BASE64_COMPLEX
DECODE_BASE64_UTF8 DEGREES DENSE_RANK DIV DS_CDF DS_GET_QUANTILE DS_GET_QUANTILES DS_HISTOGRAM
DS_HLL DS_QUANTILE_SUMMARY DS_QUANTILES_SKETCH DS_RANK DS_THETA DS_TUPLE_DOUBLES
DS_TUPLE_DOUBLES_INTERSECT DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE DS_TUPLE_DOUBLES_NOT
DS_TUPLE_DOUBLES_UNION EARLIEST EARLIEST_BY EXP EXTRACT FIRST_VALUE FLOOR_(date_and_time)
FLOOR_(numeric) GREATEST GROUPING HLL_SKETCH_ESTIMATE HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS
HLL_SKETCH_TO_STRING HLL_SKETCH_UNION HUMAN_READABLE_BINARY_BYTE_FORMAT
HUMAN_READABLE_DECIMAL_BYTE_FORMAT HUMAN_READABLE_DECIMAL_FORMAT ICONTAINS_STRING IPV4_MATCH
IPV4_PARSE IPV4_STRINGIFY IPV6_MATCH JSON_KEYS JSON_OBJECT JSON_PATHS JSON_QUERY JSON_QUERY_ARRAY
JSON_VALUE LAG LAST_VALUE LATEST LATEST_BY LEAD LEAST LEFT LENGTH LISTAGG LN LOG10 LOOKUP LOWER
LPAD LTRIM MAX MILLIS_TO_TIMESTAMP MIN MOD MV_APPEND MV_CONCAT MV_CONTAINS MV_FILTER_NONE
MV_FILTER_ONLY MV_LENGTH MV_OFFSET MV_OFFSET_OF MV_ORDINAL MV_ORDINAL_OF MV_OVERLAP MV_PREPEND
MV_SLICE MV_TO_ARRAY MV_TO_STRING NTILE NULLIF NVL PARSE_JSON PARSE_LONG PERCENT_RANK POSITION
POWER RADIANS RANK REGEXP_EXTRACT REGEXP_LIKE REGEXP_REPLACE REPEAT REPLACE REVERSE RIGHT ROUND
ROW_NUMBER RPAD RTRIM SAFE_DIVIDE SIN SQRT STDDEV STDDEV_POP STDDEV_SAMP STRING_AGG
STRING_TO_ARRAY STRING_FORMAT STRING_TO_MV STRLEN STRPOS SUBSTR SUBSTRING SUM TAN
TDIGEST_GENERATE_SKETCH TDIGEST_QUANTILE TEXTCAT THETA_SKETCH_ESTIMATE
THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS THETA_SKETCH_INTERSECT THETA_SKETCH_NOT
THETA_SKETCH_UNION TIME_CEIL TIME_EXTRACT TIME_FLOOR TIME_FORMAT TIME_IN_INTERVAL TIME_PARSE
TIME_SHIFT TIMESTAMP_TO_MILLIS TIMESTAMPADD TIMESTAMPDIFF TO_JSON_STRING TRIM TRUNC TRUNCATE
TRY_PARSE_JSON UNNEST UPPER VAR_POP VAR_SAMP VARIANCE
"""
REFERENCE_NAMES = [name.replace("_(", " (").replace("_and_", " and ") for name in REFERENCE.split()]
_SYNTAX = {
    "ARRAY[]": ("array", "the engine's array constructor"),
    "CASE": ("other", "the engine's CASE"),
    "CAST": ("other", "the engine's CAST; `<type> ARRAY` read as the engine's `<type>[]`"),
    "CURRENT_DATE": ("time", "the date in the session's `sqlTimeZone` (UTC by default)"),
    "CURRENT_TIMESTAMP": (
        "time",
        "now; written in the session's `sqlTimeZone` like every timestamp",
    ),
}
_BY_HEADING = {
    "CEIL (date and time)": "DRUID_CEIL_TO",
    "CEIL (numeric)": "CEIL",
    "FLOOR (date and time)": "DRUID_FLOOR_TO",
    "FLOOR (numeric)": "FLOOR",
}


def rule_for(heading: str) -> Rule | None:
    """The rule of a function of Druid's reference, by its heading (None: syntax)."""
    return RULES.get(_BY_HEADING.get(heading, heading))


def status_rows() -> list[tuple[str, str, str, str]]:
    """(function, kind, status, how or why) for every function of Druid's reference."""
    rows = []
    for heading in REFERENCE_NAMES:
        if heading in _SYNTAX:
            category, how = _SYNTAX[heading]
            rows.append((heading, category, "supported", how))
            continue
        rule = rule_for(heading)
        if rule.refused:
            rows.append((heading, rule.category, "refused", rule.refused))
        else:
            how = rule.note or ("the engine's function of that name" if rule.sql is None else "")
            rows.append((heading, rule.category, "supported", how or "translated"))
    return rows


STATUS_HEADER = """# Druid SQL functions: what Strata runs

Every function of Druid's SQL function reference ("All Druid SQL functions",
`docs/querying/sql-functions.md` in apache/druid, and its aggregation, array,
multi-value string and JSON pages), as `POST /druid/v2/sql` runs it. *Supported*:
the call means what Druid's docs say it means, and `tests/test_druid_sql_functions.py`
checks it against the values the docs give. *Refused*: the query gets Druid's error
(HTTP 400, `errorCode` `invalidInput`) naming the function and why. A function Druid
SQL does not have (one only the engine has) is refused as Druid refuses it, `No match
found for function signature <NAME>`.

Beyond the functions, Druid's type rules (`metastore/sql_druid.py`): a string compared
with, or in arithmetic with, a number is cast to that number's type, and a string given
to a numeric function (SQRT, POWER, ...) to a double -- text that is not a number
becomes null, as Druid's casts do (ABS, FLOOR and CEIL of a string are refused, as
Druid refuses them); a multi-value string dimension matches a filter when any of its
values does, and `GROUP BY` on it counts the row once per value (null for none), the
filter not narrowing the values grouped (`multi-value-dimensions.md`) -- also through a
CTE or a derived table (a `UNION ALL` too), for the multi-value result of an `MV_`
function, and in the subquery of an `IN` list; outside `GROUP BY` and filters a string
function of one maps over its values (`concat(tags, 'x')` of `["a","b"]` is
`["ax","bx"]`). Query `parameters` are bound as literals of their types before all of
this, as Druid binds them (a `TIMESTAMP` from text or epoch milliseconds is a
wall-clock time of the session's zone). A `GROUP BY` without `ORDER BY` answers its
groups in Druid's order (by the keys), and nulls sort first ascending, last descending,
as in Druid. The context's
`sqlTimeZone` (a zone name or a whole-hour offset) moves the time functions without a
time zone argument, `FLOOR`/`CEIL(t TO unit)`, `EXTRACT`, `DATE_TRUNC`, timestamp
literals and `CURRENT_DATE` to its wall clock, and timestamps in results are written
in it (`1999-12-31T16:00:00.000-08:00`). `APPROX_COUNT_DISTINCT*` are approximate (the
engine's sketches, not Druid's, so estimates can differ); `APPROX_QUANTILE*` over values
are exact, over stored sketches their merge's estimate.

Written from `metastore/sql_druid_rules.py` (`python -m metastore.sql_druid_rules`);
a test checks this file is what the table says.

| Function | Kind | Status | How / why |
| --- | --- | --- | --- |
"""


def status_markdown() -> str:
    lines = [STATUS_HEADER.rstrip("\n")]
    for name, category, status, how in status_rows():
        lines.append(f"| `{name}` | {category} | {status} | {how} |")
    supported = sum(1 for row in status_rows() if row[2] == "supported")
    lines.append("")
    lines.append(f"{supported} of {len(REFERENCE_NAMES)} functions supported.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import pathlib

    target = pathlib.Path(__file__).resolve().parent.parent / "docs/druid-sql-function-status.md"
    target.write_text(status_markdown())
    print(f"wrote {target}")
