"""An adversarial sweep of `POST /druid/v2` against Druid's documented behaviour and
what Druid's clients send (pydruid's builders, Turnilo's and the web console's
introspection), over test_native_queries' small `wiki` dataSource.

Each case here was a deviation found by the sweep: a failing test first, then the fix.
"""

from __future__ import annotations

import json

import pytest

from metastore.models import Segment
from tests.test_native_queries import INTERVAL, druid_client, native, publish_wiki  # noqa: F401


@pytest.fixture
def wiki(db, inline_spec):
    publish_wiki(inline_spec)


def _timeseries(**change) -> dict:
    return {
        "queryType": "timeseries",
        "dataSource": "wiki",
        "granularity": "all",
        "intervals": INTERVAL,
        "aggregations": [{"type": "count", "name": "c"}],
        **change,
    }


def _strict_json(content: bytes):
    def refuse(token):
        raise AssertionError(f"{token} is not JSON")

    return json.loads(content, parse_constant=refuse)


def test_non_finite_doubles_are_written_as_strings_as_druids_jackson_writes_them(wiki, api_client):
    # "quotient" divides without Druid's "/" guard against zero: +-Infinity and NaN,
    # which Jackson writes as the strings "Infinity", "-Infinity", "NaN" (strict JSON
    # parsers, as Grafana's and Turnilo's JavaScript, refuse the bare words).
    def quotient(name, numerator):
        return {
            "type": "arithmetic",
            "name": name,
            "fn": "quotient",
            "fields": [{"type": "constant", "value": numerator}, {"type": "constant", "value": 0}],
        }

    body = _timeseries(
        postAggregations=[quotient("pos", 1), quotient("neg", -1), quotient("nan", 0)]
    )
    response = api_client.post("/druid/v2", body, format="json")
    assert response.status_code == 200
    [row] = _strict_json(response.content)
    assert row["result"] == {"c": 5, "pos": "Infinity", "neg": "-Infinity", "nan": "NaN"}

    body["context"] = {"resultAsArray": True}
    body.update(queryType="groupBy", dimensions=[])
    response = api_client.post("/druid/v2", body, format="json")
    assert _strict_json(response.content) == [[5, "Infinity", "-Infinity", "NaN"]]


def test_topn_inverted_metric_lists_ties_by_the_dimension_ascending_nulls_first(wiki, api_client):
    # TopNNumericResultBuilder sorts by the metric's comparator (ascending when
    # inverted), and ties by the dimension value ascending, null first, either way.
    body = {
        "queryType": "topN",
        "dataSource": "wiki",
        "granularity": "all",
        "intervals": INTERVAL,
        "dimension": "user",
        "threshold": 5,
        "metric": {"type": "inverted", "metric": "c"},
        "aggregations": [{"type": "count", "name": "c"}],
    }
    [result] = native(api_client, body)
    assert [(r["user"], r["c"]) for r in result["result"]] == [
        (None, 1),
        ("bob", 1),
        ("carol", 1),
        ("alice", 2),
    ]


def test_bound_alpha_numeric_is_refused_naming_it_never_read_as_lexicographic(wiki, api_client):
    # `alphaNumeric: true` is Druid's older way to ask for the alphanumeric ordering
    # (pydruid's Bound(alphaNumeric=True) sends it); read as lexicographic it matched
    # 1 row of added >= "7" where Druid matches 4.
    flt = {"type": "bound", "dimension": "added", "lower": "7", "alphaNumeric": True}
    result = native(api_client, _timeseries(filter=flt), status=400)
    assert result["error"] == "Unsupported operation"
    assert result["errorMessage"].startswith("filter.alphaNumeric")

    # pydruid's Bound sends alphaNumeric false beside its ordering: accepted as before.
    flt = {**flt, "alphaNumeric": False, "ordering": "numeric"}
    [row] = native(api_client, _timeseries(filter=flt))
    assert row["result"] == {"c": 4}


def test_search_filter_regex_matches_anywhere_in_the_value(wiki, api_client):
    flt = {"type": "search", "dimension": "user", "query": {"type": "regex", "pattern": "o"}}
    [row] = native(api_client, _timeseries(filter=flt))
    assert row["result"] == {"c": 2}  # bob, carol


def _set_schemas(schemas: list[dict]) -> None:
    for segment, schema in zip(
        Segment.objects.order_by("start", "partition"), schemas, strict=True
    ):
        segment.schema = schema
        segment.save(update_fields=["schema"])


def _schema(metrics: list[dict], rollup: bool = True, granularity: str = "HOUR") -> dict:
    return {"dimensions": [], "metrics": metrics, "rollup": rollup, "queryGranularity": granularity}


