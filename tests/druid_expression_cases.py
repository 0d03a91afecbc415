"""Druid's expression examples with their values, shared by the Spark test
(test_druid_expressions) and the Spark-vs-DuckDB test (test_expression_engines).

The cases come from Druid's "Expressions" reference (docs/querying/math-expr.md):
the values it states (the logical operator examples, `human_readable_*`...) and,
where it states none, the value its description of the function implies
(`array_offset` is 0-based, `strpos` returns -1 when not found, ...).
"""

from __future__ import annotations

import math

# One input row, read as an ingestion reads JSON/CSV fields: as text.
ROW = {
    "s": "hello",
    "n": "100",
    "d": "2.5",
    "t": "1546344000000",  # 2019-01-01T12:00:00Z
    "obj": '{"a":{"b":1,"c":[1,2]},"x":"y","f":true,"z":null}',
    "arr": "[1,2,3]",
    "a_bool": "[true,false,null]",
    "a_null": "[null,null,null]",
    "nothing": None,
}

# (expression, expected value)
CASES = [
    # operators; the logical examples are the doc's own
    ("100 && 11", 1),
    ("0.7 || 0.3", 1),
    ("100 && 0", 0),
    ("'troo' && 'true'", 0),
    ("'troo' || 'true'", 1),
    ("1 || null", 1),  # true || null -> 1
    ("0 || null", None),  # false || null -> null
    ("null || null", None),
    ("1 && null", None),  # true && null -> null
    ("0 && null", 0),  # false && null -> 0
    ("-1 && 1", 0),  # a number is true only if positive
    ("!0", 1),
    ("2 ^ 3 ^ 2", 512.0),  # right-associative power
    ("5 - 3", 2),  # a number then "-": an operator, not an array element's sign
    ("1.5 - 0.5", 1.0),
    ("7 / 2", 3),  # long / long is integer division
    ("7.0 / 2", 3.5),
    ("7 % 3", 1),
    ("n * 3", 300),
    ("n + 1 > 100", 1),
    ("s == 'hello'", 1),
    ("'a' + 'b'", "ab"),
    ("nothing + 1", None),
    ("nothing == 1", None),
    # general
    ("cast(n, 'LONG')", 100),
    ("cast(d, 'LONG')", 2),
    ("cast('abc', 'LONG')", None),
    ("cast(d, 'DOUBLE')", 2.5),
    ("cast(100, 'STRING')", "100"),
    ("cast(n, 'ARRAY<LONG>')", [100]),
    ("cast(nothing, 'ARRAY<LONG>')", None),
    ("coalesce(nothing, null, 'x')", "x"),
    ("coalesce(nothing, null)", None),
    ("if(n > 50, 'big', 'small')", "big"),
    ("if(nothing, 'yes', 'no')", "no"),
    ("nvl(nothing, 'dflt')", "dflt"),
    ("nvl(s, 'dflt')", "hello"),
    ("like(s, 'he%')", 1),
    ("like('a%b', 'a!%b', '!')", 1),
    ("like('axb', 'a!%b', '!')", 0),
    ("case_searched(n > 500, 'big', n > 50, 'medium', 'small')", "medium"),
    ("case_searched(n > 500, 'big')", None),
    ("case_simple(s, 'x', 1, 'hello', 2, 3)", 2),
    ("case_simple(s, 'x', 1, 3)", 3),
    ("isnull(nothing)", 1),
    ("notnull(nothing)", 0),
    # strings
    ("concat(s, '-', 1)", "hello-1"),
    ("concat(s, nothing)", None),
    ("format('%s has %d', s, 5)", "hello has 5"),
    ("parse_long('12')", 12),
    ("parse_long('ff', 16)", 255),
    ("parse_long('-101', 2)", -5),
    ("parse_long('12x')", None),
    ("regexp_extract('foo123bar', '[0-9]+')", "123"),
    ("regexp_extract('foo123bar', '([a-z]+)([0-9]+)', 2)", "123"),
    ("regexp_extract('foobar', '[0-9]+')", None),
    ("regexp_like(s, '^h.*o$')", 1),
    ("regexp_like(s, 'x')", 0),
    ("regexp_replace('a1b22', '[0-9]+', '#')", "a#b#"),
    ("contains_string(s, 'ell')", 1),
    ("contains_string(s, 'ELL')", 0),
    ("icontains_string(s, 'ELL')", 1),
    ("replace(s, 'l', 'L')", "heLLo"),
    ("substring(s, 1, 3)", "ell"),
    ("substring(s, 2, -1)", "llo"),
    ("right(s, 2)", "lo"),
    ("left(s, 2)", "he"),
    ("strlen(s)", 5),
    ("strlen(nothing)", None),
    ("strpos(s, 'l')", 2),
    ("strpos(s, 'l', 3)", 3),
    ("strpos(s, 'z')", -1),
    ("trim('  x  ')", "x"),
    ("trim('xxaxx', 'x')", "a"),
    ("ltrim('  x  ')", "x  "),
    ("rtrim('  x  ')", "  x"),
    ("ltrim('abcx', 'ba')", "cx"),
    ("lower('HeLLo')", "hello"),
    ("upper(s)", "HELLO"),
    ("reverse(s)", "olleh"),
    ("repeat('ab', 3)", "ababab"),
    ("lpad(s, 7, 'x')", "xxhello"),
    ("lpad(s, 3, 'x')", "hel"),  # shorter: truncated
    ("lpad(s, 7, '')", "hello"),  # empty chars: no padding
    ("lpad(nothing, 7, 'x')", None),
    ("rpad(s, 7, 'x')", "helloxx"),
    ("rpad(s, 3, 'x')", "hel"),
    # time (epoch millis)
    ("timestamp('2019-01-01T12:00:00Z')", 1546344000000),
    ("timestamp('01/02/2019', 'MM/dd/yyyy')", 1546387200000),
    ("unix_timestamp('2019-01-01T12:00:00Z')", 1546344000),
    ("timestamp_floor(t, 'P1D')", 1546300800000),
    ("timestamp_floor(t, 'PT6H')", 1546344000000),
    ("timestamp_floor(t, 'P3M')", 1546300800000),
    ("timestamp_floor(t, 'P1Y')", 1546300800000),
    ("timestamp_floor(t, 'P1D', null, 'America/Los_Angeles')", 1546329600000),
    ("timestamp_ceil(t, 'P1D')", 1546387200000),
    ("timestamp_ceil(1546300800000, 'P1D')", 1546300800000),
    ("timestamp_shift(t, 'P1M', 2)", 1551441600000),
    ("timestamp_shift(t, 'PT1H', -3)", 1546333200000),
    ("timestamp_extract(t, 'EPOCH')", 1546344000),
    ("timestamp_extract(t, 'HOUR')", 12),
    ("timestamp_extract(t, 'HOUR', 'America/Los_Angeles')", 4),
    ("timestamp_extract(t, 'DAY')", 1),
    ("timestamp_extract(t, 'DOW')", 2),  # a Tuesday
    ("timestamp_extract(t, 'DOY')", 1),
    ("timestamp_extract(t, 'WEEK')", 1),
    ("timestamp_extract(t, 'MONTH')", 1),
    ("timestamp_extract(t, 'QUARTER')", 1),
    ("timestamp_extract(t, 'YEAR')", 2019),
    ("timestamp_parse('2019-01-01T12:00:00Z')", 1546344000000),
    ("timestamp_parse('2019-01-01 12:00:00')", 1546344000000),
    ("timestamp_parse('2019-01-01 04:00:00', null, 'America/Los_Angeles')", 1546344000000),
    ("timestamp_parse('2019/01/01', 'yyyy/MM/dd')", 1546300800000),
    ("timestamp_parse('not a time')", None),
    ("timestamp_format(t)", "2019-01-01T12:00:00.000Z"),
    ("timestamp_format(t, 'yyyy-MM-dd HH:mm')", "2019-01-01 12:00"),
    ("timestamp_format(t, null, 'America/Los_Angeles')", "2019-01-01T04:00:00.000-08:00"),
    # math
    ("abs(-5)", 5),
    ("abs(-2.5)", 2.5),
    ("acos(1.0)", 0.0),
    ("asin(0.0)", 0.0),
    ("atan(0.0)", 0.0),
    ("atan2(0.0, 1.0)", 0.0),
    ("bitwiseAnd(12, 10)", 8),
    ("bitwiseOr(12, 10)", 14),
    ("bitwiseXor(12, 10)", 6),
    ("bitwiseComplement(0)", -1),
    ("bitwiseShiftLeft(1, 4)", 16),
    ("bitwiseShiftRight(16, 2)", 4),
    ("bitwiseAnd(12.7, 10)", 8),  # doubles are cast to longs
    ("cbrt(27.0)", 3.0),
    ("ceil(2.1)", 3.0),
    ("copysign(2.0, -1.0)", -2.0),
    ("cos(0.0)", 1.0),
    ("cosh(0.0)", 1.0),
    ("cot(1.0)", 1 / math.tan(1.0)),
    ("div(7, 2)", 3),
    ("div(7.9, 2)", 3),
    ("div(7, 0)", None),
    ("exp(0.0)", 1.0),
    ("expm1(0.0)", 0.0),
    ("floor(2.9)", 2.0),
    ("getExponent(8.0)", 3),
    ("hypot(3.0, 4.0)", 5.0),
    ("log(1.0)", 0.0),
    ("log10(100.0)", 2.0),
    ("log1p(0.0)", 0.0),
    ("max(3, 7)", 7),
    ("min(3, 7.5)", 3.0),
    ("pi()", math.pi),
    ("pow(2, 10)", 1024.0),
    ("remainder(5.0, 3.0)", -1.0),  # IEEE 754: 5 - 3 * rint(5/3)
    ("rint(2.5)", 2.0),
    ("round(3.14159, 2)", 3.14),
    ("round(2.5)", 3.0),
    ("round(1234, -2)", 1200),
    ("round(0.0 / 0.0)", 0.0),  # Java: 0.0 / 0.0 is NaN; Druid rounds NaN to 0
    ("1.0 / 0", math.inf),
    ("-1 / 0.0", -math.inf),
    ("safe_divide(10, 4)", 2),
    ("safe_divide(10.0, 4)", 2.5),
    ("safe_divide(10, 0)", None),
    ("scalb(3.0, 2)", 12.0),
    ("signum(-3.0)", -1.0),
    ("sin(0.0)", 0.0),
    ("sinh(0.0)", 0.0),
    ("sqrt(16.0)", 4.0),
    ("tan(0.0)", 0.0),
    ("tanh(0.0)", 0.0),
    ("todegrees(pi())", 180.0),
    ("toradians(180.0)", math.pi),
    # arrays
    ("array(1, 2, 3)", [1, 2, 3]),
    ("array('a', 1)", ["a", "1"]),  # the first argument's type
    ("[1, 2, 3]", [1, 2, 3]),
    ("['a' 'b']", ["a", "b"]),  # space-delimited literal
    ("<LONG>[]", []),
    ("array_length(arr)", 3),
    ("array_length(nothing)", None),
    ("array_offset([10, 20, 30], 1)", 20),
    ("array_offset([10, 20, 30], 5)", None),
    ("array_ordinal([10, 20, 30], 1)", 10),
    ("array_ordinal([10, 20, 30], 0)", None),
    ("array_contains([1, 2, 3], 2)", 1),
    ("array_contains([1, 2, 3], 4)", 0),
    ("array_contains([1, 2, 3], [1, 3])", 1),
    ("array_contains([1, 2, 3], [1, 4])", 0),
    ("array_overlap([1, 2], [2, 3])", 1),
    ("array_overlap([1, 2], [3, 4])", 0),
    ("scalar_in_array(2, [1, 2])", 1),
    ("scalar_in_array(5, [1, 2])", 0),
    ("scalar_in_array(null, [1, 2])", None),
    ("array_offset_of(['a', 'b'], 'b')", 1),
    ("array_offset_of(['a', 'b'], 'c')", None),
    ("array_ordinal_of(['a', 'b'], 'b')", 2),
    ("array_prepend(0, [1, 2])", [0, 1, 2]),
    ("array_append([1, 2], 3)", [1, 2, 3]),
    ("array_concat([1, 2], [3])", [1, 2, 3]),
    ("array_set_add(['b', 'a'], 'a')", ["a", "b"]),
    ("array_set_add_all([3, 1], [1, 2])", [1, 2, 3]),
    ("array_slice([1, 2, 3, 4], 1, 3)", [2, 3]),
    ("array_slice([1, 2, 3, 4], 2, 10)", [3, 4]),
    ("array_slice([1, 2, 3, 4], -1, 2)", None),
    ("array_slice([1, 2, 3, 4], 5, 6)", None),
    ("array_slice([1, 2, 3, 4], 3, 1)", None),
    ("array_to_string([1, 2, 3], '-')", "1-2-3"),
    ("array_to_string(arr, ',')", "1,2,3"),
    ("string_to_array('a,b,c', ',')", ["a", "b", "c"]),
    ("string_to_array('a1b22c', '[0-9]+')", ["a", "b", "c"]),
    ("string_to_array('a,b,,', ',')", ["a", "b"]),  # Java's split drops trailing empties
    # apply (lambdas)
    ("map((x) -> x + 1, [1, 2, 3])", [2, 3, 4]),
    ("map((x) -> concat(x, '!'), ['a', 'b'])", ["a!", "b!"]),
    ("filter((x) -> x > 1, [1, 2, 3])", [2, 3]),
    ("filter((x) -> x > 5, [1, 2, 3])", None),  # none match: null
    ("fold((x, acc) -> x + acc, [1, 2, 3], 0)", 6),
    ("any((x) -> x > 2, [1, 2, 3])", 1),
    ("all((x) -> x > 2, [1, 2, 3])", 0),
    ("map((s) -> s * 2, arr)", [2.0, 4.0, 6.0]),  # the lambda's s shadows column s
    ("cartesian_map((x, y) -> concat(x, y), ['a', 'b'], ['1', '2'])", ["a1", "a2", "b1", "b2"]),
    ("cartesian_fold((x, y, acc) -> x * y + acc, [1, 2], [10, 20], 0)", 90),
    (
        "fold((s, acc) -> acc + 1, [7, 8], cast(n, 'LONG'))",
        102,
    ),  # the start reads column n, not the lambda's
    # JSON
    ("json_value(obj, '$.x')", "y"),
    ("json_value(obj, '$.a.b')", "1"),
    ("json_value(obj, '$.a.b', 'LONG')", 1),
    ("json_value(obj, '$.a.b', 'DOUBLE')", 1.0),
    ("json_value(obj, '$.a.c', 'ARRAY<LONG>')", [1, 2]),
    ("json_value(obj, '$[\\'a\\'][\\'b\\']')", "1"),  # bracket notation
    ("json_value(obj, '$.a.c[1]')", "2"),
    ("json_value(obj, '$.a')", None),  # an object is not a literal
    ("json_value(obj, '$.f')", "1"),  # booleans are longs
    ("json_value(obj, '$.z')", None),  # JSON null is NULL
    ("json_value(obj, '$.missing')", None),
    ("json_value(a_null, '$[0]')", None),
    ("json_value(a_bool, '$[1]', 'LONG')", 0),
    ("json_value(s, '$')", "hello"),
    ("json_value(obj, '$.a.b') + 1", 2),  # a JSON number adds, as in Druid
    ("nvl(nothing, n) * 2", 200),
    ("array_offset(arr, 0) < 2", 1),
    ("json_query(obj, '$.a')", '{"b":1,"c":[1,2]}'),
    ("json_query(obj, '$.a.c')", "[1,2]"),
    ("json_query(obj, '$.missing')", None),
    ("json_query_array(obj, '$.a.c')", ["1", "2"]),
    ("json_query_array(obj, '$.x')", ['"y"']),  # not an array: a one-element array
    ("json_object('k', 1, 'v', 'a')", '{"k":1,"v":"a"}'),
    ("json_object('k', json_query(obj, '$.a'), 'n', null)", '{"k":{"b":1,"c":[1,2]},"n":null}'),
    ("parse_json('{\"p\": [1, 2]}')", '{"p":[1,2]}'),
    ("try_parse_json('not json')", None),
    ("to_json_string(json_object('k', 1))", '{"k":1}'),
    ("to_json_string(s)", '"hello"'),
    ("to_json_string(5)", "5"),
    ("json_keys(obj, '$')", ["a", "f", "x", "z"]),
    ("json_keys(obj, '$.a')", ["b", "c"]),
    ("json_keys(obj, '$.x')", None),
    # IP addresses
    ("ipv4_parse('192.168.0.1')", 3232235521),
    ("ipv4_parse(3232235521)", 3232235521),
    ("ipv4_parse('192.168.0.256')", None),
    ("ipv4_parse(-1)", None),
    ("ipv4_stringify(3232235521)", "192.168.0.1"),
    ("ipv4_stringify('192.168.0.1')", "192.168.0.1"),
    ("ipv4_stringify(4294967296)", None),
    ("ipv4_match('192.168.0.1', '192.168.0.0/16')", 1),
    ("ipv4_match(3232235521, '192.168.0.0/16')", 1),
    ("ipv4_match('10.0.0.1', '192.168.0.0/16')", 0),
    ("ipv4_match('not an address', '192.168.0.0/16')", 0),
    # other: the doc's own examples
    ("human_readable_binary_byte_format(1048576)", "1.00 MiB"),
    ("human_readable_binary_byte_format(1048576, 3)", "1.000 MiB"),
    ("human_readable_decimal_byte_format(1000000)", "1.00 MB"),
    ("human_readable_decimal_byte_format(1000000, 3)", "1.000 MB"),
    ("human_readable_decimal_format(1000000)", "1.00 M"),
    ("human_readable_decimal_format(1000000, 3)", "1.000 M"),
    ("human_readable_binary_byte_format(1536)", "1.50 KiB"),
    ("human_readable_decimal_byte_format(999)", "999 B"),
    # reduction
    ("greatest(1, 3, 2)", 3),
    ("greatest(1, 3.5, 2)", 3.5),
    ("greatest('b', 'a', 'c')", "c"),
    ("greatest(1, null, 2)", 2),  # nulls are ignored
    ("greatest()", None),
    ("least(1, 3, 2)", 1),
    ("least('b', 'a', 'c')", "a"),
]


def same(got, want) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return got is not None and math.isnan(float(got))
    if isinstance(want, float) and got is not None:
        return math.isclose(float(got), want, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(want, int) and isinstance(got, float):
        return got == want
    return got == want and type(got) is type(want)
