"""Druid's extraction functions and filtered / lookup dimension specs in native
queries (metastore/druid/extraction.py, docs/querying/dimensionspecs.md).

Each case groups the small `wiki` dataSource of test_native_queries by one
transformed dimension and checks the counts per value against what Druid's
documentation says the function gives for these rows:

    2024-01-01T01:00 Main alice  10  1.5
    2024-01-01T05:00 Talk None   20  2.25
    2024-01-01T12:00 Main bob    -3  0.5
    2024-01-03T02:00 Help alice   7  None
    2024-01-03T10:00 Main carol 100  10.0
"""

from __future__ import annotations

import pytest

from metastore.druid.extraction import ExtractionError, dimension_spec, extraction_expression
from tests.test_native_queries import INTERVAL, native, publish_wiki


@pytest.fixture
def wiki_rows(db, inline_spec):
    publish_wiki(inline_spec)


def _extraction(dimension: str, fn: dict, **more) -> dict:
    return {
        "type": "extraction",
        "dimension": dimension,
        "outputName": "d",
        "extractionFn": fn,
        **more,
    }


def count_by(dimension) -> dict:
    """A groupBy of `wiki` by one dimension, counting rows."""
    return {
        "queryType": "groupBy",
        "dataSource": "wiki",
        "granularity": "all",
        "intervals": INTERVAL,
        "dimensions": [dimension],
        "aggregations": [{"type": "count", "name": "n"}],
    }


def groups(client, dimension, *, filter=None) -> dict:
    body = count_by(dimension)
    if filter is not None:
        body["filter"] = filter
    rows = native(client, body)
    return {next(v for k, v in r["event"].items() if k != "n"): r["event"]["n"] for r in rows}


