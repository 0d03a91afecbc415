"""Druid SQL's functions on the engine's parse tree (no Django).

A query sent to Druid's SQL endpoint means what it means in Druid: each call of a
function in Druid's SQL function reference is replaced, on DuckDB's parse tree,
by the DuckDB expression with Druid's meaning (`metastore.sql_druid_rules` holds
one rule per function: the engine's SQL for it, or why it is refused); a call of
any other function -- one only DuckDB has -- is refused as Druid refuses it. The
rewritten tree then goes through `metastore.sql_guard.check` like every query, so
what runs is still only what the guard's allow-lists name.

Before anything else a query's `?` parameters become literals of their types
(`bind_parameters`), as Druid binds them. Druid's type rules follow
(`apply_types`), given the kinds of the tables' columns: implicit casts of strings
with numbers, multi-value string dimensions filtered by any value, unnested by
GROUP BY and mapped over by string functions elsewhere; the session's
`sqlTimeZone` (metastore.sql_druid_time) moves timestamp literals, CURRENT_DATE
and calendar arithmetic to its clock; and a GROUP BY without ORDER BY answers in
Druid's order, nulls first.

Calls are found by the name the query wrote (read at the node's position in the
text): DuckDB turns standard syntax into functions of its own (`EXTRACT(DOW FROM
t)` into `date_part`, `TRIM(BOTH ...)` into `trim`, `COUNT(*)` into
`count_star`), and those are read as the Druid call they came from.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field

from metastore.sql_guard import AGGREGATE_FUNCTIONS, SqlRefused

# The engine's own names for standard syntax, by the Druid function written.
SYNTAX_NAMES = {
    ("EXTRACT", "date_part"),
    ("TRIM", "trim"),
    ("TRIM", "ltrim"),
    ("TRIM", "rtrim"),
    ("COUNT", "count_star"),
    ("POSITION", "position"),
    ("SUBSTRING", "substring"),
    ("CEIL", "ceiling"),
}
# Druid's string functions whose value is not a string (a multi-value string is not
# mapped through them: see `_map_values`).
_NOT_TEXT = frozenset(
    ["CHARACTER_LENGTH", "CHAR_LENGTH", "LENGTH", "STRLEN", "STRPOS", "POSITION"]
    + ["DRUID_POSITION_FROM", "CONTAINS_STRING", "ICONTAINS_STRING", "REGEXP_LIKE", "PARSE_LONG"]
)
_WRITTEN = re.compile(r'\s*("?)([A-Za-z_][A-Za-z0-9_]*)\1\s*\(')


class DruidFunctionRefused(SqlRefused):
    """A Druid SQL function Strata does not run, or a function Druid SQL lacks."""


@dataclass
class Call:
    """One call of a Druid function: its name as written and its argument nodes."""

    name: str
    args: list[dict]
    node: dict
    window: bool = False

    def literal(self, index: int, what: str, *, word: bool = False):
        """The value of argument `index`, which must be a literal (None for NULL);
        `word`: a bare word is one too (TIMESTAMPADD(DAY, ...))."""
        node = self.args[index]
        if node.get("class") == "CAST" and node.get("child", {}).get("class") == "CONSTANT":
            node = node["child"]
        if word and node.get("class") == "COLUMN_REF" and len(node["column_names"]) == 1:
            return node["column_names"][0]
        if node.get("class") != "CONSTANT":
            raise DruidFunctionRefused(f"{self.name}: {what} must be a literal")
        literal = node["literal"]
        kind, text = literal.get("kind"), literal.get("text")
        if kind == "NULL_LITERAL":
            return None
        if kind == "INTEGER":
            return int(text)
        if kind in ("NUMERIC", "DECIMAL", "DOUBLE", "FLOAT"):
            return float(text)
        if kind == "BOOLEAN":
            return text.lower() == "true"
        return text

    def given(self, index: int) -> bool:
        """Whether argument `index` is there and not a NULL literal."""
        if index >= len(self.args):
            return False
        node = self.args[index]
        return not (
            node.get("class") == "CONSTANT" and node["literal"].get("kind") == "NULL_LITERAL"
        )


@dataclass(frozen=True)
class Rule:
    """How Strata runs one Druid SQL function.

    `sql`: the engine's SQL for a call, `$a0`, `$a1`... standing for the arguments
    (a string, or a function of the Call giving one); None keeps the engine's
    function of the same name. `refused`: why it is not run (then nothing else
    counts). `arity`: (fewest, most) arguments, most None for any number."""

    name: str
    kind: str  # scalar, aggregate, window, table, operator
    arity: tuple[int, int | None] = (0, None)
    sql: object = None
    refused: str = ""
    category: str = ""
    note: str = ""
    internal: bool = False  # written by metastore.sql_druid_syntax, not by users
    engine: frozenset = field(default_factory=frozenset)


def _parse(con, text: str) -> dict:
    from metastore.sql_guard import memoized

    text_tree = memoized(con, "json_serialize_sql", text)
    # Positions in the rule's text are not positions in the query: drop them.
    tree = json.loads(re.sub(r'"query_location":\d+,?', "", text_tree))
    if tree.get("error"):  # a rule's own SQL: a bug here, not the user's query
        raise RuntimeError(f"bad rule SQL {text!r}: {tree.get('error_message')}")
    return tree


def _template_node(con, text: str) -> dict:
    return _parse(con, f"SELECT {text}")["statements"][0]["node"]["select_list"][0]


def _substitute(template: dict, args: list[dict]) -> dict:
    """The template with each `$aN` parameter replaced by argument N (copied
    after its first use, so no node is shared)."""
    used: set[int] = set()

    def arg(identifier: str) -> dict:
        index = int(identifier[1:])
        if index >= len(args):
            raise RuntimeError(f"rule uses argument {index} of {len(args)}")
        node = args[index] if index not in used else copy.deepcopy(args[index])
        used.add(index)
        return node

    stack = [template]
    while stack:
        item = stack.pop()
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, value in list(pairs):
            if isinstance(value, dict) and value.get("class") == "PARAMETER":
                ident = str(value.get("identifier", ""))
                if re.fullmatch(r"a\d+", ident):
                    item[key] = arg(ident)
                    continue
            if isinstance(value, dict | list):
                stack.append(value)
    return template


def _aggregates_in(node: dict, names: frozenset[str]):
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("class") == "FUNCTION" and item.get("function_name") in names:
                yield item
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, dict | list))


def written_name(sql: str, node: dict) -> str | None:
    """The function name the query wrote for this call node, or None when the node
    comes from other syntax (an operator, INTERVAL '1' DAY, ...)."""
    engine = node.get("function_name", "")
    location = node.get("query_location")
    if not isinstance(location, int) or not 0 <= location < len(sql):
        return None
    match = _WRITTEN.match(sql, location)
    if match is None:
        return None
    name = match.group(2)
    if name.lower() == engine.lower() or (name.upper(), engine) in SYNTAX_NAMES:
        return name.upper()
    return None


def _call_args(node: dict) -> list[dict]:
    return [a.get("expression", a) for a in node.get("arguments") or []]


def _arity_error(rule: Rule, count: int) -> DruidFunctionRefused:
    low, high = rule.arity
    expected = f"{low}" if low == high else f"{low} to {high}" if high else f"at least {low}"
    return DruidFunctionRefused(
        f"Invalid number of arguments to function '{rule.name}'. Was expecting {expected} "
        f"arguments, got {count}"
    )


def translate_call(con, call: Call, rule: Rule) -> dict | None:
    """The node replacing `call` under `rule` (None: keep the node as it is)."""
    if rule.refused:
        raise DruidFunctionRefused(f"Function [{rule.name}] is not supported here: {rule.refused}")
    low, high = rule.arity
    count = len(call.args)
    if call.node.get("function_name") == "count_star" or (call.window and rule.name == "COUNT"):
        count = max(count, 1)  # COUNT(*), over a window too (the engine's `count` of nothing)
    if count < low or (high is not None and count > high):
        raise _arity_error(rule, count)
    if rule.sql is None:
        return None
    text = rule.sql(call) if callable(rule.sql) else rule.sql
    if text is None:
        return None
    if call.window:
        raise DruidFunctionRefused(f"{rule.name} is not supported as a window function here")
    new = _substitute(_template_node(con, text), call.args)
    if rule.kind == "aggregate":
        engine = frozenset(rule.engine)
        for inner in _aggregates_in(new, engine):
            inner["distinct"] = call.node.get("distinct", False)
            inner["filter"] = _both(inner.get("filter"), call.node.get("filter"))
            inner["order_bys"] = call.node.get("order_bys") or inner["order_bys"]
    new["alias"] = call.node.get("alias", "")
    return new


def _both(own: dict | None, given: dict | None) -> dict | None:
    """A rule's own FILTER of an aggregate and the call's, both applying."""
    if own is None or given is None:
        return own or given
    return {
        "class": "CONJUNCTION",
        "type": "CONJUNCTION_AND",
        "alias": "",
        "query_location": given.get("query_location", 0),
        "children": [own, given],
    }


def _function_nodes(tree: dict) -> list[tuple[dict, bool]]:
    """Every call node of the query, parents before children: (node, is a table
    function of FROM)."""
    found: list[tuple[dict, bool]] = []
    table_calls: set[int] = set()
    stack: list = [tree["statements"][0]["node"]]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed([v for v in item if isinstance(v, dict | list)]))
            continue
        if item.get("type") == "TABLE_FUNCTION" and isinstance(item.get("function"), dict):
            table_calls.add(id(item["function"]))
        if item.get("class") in ("FUNCTION", "WINDOW") and "function_name" in item:
            found.append((item, id(item) in table_calls))
        stack.extend(reversed([v for v in item.values() if isinstance(v, dict | list)]))
    return found


def translate(con, sql: str, tree: dict, rules: dict[str, Rule], columns=None) -> None:
    """Rewrite every Druid function call of `tree` (parsed from `sql`) in place into
    the engine's SQL for it; refuse calls of functions Druid SQL does not have. With
    `columns` (a table's column kinds, see `apply_types`), Druid's implicit casts and
    multi-value strings too."""
    from metastore.sql_druid_time import session_zone

    if session_zone() != "UTC":
        _session_time(con, tree, session_zone())
    strings: set[str] = set()  # the calls of Druid's string functions (by _shape)
    for node, is_table in reversed(_function_nodes(tree)):
        engine = node.get("function_name", "")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", engine):
            strings.update([_shape(node)] if engine == "||" else [])
            operator = rules.get(engine)
            if operator is not None and operator.sql is not None:
                _replace(node, translate_call(con, Call(engine, _call_args(node), node), operator))
            continue  # an operator (+, ||, ~~ ...): the guard decides
        name = written_name(sql, node)
        if name is None and is_table and engine == "unnest":
            name = "UNNEST"  # the engine gives FROM's UNNEST no place in the text
        if name is None:
            continue  # standard syntax (INTERVAL, SIMILAR TO, a[1]): the guard decides
        rule = rules.get(name)
        if rule is None:
            raise DruidFunctionRefused(f"No match found for function signature {name}")
        if is_table and rule.kind != "table":
            raise DruidFunctionRefused(f"{name} is not a table function")
        call = Call(name, _call_args(node), node, window=node.get("class") == "WINDOW")
        if call.window:
            _range_frame_bounds(node)
            _whole_partition_frame(node)
        _replace(node, translate_call(con, call, rule))
        if rule.category == "string" and name not in _NOT_TEXT:
            strings.add(_shape({**node, "alias": ""}))
    _refuse_engine_only_forms(tree)
    if columns is not None:
        apply_types(con, tree, columns, strings)
    for select in _query_nodes(tree):
        _window_group_order(select)
    _group_order(tree["statements"][0]["node"])
    _null_order(tree["statements"][0]["node"])


UNBOUND = object()  # a parameter position the request left empty (Druid's null entry)


def bind_parameters(con, tree: dict, params: list | None) -> None:
    """Each `?` of the query replaced, in place, by its parameter as a literal of its
    type, as Druid binds parameters before planning (its SqlParameterizerShuttle): a
    string is a VARCHAR literal, a whole number a BIGINT, a float a DOUBLE, a
    datetime a TIMESTAMP literal (a wall-clock time of the session's `sqlTimeZone`,
    like any timestamp literal), a date a DATE, a list an ARRAY, None NULL. So
    Druid's implicit casts and time zone apply to a parameter as to what it stands for."""
    params = params or []
    found = _nodes_where(tree, lambda item: item.get("class") == "PARAMETER")
    for node in found:
        identifier = str(node.get("identifier", ""))
        if not identifier.isdigit():
            raise SqlRefused(f"Named parameter ${identifier} is not supported: write ?")
        index = int(identifier) - 1
        if index >= len(params) or params[index] is UNBOUND:
            raise SqlRefused(f"No value bound for parameter (position [{index + 1}])")
        _replace(node, _template_node(con, _literal_sql(params[index])))
    if len(params) > len(found):  # a client's mistake, not to be run as another query
        raise SqlRefused(f"{len(params)} parameters given for {len(found)} ? placeholders")


def _literal_sql(value) -> str:
    import datetime as dt

    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.replace(tzinfo=None).isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, list):
        return "[" + ", ".join(_literal_sql(v) for v in value) + "]"
    return "'" + str(value).replace("'", "''") + "'"


