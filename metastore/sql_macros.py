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


def macro_names() -> list[str]:
    """The names of the functions Strata defines for queries (Druid's time functions)."""
    return [macro.split()[2].split("(")[0] for macro in MACROS]
