"""The parse tree of Druid's expression grammar (Expr.g4, as Lark reads it here):
precedence and associativity as Druid has them, literals and their escapes, typed
array literals, quoted identifiers, lambdas, and errors that say where."""

from __future__ import annotations

import pytest

from metastore.druid.expressions import ExpressionError, parse
from metastore.druid.expressions.tree import (
    ArrayLiteral,
    Binary,
    Call,
    DoubleLiteral,
    Identifier,
    Lambda,
    LongLiteral,
    NullLiteral,
    StringLiteral,
    Unary,
)

a, b, c = Identifier("a"), Identifier("b"), Identifier("c")


def one(value: int) -> LongLiteral:
    return LongLiteral(value)


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("a + b * c", Binary("+", a, Binary("*", b, c))),
        ("a - b - c", Binary("-", Binary("-", a, b), c)),  # left to right
        ("a ^ b ^ c", Binary("^", a, Binary("^", b, c))),  # ^ is right-associative
        ("-a ^ b", Binary("^", Unary("-", a), b)),  # unary binds tightest (Expr.g4)
        ("-2 ^ 2", Binary("^", one(-2), one(2))),  # a negated literal is folded
        ("!a && b", Binary("&&", Unary("!", a), b)),
        ("a || b && c", Binary("&&", Binary("||", a, b), c)),  # one level, left to right
        ("a < b == c", Binary("==", Binary("<", a, b), c)),
        ("a + b < c * 2", Binary("<", Binary("+", a, b), Binary("*", c, one(2)))),
        ("(a + b) * c", Binary("*", Binary("+", a, b), c)),
        ("a % b / c", Binary("/", Binary("%", a, b), c)),
        ("--a", Unary("-", Unary("-", a))),
    ],
)
def test_operators_nest_with_druids_precedence(text, tree):
    assert parse(text) == tree


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("42", LongLiteral(42)),
        ("4.", DoubleLiteral(4.0, "4.")),
        ("1.5e3", DoubleLiteral(1500.0, "1.5e3")),
        ("2e-1", DoubleLiteral(0.2, "2e-1")),
        ("-0.5", DoubleLiteral(-0.5, "-0.5")),
        ("'it\\'s'", StringLiteral("it's")),
        ("'a\\nb\\tc\\\\d'", StringLiteral("a\nb\tc\\d")),
        ("'\\u00e9t\\u00e9'", StringLiteral("été")),
        ("'\\d+'", StringLiteral("d+")),  # an unknown escape is its character, as Java's
        ("null", NullLiteral()),
        ("nullable", Identifier("nullable")),
        ('"a column"', Identifier("a column")),
        ('"say \\"hi\\""', Identifier('say "hi"')),
        ("$x_1", Identifier("$x_1")),
        ("ConCat(a, 'b')", Call("concat", (a, StringLiteral("b")))),  # names in any case
        ("pi()", Call("pi", ())),
    ],
)
def test_literals_and_names(text, tree):
    assert parse(text) == tree


def test_nan_and_infinity_are_doubles():
    assert parse("Infinity").value == float("inf")
    assert parse("-Infinity").value == float("-inf")
    nan = parse("NaN")
    assert isinstance(nan, DoubleLiteral) and nan.value != nan.value


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("[1, 2, 3]", ArrayLiteral(None, (one(1), one(2), one(3)))),
        ("[]", ArrayLiteral(None, ())),
        ("<LONG>[]", ArrayLiteral("LONG", ())),
        ("<DOUBLE>[1, null]", ArrayLiteral("DOUBLE", (one(1), NullLiteral()))),
        ("<STRING>['a']", ArrayLiteral("STRING", (StringLiteral("a"),))),
        ("ARRAY<LONG>[1, -2]", ArrayLiteral("LONG", (one(1), one(-2)))),
        ("['a' 'b']", ArrayLiteral(None, (StringLiteral("a"), StringLiteral("b")))),
    ],
)
def test_array_literals(text, tree):
    assert parse(text) == tree


@pytest.mark.parametrize(
    ("text", "params"),
    [
        ("map((x) -> x + 1, a)", ("x",)),
        ("map(x -> x + 1, a)", ("x",)),  # Expr.g4 allows a bare parameter
        ("fold((x, acc) -> x + acc, a, 0)", ("x", "acc")),
        ("fold(( x ,acc )->x + acc, a, 0)", ("x", "acc")),
        ("map(() -> 1, a)", ()),
    ],
)
def test_a_lambda_is_the_first_argument_of_an_apply_function(text, params):
    call = parse(text)
    assert isinstance(call, Call) and isinstance(call.args[0], Lambda)
    assert call.args[0].params == params


def test_a_parenthesized_name_is_not_a_lambda():
    assert parse("(x) + 1") == Binary("+", Identifier("x"), one(1))
    assert parse("f((x), 1)") == Call("f", (Identifier("x"), one(1)))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a +", "unexpected end of expression"),
        ("a ++ b", "at position 3"),
        ("a # b", "at position 2: unexpected '# b'"),
        ("f(a", "unexpected end of expression"),
        ("'unclosed", "at position 0"),
        ("[a]", "at position 1"),  # array literals hold literals
        ("", "is required"),
        ("(" * 300 + "1" + ")" * 300, "deeper than 200 levels"),
    ],
)
def test_what_does_not_parse_is_refused_saying_where(text, words):
    with pytest.raises(ExpressionError, match=words.replace("(", r"\(").replace("+", r"\+")):
        parse(text)


def test_parsing_is_pure():
    import subprocess
    import sys

    code = (
        "import sys, metastore.druid.expressions; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'pyspark', 'duckdb')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