def _session_time(con, tree: dict, zone: str) -> None:
    """Under `sqlTimeZone`: a timestamp or date literal is a wall-clock time of the
    zone, CURRENT_DATE the zone's date, and a timestamp cast to DATE the start of its
    day there (as a TIMESTAMP: a DATE cannot hold that instant)."""
    from metastore.sql_druid_time import from_local, to_local

    stack, found = [tree["statements"][0]["node"]], []
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            found.append(item)
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
    for node in found:
        target = str((node.get("type_expr") or {}).get("type_name", "")).upper()
        if node.get("class") == "CAST" and target in ("TIMESTAMP", "DATE"):
            child = node["child"]
            if child.get("class") == "CONSTANT" and child["literal"].get("kind") == "STRING":
                text = from_local(f"CAST($a0 AS {target})", zone)
            elif target == "DATE":
                text = from_local(f"CAST(CAST({to_local('$a0', zone)} AS DATE) AS TIMESTAMP)", zone)
            else:
                continue
            _replace(node, _substitute(_template_node(con, text), [copy.deepcopy(child)]))
        elif node.get("function_name") in ("+", "-") and _calendar_step(node):
            time, step = _call_args(node)  # `t + INTERVAL '1' MONTH`: on the zone's wall clock
            text = from_local(f"{to_local('$a0', zone)} {node['function_name']} $a1", zone)
            _replace(node, _substitute(_template_node(con, text), [time, step]))
        elif node.get("class") == "COLUMN_REF" and [
            n.upper() for n in node.get("column_names") or []
        ] == ["CURRENT_DATE"]:
            today = f"CAST(CAST({to_local('now()', zone)} AS DATE) AS TIMESTAMP)"
            _replace(node, _template_node(con, from_local(today, zone)))


