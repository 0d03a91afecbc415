"""The SQL functions Strata defines in the embedded engine for queries written for
Druid (its common time functions), shared by the SQL layer (`metastore.query`,
which creates them) and the catalog (`metastore.sql_catalog`, which lists them)."""

from __future__ import annotations

# Druid SQL's common time functions, for queries written for Druid. ISO-8601 periods
# ('PT1H', 'P1D', 'P1M', 'P1W', ...) become DuckDB intervals.
_PERIOD = r"^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$"


def _part(n: int) -> str:
    return f"coalesce(nullif(regexp_extract(upper(p), '{_PERIOD}', {n}), ''), '0')::BIGINT"


MACROS = [
    "CREATE MACRO iso_period(p) AS "
    f"to_years({_part(1)}::INTEGER) + to_months({_part(2)}::INTEGER) + to_days(7 * {_part(3)}) "
    f"+ to_days({_part(4)}) + to_hours({_part(5)}) + to_minutes({_part(6)}) "
    f"+ to_seconds({_part(7)}::DOUBLE)",
    "CREATE MACRO time_floor(t, p) AS time_bucket(iso_period(p), t)",
    "CREATE MACRO time_shift(t, p, n) AS t + n * iso_period(p)",
    "CREATE MACRO timestamp_to_millis(t) AS epoch_ms(t)",
    "CREATE MACRO millis_to_timestamp(ms) AS make_timestamp(ms * 1000)",
    "CREATE MACRO time_extract(t, unit) AS date_part(unit, t)",
]


# Druid's multi-value strings: stored as the value itself, or as the JSON text of a
# list of values (see workers.jobs.parsing); a list column reads as one too.
DRUID_MACROS = [
    "CREATE MACRO druid_mv(x) AS CASE WHEN x IS NULL THEN NULL "
    "WHEN json_type(to_json(x)) = 'ARRAY' THEN from_json(to_json(x), '[\"VARCHAR\"]') "
    "WHEN starts_with(CAST(x AS VARCHAR), '[') AND json_valid(CAST(x AS VARCHAR)) "
    "AND json_type(CAST(x AS VARCHAR)) = 'ARRAY' "
    "THEN from_json(CAST(x AS VARCHAR), '[\"VARCHAR\"]') "
    "ELSE [CAST(x AS VARCHAR)] END",
    "CREATE MACRO druid_mv_out(l) AS CASE WHEN l IS NULL OR len(l) = 0 THEN NULL "
    "WHEN len(l) = 1 THEN l[1] ELSE CAST(to_json(l) AS VARCHAR) END",
    # JSON_VALUE without RETURNING: its value as text, marked so that Druid's implicit
    # casts apply to it as to a string column (metastore.sql_druid.apply_types).
    "CREATE MACRO druid_json_value(v) AS v",
    # IPv4: a dotted-decimal string or an integer in range; anything else null.
    "CREATE MACRO druid_ipv4_parse(a) AS CASE "
    "WHEN regexp_full_match(CAST(a AS VARCHAR), '[0-9]+') "
    "THEN CASE WHEN TRY_CAST(CAST(a AS VARCHAR) AS BIGINT) BETWEEN 0 AND 4294967295 "
    "THEN TRY_CAST(CAST(a AS VARCHAR) AS BIGINT) END "
    "WHEN regexp_full_match(CAST(a AS VARCHAR), '([0-9]{1,3})\\.([0-9]{1,3})\\.([0-9]{1,3})\\.([0-9]{1,3})') "
    "AND list_bool_and([TRY_CAST(p AS BIGINT) <= 255 FOR p IN string_split(CAST(a AS VARCHAR), '.')]) "
    "THEN list_reduce([TRY_CAST(p AS BIGINT) FOR p IN string_split(CAST(a AS VARCHAR), '.')], "
    "lambda acc, p: acc * 256 + p) END",
]
MACROS = MACROS + DRUID_MACROS


def macro_names() -> list[str]:
    """The names of the functions Strata defines for queries (Druid's time functions,
    and the helpers metastore.sql_druid_rules translates Druid's functions into)."""
    return [macro.split()[2].split("(")[0] for macro in MACROS]