ADDED = {
    "name": "added",
    "type": "longSum",
    "fieldName": "added",
    "combining": {"type": "longSum", "name": "added", "fieldName": "added"},
}
COUNT = {
    "name": "count",
    "type": "count",
    "combining": {"type": "longSum", "name": "count", "fieldName": "count"},
}
DELTA_MAX = {
    "name": "delta",
    "type": "doubleMax",
    "fieldName": "delta",
    "combining": {"type": "doubleMax", "name": "delta", "fieldName": "delta"},
}
DELTA_SUM = {
    **DELTA_MAX,
    "type": "doubleSum",
    "combining": {**DELTA_MAX["combining"], "type": "doubleSum"},
}


def test_segment_metadata_as_turnilo_introspects_gives_the_aggregators(wiki, api_client):
    # plywood (Turnilo) asks for the aggregators, merged leniently.
    _set_schemas([_schema([COUNT, ADDED]), _schema([COUNT, ADDED]), _schema([COUNT, ADDED])])
    body = {
        "queryType": "segmentMetadata",
        "dataSource": "wiki",
        "merge": True,
        "analysisTypes": ["aggregators"],
        "lenientAggregatorMerge": True,
    }
    [result] = native(api_client, body)
    assert result["aggregators"] == {
        "count": {"type": "longSum", "name": "count", "fieldName": "count"},
        "added": {"type": "longSum", "name": "added", "fieldName": "added"},
    }
    assert result["rollup"] is None and result["queryGranularity"] is None
    assert result["columns"]["page"]["cardinality"] is None


def test_segment_metadata_merges_aggregators_strictly_or_leniently(wiki, api_client):
    _set_schemas([_schema([COUNT, DELTA_MAX]), _schema([COUNT, DELTA_SUM]), _schema([COUNT])])
    body = {
        "queryType": "segmentMetadata",
        "dataSource": "wiki",
        "merge": True,
        "analysisTypes": ["aggregators", "rollup", "queryGranularity", "timestampSpec"],
    }
    # strict (the default): any conflict and the whole map is null
    [strict] = native(api_client, body)
    assert strict["aggregators"] is None
    assert strict["rollup"] is True
    assert strict["queryGranularity"] == "HOUR"
    assert strict["timestampSpec"] is None  # not recorded: unknown, as Druid allows

    # lenient: a conflict nulls that column's aggregator only
    [lenient] = native(api_client, {**body, "aggregatorMergeStrategy": "lenient"})
    assert lenient["aggregators"] == {
        "count": {"type": "longSum", "name": "count", "fieldName": "count"},
        "delta": None,
    }


def test_segment_metadata_rollup_and_granularity_disagreeing_are_null(wiki, api_client):
    _set_schemas(
        [_schema([COUNT]), _schema([COUNT], rollup=False, granularity="NONE"), _schema([COUNT])]
    )
    body = {
        "queryType": "segmentMetadata",
        "dataSource": "wiki",
        "merge": True,
        "intervals": ["2024-01-01/2024-01-02"],
        "analysisTypes": ["timestampSpec", "queryGranularity", "aggregators", "rollup"],
    }
    [merged] = native(api_client, body)
    assert merged["rollup"] is None and merged["queryGranularity"] is None
    assert merged["aggregators"] == {
        "count": {"type": "longSum", "name": "count", "fieldName": "count"}
    }

    # one segment: its own; NONE written as Druid's granularity object
    body["intervals"] = ["2024-01-03/2024-01-04"]
    _set_schemas([_schema([COUNT]), _schema([COUNT]), _schema([COUNT], False, "NONE")])
    [only] = native(api_client, {**body, "merge": False})
    assert only["rollup"] is False and only["queryGranularity"] == {"type": "none"}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"analysisTypes": ["size"]}, "analysisTypes[0]"),
        ({"aggregatorMergeStrategy": "latest"}, "aggregatorMergeStrategy"),
        ({"aggregatorMergeStrategy": "sometimes"}, "aggregatorMergeStrategy"),
    ],
)
def test_segment_metadata_options_not_implemented_are_refused_by_name(
    wiki, api_client, change, named
):
    body = {"queryType": "segmentMetadata", "dataSource": "wiki", "merge": True, **change}
    result = native(api_client, body, status=400)
    assert result["errorMessage"].startswith(named), result


def test_timeseries_all_over_intervals_without_rows_is_one_row_at_their_start(wiki, api_client):
    # TimeseriesQueryQueryToolChest: granularity all and no result -> one row of the
    # aggregators over nothing, stamped with the first interval's start; not with
    # skipEmptyBuckets.
    body = _timeseries(
        intervals=["2025-02-01/2025-03-01", "2025-01-01/2025-01-02"],
        aggregations=[
            {"type": "count", "name": "c"},
            {"type": "longSum", "name": "s", "fieldName": "added"},
        ],
        postAggregations=[{"type": "expression", "name": "e", "expression": "c + 1"}],
    )
    assert native(api_client, body) == [
        {"timestamp": "2025-01-01T00:00:00.000Z", "result": {"c": 0, "s": None, "e": 1}}
    ]
    filtered = {**body, "filter": {"type": "selector", "dimension": "page", "value": "Main"}}
    assert native(api_client, filtered) == native(api_client, body)
    assert native(api_client, {**body, "context": {"skipEmptyBuckets": True}}) == []