def _calendar_step(node: dict) -> bool:
    """Whether an operator adds (subtracts) months or years to a time: Druid shifts
    those in the session's zone (year-month intervals), days and less by a fixed width."""
    args = _call_args(node)
    return len(args) == 2 and args[1].get("function_name") in ("to_months", "to_years")


def _group_order(select: dict) -> None:
    """A GROUP BY query without ORDER BY answers its groups in Druid's order: by the
    grouping keys, nulls first (a groupBy query's sorted dimensions)."""
    if select.get("type") != "SELECT_NODE" or not select.get("group_expressions"):
        return
    modifiers = select.setdefault("modifiers", [])
    if len(select.get("group_sets") or []) > 1 or any(
        m.get("type") in ("ORDER_MODIFIER", "DISTINCT_MODIFIER") for m in modifiers
    ):
        return
    orders = [
        {"type": "ASCENDING", "null_order": "NULLS FIRST", "expression": copy.deepcopy(group)}
        for group in select["group_expressions"]
        if group.get("class") != "CONSTANT" or group["literal"].get("kind") == "INTEGER"
    ]  # GROUP BY 'dummy' groups all rows: nothing to order by
    if orders:
        modifiers.insert(0, {"type": "ORDER_MODIFIER", "orders": orders})


_ORDERED_WINDOWS = frozenset({"WINDOW_LAG", "WINDOW_LEAD", "WINDOW_ROW_NUMBER", "WINDOW_NTILE"})


def _window_group_order(select: dict) -> None:
    """In Druid a window runs over a GROUP BY's rows in their order, by the grouping
    keys: `LAG(x) OVER ()` of a grouped query looks at the previous group. The engine
    runs the window over the groups in no order, so a window function that depends on
    the order and has no ORDER BY is given the grouping keys as its order (aggregates
    over the window are left alone: an order would narrow their frame)."""
    if select.get("type") != "SELECT_NODE" or not select.get("group_expressions"):
        return
    keys = []
    for group in select["group_expressions"]:
        if group.get("class") == "CONSTANT" and group["literal"].get("kind") == "INTEGER":
            position = int(group["literal"]["text"]) - 1
            items = select.get("select_list") or []
            if not 0 <= position < len(items) or any(
                n.get("class") == "WINDOW" for n in _all_dicts(items[position])
            ):
                return
            group = {**items[position], "alias": ""}
        keys.append(group)
    for part in _expressions(select):
        for node in _walk(part):
            if node.get("type") in _ORDERED_WINDOWS and not node.get("orders"):
                node["orders"] = [
                    {
                        "type": "ASCENDING",
                        "null_order": "NULLS FIRST",
                        "expression": copy.deepcopy(k),
                    }
                    for k in keys
                ]


def _null_order(root: dict) -> None:
    """Druid sorts nulls first ascending and last descending (its comparators put
    null lowest); the engine's default is nulls last both ways."""
    for node in _all_dicts(root):
        if "null_order" in node and node.get("null_order") == "ORDER_DEFAULT":
            descending = node.get("type") == "DESCENDING"
            node["null_order"] = "NULLS LAST" if descending else "NULLS FIRST"


_ENGINE_ONLY_JOINS = {"ASOF": "ASOF", "POSITIONAL": "POSITIONAL", "ANTI": "ANTI", "SEMI": "SEMI"}


def _refuse_engine_only_forms(tree: dict) -> None:
    """Join kinds and window frames of the engine's grammar that Druid SQL (Calcite)
    has no syntax for, refused as Druid's parser refuses them, never answered."""
    for node in _all_dicts(tree["statements"][0]["node"]):
        if node.get("type") == "JOIN":
            word = _ENGINE_ONLY_JOINS.get(node.get("ref_type")) or _ENGINE_ONLY_JOINS.get(
                node.get("join_type")
            )
        elif node.get("class") == "WINDOW":
            groups = "GROUPS" in f"{node.get('start')} {node.get('end')}"
            exclude = node.get("exclude_clause", "NO_OTHER") != "NO_OTHER"
            word = "GROUPS" if groups else "EXCLUDE" if exclude else None
        else:
            continue
        if word:
            raise DruidFunctionRefused(
                f"Incorrect syntax near the keyword '{word}': not part of Druid SQL"
            )


def _range_frame_bounds(node: dict) -> None:
    """Druid's validator takes a RANGE frame only to UNBOUNDED or CURRENT ROW."""
    if {node.get("start"), node.get("end")} & {"EXPR_PRECEDING_RANGE", "EXPR_FOLLOWING_RANGE"}:
        raise DruidFunctionRefused(
            "Order By with RANGE clause currently supports only UNBOUNDED or CURRENT ROW. "
            "Use ROWS clause instead."
        )