CASES = [
    ("page", {"type": "regex", "expr": "(\\w\\w).*"}, {"He": 1, "Ma": 3, "Ta": 1}),
    (
        "page",
        {"type": "regex", "expr": "^M.*", "index": 0},
        {"Help": 1, "Main": 3, "Talk": 1},  # no match: the value as is
    ),
    (
        "page",
        {
            "type": "regex",
            "expr": "^M.*",
            "index": 0,
            "replaceMissingValue": True,
            "replaceMissingValueWith": "other",
        },
        {"Main": 3, "other": 2},
    ),
    ("page", {"type": "partial", "expr": "^T"}, {None: 4, "Talk": 1}),
    (
        "page",
        {"type": "searchQuery", "query": {"type": "insensitive_contains", "value": "AL"}},
        {None: 4, "Talk": 1},
    ),
    (
        "page",
        {"type": "searchQuery", "query": {"type": "fragment", "values": ["a", "i"]}},
        {None: 2, "Main": 3},
    ),
    ("page", {"type": "substring", "index": 1, "length": 2}, {"ai": 3, "al": 1, "el": 1}),
    # past the end (bob has 3 letters) and a null value: null
    ("user", {"type": "substring", "index": 4}, {None: 2, "e": 2, "l": 1}),
    ("user", {"type": "strlen"}, {"0": 1, "3": 1, "5": 3}),
    ("page", {"type": "upper"}, {"HELP": 1, "MAIN": 3, "TALK": 1}),
    ("page", {"type": "lower", "locale": "en-US"}, {"help": 1, "main": 3, "talk": 1}),
    (
        "page",
        {"type": "lookup", "lookup": {"type": "map", "map": {"Main": "M", "Talk": "T"}}},
        {None: 1, "M": 3, "T": 1},
    ),
    (
        "page",
        {
            "type": "lookup",
            "lookup": {"type": "map", "map": {"Main": "M"}},
            "retainMissingValue": True,
        },
        {"Help": 1, "M": 3, "Talk": 1},
    ),
    # the empty key maps a null value; what the map lacks is replaced
    (
        "user",
        {
            "type": "lookup",
            "lookup": {"type": "map", "map": {"": "anon", "alice": "A"}},
            "replaceMissingValueWith": "x",
        },
        {"A": 2, "anon": 1, "x": 2},
    ),
    (
        "user",
        {"type": "stringFormat", "format": "[%s]"},
        {"[alice]": 2, "[bob]": 1, "[carol]": 1, "[null]": 1},
    ),
    (
        "user",
        {"type": "stringFormat", "format": "%s!", "nullHandling": "returnNull"},
        {None: 1, "alice!": 2, "bob!": 1, "carol!": 1},
    ),
    ("added", {"type": "bucket", "size": 10, "offset": 5}, {"-5": 1, "15": 1, "5": 2, "95": 1}),
    # a whole double prints as a long, as Java's bucket function prints it
    ("delta", {"type": "bucket", "size": 0.5}, {None: 1, "0.5": 1, "1.5": 1, "10": 1, "2": 1}),
    ("__time", {"type": "timeFormat", "format": "yyyy-MM-dd"}, {"2024-01-01": 3, "2024-01-03": 2}),
    (
        "__time",
        {"type": "timeFormat", "format": "yyyy-MM-dd HH", "timeZone": "America/New_York"},
        {
            "2023-12-31 20": 1,
            "2024-01-01 00": 1,
            "2024-01-01 07": 1,
            "2024-01-02 21": 1,
            "2024-01-03 05": 1,
        },
    ),
    (
        "__time",
        {"type": "timeFormat", "granularity": "day"},
        {"2024-01-01T00:00:00.000Z": 3, "2024-01-03T00:00:00.000Z": 2},
    ),
    (
        "__time",
        {"type": "timeFormat", "asMillis": True, "granularity": "day"},
        {"1704067200000": 3, "1704240000000": 2},
    ),
    # a string function sees __time as ISO-8601 text
    (
        "__time",
        {"type": "regex", "expr": "T(\\d\\d)"},
        {"01": 1, "02": 1, "05": 1, "10": 1, "12": 1},
    ),
    (
        "page",
        {
            "type": "cascade",
            "extractionFns": [
                {"type": "regex", "expr": "(\\w+)"},
                {"type": "substring", "index": 0, "length": 2},
                {"type": "upper"},
            ],
        },
        {"HE": 1, "MA": 3, "TA": 1},
    ),
]


@pytest.mark.parametrize(("column", "fn", "expected"), CASES, ids=lambda v: str(v)[:40])
def test_extraction_dimension_gives_druids_values(wiki_rows, api_client, column, fn, expected):
    assert groups(api_client, _extraction(column, fn)) == expected


def test_time_parse_reformats_what_parses_and_keeps_the_rest(wiki_rows, api_client):
    fn = {
        "type": "cascade",
        "extractionFns": [
            {"type": "timeFormat", "format": "dd/MM/yyyy"},
            {"type": "time", "timeFormat": "dd/MM/yyyy", "resultFormat": "yyyy-MM", "joda": True},
        ],
    }
    assert groups(api_client, _extraction("__time", fn)) == {"2024-01": 5}
    kept = {"type": "time", "timeFormat": "dd/MM/yyyy", "resultFormat": "yyyy"}
    assert groups(api_client, _extraction("page", kept)) == {"Help": 1, "Main": 3, "Talk": 1}


def test_output_type_converts_the_extracted_text(wiki_rows, api_client):
    dim = _extraction("user", {"type": "strlen"}, outputType="LONG")
    assert groups(api_client, dim) == {0: 1, 3: 1, 5: 3}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"type": "listFiltered", "delegate": "page", "values": ["Main", "Help"]},
            {None: 1, "Help": 1, "Main": 3},
        ),
        (
            {
                "type": "listFiltered",
                "delegate": "page",
                "values": ["Main", "Help"],
                "isWhitelist": False,
            },
            {None: 4, "Talk": 1},
        ),
        # the pattern must match the whole value, as Java's matches()
        ({"type": "regexFiltered", "delegate": "page", "pattern": "Ma.*"}, {None: 2, "Main": 3}),
        ({"type": "regexFiltered", "delegate": "page", "pattern": "a"}, {None: 5}),
        ({"type": "prefixFiltered", "delegate": "page", "prefix": "Ta"}, {None: 4, "Talk": 1}),
    ],
)
def test_filtered_dimension_specs_keep_only_matching_values(wiki_rows, api_client, spec, expected):
    result = groups(api_client, spec)
    assert result == expected


