"""transformSpec.filter: every filter type Druid documents that Strata applies,
checked by the validator and evaluated on Spark with Druid's semantics (a null
value matches only null filters; regex finds anywhere; search is case-insensitive
unless asked; like has no escape character unless given)."""

from __future__ import annotations

import json

import pytest

from metastore.druid.errors import SpecError
from metastore.druid.filters import UNSUPPORTED_FILTERS, filter_columns, validate_filter
from metastore.druid.tasks import validate_task_spec
from workers.jobs.filter_sql import filter_sql

ROWS = [  # id, page, n, a, b (all text, as filters see input values)
    (0, "Apple", "5", "x", "x"),
    (1, "banana", "12.5", "x", "y"),
    (2, "cherry_pie", None, None, None),
    (3, None, "-3", "z", "z"),
]
ALL = {0, 1, 2, 3}

CASES = [
    ({"type": "equals", "column": "page", "matchValueType": "STRING", "matchValue": "banana"}, {1}),
    ({"type": "equals", "column": "n", "matchValueType": "LONG", "matchValue": 5}, {0}),
    ({"type": "equals", "column": "n", "matchValueType": "double", "matchValue": "12.5"}, {1}),
    ({"type": "null", "column": "page"}, {3}),
    ({"type": "null", "column": "n"}, {2}),
    ({"type": "not", "field": {"type": "null", "column": "page"}}, {0, 1, 2}),
    ({"type": "null", "column": "absent"}, ALL),
    (
        {
            "type": "range",
            "column": "n",
            "matchValueType": "LONG",
            "lower": 0,
            "upper": 12.5,
            "upperOpen": True,
        },
        {0},
    ),
    ({"type": "range", "column": "n", "matchValueType": "DOUBLE", "lower": -3, "upper": 5}, {0, 3}),
    (
        {
            "type": "range",
            "column": "n",
            "matchValueType": "DOUBLE",
            "lower": -3,
            "lowerOpen": True,
        },
        {0, 1},
    ),
    ({"type": "range", "column": "page", "matchValueType": "STRING", "lower": "b"}, {1, 2}),
    ({"type": "like", "dimension": "page", "pattern": "%an%"}, {1}),
    ({"type": "like", "dimension": "page", "pattern": "cherry_pie"}, {2}),
    ({"type": "like", "dimension": "page", "pattern": "cherry$_%", "escape": "$"}, {2}),
    ({"type": "like", "dimension": "page", "pattern": "Apple\\"}, set()),  # \ is no escape
    ({"type": "regex", "dimension": "page", "pattern": "^[A-Z]"}, {0}),
    ({"type": "regex", "dimension": "page", "pattern": "an"}, {1}),
    ({"type": "search", "dimension": "page", "query": {"type": "contains", "value": "APP"}}, {0}),
    (
        {
            "type": "search",
            "dimension": "page",
            "query": {"type": "contains", "value": "APP", "caseSensitive": True},
        },
        set(),
    ),
    (
        {
            "type": "search",
            "dimension": "page",
            "query": {"type": "insensitive_contains", "value": "PIE"},
        },
        {2},
    ),
    (
        {
            "type": "search",
            "dimension": "page",
            "query": {"type": "fragment", "values": ["an", "NA"]},
        },
        {1},
    ),
    (
        {
            "type": "interval",
            "dimension": "n",
            "intervals": ["1970-01-01T00:00:00Z/1970-01-01T00:00:00.010Z"],
        },
        {0},
    ),
    (
        {"type": "columnComparison", "dimensions": ["a", {"type": "default", "dimension": "b"}]},
        {0, 2, 3},
    ),
    ({"type": "expression", "expression": "page == 'Apple' || a == 'z'"}, {0, 3}),
    ({"type": "true"}, ALL),
    ({"type": "false"}, set()),
    (
        {
            "type": "and",
            "fields": [{"type": "true"}, {"type": "like", "dimension": "page", "pattern": "%a%"}],
        },
        {1},  # LIKE is case-sensitive: not Apple
    ),
]


@pytest.mark.spark
def test_every_filter_type_matches_the_rows_druid_matches():
    from workers.spark import get_spark

    for flt, _ in CASES:
        validate_filter(flt, "spec.dataSchema.transformSpec.filter")
    spark = get_spark()
    df = spark.createDataFrame(ROWS, "id INT, page STRING, n STRING, a STRING, b STRING")

    def col_of(name: str) -> str:
        return f"`{name}`" if name in df.columns else "CAST(NULL AS STRING)"

    sqls = [filter_sql(flt, col_of) for flt, _ in CASES]
    rows = df.selectExpr("id", *[f"{sql} AS f{i}" for i, sql in enumerate(sqls)]).collect()
    for i, (flt, expected) in enumerate(CASES):
        matched = {r["id"] for r in rows if r[f"f{i}"]}
        assert all(r[f"f{i}"] is not None for r in rows), (flt, "a filter is never null")
        assert matched == expected, json.dumps(flt)