def _whole_partition_frame(node: dict) -> None:
    """Without ORDER BY every row of a partition is a peer of the current one, so in
    Druid `ROWS ... CURRENT ROW` covers the whole partition: say so as a RANGE frame
    (the engine would otherwise stop at the current row in an arbitrary order)."""
    if node.get("orders"):
        return
    for side in ("start", "end"):
        if node.get(side) == "CURRENT_ROW_ROWS":
            node[side] = "CURRENT_ROW_RANGE"


def _replace(node: dict, new: dict | None) -> None:
    if new is not None:
        location, alias = node.get("query_location"), node.get("alias")
        node.clear()
        node.update(new)
        if location is not None:
            node["query_location"] = location
        if alias and not node.get("alias"):
            node["alias"] = alias


_ENGINE_PREFIX = re.compile(
    r"^(?:cannot parse the query: )?(?:Invalid Input|Conversion|Out of Range|Binder|Parser|"
    r"Catalog|Not implemented|Constraint|Mismatch Type|Type|Invalid type|Invalid Configuration)"
    r" Error: "
)
_NO_MATCH = re.compile(
    r"(?:No function matches the given name and argument types '|"
    r"Could not choose a best candidate function for the function call \")(\w+)\((.*?)\)['\"]"
)
_MIXED_TYPES = re.compile(r"Cannot mix values of type \S+ and \S+ in (?:CASE|COALESCE)")
_NO_COLUMN = re.compile(r'Referenced column "?(.+?)"? not found')


def engine_message(text: str) -> str:
    """A refusal of the engine, in Druid's words: its error class dropped, and the
    two most common errors (a function given the wrong types, an unknown column)
    said as Druid says them."""
    stripped = _ENGINE_PREFIX.sub("", text)
    if stripped == text:
        return text
    match = _NO_MATCH.search(stripped)
    if match:
        name, types = match.group(1).upper(), match.group(2)
        return f"Cannot apply '{name}' to arguments of type '{name}({types})'"
    if _MIXED_TYPES.search(stripped):
        return f"Illegal mixing of types in CASE or COALESCE statement: {stripped}"
    match = _NO_COLUMN.search(stripped)
    if match:
        return f"Column '{match.group(1)}' not found in any table"
    if text.startswith("cannot parse the query: "):
        return f"cannot parse the query: {stripped}"
    return stripped


# --- Druid's types: implicit casts and multi-value strings ---------------------------------
# Druid SQL (Calcite, with Druid's type coercion) casts a string compared with or added
# to a number to that number's type, and a string given to a numeric function to a
# double; a string that is not a number casts to null. A multi-value string
# dimension matches a filter if any of its values does, and a GROUP BY on it counts
# the row once per value (docs/querying/multi-value-dimensions.md). Both need the
# columns' kinds: `columns(TableName)` gives them (string, mv, long, double,
# timestamp, other), by lower-case name.

_LITERAL_KINDS = {"INTEGER": "long", "BIGINT": "long", "HUGEINT": "long"}
_TYPE_KINDS = {"BIGINT": "long", "INTEGER": "long", "DOUBLE": "double", "FLOAT": "double"}
_ENGINE_TYPE = {"long": "BIGINT", "double": "DOUBLE"}
_ARITHMETIC = {"+", "-", "*", "/", "//", "%"}
_COMPARISONS = {"COMPARE_IN", "COMPARE_NOT_IN"}
# Calcite's numeric functions with a family type check: a string argument is cast.
_NUMERIC_FUNCTIONS = {
    "sqrt": "double", "exp": "double", "ln": "double", "log10": "double", "acos": "double",
    "asin": "double", "atan": "double", "cos": "double", "cot": "double", "sin": "double",
    "tan": "double", "degrees": "double", "radians": "double", "power": "double",
    "pow": "double", "atan2": "double", "round": "double", "trunc": "double",
    "mod": "long", "sum": "double", "avg": "double",
}  # fmt: skip
# Engine functions whose value is text: what Druid's string aggregations (EARLIEST,
# LATEST and ANY_VALUE with a size, STRING_AGG) are translated into.
_TEXT_RESULTS = frozenset({"left", "string_agg", "array_to_string", "concat", "lower", "upper"})
_VALUE = "druid_value"
_AGGREGATES = frozenset(AGGREGATE_FUNCTIONS) | {
    "count_star"
}  # the lambda parameter standing for one value of a multi-value string


def _nodes_where(tree: dict, predicate) -> list[dict]:
    """Every node of the statement's parse tree (the engine's JSON form) `predicate` holds for."""
    found, stack = [], [tree["statements"][0]["node"]]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            if predicate(item):
                found.append(item)
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
    return found


def _query_nodes(tree: dict) -> list[dict]:
    return _nodes_where(tree, lambda item: item.get("type") == "SELECT_NODE")


def _ctes_in(tree: dict) -> dict[str, dict]:
    """The query node of each CTE of the query, by lower-case name."""
    found, stack = {}, [tree["statements"][0]["node"]]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            for entry in (item.get("cte_map") or {}).get("map") or []:
                value = entry.get("value") or {}
                found[str(entry.get("key", "")).lower()] = value.get("query_node") or {}
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
    return found


def _tables(from_table, columns, ctes: dict[str, dict]) -> dict[str, TableKinds]:
    """{alias or table name (lower): {column: kind}} of the tables of a FROM: base
    tables, and subqueries and CTEs by the kinds of their plain column outputs."""
    from metastore.sql_guard import TableName

    if not isinstance(from_table, dict):
        return {}
    if from_table.get("type") == "JOIN":
        return {
            **_tables(from_table.get("left"), columns, ctes),
            **_tables(from_table.get("right"), columns, ctes),
        }
    if from_table.get("type") == "SUBQUERY":
        node = (from_table.get("subquery") or {}).get("node") or {}
        derived = _derived_kinds(node, columns, ctes)
        return {str(from_table.get("alias") or "").lower(): derived} if derived else {}
    if from_table.get("type") != "BASE_TABLE":
        return {}
    name = TableName(
        from_table.get("catalog_name", ""),
        from_table.get("schema_name", ""),
        from_table["table_name"],
    )
    alias = str(from_table.get("alias") or name.table).lower()
    if not name.schema and not name.catalog and name.table.lower() in ctes:
        inner = {k: v for k, v in ctes.items() if k != name.table.lower()}  # not itself
        derived = _derived_kinds(ctes[name.table.lower()], columns, inner)
        return {alias: derived} if derived else {}
    kinds = columns(name)
    return {alias: kinds} if kinds else {}


class _DerivedKinds(dict):
    """The kinds of a subquery's columns that are columns of its tables."""

    def get(self, column: str, *, probe: bool = True) -> str | None:
        found = super().get(column)
        return found(probe) if found else None

    def __bool__(self) -> bool:
        return len(self) > 0


