"""Druid's expression grammar in Lark's notation, translated from Druid's ANTLR grammar
`processing/src/main/antlr4/org/apache/druid/math/expr/antlr/Expr.g4`.

Kept as Druid has it: `-` and `!` bind tightest (`-2^2` is 4), then `^`
(right-associative), `* / %`, `+ -`, the comparisons, and `&&`/`||` (one level,
left to right, as in Expr.g4); a lambda (`x -> ...`, `(x, y) -> ...`, `() -> ...`)
only as a function's first argument (Strata parses one anywhere and its emitters refuse it
elsewhere, saying so); array literals of literals, optionally typed
(`<LONG>[1, 2]`, `ARRAY<STRING>['a']`). Three tolerances Strata had before and keeps:
array elements may be signed numbers and may be separated by spaces only
(`['a' 'b']`), a double may start with its dot (`.5`), and an exponent
may have a `+`.

Lark's LALR(1) parser cannot tell `(x) -> ...` from `(x)` by the next token, so
the lexer reads a lambda's parameter list and its arrow as one token
(`LAMBDA_PARAMS`, `LAMBDA_PARAM`), tried before `(` and names.
"""

GRAMMAR = r"""
?start: _expr

// Operators at every level are one flat chain here (operand, operator, operand...);
// parse.py nests it by Druid's precedence table. One rule instead of a rule per
// level keeps the LALR parser from reducing through six levels for every operand.
_expr: chain
?chain: unary (OPERATOR unary)*

OPERATOR: "||" | "&&" | "<=" | ">=" | "==" | "!=" | "<" | ">" | "+" | "-" | "*" | "/" | "%" | "^"

?unary: atom
    | "-" unary -> neg
    | "!" unary -> not_

?atom: "(" _expr ")"
    | call
    | NAME -> identifier
    | QUOTED_NAME -> quoted_identifier
    | literal
    | array
    | lambda

call: NAME "(" [_expr ("," _expr)*] ")"

lambda: (LAMBDA_PARAMS | LAMBDA_PARAM) _expr

?literal: LONG -> long
    | DOUBLE -> double
    | NAN -> double
    | INFINITY -> double
    | STRING -> string
    | NULL -> null

array: [ARRAY_TYPE] "[" [element (","? element)*] "]"

// The sign is an OPERATOR token, not a "-" of its own: LALR shares the state after a
// number between an array and an operator chain, where a "-" terminal of its own would
// win the contextual lexer and `1 - x` would not parse.
?element: literal
    | OPERATOR (LONG | DOUBLE | INFINITY) -> negative

ARRAY_TYPE.2: /<(LONG|DOUBLE|STRING)>/
    | /ARRAY<(ARRAY<)*(LONG|DOUBLE|STRING|COMPLEX<[_$a-zA-Z][_$a-zA-Z0-9]*>)>+/

LAMBDA_PARAMS.3: /\(\s*([_$a-zA-Z][_$a-zA-Z0-9]*\s*(,\s*[_$a-zA-Z][_$a-zA-Z0-9]*\s*)*)?\)\s*->/
LAMBDA_PARAM.3: /[_$a-zA-Z][_$a-zA-Z0-9]*\s*->/

NULL: "null"
NAN: "NaN"
INFINITY: "Infinity"
NAME: /[_$a-zA-Z][_$a-zA-Z0-9]*/
QUOTED_NAME: /"(\\.|[^"\\])*"/
STRING: /'(\\.|[^'\\])*'/
DOUBLE: /[0-9]+\.[0-9]*([eE][-+]?[0-9]+)?|\.[0-9]+([eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+/
LONG: /[0-9]+/

%ignore /[ \t\r\n]+/
"""
