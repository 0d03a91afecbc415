"""What a SQL query may reach, decided on DuckDB's own parse tree (no Django).

A query is parsed by the engine that will run it (`json_serialize_sql`), checked
node by node against allow-lists, its table names bound to the tables Strata
registers for that query, and turned back into SQL from the checked tree
(`json_deserialize_sql`): what runs is exactly what was checked. Anything the
lists do not name is refused -- a node kind (SHOW, PIVOT, time travel), a table
function (`read_csv`, `glob`, `query`, `duckdb_settings`), a scalar function
(`current_setting`, `getvariable`, `version`), a catalog-qualified name -- so a
new feature of the engine is unreachable until it is added here on purpose.
The engine's own catalog, settings and files are therefore never what answers.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from metastore.sketches import FUNCTION_NAMES as SKETCHES


class SqlRefused(ValueError):
    """A query outside what Strata runs; the message names the construct."""


@dataclass(frozen=True)
class TableName:
    """A table as a query names it: `catalog.schema.table`, parts "" when absent."""

    catalog: str
    schema: str
    table: str

    def __str__(self) -> str:
        return ".".join(p for p in (self.catalog, self.schema, self.table) if p)


# --- the allow-lists ---------------------------------------------------------------------

_QUERY_NODES = {"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"}
_TABLE_REFS = {"BASE_TABLE", "JOIN", "SUBQUERY", "TABLE_FUNCTION", "EXPRESSION_LIST", "EMPTY"}
_OTHER_NODES = {
    "ORDER_MODIFIER",
    "LIMIT_MODIFIER",
    "LIMIT_PERCENT_MODIFIER",
    "DISTINCT_MODIFIER",
    "ORDER_DEFAULT",
    "ASCENDING",
    "DESCENDING",
}
_EXPRESSIONS = {
    "BETWEEN",
    "CASE",
    "CAST",
    "COLLATE",
    "COLUMN_REF",
    "COMPARISON",
    "CONJUNCTION",
    "CONSTANT",
    "FUNCTION",
    "LAMBDA",
    "LAMBDA_REF",
    "OPERATOR",
    "PARAMETER",
    "POSITIONAL_REFERENCE",
    "STAR",
    "SUBQUERY",
    "TYPE",
    "WINDOW",
}
# Table functions that only generate rows from their arguments.
TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Functions of values only: none reads a setting, a file, the catalog, the
# session or the clock of another query. Grouped as DuckDB's documentation groups them.
_OPERATORS = _names(
    "!= % & && * ** + - ->> / // < <-> << <= <=> <@ = > >= >> @ @> ^ ^@ | || ~ ~~ ~~* ~~~ "
    "!~~ !~~* !__postfix"
)
_NUMERIC = _names(
    "abs acos acosh add asin asinh atan atan2 atanh bit_count cbrt ceil ceiling cos cosh cot "
    "degrees divide even exp factorial fdiv floor fmod gamma gcd greatest "
    "greatest_common_divisor isfinite isinf isnan lcm least least_common_multiple lgamma ln log "
    "log10 log2 mod multiply nextafter pi pow power radians random round round_even "
    "roundbankers sign signbit sin sinh sqrt subtract tan tanh trunc xor"
)
_TEXT = _names(
    "array_to_string ascii bar base64 bit_length chr concat concat_ws contains "
    "damerau_levenshtein editdist3 ends_with format format_bytes formatReadableDecimalSize "
    "formatReadableSize from_base64 from_binary from_hex hamming hash hex ilike_escape instr "
    "jaccard jaro_similarity jaro_winkler_similarity lcase left left_grapheme len length "
    "length_grapheme levenshtein like_escape lower lpad ltrim md5 md5_number md5_number_lower "
    "md5_number_upper mismatches nfc_normalize not_ilike_escape not_like_escape octet_length "
    "ord overlay parse_formatted_bytes position prefix printf regexp_escape regexp_extract "
    "regexp_extract_all regexp_full_match regexp_matches regexp_replace regexp_split_to_array "
    "repeat replace reverse right right_grapheme rpad rtrim sha1 sha256 split split_part "
    "starts_with str_split str_split_regex string_split string_split_regex string_to_array "
    "strip_accents strlen strpos substr substring substring_grapheme suffix to_base to_base64 "
    "to_binary to_hex translate trim ucase unbin unhex unicode upper url_decode url_encode "
    "char_length character_length get_bit set_bit bitstring bin encode decode"
)
_TIME = _names(
    "age century current_date current_localtime current_localtimestamp date_add date_diff "
    "date_part date_sub date_trunc datediff datepart datesub datetrunc day dayname dayofmonth "
    "dayofweek dayofyear days_in_month decade epoch epoch_ms epoch_ns epoch_us era "
    "get_current_time get_current_timestamp hour isodow isoyear julian last_day make_date "
    "make_time make_timestamp make_timestamp_ms make_timestamp_ns make_timestamptz microsecond "
    "millennium millisecond minute month monthname nanosecond normalized_interval now quarter "
    "second strftime strptime time_bucket timezone timezone_hour timezone_minute to_centuries "
    "to_days to_decades to_hours to_microseconds to_millennia to_milliseconds to_minutes "
    "to_months to_quarters to_seconds to_timestamp to_weeks to_years today "
    "transaction_timestamp try_strptime week weekday weekofyear year yearweek ago"
)
_NESTED = _names(
    "aggregate apply array_aggr array_aggregate array_append array_apply array_cat "
    "array_concat array_contains array_distinct array_extract array_filter array_grade_up "
    "array_has array_has_all array_has_any array_indexof array_intersect array_length "
    "array_pop_back array_pop_front array_position array_prepend array_push_back "
    "array_push_front array_reduce array_resize array_reverse array_reverse_sort array_select "
    "array_slice array_sort array_transform array_unique array_value array_where array_zip "
    "cardinality element_at filter flatten generate_series generate_subscripts grade_up "
    "list_aggr list_aggregate list_any_value list_append list_apply list_approx_count_distinct "
    "list_avg list_bit_and list_bit_or list_bit_xor list_bool_and list_bool_or list_cat "
    "list_concat list_contains list_count list_distinct list_element list_entropy list_extract "
    "list_filter list_first list_grade_up list_has list_has_all list_has_any list_histogram "
    "list_indexof list_intersect list_kurtosis list_kurtosis_pop list_last list_mad list_max "
    "list_median list_min list_mode list_pack list_position list_prepend list_product "
    "list_reduce list_resize list_reverse list_reverse_sort list_select list_sem list_skewness "
    "list_slice list_sort list_stddev_pop list_stddev_samp list_string_agg list_sum "
    "list_transform list_unique list_value list_var_pop list_var_samp list_where list_zip "
    "map map_concat map_contains map_contains_entry map_contains_value map_entries "
    "map_extract map_extract_value map_from_entries map_keys map_values range reduce row "
    "struct_concat struct_contains struct_extract struct_extract_at struct_has "
    "struct_indexof struct_insert struct_keys struct_pack struct_position struct_update "
    "struct_values unnest union_extract union_tag union_value"
)
_JSON = _names(
    "array_to_json from_json from_json_strict json json_array json_array_length "
    "json_contains json_exists json_extract json_extract_path json_extract_path_text "
    "json_extract_string json_group_array json_group_object json_group_structure json_keys "
    "json_merge_patch json_object json_pretty json_quote json_structure json_transform "
    "json_transform_strict json_type json_valid json_value row_to_json to_json"
)
_OTHER = _names(
    "coalesce if nullif typeof uuid gen_random_uuid uuidv4 uuidv7 equi_width_bins error"
)
_AGGREGATES = _names(
    "any_value approx_count_distinct approx_quantile approx_top_k arbitrary arg_max "
    "arg_max_null arg_max_nulls_last arg_min arg_min_null arg_min_nulls_last argmax argmin "
    "array_agg avg bit_and bit_or bit_xor bitstring_agg bool_and bool_or corr count count_if "
    "count_star countif covar_pop covar_samp entropy favg first fsum geomean geometric_mean "
    "group_concat histogram histogram_exact kahan_sum kurtosis kurtosis_pop last list listagg "
    "mad max max_by mean median min min_by mode product quantile quantile_cont quantile_disc "
    "regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy "
    "regr_syy reservoir_quantile sem skewness stddev stddev_pop stddev_samp string_agg sum "
    "sumkahan var_pop var_samp variance wavg weighted_avg"
)
_WINDOWS = _names(
    "cume_dist dense_rank fill first_value lag last_value lead nth_value ntile percent_rank "
    "rank rank_dense row_number"
)
AGGREGATE_FUNCTIONS = _AGGREGATES
SCALAR_FUNCTIONS = _OPERATORS | _NUMERIC | _TEXT | _TIME | _NESTED | _JSON | _OTHER | SKETCHES
FUNCTIONS = SCALAR_FUNCTIONS | _AGGREGATES | _WINDOWS


# --- parse, check, bind, print -----------------------------------------------------------


_memo_lock = threading.Lock()
_memo: OrderedDict[tuple[str, str], str] = OrderedDict()
_MEMO_SIZE = 2048


def memoized(con, function: str, argument: str) -> str:
    """`function(argument)` on DuckDB, remembered: the same query text parses to the
    same tree and a tree prints as the same SQL, and a dashboard repeats its queries
    (each call is a round trip through the engine, as long as a small query)."""
    key = (function, argument)
    with _memo_lock:
        found = _memo.get(key)
        if found is not None:
            _memo.move_to_end(key)
            return found
    found = con.execute(f"SELECT {function}(?)", [argument]).fetchall()[0][0]
    with _memo_lock:
        _memo[key] = found
        while len(_memo) > _MEMO_SIZE:
            _memo.popitem(last=False)
    return found


def parse(con, sql: str) -> dict:
    """DuckDB's parse tree of one SELECT statement (`con`: any DuckDB connection)."""
    text = memoized(con, "json_serialize_sql", sql)
    try:
        tree = json.loads(text)
    except RecursionError:
        raise SqlRefused("the query is nested too deeply") from None
    if tree.get("error"):
        raise SqlRefused(f"cannot parse the query: {tree.get('error_message', '')}")
    if len(tree["statements"]) != 1:
        raise SqlRefused(f"send one query at a time (got {len(tree['statements'])} statements)")
    return tree