def test_cardinality_takes_the_older_field_names_pydruid_sends(wiki, api_client):
    # pydruid's aggregators.cardinality() writes "fieldNames" (Druid's deprecated
    # spelling of "fields", which it still reads); giving both is Druid's error too.
    older = {"type": "cardinality", "name": "u", "fieldNames": ["user"], "byRow": False}
    newer = {"type": "cardinality", "name": "u", "fields": ["user"]}
    assert native(api_client, _timeseries(aggregations=[older])) == native(
        api_client, _timeseries(aggregations=[newer])
    )
    both = {**older, "fields": ["user"]}
    result = native(api_client, _timeseries(aggregations=[both]), status=400)
    assert result["errorMessage"].startswith("aggregations[0].fieldNames")


def test_pydruid_topn_export_pandas_with_its_docs_lowercase_period(druid_client):  # noqa: F811
    """pydruid's README flow: `client.topn(...)` with `intervals='2013-10-04/pt1h'`
    (Joda reads a period in any case), then `.export_pandas()`."""
    from pydruid.utils.aggregators import count, longsum
    from pydruid.utils.filters import Dimension

    top = druid_client.topn(
        datasource="wiki",
        granularity="all",
        intervals="2024-01-01/pt72h",
        aggregations={"added": longsum("added"), "rows": count("count")},
        dimension="page",
        filter=Dimension("page") != "Talk",
        metric="added",
        threshold=2,
    )
    frame = top.export_pandas()
    assert list(frame.columns) == ["page", "added", "rows", "timestamp"]
    assert frame.to_dict("records") == [
        {"page": "Main", "added": 107, "rows": 3, "timestamp": "2024-01-01T01:00:00.000Z"},
        {"page": "Help", "added": 7, "rows": 1, "timestamp": "2024-01-01T01:00:00.000Z"},
    ]


def test_an_expression_dividing_a_double_by_zero_is_javas_infinity_or_nan(wiki, api_client):
    # Druid's BinDivExpr divides doubles as Java does: x / 0.0 is +-Infinity, 0.0 / 0 NaN.
    body = _timeseries(
        aggregations=[{"type": "doubleSum", "name": "d", "fieldName": "delta"}],
        postAggregations=[
            {"type": "expression", "name": "up", "expression": "d / 0"},
            {"type": "expression", "name": "down", "expression": "(0 - d) / 0"},
            {"type": "expression", "name": "none", "expression": "(d - d) / 0"},
            {"type": "expression", "name": "fine", "expression": "d / 2"},
        ],
    )
    response = api_client.post("/druid/v2", body, format="json")
    assert response.status_code == 200, response.content
    [row] = _strict_json(response.content)
    assert row["result"] == {
        "d": 14.25,
        "up": "Infinity",
        "down": "-Infinity",
        "none": "NaN",
        "fine": 7.125,
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5 - 3", "Binary(op='-', left=LongLiteral(value=5), right=LongLiteral(value=3))"),
        ("(0-d)", "Binary(op='-', left=LongLiteral(value=0), right=Identifier(name='d'))"),
        (
            "[1 -2]",
            "ArrayLiteral(element_type=None, elements=(LongLiteral(value=1), LongLiteral(value=-2)))",
        ),
    ],
)
def test_a_number_then_minus_parses_as_a_subtraction(text, expected):
    # The flat operator chain (195ae69) lexed the "-" after a number as an array
    # element's sign: `1 - x` did not parse anywhere (filters, virtual columns, transforms).
    from metastore.druid.expressions.parse import parse

    assert repr(parse(text)) == expected


@pytest.mark.parametrize(
    ("interval", "explicit"),
    [
        ("2023-12-31/P1M", "2023-12-31/2024-01-31"),
        ("p1y/2024-01-02", "2023-01-02/2024-01-02"),
        ("2024-01-01T00:00:00.000Z/p1w", "2024-01-01/2024-01-08"),
    ],
)
def test_native_intervals_take_month_and_year_periods(wiki, api_client, interval, explicit):
    # Joda's Interval.parse (Druid's intervals) adds calendar months and years, in
    # any case: the same query over the explicit interval gives the same rows.
    by_period = native(api_client, _timeseries(intervals=[interval]))
    assert by_period == native(api_client, _timeseries(intervals=[explicit]))
    assert by_period[0]["result"]["c"] > 0