@pytest.mark.spark
def test_an_interval_filter_on_time_keeps_the_rows_of_its_intervals(tmp_path):
    from tests.test_ingest_spark import one_column_spec, parsed_rows

    events = [
        {"ts": "2024-01-01T10:00:00Z", "page": "in"},
        {"ts": "2024-01-02T10:00:00Z", "page": "out"},
        {"ts": "2024-01-03T10:00:00Z", "page": "in too"},
    ]
    flt = {
        "type": "or",
        "fields": [
            {"type": "interval", "dimension": "__time", "intervals": ["2024-01-01/2024-01-02"]},
            {"type": "range", "column": "__time", "matchValueType": "LONG", "lower": 1704276000000},
        ],
    }
    rows, stats, _ = parsed_rows(one_column_spec(events, flt=flt), tmp_path)
    assert sorted(r["page"] for r in rows) == ["in", "in too"]
    assert stats["thrownAway"] == 1


def _refused(flt: dict) -> SpecError:
    with pytest.raises(SpecError) as refused:
        validate_filter(flt, "f")
    return refused.value


@pytest.mark.parametrize(
    ("flt", "field", "words"),
    [
        (
            {"type": "equals", "column": "x", "matchValueType": "ARRAY<LONG>", "matchValue": [1]},
            "f.matchValueType",
            "array",
        ),
        (
            {"type": "equals", "column": "x", "matchValueType": "LONG"},
            "f.matchValue",
            "null filter",
        ),
        (
            {"type": "equals", "column": "x", "matchValueType": "LONG", "matchValue": "five"},
            "f.matchValue",
            "not a long",
        ),
        ({"type": "range", "column": "x", "matchValueType": "LONG"}, "f", "lower and/or upper"),
        (
            {"type": "like", "dimension": "x", "pattern": "a%", "escape": "ab"},
            "f.escape",
            "single character",
        ),
        (
            {"type": "search", "dimension": "x", "query": {"type": "regex", "pattern": "a"}},
            "f.query.type",
            "fragment",
        ),
        (
            {"type": "interval", "dimension": "__time", "intervals": ["2024-02-01/2024-01-01"]},
            "f.intervals[0]",
            "malformed",
        ),
        ({"type": "columnComparison", "dimensions": ["a"]}, "f.dimensions", "two"),
        (
            {"type": "expression", "expression": "nosuchfunction(x)"},
            "f.expression",
            "nosuchfunction",
        ),
        ({"type": "expression", "expression": "__time > 0"}, "f.expression", "interval filter"),
        ({"type": "true", "extra": 1}, "f.extra", "unknown"),
        ({"type": "extraction", "dimension": "x"}, "f.type", "not implemented"),
        (
            {"type": "arrayContainsElement", "column": "x"},
            "f.elementMatchValueType",
            "required",
        ),
    ],
)
def test_bad_filters_are_refused_naming_the_field(flt, field, words):
    error = _refused(flt)
    assert error.field == field and words in error.message, error


def test_the_columns_a_filter_reads_are_read_from_the_input():
    flt = {
        "type": "and",
        "fields": [
            {"type": "equals", "column": "a", "matchValueType": "STRING", "matchValue": "v"},
            {
                "type": "columnComparison",
                "dimensions": ["b", {"type": "default", "dimension": "c"}],
            },
            {"type": "expression", "expression": "d + e > 1"},
            {"type": "not", "field": {"type": "regex", "dimension": "f", "pattern": "."}},
            {"type": "true"},
        ],
    }
    assert filter_columns(flt) == {"a", "b", "c", "d", "e", "f"}


def test_unsupported_filters_left_are_the_ones_needing_extensions_or_extraction():
    assert set(UNSUPPORTED_FILTERS) == {
        "extraction",
        "javascript",
        "spatial",
    }


def test_a_compact_task_takes_the_new_filters_too():
    body = {
        "type": "compact",
        "dataSource": "wiki",
        "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": "2024/2025"}},
        "transformSpec": {"filter": {"type": "null", "column": "page"}},
    }
    assert validate_task_spec(body, input_roots=[]).compaction.filter == {
        "type": "null",
        "column": "page",
    }
