"""Bash and-or lists that guard a command with a test, rewritten as the ``if`` they stand for.

Launch scripts switch features on one line::

    [ "$USE_FP8" = "1" ] && ARGS+=(--fp8-format hybrid)
    [[ $SEQ -gt 4096 ]] || ARGS+=(--no-rope-fusion)
    [ -n "$CKPT" ] && LOAD=--load $CKPT || LOAD=

Bash runs the command after ``&&`` only when the test succeeds, after ``||`` only when it fails
(GNU Bash Reference Manual §3.2.4, "Lists of Commands"). Read as plain lines, the guarded flags
were always taken (an fp8 job from a script that said ``USE_FP8=0``). The rewrite gives the
importer's branch reader (clustersim.importers.megatron_parse) ``if TEST`` / ``COMMAND`` /
``fi`` (``else`` for ``||``; ``A && B || C`` as if/else), which it decides on the file's own
variables like any ``if``, and refuses by name where it cannot.
"""

from __future__ import annotations

import re

from clustersim.importers.shell_case import split_unquoted

_TEST = re.compile(r"^(!\s+)?(\[\[\s.*?\s\]\]|\[\s.*?\s\]|test\s[^&|]*?)\s*(&&|\|\|)\s*(.*)$")


def _guarded(line: str) -> tuple[str, str, str] | None:
    """(the tests with their operators, the last operator, the command) of ``TEST && ... CMD``."""
    cond, rest, op = "", line, ""
    while True:
        m = _TEST.match(rest)
        if m is None:
            break
        cond += (f" {op} " if cond else "") + (m.group(1) or "") + m.group(2)
        op, rest = m.group(3), m.group(4).strip()
    if not cond or not rest or rest.startswith(("[", "test ")):
        return None
    return cond, op, rest


def and_or_to_if(lines: list[str]) -> list[str]:
    """The script's lines with every ``TEST && COMMAND`` / ``TEST || COMMAND`` (and ``TEST && A || B``)
    rewritten as ``if``/``else``/``fi`` lines."""
    out: list[str] = []
    for raw in lines:
        g = _guarded(raw.strip())
        if g is None:
            out.append(raw)
            continue
        cond, op, command = g
        if op == "||":
            out += [f"if {cond}", "else", command, "fi"]
            continue
        then, *otherwise = split_unquoted(command, "||")
        out += [f"if {cond}", then.strip()]
        if otherwise:
            out += ["else", "||".join(otherwise).strip()]
        out.append("fi")
    return out
