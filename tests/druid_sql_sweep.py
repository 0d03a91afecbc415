"""A sweep of Druid's own SQL test queries over Druid's test dataSources `foo` and
`numfoo` (tests/druid_test_data.py), each with the rows Druid's tests expect in
SQL-compatible null handling (or the error they expect), sent to /druid/v2/sql as a
client would (issue 26, item 7). Sources: Druid's CalciteMultiValueStringQueryTest
(`mv_*`) and CalciteQueryTest (`q_*`). `run` answers each case with an outcome and,
for a miss, its cause, so that misses can be ranked by cause.

Rows are compared as Druid's test helpers compare them, except that a float Druid
types FLOAT is compared within float precision, and rows without an ORDER BY that
fixes them as a multiset.
"""

from __future__ import annotations

import collections
import json
import math
import os
from dataclasses import dataclass

T2000, T2001 = "2000-01-01T00:00:00.000Z", "2001-01-01T00:00:00.000Z"
_IN23 = ",".join(f"'{v}'" for v in ["abc", "def", "ghi", *(f"dummy{i}" for i in range(20))])
_SIN, _COS = math.sin(math.pi / 6), math.cos(math.pi / 6)
_FOO_TIMES = [f"{d}T00:00:00.000Z" for d in ("2000-01-01", "2000-01-02", "2000-01-03")] + [
    f"{d}T00:00:00.000Z" for d in ("2001-01-01", "2001-01-02", "2001-01-03")
]

AB, BC = '["a","b"]', '["b","c"]'


@dataclass(frozen=True)
class Error:
    """Druid refuses the query with a message containing `text`."""

    text: str