def test_filters_apply_the_extraction_function_before_matching(wiki_rows, api_client):
    day = {"type": "timeFormat", "format": "yyyy-MM-dd"}
    on_day = {"type": "selector", "dimension": "__time", "value": "2024-01-03", "extractionFn": day}
    assert groups(api_client, "page", filter=on_day) == {"Help": 1, "Main": 1}

    lowered = {
        "type": "in",
        "dimension": "page",
        "values": ["main"],
        "extractionFn": {"type": "lower"},
    }
    assert groups(api_client, "user", filter=lowered) == {"alice": 1, "bob": 1, "carol": 1}

    short = {
        "type": "bound",
        "dimension": "user",
        "upper": "4",
        "ordering": "numeric",
        "extractionFn": {"type": "strlen"},
    }
    assert groups(api_client, "user", filter=short) == {None: 1, "bob": 1}


@pytest.mark.parametrize(
    ("dimension", "named"),
    [
        (
            _extraction("page", {"type": "javascript", "function": "x"}),
            "dimensions[0].extractionFn.type",
        ),
        (
            _extraction("page", {"type": "registeredLookup", "lookup": "names"}),
            "dimensions[0].extractionFn.type",
        ),
        ({"type": "lookup", "dimension": "page", "name": "names"}, "dimensions[0].name"),
        (
            _extraction("__time", {"type": "timeFormat", "format": "EEEE", "locale": "fr"}),
            "dimensions[0].extractionFn.locale",
        ),
        (_extraction("page", {"type": "nosuch"}), "dimensions[0].extractionFn.type"),
        (_extraction("page", {"type": "substring"}), "dimensions[0].extractionFn.index"),
        (
            _extraction("page", {"type": "regex", "expr": "a", "extra": 1}),
            "dimensions[0].extractionFn.extra",
        ),
        ({"type": "listFiltered", "delegate": "page"}, "dimensions[0].values"),
    ],
)
def test_what_cannot_be_done_is_refused_naming_the_field(wiki_rows, api_client, dimension, named):
    result = native(api_client, count_by(dimension), status=400)
    assert result["errorMessage"].startswith(named), result


def test_topn_ranks_an_extracted_dimension(wiki_rows, api_client):
    body = {
        "queryType": "topN",
        "dataSource": "wiki",
        "granularity": "all",
        "intervals": INTERVAL,
        "dimension": _extraction("page", {"type": "substring", "index": 0, "length": 1}),
        "metric": "n",
        "threshold": 2,
        "aggregations": [{"type": "count", "name": "n"}],
    }
    [result] = native(api_client, body)
    assert result["result"] == [{"d": "M", "n": 3}, {"d": "H", "n": 1}] or result["result"] == [
        {"d": "M", "n": 3},
        {"d": "T", "n": 1},
    ]


def test_the_translation_is_pure_and_composes():
    text = extraction_expression({"type": "upper"}, "fn", "x", "string")
    assert text == "upper(x)"
    nested = extraction_expression(
        {"type": "cascade", "extractionFns": [{"type": "upper"}, {"type": "strlen"}]}, "fn"
    )
    assert nested == "cast(nvl(strlen(upper(__in)), 0), 'STRING')"
    spec = dimension_spec({"type": "default", "dimension": "a", "outputType": "long"}, "d")
    assert (spec.dimension, spec.output_name, spec.output_type, spec.transform) == (
        "a",
        "a",
        "long",
        None,
    )
    with pytest.raises(ExtractionError) as refused:
        dimension_spec({"type": "default", "dimension": ""}, "d")
    assert refused.value.field == "d.dimension"


