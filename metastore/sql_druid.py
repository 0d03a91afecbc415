"""Druid SQL's functions on the engine's parse tree (no Django).

A query sent to Druid's SQL endpoint means what it means in Druid: each call of a
function in Druid's SQL function reference is replaced, on DuckDB's parse tree,
by the DuckDB expression with Druid's meaning (`metastore.sql_druid_rules` holds
one rule per function: the engine's SQL for it, or why it is refused); a call of
any other function -- one only DuckDB has -- is refused as Druid refuses it. The
rewritten tree then goes through `metastore.sql_guard.check` like every query, so
what runs is still only what the guard's allow-lists name.

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

from metastore.sql_guard import SqlRefused

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


def _template_node(con, text: str) -> dict:
    from metastore.sql_guard import memoized

    tree = json.loads(memoized(con, "json_serialize_sql", f"SELECT {text}"))
    if tree.get("error"):  # a rule's own SQL: a bug here, not the user's query
        raise RuntimeError(f"bad rule SQL {text!r}: {tree.get('error_message')}")
    return tree["statements"][0]["node"]["select_list"][0]


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
    if call.node.get("function_name") == "count_star":
        count = 1
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


def translate(con, sql: str, tree: dict, rules: dict[str, Rule]) -> None:
    """Rewrite every Druid function call of `tree` (parsed from `sql`) in place into
    the engine's SQL for it; refuse calls of functions Druid SQL does not have."""
    for node, is_table in reversed(_function_nodes(tree)):
        engine = node.get("function_name", "")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", engine):
            operator = rules.get(engine)
            if operator is not None and operator.sql is not None:
                _replace(node, translate_call(con, Call(engine, _call_args(node), node), operator))
            continue  # an operator (+, ||, ~~ ...): the guard decides
        name = written_name(sql, node)
        if name is None:
            continue  # standard syntax (INTERVAL, SIMILAR TO, a[1]): the guard decides
        rule = rules.get(name)
        if rule is None:
            raise DruidFunctionRefused(f"No match found for function signature {name}")
        if is_table and rule.kind != "table":
            raise DruidFunctionRefused(f"{name} is not a table function")
        call = Call(name, _call_args(node), node, window=node.get("class") == "WINDOW")
        if call.window:
            _whole_partition_frame(node)
        _replace(node, translate_call(con, call, rule))


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
        location = node.get("query_location")
        node.clear()
        node.update(new)
        node["query_location"] = location


_ENGINE_PREFIX = re.compile(
    r"^(?:cannot parse the query: )?(?:Invalid Input|Conversion|Out of Range|Binder|Parser|"
    r"Catalog|Not implemented|Constraint|Mismatch Type|Type|Invalid type|Invalid Configuration)"
    r" Error: "
)
_NO_MATCH = re.compile(
    r"(?:No function matches the given name and argument types '|"
    r"Could not choose a best candidate function for the function call \")(\w+)\((.*?)\)['\"]"
)
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
    match = _NO_COLUMN.search(stripped)
    if match:
        return f"Column '{match.group(1)}' not found in any table"
    if text.startswith("cannot parse the query: "):
        return f"cannot parse the query: {stripped}"
    return stripped