def deparse(con, tree: dict) -> str:
    """The SQL text of a (checked, bound) tree."""
    return memoized(con, "json_deserialize_sql", json.dumps(tree))


def name_columns_like_druid(tree: dict) -> None:
    """Name the result's computed columns that have no alias as Druid SQL (Calcite)
    does, `EXPR$<position>`; column references keep their names. In a set operation
    the first query names the columns."""
    node = tree["statements"][0]["node"]
    while node.get("type") == "SET_OPERATION_NODE" and node.get("children"):
        node = node["children"][0]
    if node.get("type") != "SELECT_NODE":
        return
    for position, expr in enumerate(node.get("select_list") or []):
        if not expr.get("alias") and expr.get("class") not in ("COLUMN_REF", "STAR"):
            expr["alias"] = f"EXPR${position}"


def _cte_names(node: dict) -> set[str]:
    entries = (node.get("cte_map") or {}).get("map") or []
    return {entry["key"].lower() for entry in entries}


def _check_function(node: dict, allowed: frozenset[str], what: str) -> None:
    name = node.get("function_name", "")
    if node.get("schema") or node.get("catalog"):
        qualified = ".".join(p for p in (node.get("catalog"), node.get("schema"), name) if p)
        raise SqlRefused(f"{what} {qualified} is not available: call functions by their name")
    if name.lower() not in allowed and name not in allowed:
        raise SqlRefused(f"{what} {name} is not supported")