def _derived_kinds(node: dict, columns, ctes: dict[str, dict]) -> _DerivedKinds:
    """`(SELECT tags AS t, * FROM ds) AS s`: the kinds of its plain column outputs; of
    a UNION (ALL), a column is a multi-value string if it is one in either branch."""
    if node.get("type") == "SET_OPERATION_NODE":
        branches = node.get("children") or [node.get("left") or {}, node.get("right") or {}]
        first, *rest = [_derived_kinds(b, columns, ctes) for b in branches]
        same = [list(dict.values(r)) for r in rest if len(r) == len(first)]
        out = _DerivedKinds()
        for i, (name, kind) in enumerate(dict.items(first)):
            kinds = [kind] + [other[i] for other in same]
            out[name] = lambda probe, ks=kinds: (
                "mv" if probe and any(k(probe) == "mv" for k in ks) else ks[0](probe)
            )
        return out
    if node.get("type") != "SELECT_NODE":
        return _DerivedKinds()
    inner = _Kinds(_tables(node.get("from_table"), columns, ctes))
    out = _DerivedKinds()
    for item in node.get("select_list") or []:
        if item.get("class") == "STAR" and not item.get("relation_name"):
            for table in inner.tables.values():
                for name in getattr(table, "base", table):
                    out[name] = lambda probe, t=table, n=name: t.get(n, probe=probe)
        elif item.get("class") == "COLUMN_REF" and inner.column(item, probe=False):
            name = str(item.get("alias") or item["column_names"][-1]).lower()
            out[name] = lambda probe, ref=item: (inner.column(ref, probe=probe) or (0, None))[1]
        elif item.get("alias") and item.get("function_name") in _TEXT_RESULTS:
            out[str(item["alias"]).lower()] = lambda probe: "string"
    return out


def _expressions(select: dict) -> list:
    """The expression lists of a SELECT (not of the queries nested in it)."""
    parts = [select.get(k) for k in ("select_list", "where_clause", "group_expressions")]
    parts += [select.get("having"), select.get("qualify")]
    for modifier in select.get("modifiers") or []:
        parts.extend(order.get("expression") for order in modifier.get("orders") or [])
    joins = [select.get("from_table")]
    while joins:  # the ON conditions of the FROM's joins (not of its subqueries)
        join = joins.pop()
        if isinstance(join, dict) and join.get("type") == "JOIN":
            parts.append(join.get("condition"))
            joins += [join.get("left"), join.get("right")]
    return [p for p in parts if p]


def _walk(node, *, into_mv: bool = True):
    """Every expression dict under `node`, parents first, not entering subqueries
    (nor, unless `into_mv`, the argument of druid_mv: a multi-value string as a whole)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
            continue
        if not isinstance(item, dict) or item.get("type") == "SELECT_NODE":
            continue
        if item.get("class") == "SUBQUERY":
            continue
        yield item
        if not into_mv and item.get("function_name") == "druid_mv":
            continue
        stack.extend(reversed([v for v in item.values() if isinstance(v, dict | list)]))


class _Kinds:
    def __init__(self, tables: dict[str, TableKinds]) -> None:
        self.tables = tables

    def column(self, node: dict, *, probe: bool = True) -> tuple[str, str] | None:
        """(column, kind) of a column reference to one of the tables; without `probe`,
        a multi-value string may be told as a string."""
        if node.get("class") != "COLUMN_REF":
            return None
        names = [n.lower() for n in node.get("column_names") or []]
        if names == [_VALUE]:  # one value of a multi-value string (see _any_value)
            return (_VALUE, "string")
        if len(names) >= 2 and names[-2] in self.tables:
            kind = self.tables[names[-2]].get(names[-1], probe=probe)
            return (names[-1], kind) if kind else None
        if len(names) == 1:
            found = [t for t in self.tables.values() if names[0] in t]
            if len(found) == 1:
                return names[0], found[0].get(names[0], probe=probe)
        return None

    def of(self, node: dict) -> str | None:
        column = self.column(node, probe=False)
        if column:
            return column[1]
        kind = node.get("class")
        if kind == "CONSTANT":
            literal = node["literal"].get("kind")
            if literal == "STRING":
                return "string"
            return _LITERAL_KINDS.get(
                literal, "double" if literal in ("NUMERIC", "DECIMAL", "DOUBLE", "FLOAT") else None
            )
        if kind == "FUNCTION" and node.get("function_name") == "druid_json_value":
            return "string"  # JSON_VALUE without RETURNING: cast as text is
        if kind == "CAST" and not node.get("try_cast"):
            return _TYPE_KINDS.get(str((node.get("type_expr") or {}).get("type_name", "")).upper())
        if kind == "FUNCTION" and node.get("function_name") in _ARITHMETIC:
            found = {self.of(arg) for arg in _call_args(node)}  # `m1 - 1` is a number
            if found and found <= {"long", "double"}:
                return "double" if "double" in found else "long"
        return None


def apply_types(con, tree: dict, columns, strings: set[str] = frozenset()) -> None:
    """Druid's multi-value strings and implicit casts, on `tree` in place (see above);
    `strings`: the calls of Druid's string functions (their `_shape`)."""
    ctes = _ctes_in(tree)
    selects = _query_nodes(tree)
    in_lists = {  # `x IN (SELECT tags ...)`: Druid plans the subquery as a GROUP BY
        id(n["subquery"]["node"])
        for select in selects
        for part in _expressions(select)
        for n in _all_dicts(part)
        if n.get("class") == "SUBQUERY" and n.get("subquery_type") == "ANY"
    }
    for select in selects:
        kinds = _Kinds(_tables(select.get("from_table"), columns, ctes))
        if not kinds.tables:
            continue
        _multi_value(con, select, kinds, grouped=id(select) in in_lists, strings=strings)
        for part in _expressions(select):
            for node in list(_walk(part)):
                _implicit_cast(con, node, kinds)
                _constant(con, node, kinds)
                _lenient_cast(node, kinds)
                _time_argument(node, kinds)


_NUMBER_TYPES = frozenset(
    {"BIGINT", "INTEGER", "INT", "SMALLINT", "TINYINT", "FLOAT", "REAL", "DOUBLE", "DECIMAL"}
)


def _lenient_cast(node: dict, kinds: _Kinds) -> None:
    """CAST(text AS <number>): null for text that is not a number, as Druid's CAST."""
    if node.get("class") != "CAST" or node.get("try_cast"):
        return
    target = str((node.get("type_expr") or {}).get("type_name", "")).upper()
    if target in _NUMBER_TYPES and kinds.of(node["child"]) in ("string", "mv"):
        node["try_cast"] = True


