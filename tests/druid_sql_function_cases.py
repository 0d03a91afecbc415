"""Druid SQL's functions, one or more cases each, with the values Druid's docs give
(apache/druid docs/querying/sql-functions.md, sql-scalar.md, sql-aggregations.md,
sql-array-functions.md, sql-multivalue-string-functions.md, sql-json-functions.md):
the documented examples where the docs have one (ABS, CEIL, EXP, FLOOR, LN, LOG10,
MOD, POWER, ROUND, SQRT, TRUNCATE, HUMAN_READABLE_*), otherwise the value the
docs' description of the function gives over the tiny `fns` dataSource:

| __time                   | dim | tags      | cnt | val | js                                      | code |
| 2000-01-01T00:00:00.000Z | a   | ["a","b"] | 1   | 1.5 | {"x":{"y":1},"n":5,"arr":[1,2],"s":"t"} | 10   |
| 2000-01-02T03:04:05.678Z | b   | c         | 2   | 2.5 | {"x":2}                                 | x    |
| 2000-02-01T12:00:00.000Z | -   | -         | 3   | -   | -                                       | -    |

(`tags` is a multi-value string as ingestion stores one: JSON array text for
several values, the value itself for one.)

A case is (function, SQL, expected): SQL with `{}` is an expression, evaluated as
`SELECT <expr> AS v FROM fns WHERE cnt = <row>` (row 1 unless the case says
otherwise); a whole query's first column is compared as a list. `expected` is a
value (floats compared to 1e-12) or a predicate.
"""

from __future__ import annotations

ROW1 = "WHERE cnt = 1"
ROW2 = "WHERE cnt = 2"
ALL = ""


def _key(item) -> tuple:
    return (item is None, str(item))


def sorted_list(expected):
    def check(value):
        return sorted(value, key=_key) == sorted(expected, key=_key)

    check.__doc__ = f"the items {expected!r} in any order"
    return check


def sorted_text(expected: str, separator: str = ","):
    def check(value):
        return sorted(value.split(separator)) == sorted(expected.split(separator))

    check.__doc__ = f"the values of {expected!r} in any order"
    return check


def about(expected, tolerance: float = 1e-6):
    """A sketch's estimate: within `tolerance` of `expected` (each item of a list)."""

    def check(value):
        if isinstance(expected, list):
            return len(value) == len(expected) and all(
                abs(v - e) <= tolerance for v, e in zip(value, expected, strict=True)
            )
        return abs(value - expected) <= tolerance

    check.__doc__ = f"about {expected!r}"
    return check


def text_containing(part: str):
    def check(value):
        return isinstance(value, str) and part in value

    check.__doc__ = f"a text containing {part!r}"
    return check