N = None
# (name, query, expected rows or Error, whether the order is fixed)
CASES: list[tuple[str, str, object, bool]] = [
    # --- CalciteMultiValueStringQueryTest -----------------------------------------------
    ("mv_concat_group", "SELECT concat(dim3, 'foo'), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[N, 2], ["bfoo", 2], ["afoo", 1], ["cfoo", 1], ["dfoo", 1], ["foo", 1]], False),
    ("mv_concat_group_filter", "SELECT concat(dim3, '', 'foo'), SUM(cnt) FROM druid.numfoo where concat(dim3, '', 'foo') = 'bfoo' GROUP BY 1 ORDER BY 2 DESC",
     [["bfoo", 2], ["afoo", 1], ["cfoo", 1]], False),
    ("mv_concat_scan", "SELECT concat(dim3, 'foo') FROM druid.numfoo",
     [['["afoo","bfoo"]'], ['["bfoo","cfoo"]'], ["dfoo"], ["foo"], [N], [N]], False),
    ("mv_self_concat_scan", "SELECT concat(dim3, '-lol-', dim3) FROM druid.numfoo",
     [['["a-lol-a","b-lol-b"]'], ['["b-lol-b","c-lol-c"]'], ["d-lol-d"], ["-lol-"], [N], [N]], False),
    ("mv_concat_scan_filter", "SELECT concat(dim3, '', 'foo') FROM druid.numfoo where concat(dim3, '', 'foo') = 'bfoo'",
     [['["afoo","bfoo"]'], ['["bfoo","cfoo"]']], False),
    ("mv_overlap", "SELECT dim3 FROM druid.numfoo WHERE MV_OVERLAP(dim3, ARRAY['a','b']) LIMIT 5", [[AB], [BC]], False),
    ("mv_overlap_null", "SELECT dim3 FROM druid.numfoo WHERE MV_OVERLAP(dim3, ARRAY[NULL]) LIMIT 5", [[N], [N]], False),
    ("mv_overlap_column", "SELECT dim3 FROM druid.numfoo WHERE MV_OVERLAP(dim3, ARRAY[dim2]) LIMIT 5", [[AB]], False),
    ("mv_contains", "SELECT dim3 FROM druid.numfoo WHERE MV_CONTAINS(dim3, ARRAY['a','b']) LIMIT 5", [[AB]], False),
    ("mv_contains_null", "SELECT dim3 FROM druid.numfoo WHERE MV_CONTAINS(dim3, ARRAY[NULL]) LIMIT 5", [[N], [N]], False),
    ("mv_contains_one", "SELECT dim3 FROM druid.numfoo WHERE MV_CONTAINS(dim3, ARRAY['a']) LIMIT 5", [[AB]], False),
    ("mv_contains_column", "SELECT dim3 FROM druid.numfoo WHERE MV_CONTAINS(dim3, ARRAY[dim2]) LIMIT 5", [[AB]], False),
    ("mv_slice", "SELECT MV_SLICE(dim3, 1) FROM druid.numfoo", [["b"], ["c"], ["[]"], ["[]"], [N], [N]], False),
    ("mv_length_group", "SELECT dim1, MV_LENGTH(dim3), SUM(cnt) FROM druid.numfoo GROUP BY 1, 2 ORDER BY 2 DESC",
     [["", 2, 1], ["10.1", 2, 1], ["1", 1, 1], ["2", 1, 1], ["abc", N, 1], ["def", N, 1]], False),
    ("mv_append_group", "SELECT MV_APPEND(dim3, 'foo'), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [["foo", 4], [N, 2], ["b", 2], ["", 1], ["a", 1], ["c", 1], ["d", 1]], False),
    ("mv_prepend_group", "SELECT MV_PREPEND('foo', dim3), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [["foo", 4], [N, 2], ["b", 2], ["", 1], ["a", 1], ["c", 1], ["d", 1]], False),
    ("mv_prepend_append_to_string", "SELECT MV_TO_STRING(MV_PREPEND('foo', dim3), ','), MV_TO_STRING(MV_APPEND(dim3, 'foo'), ','), SUM(cnt) FROM druid.numfoo GROUP BY 1,2 ORDER BY 3 DESC",
     [[N, N, 2], ["foo,", ",foo", 1], ["foo,a,b", "a,b,foo", 1], ["foo,b,c", "b,c,foo", 1], ["foo,d", "d,foo", 1]], False),
    ("mv_concat_mv_group", "SELECT MV_CONCAT(dim3, dim3), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [["b", 4], [N, 2], ["", 2], ["a", 2], ["c", 2], ["d", 2]], False),
    ("mv_offset_group", "SELECT MV_OFFSET(dim3, 1), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[N, 4], ["b", 1], ["c", 1]], False),
    ("mv_ordinal_group", "SELECT MV_ORDINAL(dim3, 2), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[N, 4], ["b", 1], ["c", 1]], False),
    ("mv_offset_of_group", "SELECT MV_OFFSET_OF(dim3, 'b'), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[N, 4], [0, 1], [1, 1]], False),
    ("mv_ordinal_of_group", "SELECT MV_ORDINAL_OF(dim3, 'b'), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[N, 4], [1, 1], [2, 1]], False),
    ("mv_to_string_group", "SELECT MV_TO_STRING(dim3, ','), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[N, 2], ["", 1], ["a,b", 1], ["b,c", 1], ["d", 1]], False),
    ("mv_string_to_mv_group", "SELECT STRING_TO_MV(CONCAT(MV_TO_STRING(dim3, ','), ',d'), ','), SUM(cnt) FROM druid.numfoo WHERE MV_LENGTH(dim3) > 0 GROUP BY 1 ORDER BY 2 DESC, 1",
     [["d", 5], ["b", 2], ["", 1], ["a", 1], ["c", 1]], True),
    ("mv_string_to_mv_filter", "SELECT STRING_TO_MV(CONCAT(MV_TO_STRING(dim3, ','), ',d'), ',') FROM druid.numfoo WHERE MV_CONTAINS(STRING_TO_MV(CONCAT(MV_TO_STRING(dim3, ','), ',d'), ','), 'd')",
     [['["a","b","d"]'], ['["b","c","d"]'], ['["d","d"]'], ['["","d"]']], False),
    ("mv_string_to_mv_constant", "SELECT m1, STRING_TO_MV('a,b', ',') AS mv FROM druid.numfoo GROUP BY 1",
     [[float(m), AB] for m in range(1, 7)], False),
    ("mv_string_to_mv_constant_grouped", "SELECT m1, STRING_TO_MV('a,b', ',') AS mv FROM druid.numfoo GROUP BY 1, 2",
     [[float(m), v] for m in range(1, 7) for v in "ab"], False),
    ("mv_string_to_mv_of_string_agg", "SELECT STRING_TO_MV(STRING_AGG(dim1, ','), ',') AS mv, COUNT(*) cnt FROM druid.numfoo",
     [['["","10.1","2","1","def","abc"]', 6]], False),
    ("mv_filter_only_group", "SELECT MV_FILTER_ONLY(dim3, ARRAY['b']), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[N, 4], ["b", 2]], False),
    ("mv_filter_none_group", "SELECT MV_FILTER_NONE(dim3, ARRAY['b']), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[N, 2], ["", 1], ["a", 1], ["c", 1], ["d", 1]], False),
    ("mv_filter_only_length", "SELECT MV_LENGTH(MV_FILTER_ONLY(dim3, ARRAY['b'])), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[N, 4], [1, 2]], False),
    ("mv_filter_only_coalesce", "SELECT COALESCE(MV_FILTER_ONLY(dim3, ARRAY['b']), 'no b'), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[N, 4], ["b", 2]], False),
    ("mv_filter_only_coalesce_column", "SELECT COALESCE(MV_FILTER_ONLY(dim3, ARRAY['b']), dim1), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [["b", 2], ["1", 1], ["2", 1], ["abc", 1], ["def", 1]], False),
    ("mv_filter_only_null_literal", "SELECT COALESCE(MV_FILTER_ONLY(dim3, ARRAY[NULL, 'b']), 'no b'), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[N, 3], ["b", 2], ["no b", 1]], False),
    ("mv_filter_none_length", "SELECT MV_LENGTH(MV_FILTER_NONE(dim3, ARRAY['b'])), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[1, 4], [N, 2]], False),
    ("mv_filter_only_two_lengths", "SELECT MV_LENGTH(MV_FILTER_ONLY(dim3, ARRAY['b'])), MV_LENGTH(dim3), SUM(cnt) FROM druid.numfoo GROUP BY 1,2 ORDER BY 3 DESC",
     [[N, N, 2], [N, 1, 2], [1, 2, 2]], False),
    ("mv_filter_on_filter_only_no_match", "SELECT dim3, SUM(cnt) FROM druid.numfoo WHERE MV_FILTER_ONLY(dim3, ARRAY['b']) = 'a' GROUP BY 1 ORDER BY 2 DESC",
     [], False),
    ("mv_filter_on_filter_only_match", "SELECT dim3, SUM(cnt) FROM druid.numfoo WHERE MV_FILTER_ONLY(dim3, ARRAY['b']) = 'b' GROUP BY 1 ORDER BY 2 DESC",
     [["b", 2], ["a", 1], ["c", 1]], False),
    ("mv_filter_on_filter_only_like", "SELECT dim3, SUM(cnt) FROM druid.numfoo WHERE MV_FILTER_ONLY(dim3, ARRAY['b']) LIKE 'b%' GROUP BY 1 ORDER BY 2 DESC",
     [["b", 2], ["a", 1], ["c", 1]], False),
    ("mv_to_array_group", "SELECT MV_TO_ARRAY(dim3), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[N, 2], [[""], 1], [["a", "b"], 1], [["b", "c"], 1], [["d"], 1]], False),
    ("mv_to_array_single_group", "SELECT MV_TO_ARRAY(dim1), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
     [[[v], 1] for v in ("", "1", "10.1", "2", "abc", "def")], False),
    ("mv_to_array_single_group_limit", "SELECT MV_TO_ARRAY(dim1), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC limit 10",
     [[[v], 1] for v in ("", "1", "10.1", "2", "abc", "def")], False),
    ("mv_to_array_two_args", "SELECT MV_TO_ARRAY(dim3,dim3) FROM druid.numfoo", Error("Invalid number of arguments to function"), False),
    ("mv_to_array_no_args", "SELECT MV_TO_ARRAY() FROM druid.numfoo", Error("Invalid number of arguments to function"), False),
    ("mv_to_array_of_expression", "SELECT MV_TO_ARRAY(concat(dim3,'c')) FROM druid.numfoo", Error("should be an identifier expression"), False),
    ("mv_to_array_of_array", "SELECT MV_TO_ARRAY(Array[1,2]) FROM druid.numfoo", Error("should be an identifier expression"), False),
    ("mv_overlap_coalesce_nvl", "SELECT COALESCE(dim3, 'other') FROM druid.numfoo WHERE MV_OVERLAP(COALESCE(MV_TO_ARRAY(dim3), ARRAY['other']), ARRAY['a', 'b', 'other']) OR MV_OVERLAP(NVL(MV_TO_ARRAY(dim3), ARRAY['other']), ARRAY['a', 'b', 'other']) LIMIT 5",
     [[AB], [BC], ["other"], ["other"]], False),
    ("mv_overlap_coalesce_single", "SELECT COALESCE(dim3, 'other') FROM druid.numfoo WHERE MV_OVERLAP(COALESCE(dim3, 'other'), ARRAY['a', 'b', 'other']) LIMIT 5",
     [[AB], [BC], ["other"], ["other"]], False),
    ("mv_overlap_coalesce_other_column", "SELECT COALESCE(dim3, dim2) FROM druid.numfoo WHERE MV_OVERLAP(COALESCE(dim3, dim2), ARRAY['a', 'b', 'other']) LIMIT 5",
     [[AB], [BC]], False),
    ("mv_overlap_coalesce_mixed_types", "SELECT COALESCE(dim3, 'other') FROM druid.numfoo WHERE MV_OVERLAP(COALESCE(dim3, ARRAY['other']), ARRAY['a', 'b', 'other']) LIMIT 5",
     Error("Illegal mixing of types in CASE or COALESCE statement"), False),
    ("mv_contains_substring", "SELECT dim3 FROM druid.numfoo WHERE MV_CONTAINS(SUBSTRING(dim3, 1, 1), ARRAY['a','b']) LIMIT 5",
     [[AB]], False),
    # --- CalciteQueryTest ----------------------------------------------------------------
    ("q_routines_aggregator", "SELECT COUNT(*) FROM INFORMATION_SCHEMA.ROUTINES WHERE IS_AGGREGATOR = 'YES' AND ROUTINE_NAME = 'COUNT'", [[1]], False),
    ("q_routines_scalar", "SELECT COUNT(*) FROM INFORMATION_SCHEMA.ROUTINES WHERE IS_AGGREGATOR = 'NO' AND ROUTINE_NAME = 'CEIL'", [[1]], False),
    ("q_routines_no_schema", "SELECT * FROM INFORMATION_SCHEMA.ROUTINES WHERE ROUTINE_SCHEMA = 'boo'", [], False),
    ("q_group_order_desc", "SELECT dim1, COUNT(*) FROM druid.foo GROUP BY dim1 ORDER BY dim1 DESC",
     [["def", 1], ["abc", 1], ["2", 1], ["10.1", 1], ["1", 1], ["", 1]], True),
    ("q_group_limit", "SELECT dim1, dim2, COUNT(*) FROM druid.foo GROUP BY dim1, dim2 limit 1", [["", "a", 1]], True),
    ("q_safe_divide", "select count(*) c from foo where ((floor(safe_divide(cast(cast(m1 as char) as bigint), 2))) = 0)", [[1]], False),
    ("q_div", "select cnt, m1, div(m1, 2), div(cnt+2, cnt+1) from foo",
     [[1, 1.0, 0, 1], [1, 2.0, 1, 1], [1, 3.0, 1, 1], [1, 4.0, 2, 1], [1, 5.0, 2, 1], [1, 6.0, 3, 1]], False),
    ("q_group_order_by_count", "SELECT dim1, dim2, COUNT(*) FROM druid.foo GROUP BY 1, 2 ORDER BY 3 DESC",
     [["", "a", 1], ["1", "a", 1], ["10.1", N, 1], ["2", "", 1], ["abc", N, 1], ["def", "abc", 1]], False),
    ("q_group_single_desc", "SELECT dim1 FROM druid.foo GROUP BY dim1 ORDER BY dim1 DESC",
     [["def"], ["abc"], ["2"], ["10.1"], ["1"], [""]], True),
    ("q_earliest", "SELECT EARLIEST(cnt), EARLIEST(m1), EARLIEST(dim1, 10), EARLIEST(dim1, CAST(10 AS INTEGER)), EARLIEST(cnt + 1), EARLIEST(m1 + 1), EARLIEST(dim1 || CAST(cnt AS VARCHAR), 10), EARLIEST_BY(cnt, MILLIS_TO_TIMESTAMP(l1)), EARLIEST_BY(m1, MILLIS_TO_TIMESTAMP(l1)), EARLIEST_BY(dim1, MILLIS_TO_TIMESTAMP(l1), 10), EARLIEST_BY(cnt + 1, MILLIS_TO_TIMESTAMP(l1)), EARLIEST_BY(m1 + 1, MILLIS_TO_TIMESTAMP(l1)), EARLIEST_BY(dim1 || CAST(cnt AS VARCHAR), MILLIS_TO_TIMESTAMP(l1), 10), EARLIEST_BY(dim1 || CAST(cnt AS VARCHAR), MILLIS_TO_TIMESTAMP(l1), 10) FROM druid.numfoo",
     [[1, 1.0, "", "", 2, 2.0, "1", 1, 3.0, "2", 2, 4.0, "21", "21"]], False),
    ("q_latest_of_distinct", "SELECT LATEST(dim1,10) FROM (SELECT DISTINCT __time, dim1 from foo)", [["abc"]], False),
    ("q_latest_vector", "SELECT LATEST(cnt), LATEST(cnt + 1), LATEST(m1), LATEST(m1+1) FROM druid.numfoo", [[1, 2, 6.0, 7.0]], False),
    ("q_latest", "SELECT LATEST(cnt), LATEST(m1), LATEST(dim1, 10), LATEST(dim1, CAST(10 AS INTEGER)), LATEST(cnt + 1), LATEST(m1 + 1), LATEST(dim1 || CAST(cnt AS VARCHAR), 10), LATEST_BY(cnt, MILLIS_TO_TIMESTAMP(l1)), LATEST_BY(m1, MILLIS_TO_TIMESTAMP(l1)), LATEST_BY(dim1, MILLIS_TO_TIMESTAMP(l1), 10), LATEST_BY(cnt + 1, MILLIS_TO_TIMESTAMP(l1)), LATEST_BY(m1 + 1, MILLIS_TO_TIMESTAMP(l1)), LATEST_BY(dim1 || CAST(cnt AS VARCHAR), MILLIS_TO_TIMESTAMP(l1), 10), LATEST_BY(dim1 || CAST(cnt AS VARCHAR), MILLIS_TO_TIMESTAMP(l1), CAST(10 AS INTEGER)) FROM druid.numfoo",
     [[1, 6.0, "abc", "abc", 2, 7.0, "abc1", 1, 2.0, "10.1", 2, 3.0, "10.11", "10.11"]], False),
    ("q_earliest_by_not_time", "SELECT EARLIEST_BY(m1, l1) FROM druid.numfoo", Error("Cannot apply 'EARLIEST_BY' to arguments of type"), False),
    ("q_latest_by_not_time", "SELECT LATEST_BY(m1, l1) FROM druid.numfoo", Error("Cannot apply 'LATEST_BY' to arguments of type"), False),
    ("q_any_value", "SELECT ANY_VALUE(cnt), ANY_VALUE(m1), ANY_VALUE(m2), ANY_VALUE(dim1, 10), ANY_VALUE(cnt + 1), ANY_VALUE(m1 + 1), ANY_VALUE(dim1 || CAST(cnt AS VARCHAR), 10) FROM druid.foo",
     [[1, 1.0, 1.0, "", 2, 2.0, "1"]], False),
    ("q_latest_by_time_expression", "SELECT LATEST_BY(m1, MILLIS_TO_TIMESTAMP(BITWISE_SHIFT_RIGHT(TIMESTAMP_TO_MILLIS(__time), 3))) FROM druid.foo GROUP BY TIME_FLOOR(__time, 'P1Y', null, 'America/Los_Angeles')",
     [[1.0], [4.0], [6.0]], False),
    ("q_latest_in_subquery", "SELECT SUM(val1), SUM(val2), SUM(val3) FROM (SELECT dim2, LATEST(m1) AS val1, LATEST(cnt) AS val2, LATEST(m2) AS val3 FROM foo GROUP BY dim2)",
     [[18.0, 4, 18.0]], False),
    ("q_latest_group", "SELECT dim2, LATEST(m1) AS val1 FROM foo GROUP BY dim2", [[N, 6.0], ["", 3.0], ["a", 4.0], ["abc", 5.0]], False),
    ("q_string_latest_group", "SELECT dim2, LATEST(dim4,10) AS val1 FROM druid.numfoo GROUP BY dim2",
     [[N, "b"], ["", "a"], ["a", "b"], ["abc", "b"]], False),
    ("q_latest_always_false", "SELECT LATEST(dim4, 10), dim2 FROM numfoo WHERE (dim1 = 'something' AND dim1 IN('something else')) GROUP BY dim2", [], False),
    ("q_latest_by_always_false", "SELECT LATEST_BY(dim4, __time, 10), dim2 FROM numfoo WHERE (dim1 = 'something' AND dim1 IN('something else')) GROUP BY dim2", [], False),
    ("q_earliest_in_subquery", "SELECT SUM(val1), SUM(val2), SUM(val3) FROM (SELECT dim2, EARLIEST(m1) AS val1, EARLIEST(cnt) AS val2, EARLIEST(m2) AS val3 FROM foo GROUP BY dim2)",
     [[11.0, 4, 11.0]], False),
    ("q_string_latest_in_subquery", "SELECT SUM(val) FROM (SELECT dim2, LATEST(dim1, 10) AS val FROM foo GROUP BY dim2)", [[3.0]], False),
    ("q_string_earliest_in_subquery", "SELECT SUM(val) FROM (SELECT dim2, EARLIEST(dim1,10) AS val FROM foo GROUP BY dim2)", [[12.1]], False),
    ("q_any_in_subquery", "SELECT SUM(val1), SUM(val2), SUM(val3) FROM (SELECT dim2, ANY_VALUE(m1) AS val1, ANY_VALUE(cnt) AS val2, ANY_VALUE(m2) AS val3 FROM foo GROUP BY dim2)",
     [[11.0, 4, 11.0]], False),
    ("q_string_earliest_group", "SELECT dim2, EARLIEST(dim1,10) AS val FROM foo GROUP BY dim2",
     [[N, "10.1"], ["", "2"], ["a", ""], ["abc", "def"]], True),
    ("q_string_earliest_multi_value", "SELECT dim2, EARLIEST(dim3,10) AS val FROM foo GROUP BY dim2",
     [[N, "[b, c]"], ["", "d"], ["a", "[a, b]"], ["abc", N]], True),
    ("q_string_any_in_subquery", "SELECT SUM(val) FROM (SELECT dim2, ANY_VALUE(dim1, 10) AS val FROM foo GROUP BY dim2)", [[12.1]], False),
    ("q_earliest_numeric_nulls", "SELECT EARLIEST(l1), EARLIEST(dbl1), EARLIEST(f1) FROM druid.numfoo", [[7, 1.0, 1.0]], False),
    ("q_latest_numeric_nulls", "SELECT LATEST(l1), LATEST(dbl1), LATEST(f1) FROM druid.numfoo", [[N, N, N]], False),
    ("q_first_latest_skip_nulls", "SELECT EARLIEST(dim1, 32), LATEST(l1), LATEST(dbl1), LATEST(f1) FROM druid.numfoo WHERE dim1 IS NOT NULL AND l1 IS NOT NULL AND dbl1 IS NOT NULL AND f1 is NOT NULL",
     [["", 0, 0.0, 0.0]], False),
    ("q_any_keeps_nulls", "SELECT ANY_VALUE(dim1, 32), ANY_VALUE(l2), ANY_VALUE(dbl2), ANY_VALUE(f2) FROM druid.numfoo", [["", N, N, N]], False),
    ("q_any_with_filter", "SELECT ANY_VALUE(dim1, 32), ANY_VALUE(l2), ANY_VALUE(dbl2), ANY_VALUE(f2) FROM druid.numfoo WHERE dim1 IS NOT NULL AND l2 IS NOT NULL AND dbl2 IS NOT NULL AND f2 is NOT NULL",
     [["10.1", 325323, 1.7, 0.1]], False),
    *[
        (f"q_order_by_{fn.lower()}_{col}", f"SELECT dim1, {fn}({col}) FROM druid.numfoo GROUP BY 1 ORDER BY 2 LIMIT 10",
         [["1", N], ["abc", N], ["def", N], ["2", zero], ["", first], ["10.1", second]], False)
        for fn in ("EARLIEST", "LATEST", "ANY_VALUE")
        for col, zero, first, second in (("f1", 0.0, 1.0, 0.1), ("dbl1", 0.0, 1.0, 1.7), ("l1", 0, 7, 325323))
    ],
    ("q_group_long", "SELECT cnt, COUNT(*) FROM druid.foo GROUP BY cnt", [[1, 6]], True),
    ("q_group_ordinal", "SELECT cnt, COUNT(*) FROM druid.foo GROUP BY 1", [[1, 6]], True),
    ("q_group_floor_month_alias", "SELECT FLOOR(__time TO MONTH) AS __time, COUNT(*) FROM druid.foo GROUP BY FLOOR(__time TO MONTH)",
     [["2000-01-01T00:00:00.000Z", 3], ["2001-01-01T00:00:00.000Z", 3]], True),
    ("q_group_order_ordinal_alias", "SELECT cnt as theCnt, COUNT(*) FROM druid.foo GROUP BY 1 ORDER BY 1 ASC", [[1, 6]], True),
    ("q_group_float", "SELECT m1, COUNT(*) FROM druid.foo GROUP BY m1", [[float(m), 1] for m in range(1, 7)], True),
    ("q_group_double", "SELECT m2, COUNT(*) FROM druid.foo GROUP BY m2", [[float(m), 1] for m in range(1, 7)], True),
    ("q_filter_float", "SELECT COUNT(*) FROM druid.foo WHERE m1 = 1.0", [[1]], False),
    ("q_decode_base64", "SELECT DECODE_BASE64_UTF8('aGVsbG8=') FROM druid.foo limit 1", [["hello"]], False),
    ("q_filter_double", "SELECT COUNT(*) FROM druid.foo WHERE m2 = 1.0", [[1]], False),
    ("q_having_grand_total", "SELECT SUM(m1) AS m1_sum FROM foo HAVING m1_sum = 21", [[21.0]], False),
    ("q_group_nulls_first", "SELECT dim2, COUNT(*) FROM foo GROUP BY dim2 ORDER BY dim2", [[N, 2], ["", 1], ["a", 2], ["abc", 1]], True),
    ("q_group_nulls_last_desc", "SELECT dim2, COUNT(*) FROM foo GROUP BY dim2 ORDER BY dim2 DESC", [["abc", 1], ["a", 2], ["", 1], [N, 2]], True),
    ("q_having_double_sum", "SELECT dim1, SUM(m1) AS m1_sum FROM druid.foo GROUP BY dim1 HAVING SUM(m1) > 1",
     [["1", 4.0], ["10.1", 2.0], ["2", 3.0], ["abc", 6.0], ["def", 5.0]], True),
    ("q_having_count_distinct", "SELECT dim2, COUNT(DISTINCT m1) FROM druid.foo GROUP BY dim2 HAVING COUNT(DISTINCT m1) > 1",
     [[N, 2], ["a", 2]], True),
    ("q_count_distinct_filter", "SELECT COUNT(DISTINCT foo.dim1) FILTER(WHERE foo.cnt = 1), SUM(foo.cnt) FROM druid.foo", [[6, 6]], False),
    ("q_having_float_sum", "SELECT dim1, CAST(SUM(m1) AS FLOAT) AS m1_sum FROM druid.foo GROUP BY dim1 HAVING CAST(SUM(m1) AS FLOAT) > 1",
     [["1", 4.0], ["10.1", 2.0], ["2", 3.0], ["abc", 6.0], ["def", 5.0]], True),
    ("q_column_comparison", "SELECT dim1, m1, COUNT(*) FROM druid.foo WHERE m1 - 1 = dim1 GROUP BY dim1, m1", [["2", 3.0, 1]], True),
    ("q_having_ratio", "SELECT dim1, COUNT(*) FILTER(WHERE dim2 <> 'a')/COUNT(*) as ratio FROM druid.foo GROUP BY dim1 HAVING COUNT(*) FILTER(WHERE dim2 <> 'a')/COUNT(*) = 1",
     [["2", 1], ["def", 1]], True),
    ("q_group_select_projection", "SELECT dim1, SUBSTRING(dim1, 2) FROM druid.foo GROUP BY dim1",
     [["", N], ["1", N], ["10.1", "0.1"], ["2", N], ["abc", "bc"], ["def", "ef"]], True),
    ("q_approx_count_distinct", "SELECT SUM(cnt), APPROX_COUNT_DISTINCT(dim2), approx_count_distinct(dim2) FILTER(WHERE dim2 <> ''), APPROX_COUNT_DISTINCT(SUBSTRING(dim2, 1, 1)), APPROX_COUNT_DISTINCT(SUBSTRING(dim2, 1, 1) || 'x') FROM druid.foo",
     [[6, 3, 2, 1, 1]], False),
    ("q_approx_count_distinct_expression", "SELECT APPROX_COUNT_DISTINCT(dim1 || 'hello') FROM druid.foo", [[6]], False),
    ("q_nested_group_by", "SELECT FLOOR(__time to hour) AS __time, dim1, COUNT(m2) FROM (SELECT MAX(__time) AS __time, m2, dim1 FROM druid.foo WHERE 1=1 AND m1 = '5.0' GROUP BY m2, dim1) GROUP BY FLOOR(__time to hour), dim1",
     [["2001-01-02T00:00:00.000Z", "def", 1]], False),
    ("q_double_nested_group_by", "SELECT SUM(cnt), COUNT(*) FROM (SELECT dim2, SUM(t1.cnt) cnt FROM (SELECT dim1, dim2, COUNT(*) cnt FROM druid.foo GROUP BY dim1, dim2) t1 GROUP BY dim2) t2",
     [[6, 4]], False),
    ("q_double_nested_group_by_max", "SELECT MAX(cnt) FROM (SELECT dim2, MAX(t1.cnt) cnt FROM (SELECT dim1, dim2, COUNT(*) cnt FROM druid.foo GROUP BY dim1, dim2) t1 GROUP BY dim2) t2",
     [[1]], False),
    ("q_count_of_groups", "SELECT SUM(cnt), COUNT(*) FROM (SELECT dim2, SUM(cnt) AS cnt FROM druid.foo GROUP BY dim2)", [[6, 4]], False),
    ("q_filtered_aggregates_of_no_rows", "SELECT dim2, count(*) FILTER(WHERE dim1 = 'nonexistent'), COUNT(DISTINCT dim1) FILTER(WHERE dim1 = 'nonexistent'), APPROX_COUNT_DISTINCT(distinct dim1) FILTER(WHERE dim1 = 'nonexistent'), sum(dbl1) FILTER(WHERE dim1 = 'nonexistent'), max(dbl1) FILTER(WHERE dim1 = 'nonexistent'), min(dbl1) FILTER(WHERE dim1 = 'nonexistent'), sum(l1) FILTER(WHERE dim1 = 'nonexistent'), max(l1) FILTER(WHERE dim1 = 'nonexistent'), min(l1) FILTER(WHERE dim1 = 'nonexistent'), avg(l1) FILTER(WHERE dim1 = 'nonexistent'), avg(dbl1) FILTER(WHERE dim1 = 'nonexistent') FROM druid.numfoo WHERE dim2 = 'a' GROUP BY dim2",
     [["a", 0, 0, 0, N, N, N, N, N, N, N, N]], False),
    ("q_not_in_with_null", "SELECT COUNT(*) FROM foo WHERE dim1 NOT IN (NULL, 'abc')", [[0]], False),
    ("q_literally_false", "SELECT COUNT(*), MAX(cnt) FROM druid.foo WHERE 1 = 0", [[0, N]], False),
    ("q_impossible_time_filter", "SELECT COUNT(*) FROM druid.foo WHERE FLOOR(__time TO DAY) = TIMESTAMP '2000-01-02 01:00:00' OR FLOOR(__time TO DAY) = TIMESTAMP '2000-01-02 02:00:00'", [[0]], False),
    ("q_group_impossible_time_filter", "SELECT dim1, COUNT(*) FROM druid.foo WHERE FLOOR(__time TO DAY) = TIMESTAMP '2000-01-02 01:00:00' OR FLOOR(__time TO DAY) = TIMESTAMP '2000-01-02 02:00:00' GROUP BY 1", [], False),
    ("q_group_literally_false", "SELECT COUNT(*), MAX(cnt) FROM druid.foo WHERE 1 = 0 GROUP BY dim1", [], False),
    ("q_filter_matching_nothing", "SELECT COUNT(*), MAX(cnt) FROM druid.foo WHERE dim1 = 'foobar'", [[0, N]], False),
    ("q_group_by_empty", "SELECT COUNT(*), SUM(cnt), MIN(cnt) FROM druid.foo GROUP BY ()", [[6, 6, 1]], False),
    ("q_group_by_literal_nothing", "SELECT COUNT(*), MAX(cnt) FROM druid.foo WHERE dim1 = 'foobar' GROUP BY 'dummy'", [], False),
    ("q_count_non_null", "SELECT COUNT(cnt) FROM druid.foo", [[6]], False),
    ("q_count_nullable", "SELECT COUNT(dim2) FROM druid.foo", [[4]], False),
    ("q_count_nullable_expression", "SELECT COUNT(CASE WHEN dim2 = 'abc' THEN 'yes' WHEN dim2 = 'def' THEN 'yes' END) FROM druid.foo", [[1]], False),
    ("q_count_star", "SELECT COUNT(*) FROM druid.foo", [[6]], False),
    ("q_count_star_cte", "WITH beep (dim1_firstchar) AS (SELECT SUBSTRING(dim1, 1, 1) FROM foo WHERE dim2 = 'a') SELECT COUNT(*) FROM beep WHERE dim1_firstchar <> 'z'", [[1]], False),
    ("q_like_escape", "SELECT COUNT(*) FROM druid.foo WHERE dim1 like 'a%' OR dim2 like '%xb%' escape 'x'", [[2]], False),
    ("q_in_expression", "SELECT dim1 IN ('abc', 'def', 'ghi'), COUNT(*) FROM druid.foo GROUP BY 1", [[False, 4], [True, 2]], True),
    ("q_in_or_is_null", "SELECT dim1 IN ('abc', 'def', 'ghi') OR dim1 IS NULL, COUNT(*) FROM druid.foo GROUP BY 1", [[False, 4], [True, 2]], True),
    ("q_not_in_or_is_null", "SELECT NOT (dim1 IN ('abc', 'def', 'ghi') OR dim1 IS NULL), COUNT(*) FROM druid.foo GROUP BY 1", [[False, 2], [True, 4]], True),
    ("q_not_in_and_not_null", "SELECT dim1 NOT IN ('abc', 'def', 'ghi') AND dim1 IS NOT NULL, COUNT(*) FROM druid.foo GROUP BY 1", [[False, 2], [True, 4]], True),
    ("q_in_or_greater", "SELECT dim1 IN ('abc', 'def', 'ghi') OR dim1 > 'zzz', COUNT(*) FROM druid.foo GROUP BY 1", [[False, 4], [True, 2]], True),
    ("q_not_in_and_less", "SELECT dim1 NOT IN ('abc', 'def', 'ghi') AND dim1 < 'zzz', COUNT(*) FROM druid.foo GROUP BY 1", [[False, 2], [True, 4]], True),
    ("q_not_in_or_equal", "SELECT dim1 NOT IN ('abc', 'def', 'ghi') OR dim1 = 'def', COUNT(*) FROM druid.foo GROUP BY 1", [[False, 1], [True, 5]], True),
    ("q_is_null_to_in", "SELECT dim1, COUNT(*) FROM druid.foo WHERE dim1 IS NULL OR dim1 = 'abc' OR dim1 = 'def' OR dim1 = 'ghi' GROUP BY dim1", [["abc", 1], ["def", 1]], True),
    ("q_in_23_elements", f"SELECT dim1, COUNT(*) FROM druid.foo WHERE dim1 IN ({_IN23}) OR dim1 = 'xyz' OR dim1 IS NULL GROUP BY dim1", [["abc", 1], ["def", 1]], True),
    ("q_time_condition_month", "SELECT SUM(cnt), gran FROM (SELECT __time as t, floor(__time TO month) AS gran, cnt FROM druid.foo) AS x WHERE t >= '2000-01-01' and t < '2002-01-01' GROUP BY gran ORDER BY gran",
     [[3, T2000], [3, T2001]], True),
    ("q_time_condition_nested", "SELECT SUM(cnt), COUNT(*) FROM (SELECT dim2, SUM(cnt) AS cnt FROM druid.foo WHERE __time >= '2000-01-01' GROUP BY dim2)", [[6, 4]], False),
    ("q_semi_join_substring", "SELECT COUNT(*) FROM druid.foo WHERE __time >= '2000-01-01' AND SUBSTRING(dim2, 1, 1) IN (SELECT SUBSTRING(dim1, 1, 1) FROM druid.foo WHERE dim1 <> '' AND __time >= '2000-01-01')", [[3]], False),
    ("q_constant", "SELECT 2 + 2 AS a", [[4]], False),
    ("q_filter_float_dimension", "SELECT dim1 FROM numfoo WHERE f1 = 0.1 LIMIT 1", [["10.1"]], False),
    ("q_filter_double_dimension", "SELECT dim1 FROM numfoo WHERE dbl1 = 1.7 LIMIT 1", [["10.1"]], False),
    ("q_filter_long_dimension", "SELECT dim1 FROM numfoo WHERE l1 = 7 LIMIT 1", [[""]], False),
    ("q_trigonometry", "SELECT exp(count(*)) + 10, sin(pi / 6), cos(pi / 6), tan(pi / 6), cot(pi / 6), asin(exp(count(*)) / 2), acos(exp(count(*)) / 2), atan(exp(count(*)) / 2), atan2(exp(count(*)), 1) FROM druid.foo WHERE  dim2 = 0",
     [[11.0, _SIN, _COS, math.tan(math.pi / 6), _COS / _SIN, math.asin(0.5), math.acos(0.5), math.atan(0.5), math.atan2(1, 1)]], False),
    ("q_radians_degrees", "SELECT RADIANS(m1 * 15)/DEGREES(m2) FROM numfoo WHERE dim1 = '1'", [[math.radians(60) / math.degrees(4)]], False),
    ("q_timestampdiff", "SELECT TIMESTAMPDIFF(DAY, TIMESTAMP '1999-01-01 00:00:00', __time), TIMESTAMPDIFF(DAY, __time, DATE '2001-01-01'), TIMESTAMPDIFF(HOUR, TIMESTAMP '1999-12-31 01:00:00', __time), TIMESTAMPDIFF(MINUTE, TIMESTAMP '1999-12-31 23:58:03', __time), TIMESTAMPDIFF(SECOND, TIMESTAMP '1999-12-31 23:59:03', __time), TIMESTAMPDIFF(MONTH, TIMESTAMP '1999-11-01 00:00:00', __time), TIMESTAMPDIFF(YEAR, TIMESTAMP '1996-11-01 00:00:00', __time), TIMESTAMPDIFF(QUARTER, TIMESTAMP '1996-10-01 00:00:00', __time), TIMESTAMPDIFF(WEEK, TIMESTAMP '1998-10-01 00:00:00', __time) FROM druid.foo LIMIT 2",
     [[365, 366, 23, 1, 57, 2, 3, 13, 65], [366, 365, 47, 1441, 86457, 2, 3, 13, 65]], True),
    ("q_timestamp_ceil", "SELECT CEIL(TIMESTAMP '2000-01-01 00:00:00' TO DAY), CEIL(TIMESTAMP '2000-01-01 01:00:00' TO DAY) FROM druid.foo LIMIT 1",
     [[T2000, "2000-01-02T00:00:00.000Z"]], False),
    ("q_nvl_columns", "SELECT NVL(dim2, dim1), COUNT(*) FROM druid.foo GROUP BY NVL(dim2, dim1)", [["", 1], ["10.1", 1], ["a", 2], ["abc", 2]], True),
    ("q_group_literal_in_subquery", "SELECT t1, t2 FROM ( SELECT 'dummy' as t1, CASE WHEN dim4 = 'b' THEN dim4 ELSE NULL END AS t2 FROM numfoo GROUP BY dim4 ) GROUP BY t1,t2",
     [["dummy", N], ["dummy", "b"]], True),
    ("q_left_right", "SELECT dim1, LEFT(dim1, 2), RIGHT(dim1, 2) FROM druid.foo GROUP BY dim1",
     [["", "", ""], ["1", "1", "1"], ["10.1", "10", ".1"], ["2", "2", "2"], ["abc", "ab", "bc"], ["def", "de", "ef"]], True),
    ("q_group_desc_limit", "SELECT dim1 FROM druid.foo GROUP BY dim1 ORDER BY dim1 DESC LIMIT 2", [["def"], ["abc"]], True),
    ("q_repeated_case_grouping", "SELECT CASE dim1 WHEN NULL THEN FALSE ELSE TRUE END AS col_a, CASE dim2 WHEN NULL THEN FALSE ELSE TRUE END AS col_b FROM foo GROUP BY 1, 2",
     [[True, True]], False),
    ("q_regexp_like_null_pattern", "SELECT REGEXP_LIKE('x', NULL)", Error("Illegal use of 'NULL'"), False),
    ("q_regexp_like_column_pattern", "SELECT REGEXP_LIKE('x', dim1) FROM foo", Error("Argument to function 'REGEXP_LIKE' must be a literal"), False),
    ("q_regexp_like_number_pattern", "SELECT REGEXP_LIKE('x', 1) FROM foo", Error("Cannot apply 'REGEXP_LIKE' to arguments"), False),
    *[
        (f"q_timestampadd_zero_{unit.lower()}", f'SELECT TIMESTAMPADD({unit}, 0, "__time") FROM druid.foo', [[t] for t in _FOO_TIMES], False)
        for unit in ("DAY", "MONTH", "YEAR")
    ],
    ("q_long_filters", "SELECT COUNT(*) FROM druid.foo WHERE cnt >= 3 OR cnt = 1", [[6]], False),
    ("q_long_float_range", "SELECT COUNT(*) FROM druid.foo WHERE cnt > 1.1 and cnt < 100000001.0", [[0]], False),
    ("q_long_float_equal", "SELECT COUNT(*) FROM druid.foo WHERE cnt = 1.0", [[6]], False),
    ("q_long_float_equal_none", "SELECT COUNT(*) FROM druid.foo WHERE cnt = 100000001.0", [[0]], False),
    ("q_long_float_either", "SELECT COUNT(*) FROM druid.foo WHERE cnt = 1.0 or cnt = 100000001.0", [[6]], False),
    ("q_long_two_points", "SELECT COUNT(*) FROM druid.foo WHERE cnt = 1 OR cnt = 2", [[6]], False),
    ("q_string_as_number", "SELECT distinct dim1 FROM druid.foo WHERE dim1 = 10 OR (floor(CAST(dim1 AS float)) = 10.00 and CAST(dim1 AS float) > 9 and CAST(dim1 AS float) <= 10.5)",
     [["10.1"]], False),
    ("q_string_as_number_range", "SELECT distinct dim1 FROM druid.foo WHERE CAST(dim1 AS float) > 9 and CAST(dim1 AS float) <= 10.5", [["10.1"]], False),
    ("q_long_aggregations", "SELECT  MIN(l1), MIN(cnt), MAX(l1) FROM druid.numfoo", [[0, 1, 325323]], False),
    ("q_double_aggregations", "SELECT  MIN(dbl1), MAX(dbl1) FROM druid.numfoo", [[0.0, 1.7]], False),
    ("q_float_aggregations", "SELECT  MIN(m1), MAX(m1) FROM druid.numfoo", [[1.0, 6.0]], False),
    ("q_simple_aggregations", "SELECT COUNT(*), COUNT(cnt), COUNT(dim1), AVG(cnt), SUM(cnt), SUM(cnt) + MIN(cnt) + MAX(cnt), COUNT(dim2), COUNT(dbl1), AVG(dbl1) FROM druid.numfoo",
     [[6, 6, 6, 1.0, 6, 8, 4, 3, (1 + 1.7) / 3]], False),
    ("q_sort_on_post_aggregation", "SELECT dim1, MIN(m1) + MAX(m1) AS x FROM druid.foo GROUP BY dim1 ORDER BY x LIMIT 3",
     [["", 2.0], ["10.1", 4.0], ["2", 6.0]], True),
    ("q_group_order_by_length", "SELECT dim1, SUBSTRING(dim1, 2) FROM druid.foo GROUP BY dim1 ORDER BY CHARACTER_LENGTH(dim1) DESC, dim1",
     [["10.1", "0.1"], ["abc", "bc"], ["def", "ef"], ["1", N], ["2", N], ["", N]], True),
    ("q_topn_select_projection", "SELECT dim1, SUBSTRING(dim1, 2) FROM druid.foo GROUP BY dim1 LIMIT 10",
     [["", N], ["1", N], ["10.1", "0.1"], ["2", N], ["abc", "bc"], ["def", "ef"]], True),
    ("q_union_all", "SELECT COUNT(*) FROM foo UNION ALL SELECT SUM(cnt) FROM foo UNION ALL SELECT COUNT(*) FROM foo", [[6], [6], [6]], False),
    ("q_union_all_limit", "SELECT * FROM (SELECT COUNT(*) FROM foo UNION ALL SELECT SUM(cnt) FROM foo UNION ALL SELECT COUNT(*) FROM foo) LIMIT 2", [[6], [6]], False),
    ("q_prune_dead_aggregators", "SELECT CASE 'foo' WHEN 'bar' THEN SUM(cnt) WHEN 'foo' THEN SUM(m1) WHEN 'baz' THEN SUM(m2) END FROM foo", [[21.0]], False),
    ("q_prune_dead_aggregators_projection", "SELECT CASE 'foo' WHEN 'bar' THEN SUM(cnt) / 10 WHEN 'foo' THEN SUM(m1) / 10 WHEN 'baz' THEN SUM(m2) / 10 END FROM foo", [[2.1]], False),
    ("q_prune_dead_aggregators_having", "SELECT CASE 'foo' WHEN 'bar' THEN SUM(cnt) WHEN 'foo' THEN SUM(m1) WHEN 'baz' THEN SUM(m2) END AS theCase FROM foo HAVING theCase = 21", [[21.0]], False),
    ("q_group_case_when", "SELECT CASE EXTRACT(DAY FROM __time) WHEN m1 THEN 'match-m1' WHEN cnt THEN 'match-cnt' WHEN 0 THEN 'zero' END, COUNT(*) FROM druid.foo GROUP BY CASE EXTRACT(DAY FROM __time) WHEN m1 THEN 'match-m1' WHEN cnt THEN 'match-cnt' WHEN 0 THEN 'zero' END",
     [[N, 2], ["match-cnt", 1], ["match-m1", 3]], True),
    ("q_case_when_three_arg", "SELECT dim1, dim2, CASE WHEN dim1 = 'abc' THEN dim1 ELSE dim2 END FROM druid.foo WHERE CASE WHEN dim1 = 'abc' THEN dim1 ELSE dim2 END = 'abc'",
     [["def", "abc", "abc"], ["abc", N, "abc"]], False),
    ("q_case_when_two_arg", "SELECT dim1, dim2, CASE WHEN dim1 = 'def' THEN dim2 END FROM druid.foo WHERE CASE WHEN dim1 = 'def' THEN dim2 END = 'abc'",
     [["def", "abc", "abc"]], False),
    ("q_group_case_triple_and", "SELECT CASE WHEN m1 > 1 AND m1 < 5 AND cnt = 1 THEN 'x' ELSE NULL END, COUNT(*) FROM druid.foo GROUP BY 1",
     [[N, 3], ["x", 3]], True),
]  # fmt: skip


@dataclass
class Outcome:
    name: str
    ok: bool
    cause: str = ""  # for a miss: "error: <message>", "rows", "types", "order", "no error"
    detail: str = ""


def _same(value, expected) -> str:
    """Empty if equal, else "types" (equal numbers of another type) or "rows"."""
    if isinstance(expected, list) and isinstance(value, list) and len(value) == len(expected):
        causes = [_same(v, e) for v, e in zip(value, expected, strict=True)]
        return "rows" if "rows" in causes else "types" if "types" in causes else ""
    numbers = (int, float)
    if isinstance(expected, numbers) and isinstance(value, numbers):
        if isinstance(expected, bool) or isinstance(value, bool):
            return "" if value == expected else "rows"
        if not math.isclose(value, expected, rel_tol=1e-6, abs_tol=1e-9):
            return "rows"
        return "" if type(value) is type(expected) else "types"
    return "" if value == expected else "rows"


def _key(row) -> str:
    """A row's sort key; a JSON object's keys in their order (Druid's may differ)."""
    return repr([(v is not None, _text(v)) for v in row])


def _text(value) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else repr(value)


def compare(rows: list, expected: list, ordered: bool) -> str:
    if len(rows) != len(expected):
        return "rows"
    if ordered:
        return _same(rows, expected)
    found = _same(sorted(rows, key=_key), sorted(expected, key=_key))
    if found == "rows":  # another multiset, or the same rows typed otherwise
        return "rows"
    return found


def run_case(api_client, case) -> Outcome:
    name, query, expected, ordered = case
    body = {"query": query, "resultFormat": "array"}
    response = api_client.post("/druid/v2/sql", body, format="json")
    if isinstance(expected, Error):
        if response.status_code != 400:
            return Outcome(name, False, "no error", str(response.content[:200]))
        message = response.json().get("errorMessage", "")
        ok = expected.text.lower() in message.lower()
        return Outcome(name, ok, "" if ok else "error text", message[:200])
    if response.status_code != 200:
        message = response.json().get("errorMessage", "") if response.status_code == 400 else ""
        return Outcome(name, False, f"error: {message or response.status_code}"[:160])
    rows = response.json()
    cause = compare(rows, expected, ordered)
    return Outcome(name, not cause, cause, "" if not cause else repr(rows)[:300])


def run(api_client, cases=CASES) -> list[Outcome]:
    """Every case's outcome; with STRATA_SQL_SWEEP_REPORT set to a file path, the
    share passed, the misses' causes by count and each miss are written there."""
    outcomes = [run_case(api_client, case) for case in cases]
    report = os.environ.get("STRATA_SQL_SWEEP_REPORT")
    if report:
        _write_report(outcomes, report)
    return outcomes


def _write_report(outcomes: list[Outcome], path: str) -> None:
    causes = collections.Counter(o.cause for o in outcomes if not o.ok)
    with open(path, "w") as out:
        out.write(f"{sum(o.ok for o in outcomes)} of {len(outcomes)} pass\n\n")
        for cause, count in causes.most_common():
            out.write(f"{count:4d}  {cause}\n")
        out.write("\n")
        for o in outcomes:
            if not o.ok:
                out.write(f"{o.name}: {o.cause} {o.detail}\n")