def _constant(con, node: dict, kinds: _Kinds) -> None:
    """`PI` written bare, not a column: Calcite's constant."""
    names = node.get("column_names") if node.get("class") == "COLUMN_REF" else None
    if names and [n.lower() for n in names] == ["pi"] and kinds.column(node) is None:
        _replace(node, _template_node(con, "pi()"))


_BY = {"arg_min": "EARLIEST_BY", "arg_min_null": "EARLIEST_BY"}
_BY |= {"arg_max": "LATEST_BY", "arg_max_null": "LATEST_BY"}
_SQL_TYPES = {"long": "BIGINT", "double": "DOUBLE", "string": "VARCHAR", "mv": "VARCHAR"}


def _time_argument(node: dict, kinds: _Kinds) -> None:
    """EARLIEST_BY/LATEST_BY order by a TIMESTAMP: a number or text is refused as
    Druid refuses it (the engine would read a number as a time)."""
    name = _BY.get(node.get("function_name", ""))
    args = _call_args(node) if name else []
    if len(args) != 2 or args[1].get("class") != "CAST":
        return
    kind = kinds.of(args[1]["child"])
    if kind in _SQL_TYPES:
        first = _SQL_TYPES.get(kinds.of(args[0]) or "", "ANY")
        raise DruidFunctionRefused(
            f"Cannot apply '{name}' to arguments of type '{name}(<{first}>, <{_SQL_TYPES[kind]}>)'"
        )


def _cast(con, node: dict, engine_type: str) -> None:
    inner = copy.deepcopy(node)
    _replace(node, _substitute(_template_node(con, f"TRY_CAST($a0 AS {engine_type})"), [inner]))


def _implicit_cast(con, node: dict, kinds: _Kinds) -> None:
    """Cast text to the type it is compared with or computed on, as Druid's planner does."""
    cls = node.get("class")
    if cls == "BETWEEN":
        _implicit_cast_between(con, node, kinds)
    elif cls == "COMPARISON":
        _implicit_cast_pair(con, node, [node["left"], node["right"]], kinds)
    elif cls == "OPERATOR" and node.get("type") in _COMPARISONS:
        _implicit_cast_list(con, node["children"][0], node["children"][1:], kinds)
    elif cls == "FUNCTION" and node.get("function_name") in _ARITHMETIC:
        sides = _call_args(node)
        if len(sides) == 2:
            _implicit_cast_pair(con, node, sides, kinds)
    elif cls == "FUNCTION" and node.get("function_name") in _NUMERIC_FUNCTIONS:
        for arg in _call_args(node):
            if kinds.of(arg) == "string":
                _cast(con, arg, _ENGINE_TYPE[_NUMERIC_FUNCTIONS[node["function_name"]]])


def _implicit_cast_between(con, node: dict, kinds: _Kinds) -> None:
    bounds = {kinds.of(node["lower"]), kinds.of(node["upper"])}
    if kinds.of(node["input"]) == "string" and len(bounds) == 1 and bounds <= {"long", "double"}:
        _cast(con, node["input"], _ENGINE_TYPE[bounds.pop()])
    elif kinds.of(node["input"]) == "timestamp":
        _local_time_text(con, [node["lower"], node["upper"]])


def _implicit_cast_list(con, first: dict, rest: list[dict], kinds: _Kinds) -> None:
    """`first IN (rest...)` and its kin."""
    rest_kinds = {kinds.of(n) for n in rest}
    if kinds.of(first) == "string" and len(rest_kinds) == 1 and rest_kinds <= {"long", "double"}:
        _cast(con, first, _ENGINE_TYPE[rest_kinds.pop()])
    elif kinds.of(first) == "string" and "string" in rest_kinds:
        for number in (n for n in rest if kinds.of(n) in ("long", "double")):
            _cast(con, number, "VARCHAR")  # `s IN ('a', 1)`: Druid matches the text '1'


def _implicit_cast_pair(con, node: dict, sides: list[dict], kinds: _Kinds) -> None:
    """Two operands: text next to a number becomes that number's type; next to a
    timestamp, in a comparison, a time of the session's zone."""
    found = [kinds.of(side) for side in sides]
    for side, kind, other in ((sides[0], found[0], found[1]), (sides[1], found[1], found[0])):
        if kind == "string" and other in _ENGINE_TYPE:
            _cast(con, side, _ENGINE_TYPE[other])
        elif kind == "string" and other == "timestamp" and node.get("class") == "COMPARISON":
            _local_time_text(con, [side])


def _local_time_text(con, nodes: list[dict]) -> None:
    """Text compared with a timestamp is a time of the session's `sqlTimeZone`."""
    from metastore.sql_druid_time import from_local, session_zone

    if session_zone() == "UTC":
        return
    for node in nodes:
        if node.get("class") == "CONSTANT" and node["literal"].get("kind") == "STRING":
            text = from_local("CAST($a0 AS TIMESTAMP)", session_zone())
            _replace(node, _substitute(_template_node(con, text), [copy.deepcopy(node)]))


def _mv_refs(node, kinds: _Kinds) -> list[dict]:
    return [
        n
        for n in _walk(node, into_mv=False)
        if (column := kinds.column(n)) is not None and column[1] == "mv"
    ]


def _any_value(con, atom: dict, kinds: _Kinds) -> None:
    """A filter on a multi-value string: true if it holds for any of the values (a
    null or empty row is one null value)."""
    if atom.get("class") == "SUBQUERY":
        _any_value_in(con, atom, kinds)
        return
    refs = _mv_refs(atom, kinds)
    if not refs:
        return
    column = copy.deepcopy(refs[0])
    same = [r for r in refs if kinds.column(r) == kinds.column(refs[0])]
    for ref in same:
        ref.clear()
        ref.update({"class": "COLUMN_REF", "type": "COLUMN_REF", "column_names": [_VALUE]})
        ref["alias"] = ""
    body = copy.deepcopy(atom)
    negated = _positive(body)  # `tags <> 'a'`: no value is 'a', as Druid's NOT(selector)
    values = "CASE WHEN len(druid_mv($a0)) > 0 THEN druid_mv($a0) ELSE [NULL::VARCHAR] END"
    text = f"list_bool_or(list_transform({values}, lambda {_VALUE}: $a1))"
    _replace(
        atom, _substitute(_template_node(con, f"NOT {text}" if negated else text), [column, body])
    )