# (function, expression or query, expected, rows) -- rows: a WHERE clause or ALL.
SCALAR = [
    # numeric (the documented examples)
    ("ABS", "ABS(-27)", 27, ROW1),
    ("ACOS", "ACOS(1)", 0.0, ROW1),
    ("ASIN", "ASIN(0)", 0.0, ROW1),
    ("ATAN", "ATAN(0)", 0.0, ROW1),
    ("ATAN2", "ATAN2(0, 1)", 0.0, ROW1),
    ("CEIL (numeric)", "CEIL(21.25)", 22, ROW1),
    ("COS", "COS(0)", 1.0, ROW1),
    ("COT", "COT(1)", 0.6420926159343306, ROW1),
    ("DEGREES", "DEGREES(1)", 57.29577951308232, ROW1),
    ("DIV", "DIV(78, 10)", 7, ROW1),
    ("EXP", "EXP(1)", 2.7182818284590455, ROW1),
    ("FLOOR (numeric)", "FLOOR(21.25)", 21, ROW1),
    ("LN", "LN(76)", 4.330733340286331, ROW1),
    ("LOG10", "LOG10(76)", 1.8808135922807914, ROW1),
    ("MOD", "MOD(78, 10)", 8, ROW1),
    ("POWER", "POWER(5, 2)", 25, ROW1),
    ("RADIANS", "RADIANS(180)", 3.141592653589793, ROW1),
    ("ROUND", "ROUND(-73.9377670288086, 0)", -74, ROW1),
    ("SIN", "SIN(0)", 0.0, ROW1),
    ("SQRT", "SQRT(25)", 5, ROW1),
    ("TAN", "TAN(0)", 0.0, ROW1),
    ("TRUNCATE", "TRUNCATE(-73.9377670288086, 1)", -73.9, ROW1),
    ("TRUNC", "TRUNC(-73.9377670288086, 1)", -73.9, ROW1),
    ("SAFE_DIVIDE", "SAFE_DIVIDE(10, 0)", None, ROW1),
    ("SAFE_DIVIDE", "SAFE_DIVIDE(val, 0.5)", 3.0, ROW1),
    ("SAFE_DIVIDE", "SAFE_DIVIDE(7, 2)", 3, ROW1),
    ("SAFE_DIVIDE", "SAFE_DIVIDE(cnt, 2)", 1, ROW2),
    ("BITWISE_AND", "BITWISE_AND(12, 10)", 8, ROW1),
    ("BITWISE_OR", "BITWISE_OR(12, 10)", 14, ROW1),
    ("BITWISE_XOR", "BITWISE_XOR(12, 10)", 6, ROW1),
    ("BITWISE_COMPLEMENT", "BITWISE_COMPLEMENT(12)", -13, ROW1),
    ("BITWISE_SHIFT_LEFT", "BITWISE_SHIFT_LEFT(1, 3)", 8, ROW1),
    ("BITWISE_SHIFT_RIGHT", "BITWISE_SHIFT_RIGHT(8, 3)", 1, ROW1),
    (
        "HUMAN_READABLE_BINARY_BYTE_FORMAT",
        "HUMAN_READABLE_BINARY_BYTE_FORMAT(1048576)",
        "1.00 MiB",
        ROW1,
    ),
    (
        "HUMAN_READABLE_DECIMAL_BYTE_FORMAT",
        "HUMAN_READABLE_DECIMAL_BYTE_FORMAT(1048576)",
        "1.04 MB",
        ROW1,
    ),
    ("HUMAN_READABLE_DECIMAL_FORMAT", "HUMAN_READABLE_DECIMAL_FORMAT(1048576)", "1.04 M", ROW1),
    (
        "HUMAN_READABLE_BINARY_BYTE_FORMAT",
        "HUMAN_READABLE_BINARY_BYTE_FORMAT(1000)",
        "1000 B",
        ROW1,
    ),
    # division, typed as in Druid: a long by a long is a long
    ("/ (division)", "7 / 2", 3, ROW1),
    ("/ (division)", "-7 / 2", -3, ROW1),
    ("/ (division)", "7.0 / 2", 3.5, ROW1),
    ("/ (division)", "val / 2", 0.75, ROW1),
    ("/ (division)", "cnt / 2", 0, ROW1),
    # Druid's implicit casts (sql-data-types.md): a string with a number is cast to the
    # number's type, a string given to a numeric function to a double; not a number: null
    ("implicit cast", "'5' + 1", 6, ROW1),
    ("implicit cast", "code + 1", 11, ROW1),
    ("implicit cast", "code * 2.5", 25.0, ROW1),
    ("implicit cast", "code + 1", None, ROW2),
    ("implicit cast", "SQRT('25')", 5.0, ROW1),
    ("implicit cast", "SQRT(code)", None, ROW2),
    ("implicit cast", "POWER(code, 2)", 100.0, ROW1),
    ("implicit cast", "CONCAT(cnt, '-', val)", "1-1.5", ROW1),
    ("implicit cast", "cnt || 'x'", "1x", ROW1),
    ("implicit cast", "code = 10", True, ROW1),
    ("implicit cast", "code = 10", None, ROW2),
    # strings
    ("CONCAT", "CONCAT('x', dim, 'z')", "xaz", ROW1),
    ("CONCAT", "CONCAT('x', dim, 'z')", None, "WHERE cnt = 3"),
    ("TEXTCAT", "TEXTCAT('dr', 'uid')", "druid", ROW1),
    ("CONTAINS_STRING", "CONTAINS_STRING('druid', 'ui')", True, ROW1),
    ("ICONTAINS_STRING", "ICONTAINS_STRING('Druid', 'RU')", True, ROW1),
    ("DECODE_BASE64_UTF8", "DECODE_BASE64_UTF8('aGVsbG8=')", "hello", ROW1),
    ("LEFT", "LEFT('druid', 2)", "dr", ROW1),
    ("RIGHT", "RIGHT('druid', 2)", "id", ROW1),
    ("LENGTH", "LENGTH('druid')", 5, ROW1),
    ("CHAR_LENGTH", "CHAR_LENGTH('druid')", 5, ROW1),
    ("CHARACTER_LENGTH", "CHARACTER_LENGTH('druid')", 5, ROW1),
    ("STRLEN", "STRLEN('druid')", 5, ROW1),
    ("LOWER", "LOWER('DRUID')", "druid", ROW1),
    ("UPPER", "UPPER('druid')", "DRUID", ROW1),
    ("LPAD", "LPAD('ab', 4)", "  ab", ROW1),
    ("LPAD", "LPAD('abc', 2, 'x')", "ab", ROW1),
    ("LPAD", "LPAD('abc', 5, '')", "abc", ROW1),
    ("RPAD", "RPAD('ab', 4, 'x')", "abxx", ROW1),
    ("PARSE_LONG", "PARSE_LONG('123')", 123, ROW1),
    ("PARSE_LONG", "PARSE_LONG('ff', 16)", 255, ROW1),
    ("PARSE_LONG", "PARSE_LONG('x1')", None, ROW1),
    ("POSITION", "POSITION('u' IN 'druid')", 3, ROW1),
    ("POSITION", "POSITION('d' IN 'druid druid' FROM 2)", 5, ROW1),
    ("POSITION", "POSITION('d' IN 'druid druid' FROM 6)", 7, ROW1),
    ("POSITION", "POSITION('z' IN 'druid' FROM 2)", 0, ROW1),
    ("REGEXP_EXTRACT", "REGEXP_EXTRACT('foo123bar', '[0-9]+')", "123", ROW1),
    ("REGEXP_EXTRACT", "REGEXP_EXTRACT('foo', '[0-9]+')", None, ROW1),
    ("REGEXP_EXTRACT", "REGEXP_EXTRACT('foo123', '([a-z]+)([0-9]+)', 2)", "123", ROW1),
    ("REGEXP_LIKE", "REGEXP_LIKE('foo123', '[0-9]')", True, ROW1),
    ("REGEXP_REPLACE", "REGEXP_REPLACE('a1b2', '([0-9])', '<$1>')", "a<1>b<2>", ROW1),
    ("REPLACE", "REPLACE('druid', 'd', 'D')", "DruiD", ROW1),
    ("REPEAT", "REPEAT('ab', 3)", "ababab", ROW1),
    ("REVERSE", "REVERSE('druid')", "diurd", ROW1),
    ("STRING_FORMAT", "STRING_FORMAT('%s-%d', 'a', 5)", "a-5", ROW1),
    ("STRPOS", "STRPOS('druid', 'u')", 3, ROW1),
    ("STRPOS", "STRPOS('druid', 'z')", 0, ROW1),
    ("SUBSTRING", "SUBSTRING('druid', 2, 3)", "rui", ROW1),
    ("SUBSTR", "SUBSTR('druid', 2)", "ruid", ROW1),
    ("TRIM", "TRIM(BOTH 'x' FROM 'xxdruidxx')", "druid", ROW1),
    ("TRIM", "TRIM(LEADING FROM '  druid  ')", "druid  ", ROW1),
    ("BTRIM", "BTRIM('  druid  ')", "druid", ROW1),
    ("LTRIM", "LTRIM('xxdruid', 'x')", "druid", ROW1),
    ("RTRIM", "RTRIM('druid  ')", "druid", ROW1),
    # other scalars
    ("CASE", "CASE WHEN cnt = 1 THEN 'one' ELSE 'other' END", "one", ROW1),
    ("CAST", "CAST('5' AS BIGINT)", 5, ROW1),
    ("COALESCE", "COALESCE(dim, 'none')", "none", "WHERE cnt = 3"),
    ("NULLIF", "NULLIF(dim, 'a')", None, ROW1),
    ("NVL", "NVL(dim, 'none')", "none", "WHERE cnt = 3"),
    ("NVL", "NVL(dim, 'none')", "a", ROW1),
    ("GREATEST", "GREATEST(1, 3, 2)", 3, ROW1),
    ("LEAST", "LEAST(1, 3, 2)", 1, ROW1),
    ("IPV4_PARSE", "IPV4_PARSE('192.168.0.1')", 3232235521, ROW1),
    ("IPV4_PARSE", "IPV4_PARSE('300.1.1.1')", None, ROW1),
    ("IPV4_STRINGIFY", "IPV4_STRINGIFY(3232235521)", "192.168.0.1", ROW1),
    ("IPV4_MATCH", "IPV4_MATCH('192.168.0.1', '192.168.0.0/16')", True, ROW1),
    ("IPV4_MATCH", "IPV4_MATCH('10.0.0.1', '192.168.0.0/16')", False, ROW1),
    # date and time (row 2: __time 2000-01-02T03:04:05.678Z, a Sunday)
    ("TIME_FLOOR", "TIME_FLOOR(__time, 'PT1H')", "2000-01-02T03:00:00.000Z", ROW2),
    ("TIME_FLOOR", "TIME_FLOOR(__time, 'P1W')", "1999-12-27T00:00:00.000Z", ROW2),
    ("TIME_FLOOR", "TIME_FLOOR(__time, 'P1M')", "2000-01-01T00:00:00.000Z", ROW2),
    (
        "TIME_FLOOR",
        "TIME_FLOOR(__time, 'PT1H', TIMESTAMP '2000-01-01 00:30:00')",
        "2000-01-02T02:30:00.000Z",
        ROW2,
    ),
    (
        "TIME_FLOOR",
        "TIME_FLOOR(__time, 'P1D', NULL, 'America/Los_Angeles')",
        "2000-01-01T08:00:00.000Z",
        ROW2,
    ),
    ("TIME_CEIL", "TIME_CEIL(__time, 'PT1H')", "2000-01-02T04:00:00.000Z", ROW2),
    ("TIME_CEIL", "TIME_CEIL(__time, 'P1D')", "2000-01-01T00:00:00.000Z", ROW1),
    ("TIME_SHIFT", "TIME_SHIFT(__time, 'P1M', -1)", "1999-12-02T03:04:05.678Z", ROW2),
    ("TIME_SHIFT", "TIME_SHIFT(__time, 'PT2H', 3)", "2000-01-02T09:04:05.678Z", ROW2),
    ("TIME_EXTRACT", "TIME_EXTRACT(__time, 'HOUR')", 3, ROW2),
    ("TIME_EXTRACT", "TIME_EXTRACT(__time, 'DOW')", 7, ROW2),
    ("TIME_EXTRACT", "TIME_EXTRACT(__time, 'EPOCH')", 946782245, ROW2),
    ("TIME_EXTRACT", "TIME_EXTRACT(__time, 'HOUR', 'America/Los_Angeles')", 19, ROW2),
    ("TIME_EXTRACT", "TIME_EXTRACT(__time, 'CENTURY')", 20.0, ROW2),
    ("EXTRACT", "EXTRACT(DOY FROM __time)", 2, ROW2),
    ("EXTRACT", "EXTRACT(MILLISECOND FROM __time)", 678, ROW2),
    ("EXTRACT", "EXTRACT(WEEK FROM __time)", 52, ROW2),
    ("TIME_PARSE", "TIME_PARSE('2000-01-02T03:04:05Z')", "2000-01-02T03:04:05.000Z", ROW1),
    ("TIME_PARSE", "TIME_PARSE('02/01/2000', 'dd/MM/yyyy')", "2000-01-02T00:00:00.000Z", ROW1),
    (
        "TIME_PARSE",
        "TIME_PARSE('2000-02-01 00:00:00', NULL, 'America/Los_Angeles')",
        "2000-02-01T08:00:00.000Z",
        ROW1,
    ),
    ("TIME_PARSE", "TIME_PARSE('not a time')", None, ROW1),
    ("TIME_FORMAT", "TIME_FORMAT(__time)", "2000-01-02T03:04:05.678Z", ROW2),
    ("TIME_FORMAT", "TIME_FORMAT(__time, 'yyyy-MM-dd HH:mm')", "2000-01-02 03:04", ROW2),
    (
        "TIME_FORMAT",
        "TIME_FORMAT(__time, 'yyyy-MM-dd HH:mm', 'America/Los_Angeles')",
        "2000-01-01 19:04",
        ROW2,
    ),
    (
        "TIME_FORMAT",
        "TIME_FORMAT(__time, NULL, 'America/Los_Angeles')",
        "2000-01-01T19:04:05.678-08:00",
        ROW2,
    ),
    ("TIME_IN_INTERVAL", "TIME_IN_INTERVAL(__time, '2000-01-02/P1D')", True, ROW2),
    ("TIME_IN_INTERVAL", "TIME_IN_INTERVAL(__time, '2000-01-01/2000-01-02')", False, ROW2),
    ("MILLIS_TO_TIMESTAMP", "MILLIS_TO_TIMESTAMP(946782245678)", "2000-01-02T03:04:05.678Z", ROW1),
    ("TIMESTAMP_TO_MILLIS", "TIMESTAMP_TO_MILLIS(__time)", 946782245678, ROW2),
    ("DATE_TRUNC", "DATE_TRUNC('month', __time)", "2000-01-01T00:00:00.000Z", ROW2),
    ("FLOOR (date and time)", "FLOOR(__time TO DAY)", "2000-01-02T00:00:00.000Z", ROW2),
    ("CEIL (date and time)", "CEIL(__time TO DAY)", "2000-01-03T00:00:00.000Z", ROW2),
    ("CEIL (date and time)", "CEIL(__time TO DAY)", "2000-01-01T00:00:00.000Z", ROW1),
    ("TIMESTAMPADD", "TIMESTAMPADD(HOUR, 2, __time)", "2000-01-02T05:04:05.678Z", ROW2),
    ("TIMESTAMPDIFF", "TIMESTAMPDIFF(DAY, TIMESTAMP '2000-01-01 00:00:00', __time)", 1, ROW2),
    ("CURRENT_TIMESTAMP", "CURRENT_TIMESTAMP > __time", True, ROW1),
    ("CURRENT_DATE", "CURRENT_DATE > DATE '2000-01-01'", True, ROW1),
    # arrays
    ("ARRAY[]", "ARRAY[1, 2]", [1, 2], ROW1),
    ("ARRAY_APPEND", "ARRAY_APPEND(ARRAY[1, 2], 3)", [1, 2, 3], ROW1),
    ("ARRAY_CONCAT", "ARRAY_CONCAT(ARRAY[1, 2], ARRAY[3])", [1, 2, 3], ROW1),
    ("ARRAY_CONTAINS", "ARRAY_CONTAINS(ARRAY[1, 2], 1)", True, ROW1),
    ("ARRAY_CONTAINS", "ARRAY_CONTAINS(ARRAY[1, 2, 3], ARRAY[1, 3])", True, ROW1),
    ("ARRAY_CONTAINS", "ARRAY_CONTAINS(ARRAY[1, 2, 3], ARRAY[1, 4])", False, ROW1),
    ("ARRAY_LENGTH", "ARRAY_LENGTH(ARRAY[1, 2, 3])", 3, ROW1),
    ("ARRAY_OFFSET", "ARRAY_OFFSET(ARRAY[1, 2, 3], 0)", 1, ROW1),
    ("ARRAY_OFFSET", "ARRAY_OFFSET(ARRAY[1, 2, 3], 5)", None, ROW1),
    ("ARRAY_OFFSET_OF", "ARRAY_OFFSET_OF(ARRAY[1, 2, 3], 3)", 2, ROW1),
    ("ARRAY_OFFSET_OF", "ARRAY_OFFSET_OF(ARRAY[1, 2, 3], 9)", None, ROW1),
    ("ARRAY_ORDINAL", "ARRAY_ORDINAL(ARRAY[1, 2, 3], 1)", 1, ROW1),
    ("ARRAY_ORDINAL_OF", "ARRAY_ORDINAL_OF(ARRAY[1, 2, 3], 3)", 3, ROW1),
    ("ARRAY_OVERLAP", "ARRAY_OVERLAP(ARRAY[1, 2], ARRAY[2, 3])", True, ROW1),
    ("ARRAY_OVERLAP", "ARRAY_OVERLAP(ARRAY[1, 2], ARRAY[3])", False, ROW1),
    ("SCALAR_IN_ARRAY", "SCALAR_IN_ARRAY(2, ARRAY[1, 2])", True, ROW1),
    ("ARRAY_PREPEND", "ARRAY_PREPEND(0, ARRAY[1])", [0, 1], ROW1),
    ("ARRAY_SLICE", "ARRAY_SLICE(ARRAY[1, 2, 3, 4], 1, 3)", [2, 3], ROW1),
    ("ARRAY_SLICE", "ARRAY_SLICE(ARRAY[1, 2], 3, 4)", None, ROW1),
    ("ARRAY_TO_MV", "ARRAY_TO_MV(ARRAY['a', 'b'])", '["a","b"]', ROW1),
    ("ARRAY_TO_STRING", "ARRAY_TO_STRING(ARRAY['a', 'b'], '-')", "a-b", ROW1),
    ("STRING_TO_ARRAY", "STRING_TO_ARRAY('a,b', ',')", ["a", "b"], ROW1),
    # multi-value strings (row 1: tags ["a","b"]; row 2: tags c)
    ("MV_APPEND", "MV_APPEND(tags, 'c')", '["a","b","c"]', ROW1),
    ("MV_CONCAT", "MV_CONCAT(tags, tags)", '["a","b","a","b"]', ROW1),
    ("MV_CONTAINS", "MV_CONTAINS(tags, 'a')", True, ROW1),
    ("MV_CONTAINS", "MV_CONTAINS(tags, ARRAY['a', 'b'])", True, ROW1),
    ("MV_CONTAINS", "MV_CONTAINS(tags, 'a')", False, ROW2),
    ("MV_FILTER_NONE", "MV_FILTER_NONE(tags, ARRAY['a'])", "b", ROW1),
    ("MV_FILTER_ONLY", "MV_FILTER_ONLY(tags, ARRAY['a'])", "a", ROW1),
    ("MV_LENGTH", "MV_LENGTH(tags)", 2, ROW1),
    ("MV_LENGTH", "MV_LENGTH(tags)", 1, ROW2),
    ("MV_OFFSET", "MV_OFFSET(tags, 1)", "b", ROW1),
    ("MV_OFFSET_OF", "MV_OFFSET_OF(tags, 'b')", 1, ROW1),
    ("MV_ORDINAL", "MV_ORDINAL(tags, 1)", "a", ROW1),
    ("MV_ORDINAL_OF", "MV_ORDINAL_OF(tags, 'b')", 2, ROW1),
    ("MV_OVERLAP", "MV_OVERLAP(tags, ARRAY['b', 'z'])", True, ROW1),
    ("MV_PREPEND", "MV_PREPEND('z', tags)", '["z","a","b"]', ROW1),
    ("MV_SLICE", "MV_SLICE(tags, 0, 1)", "a", ROW1),
    ("MV_TO_ARRAY", "MV_TO_ARRAY(tags)", ["a", "b"], ROW1),
    ("MV_TO_ARRAY", "MV_TO_ARRAY(tags)", ["c"], ROW2),
    ("MV_TO_STRING", "MV_TO_STRING(tags, ',')", "a,b", ROW1),
    ("STRING_TO_MV", "STRING_TO_MV('a,b', ',')", '["a","b"]', ROW1),
    # JSON (row 1)
    ("JSON_VALUE", "JSON_VALUE(js, '$.n')", "5", ROW1),
    ("JSON_VALUE", "JSON_VALUE(js, '$.n' RETURNING BIGINT)", 5, ROW1),
    ("JSON_VALUE", "JSON_VALUE(js, '$.arr' RETURNING BIGINT ARRAY)", [1, 2], ROW1),
    ("JSON_VALUE", "JSON_VALUE(js, '$.x')", None, ROW1),
    ("JSON_VALUE", "JSON_VALUE(js, '$.x.y' RETURNING DOUBLE)", 1.0, ROW1),
    ("JSON_QUERY", "JSON_QUERY(js, '$.x')", {"y": 1}, ROW1),
    ("JSON_QUERY_ARRAY", "JSON_QUERY_ARRAY(js, '$.arr')", [1, 2], ROW1),
    ("JSON_KEYS", "JSON_KEYS(js, '$')", sorted_list(["x", "n", "arr", "s"]), ROW1),
    ("JSON_OBJECT", "JSON_OBJECT(KEY 'a' VALUE cnt, KEY 'b' VALUE dim)", {"a": 1, "b": "a"}, ROW1),
    ("JSON_OBJECT", "JSON_OBJECT('a': 1)", {"a": 1}, ROW1),
    ("PARSE_JSON", "PARSE_JSON('{\"a\": [1, 2]}')", {"a": [1, 2]}, ROW1),
    ("TRY_PARSE_JSON", "TRY_PARSE_JSON('not json')", None, ROW1),
    ("TO_JSON_STRING", "TO_JSON_STRING(JSON_OBJECT(KEY 'a' VALUE 1))", '{"a":1}', ROW1),
    # aggregations (over the three rows)
    ("COUNT", "COUNT(*)", 3, ALL),
    ("COUNT", "COUNT(dim)", 2, ALL),
    ("COUNT", "COUNT(DISTINCT dim)", 2, ALL),
    ("SUM", "SUM(cnt)", 6, ALL),
    ("MIN", "MIN(cnt)", 1, ALL),
    ("MAX", "MAX(cnt)", 3, ALL),
    ("AVG", "AVG(val)", 2.0, ALL),
    ("BIT_AND", "BIT_AND(cnt)", 0, ALL),
    ("BIT_OR", "BIT_OR(cnt)", 3, ALL),
    ("BIT_XOR", "BIT_XOR(cnt)", 0, ALL),
    ("STDDEV", "STDDEV(cnt)", 1.0, ALL),
    ("STDDEV_SAMP", "STDDEV_SAMP(cnt)", 1.0, ALL),
    ("STDDEV_POP", "STDDEV_POP(cnt)", 0.816496580927726, ALL),
    ("VARIANCE", "VARIANCE(cnt)", 1.0, ALL),
    ("VAR_SAMP", "VAR_SAMP(cnt)", 1.0, ALL),
    ("VAR_POP", "VAR_POP(cnt)", 0.6666666666666666, ALL),
    ("APPROX_COUNT_DISTINCT", "APPROX_COUNT_DISTINCT(dim)", 2, ALL),
    ("APPROX_COUNT_DISTINCT_BUILTIN", "APPROX_COUNT_DISTINCT_BUILTIN(dim)", 2, ALL),
    ("APPROX_COUNT_DISTINCT_DS_HLL", "APPROX_COUNT_DISTINCT_DS_HLL(dim)", 2, ALL),
    ("APPROX_COUNT_DISTINCT_DS_THETA", "APPROX_COUNT_DISTINCT_DS_THETA(dim)", 2, ALL),
    ("APPROX_QUANTILE", "APPROX_QUANTILE(cnt, 0.5)", 2.0, ALL),
    ("APPROX_QUANTILE_DS", "APPROX_QUANTILE_DS(cnt, 0.5)", 2.0, ALL),
    # DataSketches (sketches of the values here; stored sketches: test_sql_sketches.py)
    ("DS_HLL", "HLL_SKETCH_ESTIMATE(DS_HLL(dim))", about(2.0), ALL),
    ("HLL_SKETCH_ESTIMATE", "HLL_SKETCH_ESTIMATE(DS_HLL(dim, 14), true)", 2, ALL),
    (
        "HLL_SKETCH_UNION",
        "HLL_SKETCH_ESTIMATE(HLL_SKETCH_UNION(DS_HLL(dim), DS_HLL(CAST(cnt AS VARCHAR))), true)",
        5,
        ALL,
    ),
    (
        "HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS",
        "HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_HLL(dim), 2)",
        about([2.0, 2.0, 2.0], 0.01),
        ALL,
    ),
    ("DS_THETA", "THETA_SKETCH_ESTIMATE(DS_THETA(dim))", 2.0, ALL),
    ("THETA_SKETCH_ESTIMATE", "THETA_SKETCH_ESTIMATE(DS_THETA(dim, 32))", 2.0, ALL),
    (
        "THETA_SKETCH_UNION",
        "THETA_SKETCH_ESTIMATE(THETA_SKETCH_UNION(DS_THETA(dim), DS_THETA(CAST(cnt AS VARCHAR))))",
        5.0,
        ALL,
    ),
    (
        "THETA_SKETCH_INTERSECT",
        "THETA_SKETCH_ESTIMATE(THETA_SKETCH_INTERSECT(16384, DS_THETA(dim), DS_THETA(dim)))",
        2.0,
        ALL,
    ),
    (
        "THETA_SKETCH_NOT",
        "THETA_SKETCH_ESTIMATE(THETA_SKETCH_NOT(DS_THETA(dim), DS_THETA(dim)))",
        0.0,
        ALL,
    ),
    ("DS_QUANTILES_SKETCH", "DS_GET_QUANTILE(DS_QUANTILES_SKETCH(cnt), 0.5)", 2.0, ALL),
    ("DS_GET_QUANTILE", "DS_GET_QUANTILE(DS_QUANTILES_SKETCH(cnt, 64), 1)", 3.0, ALL),
    ("DS_GET_QUANTILES", "DS_GET_QUANTILES(DS_QUANTILES_SKETCH(cnt), 0, 1)", [1.0, 3.0], ALL),
    ("DS_RANK", "DS_RANK(DS_QUANTILES_SKETCH(cnt), 2)", about(2 / 3), ALL),
    ("DS_CDF", "DS_CDF(DS_QUANTILES_SKETCH(cnt), 1.5)", about([1 / 3, 1.0]), ALL),
    ("DS_HISTOGRAM", "DS_HISTOGRAM(DS_QUANTILES_SKETCH(cnt), 1.5)", about([1.0, 2.0]), ALL),
    (
        "DS_QUANTILE_SUMMARY",
        "DS_QUANTILE_SUMMARY(DS_QUANTILES_SKETCH(cnt))",
        text_containing("KLL"),
        ALL,
    ),
    ("EARLIEST", "EARLIEST(dim)", "a", ALL),
    ("EARLIEST", "EARLIEST(cnt)", 1, ALL),
    ("EARLIEST_BY", "EARLIEST_BY(dim, MILLIS_TO_TIMESTAMP(0 - cnt))", "b", "WHERE cnt < 3"),
    ("LATEST", "LATEST(cnt)", 3, ALL),
    ("LATEST", "LATEST(dim, 1)", "b", ALL),
    ("LATEST_BY", "LATEST_BY(cnt, MILLIS_TO_TIMESTAMP(0 - cnt))", 1, ALL),
    ("ANY_VALUE", "ANY_VALUE(dim)", "a", ROW1),
    ("STRING_AGG", "STRING_AGG(dim, ',')", sorted_text("a,b"), ALL),
    ("STRING_AGG", "STRING_AGG(DISTINCT dim, '|', 100)", sorted_text("a|b", "|"), ALL),
    ("LISTAGG", "LISTAGG(dim, ',')", sorted_text("a,b"), ALL),
    ("ARRAY_AGG", "ARRAY_AGG(cnt)", sorted_list([1, 2, 3]), ALL),
    ("ARRAY_AGG", "ARRAY_AGG(dim, 100)", sorted_list(["a", "b", None]), ALL),
    ("ARRAY_CONCAT_AGG", "ARRAY_CONCAT_AGG(MV_TO_ARRAY(tags))", sorted_list(["a", "b", "c"]), ALL),
]