# --- nested-field virtual columns --------------------------------------------------------


@pytest.fixture
def nested(db, inline_spec):
    import json
    from datetime import UTC, datetime

    import pyarrow as pa

    from tests.test_native_queries import publish_tables

    docs = [
        {"country": "FR", "phones": [{"number": "1"}, {"number": "2"}], "zip": 75001},
        {"country": "FR", "phones": [{"number": "3"}], "zip": 69001},
        {"country": "US", "phones": [], "zip": 10001},
    ]
    table = pa.table(
        {
            "__time": pa.array(
                [datetime(2024, 1, 1, h, tzinfo=UTC) for h in range(3)],
                type=pa.timestamp("us", tz="UTC"),
            ),
            "shipTo": pa.array([json.dumps(d) for d in docs], type=pa.string()),
        }
    )
    publish_tables(inline_spec, "orders", {"2024-01-01/2024-01-02": [table]})


def test_nested_field_virtual_columns_read_json_paths(nested, api_client):
    body = {
        "queryType": "groupBy",
        "dataSource": "orders",
        "granularity": "all",
        "intervals": ["2024-01-01/2024-01-02"],
        "virtualColumns": [
            {
                "type": "nested-field",
                "columnName": "shipTo",
                "outputName": "v0",
                "path": "$.country",
            },
            {
                "type": "nested-field",
                "columnName": "shipTo",
                "outputName": "v1",
                "pathParts": [
                    {"type": "field", "field": "phones"},
                    {"type": "arrayElement", "index": 1},
                    {"type": "field", "field": "number"},
                ],
            },
            {
                "type": "nested-field",
                "columnName": "shipTo",
                "outputName": "zip",
                "path": ".zip",
                "useJqSyntax": True,
                "expectedType": "LONG",
            },
        ],
        "dimensions": ["v0", "v1"],
        "filter": {"type": "range", "column": "zip", "matchValueType": "LONG", "lower": 50000},
        "aggregations": [
            {"type": "count", "name": "n"},
            {"type": "longSum", "name": "z", "fieldName": "zip"},
        ],
    }
    rows = [r["event"] for r in native(api_client, body)]
    assert rows == [
        {"v0": "FR", "v1": None, "n": 1, "z": 69001},
        {"v0": "FR", "v1": "2", "n": 1, "z": 75001},
    ]


# --- subtotalsSpec ---------------------------------------------------------------------------


def test_subtotals_concatenate_each_grouping_with_the_others_null(wiki_rows, api_client):
    body = {
        "queryType": "groupBy",
        "dataSource": "wiki",
        "granularity": "all",
        "intervals": INTERVAL,
        "dimensions": ["page", {"type": "default", "dimension": "user", "outputName": "who"}],
        "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}],
        "subtotalsSpec": [["page", "who"], ["page"], []],
        "limitSpec": {
            "type": "default",
            "limit": 2,
            "columns": [{"dimension": "added", "direction": "descending"}],
        },
    }
    rows = [r["event"] for r in native(api_client, body)]
    assert rows == [
        # the limit applies to each subtotal
        {"page": "Main", "who": "carol", "added": 100},
        {"page": "Talk", "who": None, "added": 20},
        {"page": "Main", "who": None, "added": 107},
        {"page": "Talk", "who": None, "added": 20},
        {"page": None, "who": None, "added": 134},
    ]
    body["subtotalsSpec"] = [["nosuch"]]
    refused = native(api_client, body, status=400)
    assert refused["errorMessage"].startswith("subtotalsSpec[0]")