def _any_value_in(con, atom: dict, kinds: _Kinds) -> None:
    """`tags IN (SELECT ...)`: some value of the row is one the subquery gives (a
    subquery cannot sit in the per-value lambda: the values meet the list it gives)."""
    child = atom.get("child") or {}
    found = kinds.column(child)
    if atom.get("subquery_type") != "ANY" or not found or found[1] != "mv":
        return
    values = "CASE WHEN len(druid_mv($a0)) > 0 THEN druid_mv($a0) ELSE [NULL::VARCHAR] END"
    text = (
        f"list_has_any({values}, (SELECT list(druid_in_value) "
        "FROM (SELECT NULL) AS druid_in(druid_in_value)))"
    )
    new = _substitute(_template_node(con, text), [copy.deepcopy(child)])
    for node in _all_dicts(new):
        if node.get("type") == "SUBQUERY" and node.get("alias") == "druid_in":
            node["subquery"] = atom["subquery"]
    _replace(atom, new)


def _all_dicts(tree):
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend(item)


_NEGATED = {
    "COMPARE_NOTEQUAL": "COMPARE_EQUAL",
    "COMPARE_NOT_IN": "COMPARE_IN",
    "OPERATOR_IS_NOT_NULL": "OPERATOR_IS_NULL",
}
_NEGATED_LIKE = {"!~~": "~~", "!~~*": "~~*"}


def _positive(predicate: dict) -> bool:
    """Turn a negative predicate (<>, NOT IN, IS NOT NULL, NOT LIKE) into its positive
    form, in place; whether it was negative."""
    if predicate.get("type") in _NEGATED:
        predicate["type"] = _NEGATED[predicate["type"]]
        return True
    name = predicate.get("function_name")
    if name in _NEGATED_LIKE:
        predicate["function_name"] = _NEGATED_LIKE[name]
        if "qualified_name" in predicate:
            predicate["qualified_name"] = {"path": [_NEGATED_LIKE[name]]}
        return True
    return False


def _filter_atoms(node):
    """The predicates of a filter under its AND, OR and NOT."""
    stack = [node]
    while stack:
        item = stack.pop()
        if not isinstance(item, dict):
            continue
        if item.get("class") == "CONJUNCTION" or item.get("type") == "OPERATOR_NOT":
            stack.extend(item.get("children") or [])
        else:
            yield item


def _multi_value(con, select: dict, kinds: _Kinds, *, grouped=False, strings=frozenset()) -> None:
    """Druid's multi-value strings in one SELECT: filters match any value, GROUP BY
    (and an IN list's subquery, `grouped`) unnests, other expressions map over
    the values."""
    filters = [select.get("where_clause")]
    for part in (select.get("select_list") or []) + [select.get("having")]:
        filters.extend(n.get("filter") for n in _walk(part) if n.get("filter"))
    for where in filters:
        for atom in list(_filter_atoms(where)):
            _any_value(con, atom, kinds)
    if select.get("from_table", {}).get("type") in ("BASE_TABLE", "SUBQUERY"):
        columns = _grouped_multi_value(select, kinds)
        if grouped and not select.get("group_expressions"):
            columns = _selected_multi_value(select, kinds)
        for column in columns:
            _unnest_for_grouping(con, select, kinds, column)
        if select.get("group_expressions"):
            _unnest_grouped_lists(con, select, kinds)
        if not columns and not select.get("group_expressions"):
            for item in select.get("select_list") or []:
                if _shape({**item, "alias": ""}) in strings:
                    _map_values(con, item, kinds)
    for node in [n for part in _expressions(select) for n in _walk(part)]:
        if node.get("function_name") == "druid_mv" and _call_args(node):
            argument = _call_args(node)[0]  # MV_CONTAINS(SUBSTRING(tags, 1, 1), ...)
            if _shape({**argument, "alias": ""}) in strings:
                _map_values(con, argument, kinds, whole=True)


def _selected_multi_value(select: dict, kinds: _Kinds) -> list[str]:
    found: list[str] = []
    for item in select.get("select_list") or []:
        for ref in _mv_refs(item, kinds):
            if kinds.column(ref)[0] not in found:
                found.append(kinds.column(ref)[0])
    return found


def _map_values(con, item: dict, kinds: _Kinds, *, whole: bool = False) -> None:
    """A string function of one multi-value string outside GROUP BY and filters is
    applied to each of its values, as Druid maps it (`concat(tags, 'x')` of ["a","b"]
    is ["ax","bx"]); aggregates and the MV_ functions (which take the values as a
    whole) are left as they are."""
    refs = _mv_refs(item, kinds)
    if not refs or item.get("class") == "COLUMN_REF":
        return
    if len({kinds.column(r)[0] for r in refs}) != 1:
        return  # two multi-value strings: no one mapping (Druid takes their cartesian product)
    if any(
        n.get("class") in ("FUNCTION", "WINDOW") and n.get("function_name") in _AGGREGATES
        for n in _walk(item)
    ):
        return
    column = copy.deepcopy(refs[0])
    for ref in refs:
        ref.clear()
        ref.update({"class": "COLUMN_REF", "type": "COLUMN_REF", "column_names": [_VALUE]})
        ref["alias"] = ""
    body = copy.deepcopy(item)
    body["alias"] = ""
    text = f"list_transform(druid_mv($a0), lambda {_VALUE}: $a1)"
    text = text if whole else f"druid_mv_out({text})"  # `whole`: the list, to an MV_ function
    _replace(item, _substitute(_template_node(con, text), [column, body]))


def _grouped_expressions(select: dict, kinds: _Kinds) -> list[tuple[int, dict]]:
    """(index in GROUP BY, the expression grouped on: the select item a position or
    alias names, else the GROUP BY expression itself)."""
    items = select.get("select_list") or []
    aliases = {str(i.get("alias", "")).lower(): i for i in items if i.get("alias")}
    found = []
    for index, expression in enumerate(select.get("group_expressions") or []):
        literal = expression.get("literal", {}) if expression.get("class") == "CONSTANT" else {}
        if literal.get("kind") == "INTEGER" and 0 < int(literal["text"]) <= len(items):
            expression = items[int(literal["text"]) - 1]
        elif expression.get("class") == "POSITIONAL_REFERENCE":
            position = int(expression.get("index") or 0)
            expression = items[position - 1] if 0 < position <= len(items) else expression
        elif expression.get("class") == "COLUMN_REF" and kinds.column(expression) is None:
            names = expression.get("column_names") or []
            expression = aliases.get(str(names[-1]).lower(), expression) if names else expression
        found.append((index, expression))
    return found


def _grouped_multi_value(select: dict, kinds: _Kinds) -> list[str]:
    """The multi-value columns a GROUP BY groups on (by name, position or alias)."""
    found: list[str] = []
    for _, expression in _grouped_expressions(select, kinds):
        for ref in _mv_refs(expression, kinds):
            if kinds.column(ref)[0] not in found:
                found.append(kinds.column(ref)[0])
    return found