# Whole queries: their first column, in order.
QUERIES = [
    (
        "GROUPING",
        "SELECT GROUPING(dim) FROM fns GROUP BY ROLLUP (dim) ORDER BY 1 DESC LIMIT 1",
        [1],
    ),
    ("ROW_NUMBER", "SELECT ROW_NUMBER() OVER (ORDER BY cnt) FROM fns ORDER BY cnt", [1, 2, 3]),
    ("RANK", "SELECT RANK() OVER (ORDER BY cnt) FROM fns ORDER BY cnt", [1, 2, 3]),
    ("DENSE_RANK", "SELECT DENSE_RANK() OVER (ORDER BY cnt) FROM fns ORDER BY cnt", [1, 2, 3]),
    (
        "PERCENT_RANK",
        "SELECT PERCENT_RANK() OVER (ORDER BY cnt) FROM fns ORDER BY cnt",
        [0.0, 0.5, 1.0],
    ),
    (
        "CUME_DIST",
        "SELECT CUME_DIST() OVER (ORDER BY cnt) FROM fns ORDER BY cnt",
        [1 / 3, 2 / 3, 1.0],
    ),
    ("NTILE", "SELECT NTILE(2) OVER (ORDER BY cnt) FROM fns ORDER BY cnt", [1, 1, 2]),
    ("LAG", "SELECT LAG(cnt) OVER (ORDER BY cnt) FROM fns ORDER BY cnt", [None, 1, 2]),
    ("LEAD", "SELECT LEAD(cnt) OVER (ORDER BY cnt) FROM fns ORDER BY cnt", [2, 3, None]),
    (
        "FIRST_VALUE",
        "SELECT FIRST_VALUE(cnt) OVER (ORDER BY cnt) FROM fns ORDER BY cnt",
        [1, 1, 1],
    ),
    (
        "LAST_VALUE",
        "SELECT LAST_VALUE(cnt) OVER (ORDER BY cnt ROWS BETWEEN UNBOUNDED PRECEDING AND "
        "UNBOUNDED FOLLOWING) FROM fns ORDER BY cnt",
        [3, 3, 3],
    ),
    # Without ORDER BY every row is a peer: ROWS ... CURRENT ROW is the whole partition.
    (
        "SUM",
        "SELECT SUM(cnt) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM fns",
        [6, 6, 6],
    ),
    # A row without values (row 3) unnests to one null row, as Druid's own tests have
    # it (CalciteArraysQueryTest.testUnnest; tests/druid_sql_sweep_relational.py).
    (
        "UNNEST",
        "SELECT u.tag FROM fns CROSS JOIN UNNEST(MV_TO_ARRAY(tags)) AS u(tag) ORDER BY 1",
        [None, "a", "b", "c"],
    ),
    # Implicit casts in filters: a string column compared with a number.
    ("implicit cast", "SELECT cnt FROM fns WHERE code = 10", [1]),
    ("implicit cast", "SELECT cnt FROM fns WHERE code > 5.5", [1]),
    ("implicit cast", "SELECT cnt FROM fns WHERE code IN (10, 20)", [1]),
    ("implicit cast", "SELECT cnt FROM fns WHERE cnt = '2'", [2]),
    ("implicit cast", "SELECT cnt FROM fns WHERE code BETWEEN 5 AND 20", [1]),
    # Multi-value strings (multi-value-dimensions.md): a filter matches a row if any
    # value matches; GROUP BY counts the row once per value (null when it has none),
    # and a filter does not narrow the values grouped.
    ("multi-value", "SELECT cnt FROM fns WHERE tags = 'b'", [1]),
    ("multi-value", "SELECT cnt FROM fns WHERE tags IN ('c', 'z')", [2]),
    ("multi-value", "SELECT cnt FROM fns WHERE tags LIKE 'b%'", [1]),
    ("multi-value", "SELECT cnt FROM fns WHERE NOT (tags = 'a')", [2]),
    ("multi-value", "SELECT cnt FROM fns WHERE tags <> 'a'", [2]),
    ("multi-value", "SELECT cnt FROM fns WHERE tags NOT IN ('b') AND tags NOT LIKE 'x%'", [2]),
    ("multi-value", "SELECT cnt FROM fns WHERE tags IS NOT NULL ORDER BY cnt", [1, 2]),
    ("multi-value", "SELECT cnt FROM fns WHERE tags IS NULL", [3]),
    ("multi-value", "SELECT cnt FROM fns WHERE tags = 5", []),
    ("multi-value", "SELECT cnt FROM fns WHERE UPPER(tags) = 'B'", [1]),
    (
        "multi-value",
        "SELECT SUM(cnt) FROM fns GROUP BY tags ORDER BY tags NULLS FIRST",
        [3, 1, 1, 2],
    ),
    (
        "multi-value",
        "SELECT tags AS t, COUNT(*) FROM fns GROUP BY 1 ORDER BY 1 NULLS FIRST",
        [None, "a", "b", "c"],
    ),
    (
        "multi-value",
        "SELECT f.tags FROM fns f WHERE tags = 'a' GROUP BY f.tags ORDER BY 1",
        ["a", "b"],
    ),
    ("multi-value", "SELECT COUNT(*) FILTER (WHERE tags = 'b') FROM fns", [1]),
    (
        "multi-value",
        "SELECT t, COUNT(*) FROM (SELECT tags AS t, dim FROM fns WHERE cnt < 3) GROUP BY t "
        "ORDER BY t",
        ["a", "b", "c"],
    ),
    (
        "multi-value",
        "SELECT s.tags, dim FROM (SELECT * FROM fns) AS s WHERE tags = 'a' GROUP BY 1, 2 "
        "ORDER BY 1",
        ["a", "b"],
    ),
    (
        "multi-value",
        "SELECT COUNT(*) FROM fns GROUP BY tags, MV_TO_STRING(tags, '|') ORDER BY 1",
        [1, 1, 1, 1],
    ),
    (
        "multi-value",
        "SELECT UPPER(tags) FROM fns GROUP BY 1 HAVING UPPER(tags) <> 'C' ORDER BY 1",
        ["A", "B"],
    ),
    ("multi-value", "SELECT MV_LENGTH(tags) FROM fns WHERE MV_CONTAINS(tags, 'a')", [2]),
    (
        "multi-value",
        "SELECT MV_TO_STRING(tags, ',') FROM fns GROUP BY 1 ORDER BY 1",
        [None, "a,b", "c"],  # Druid sorts nulls first ascending (CalciteQueryTest)
    ),
]