def test_array_contains_element_matches_multi_value_and_array_rows(db, inline_spec, api_client):
    """tags holds multi-value strings as ingestion stores them (JSON list text for
    several values, the value itself for one); nums a JSON array of longs."""
    from datetime import UTC, datetime

    import pyarrow as pa

    from tests.test_native_queries import publish_tables

    rows = [('["a","b"]', "[1,2]"), ("a", "[3]"), ("c", None), (None, "[2,5]")]
    table = pa.table(
        {
            "__time": pa.array(
                [datetime(2024, 1, 1, h, tzinfo=UTC) for h in range(len(rows))],
                type=pa.timestamp("us", tz="UTC"),
            ),
            "tags": pa.array([r[0] for r in rows], type=pa.string()),
            "nums": pa.array([r[1] for r in rows], type=pa.string()),
        }
    )
    publish_tables(inline_spec, "arrays", {"2024-01-01/2024-01-02": [table]})

    def count(filter_spec) -> int:
        body = {
            "queryType": "timeseries",
            "dataSource": "arrays",
            "granularity": "all",
            "intervals": ["2024-01-01/2024-01-02"],
            "filter": filter_spec,
            "aggregations": [{"type": "count", "name": "n"}],
        }
        return native(api_client, body)[0]["result"]["n"]

    def element(column, vtype, value):
        return {
            "type": "arrayContainsElement",
            "column": column,
            "elementMatchValueType": vtype,
            "elementMatchValue": value,
        }

    assert count(element("tags", "STRING", "a")) == 2
    assert count(element("tags", "STRING", "z")) == 0
    assert count(element("nums", "LONG", 2)) == 2
    refused = native(
        api_client,
        {
            "queryType": "timeseries",
            "dataSource": "arrays",
            "granularity": "all",
            "intervals": ["2024-01-01/2024-01-02"],
            "filter": element("tags", "ARRAY<STRING>", ["a"]),
            "aggregations": [{"type": "count", "name": "n"}],
        },
        status=400,
    )
    assert refused["errorMessage"].startswith("filter.elementMatchValueType")


# --- union dataSources -------------------------------------------------------------------------


def test_a_union_datasource_reads_its_tables_as_one(wiki_rows, inline_spec, api_client):
    """`wiki2` has the wiki's columns but `delta`, and one more row on day 1."""
    from datetime import UTC, datetime

    import pyarrow as pa

    from tests.test_native_queries import publish_tables

    table = pa.table(
        {
            "__time": pa.array(
                [datetime(2024, 1, 1, 20, tzinfo=UTC)], type=pa.timestamp("us", tz="UTC")
            ),
            "page": pa.array(["Main"], type=pa.string()),
            "user": pa.array(["dave"], type=pa.string()),
            "added": pa.array([1000], type=pa.int64()),
            "count": pa.array([1], type=pa.int64()),
        }
    )
    publish_tables(inline_spec, "wiki2", {"2024-01-01/2024-01-02": [table]})
    body = {
        "queryType": "groupBy",
        "dataSource": {
            "type": "union",
            "dataSources": ["wiki", {"type": "table", "name": "wiki2"}],
        },
        "granularity": "all",
        "intervals": ["2024-01-01/2024-01-02"],
        "dimensions": ["page"],
        "aggregations": [
            {"type": "longSum", "name": "added", "fieldName": "added"},
            {"type": "count", "name": "rows"},
            {"type": "doubleSum", "name": "delta", "fieldName": "delta"},
        ],
    }
    rows = [r["event"] for r in native(api_client, body)]
    assert rows == [
        {"page": "Main", "added": 1007, "rows": 3, "delta": 2.0},
        {"page": "Talk", "added": 20, "rows": 1, "delta": 2.25},
    ]
    body["dataSource"]["dataSources"].append("nosuch")
    refused = native(api_client, body, status=400)
    assert refused["errorMessage"].startswith("dataSource.dataSources[2]")
    body["dataSource"] = {"type": "union", "dataSources": ["wiki", {"type": "inline"}]}
    refused = native(api_client, body, status=400)
    assert refused["errorMessage"].startswith("dataSource.dataSources[1].type")