def _shape(node: dict) -> str:
    return re.sub(r'"query_location(?:_length)?": ?\d+,? ?', "", json.dumps(node, sort_keys=True))


def _unnest_grouped_lists(con, select: dict, kinds: _Kinds) -> None:
    """GROUP BY the multi-value result of an MV_ function (`MV_APPEND(tags, 'x')`):
    the row once per value of the result (null when it has none), as Druid groups."""
    groups = select.get("group_expressions") or []
    items = select.get("select_list") or []
    for n, (index, expression) in enumerate(_grouped_expressions(select, kinds)):
        if expression.get("function_name") != "druid_mv_out":
            continue
        name = f"druid_group${n}"
        shape = _shape({**expression, "alias": ""})
        values = copy.deepcopy(_call_args(expression)[0])
        _unnest_in_from(con, select, name, "$a0", [values])
        for node in [groups[index], *items]:
            if node is expression or _shape({**node, "alias": ""}) == shape:
                alias = node.get("alias", "")
                node.clear()
                node.update({"class": "COLUMN_REF", "type": "COLUMN_REF", "column_names": [name]})
                node["alias"] = alias


def _unnest_in_from(con, select: dict, name: str, values: str, args: list[dict]) -> None:
    """The SELECT's table, read through `SELECT *, unnest(<values, or [NULL] if none>)
    AS name` (under the table's own alias)."""
    table = select["from_table"]
    alias = table.get("alias") or table.get("table_name") or ""
    listed = f"CASE WHEN len({values}) > 0 THEN {values} ELSE [NULL::VARCHAR] END"
    quoted = name.replace('"', '""')
    template = _parse(
        con,
        f'SELECT * FROM (SELECT *, unnest({listed}) AS "{quoted}" FROM druid_unnest_source) AS a',
    )
    template = _substitute(template, args)
    subquery = template["statements"][0]["node"]["from_table"]
    subquery["alias"] = alias
    subquery["subquery"]["node"]["from_table"] = copy.deepcopy(table)
    select["from_table"] = subquery


def _unnest_for_grouping(con, select: dict, kinds: _Kinds, column: str) -> None:
    """GROUP BY a multi-value string: the row once per value (null when it has none),
    as Druid groups; the filters above still see the whole row."""
    value_name = f"{column}$value"
    for part in _expressions(select):
        if part is select.get("where_clause"):
            continue
        for ref in list(_walk(part, into_mv=False)):
            found = kinds.column(ref)
            if found and found[0] == column:
                ref["column_names"] = [*ref["column_names"][:-1], value_name]
    for item in select.get("select_list") or []:
        if item.get("column_names") and item["column_names"][-1] == value_name:
            item["alias"] = item.get("alias") or column
    quoted = column.replace('"', '""')
    _unnest_in_from(con, select, value_name, f'druid_mv("{quoted}")', [])


class TableKinds:
    """A table's column kinds (see above) from its segment files. Whether a string
    column is a multi-value string (a JSON list of strings in some row) is found when
    first asked, from the row groups' statistics and, where they cannot tell, by
    reading that column of those files; cached per column (segment files never change)."""

    def __init__(self, files) -> None:
        self.files = tuple(files)
        self.base: dict[str, str] = {}
        self.candidates: dict[str, list[str]] = {}  # column: files that may hold lists
        for path in self.files:
            kinds, candidates = _file_kinds_of(path)
            for column, kind in kinds.items():
                self.base.setdefault(column, kind)
            for column in candidates:
                self.candidates.setdefault(column, []).append(path)
        self.multi_value: dict[str, bool] = {}

    def __contains__(self, column: str) -> bool:
        return column in self.base

    def get(self, column: str, *, probe: bool = True) -> str | None:
        kind = self.base.get(column)
        if kind != "string" or not probe or column not in self.candidates:
            return kind
        if column not in self.multi_value:
            self.multi_value[column] = _holds_lists(self.candidates[column], column)
        return "mv" if self.multi_value[column] else "string"


_file_kinds: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {}
_table_kinds: dict[tuple, TableKinds] = {}


def table_kinds(files) -> TableKinds:
    """The kinds of the columns of a table made of `files`, cached by the files."""
    key = tuple(files)
    found = _table_kinds.get(key)
    if found is None:
        found = TableKinds(key)
        if len(_table_kinds) > 1_000:
            _table_kinds.clear()
        _table_kinds[key] = found
    return found


def _arrow_kind(arrow_type) -> str:
    import pyarrow as pa

    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        element = arrow_type.value_type
        return "mv" if pa.types.is_string(element) or pa.types.is_large_string(element) else "other"
    if pa.types.is_integer(arrow_type):
        return "long"
    if pa.types.is_floating(arrow_type):
        return "double"
    if pa.types.is_timestamp(arrow_type):
        return "timestamp"
    return "other"


def _file_kinds_of(path: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """(kind by column, the string columns whose statistics allow a `[...` value)."""
    found = _file_kinds.get(path)
    if found is not None:
        return found
    import pyarrow.parquet as pq

    try:
        metadata = pq.read_metadata(path)
    except OSError:  # missing from deep storage: binding the table says so
        return {}, ()
    schema = metadata.schema.to_arrow_schema()
    kinds = {column.name.lower(): _arrow_kind(column.type) for column in schema}
    leaves = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    candidates = tuple(
        column.name.lower()
        for column in schema
        if kinds[column.name.lower()] == "string"
        and column.name in leaves
        and _may_hold_lists(metadata, leaves[column.name])
    )
    if len(_file_kinds) > 100_000:
        _file_kinds.clear()
    _file_kinds[path] = found = (kinds, candidates)
    return found


def _may_hold_lists(metadata, index: int) -> bool:
    """Whether a value may start with `[`, by the row groups' min/max statistics."""
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(index).statistics
        if stats is None or not stats.has_min_max:
            if metadata.row_group(group).num_rows:
                return True
            continue
        low, high = (
            v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            for v in (stats.min, stats.max)
        )
        if low < "\\" and high >= "[":
            return True
    return False


def _holds_lists(files: list[str], column: str) -> bool:
    """Whether some row of `column` in `files` is a JSON list of strings, as ingestion
    stores a multi-value string (a JSON dimension's list of numbers is not one)."""
    import duckdb

    name = '"' + column.replace('"', '""') + '"'
    con = duckdb.connect()
    try:
        rows = con.execute(
            f"SELECT {name} FROM read_parquet(?, union_by_name = true) "
            f"WHERE starts_with({name}, '[') AND json_valid({name}) "
            f"AND json_type({name}) = 'ARRAY' LIMIT 64",
            [list(files)],
        ).fetchall()
    finally:
        con.close()
    return any(all(isinstance(v, str) for v in json.loads(value)) for (value,) in rows)
