"""Bash arithmetic expansion ``$(( expr ))`` of a launch script, as far as it decides a flag.

Launch scripts compute sizes: ``WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES))``,
``GBS=$((DP * MBS * GRAD_ACC))``. Bash evaluates the expression in integers ("Shell Arithmetic",
GNU Bash Reference Manual §6.5): ``+ - * / % **``, unary ``-`` and ``+``, parentheses; ``/``
truncates toward zero; a bare name inside is the variable's value. The importer's reader runs no
shell, so an expression is replaced by its value only where every name in it is a variable the
file sets to an integer; otherwise it stays as written, and a flag holding it is reported as
unresolved, as a flag holding an unset variable is.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping

_NAME = re.compile(r"[A-Za-z_]\w*")
_INT = re.compile(r"[+-]?\d+")
_BINARY: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Mod: operator.mod,
}
_MAX_DIGITS = 30       # a value no launch flag holds; stops 10**10**10 before it is computed


def arith_span(text: str, start: int) -> int | None:
    """End (exclusive) of the ``$(( ... ))`` that starts at ``start``, or None where the
    parentheses do not close as ``))``."""
    depth = 0
    for i in range(start + 1, len(text)):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1 if text[i - 1] == ")" and i - 1 > start + 2 else None
    return None


def _value(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _value(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp):
        a, b = _value(node.left), _value(node.right)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Div):          # bash: integer division, truncated toward zero
            return None if b == 0 else abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        if isinstance(node.op, ast.Pow):
            return a ** b if b >= 0 and len(str(abs(a))) * b <= _MAX_DIGITS else None
        if isinstance(node.op, ast.Mod) and b == 0:
            return None
        fn = _BINARY.get(type(node.op))
        if fn is None:
            return None
        out = fn(a, b)
        if isinstance(node.op, ast.Mod) and out and (a < 0) != (out < 0):   # bash: the sign of the dividend
            out -= b
        return out if len(str(abs(out))) <= _MAX_DIGITS else None
    return None


def evaluate(expr: str, env: Mapping[str, str]) -> str | None:
    """The value of a bash arithmetic expression (the text between ``$((`` and ``))``, its ``$NAME``
    already substituted) as decimal text, or None when it holds a name the file does not set to
    an integer or anything beyond integer ``+ - * / % **`` and parentheses."""
    missing = False

    def name(m: re.Match[str]) -> str:
        nonlocal missing
        value = env.get(m.group(0), "").strip()
        if not _INT.fullmatch(value):
            missing = True
            return "0"
        return f"({int(value)})"

    text = _NAME.sub(name, expr)
    if missing or not text.strip():
        return None
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None
    out = _value(tree.body)
    return None if out is None else str(out)


def expand_arithmetic(text: str, env: Mapping[str, str]) -> str:
    """``text`` with every ``$(( expr ))`` that ``evaluate`` can value replaced by its value."""
    out, i = [], 0
    while True:
        j = text.find("$((", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        end = arith_span(text, j)
        if end is None:
            out.append(text[i:j + 3])
            i = j + 3
            continue
        value = evaluate(text[j + 3:end - 2], env)
        out.append(text[i:j] + (text[j:end] if value is None else value))
        i = end