def _children(node, scope: frozenset[str]):
    if isinstance(node, dict):
        return [(v, scope) for k, v in node.items() if isinstance(v, dict | list)]
    return [(v, scope) for v in node if isinstance(v, dict | list)]


def check(
    tree: dict,
    *,
    functions: frozenset[str],
    bind: Callable[[TableName], tuple[str, str]],
) -> list[TableName]:
    """Refuse what the allow-lists do not name, and bind every table the query reads:
    `bind(name)` returns (registered table, alias) or raises SqlRefused. The tree is
    rewritten in place; the tables named are returned in order. Iterative, so a
    deep tree cannot exhaust Python's stack; a CTE's name counts only inside the
    query that defines it."""
    seen: list[TableName] = []
    qualified: list[dict] = []  # column references naming schema.table.column
    stack = [(tree["statements"][0]["node"], frozenset())]
    while stack:
        node, scope = stack.pop()
        if isinstance(node, list):
            stack.extend(_children(node, scope))
            continue
        kind = node.get("class") or node.get("type")
        if node.get("at_clause"):
            raise SqlRefused("AT (time travel on a table) is not supported: use as_of")
        if "class" in node:
            if node["class"] not in _EXPRESSIONS:
                raise SqlRefused(f"{node['class'].lower()} expressions are not supported")
            if "function_name" in node:
                _check_function(node, functions, "function")
            if node["class"] == "COLUMN_REF" and len(node.get("column_names") or ()) > 2:
                qualified.append(node)
        elif isinstance(kind, str):
            if kind in _QUERY_NODES:
                scope = scope | _cte_names(node)
            elif kind == "BASE_TABLE":
                _bind_table(node, scope, bind, seen)
            elif kind == "TABLE_FUNCTION":
                _check_function(node["function"], TABLE_FUNCTIONS, "table function")
                stack.append((node["function"].get("arguments") or [], scope))
                stack.append((node.get("sample") or {}, scope))
                continue
            elif kind not in _TABLE_REFS and kind not in _OTHER_NODES:
                raise SqlRefused(f"{kind.replace('_', ' ').lower()} is not supported")
        stack.extend(_children(node, scope))
    # `druid.wiki.page` names its table as the query did; the bound table has no schema.
    tables = {(t.schema.lower(), t.table.lower()) for t in seen if t.schema}
    for node in qualified:
        names = node["column_names"]
        if (names[0].lower(), names[1].lower()) in tables:
            node["column_names"] = names[1:]
    return seen


def _bind_table(node: dict, scope, bind, seen: list[TableName]) -> None:
    name = TableName(node.get("catalog_name", ""), node.get("schema_name", ""), node["table_name"])
    if not name.catalog and not name.schema and name.table.lower() in scope:
        return  # a common table expression of an enclosing query
    registered, alias = bind(name)
    seen.append(name)
    node["catalog_name"] = ""
    node["schema_name"] = ""
    node["table_name"] = registered
    node["qualified_name"] = {"path": [registered]}
    if not node.get("alias"):
        node["alias"] = alias
