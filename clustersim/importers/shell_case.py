"""Bash ``case`` blocks of a launch script, rewritten as the ``if``/``elif`` chain bash runs.

Launch scripts pick a model's shape by name::

    case $MODEL_SIZE in
      7B)  HIDDEN=4096; LAYERS=32 ;;
      13B|13b) HIDDEN=5120; LAYERS=40 ;;
      *) echo "unknown size"; exit 1 ;;
    esac

Bash runs the commands of the first item whose pattern matches the word and no other (GNU Bash
Reference Manual §3.2.5.2, "Conditional Constructs": ``case``; ``|`` separates patterns, ``;;``
ends an item). Read line by line without this, every item's assignments ran and the last one won
(the 13B shape above). The rewrite gives the importer's branch reader
(clustersim.importers.megatron_parse) ``if [[ WORD == P1 ]] || [[ WORD == P2 ]]`` / ``elif`` ... ``fi``,
one command per line, which it decides on the file's own variables like any ``if`` (a word it
cannot know keeps every item and refuses what they set). ``;&`` and ``;;&`` (fall through to the
next item) are refused by name: which items run is then not one branch.
"""

from __future__ import annotations

import re

from clustersim.errors import InputError

_CASE = re.compile(r"^case\s+(.+?)\s+in\b\s*(.*)$")
_PATTERN = re.compile(r"^\(?\s*([^()]*?)\s*\)\s*(.*)$")


def split_unquoted(text: str, sep: str) -> list[str]:
    """``text`` split at each ``sep`` outside quotes."""
    out, quote, start, i = [], "", 0, 0
    while i < len(text):
        c = text[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif text.startswith(sep, i):
            out.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    out.append(text[start:])
    return out


def _condition(word: str, patterns: str) -> str:
    """``[[ WORD == P ]]`` for each ``|``-separated pattern, joined with ``||`` (``*`` matches all)."""
    parts = [p.strip() for p in split_unquoted(patterns, "|") if p.strip()]
    if "*" in parts:
        return "[ 1 = 1 ]"
    return " || ".join(f"[[ {word} == {p} ]]" for p in parts) or "[ 1 = 0 ]"


def _item_body(word: str, line: str) -> tuple[list[str], str | None]:
    """An item's commands on ``line`` (one per ``;``) and what follows its ``;;`` (None: no ``;;`` yet)."""
    body, *rest = split_unquoted(line, ";;")
    commands = split_unquoted(body, ";")
    if any(s.startswith("&") for s in rest[:1]) or any(s.startswith("&") for s in commands[1:]):
        raise InputError("case", f"case {word} in", "items ended by ;; (one item runs); ;& and ;;& fall through "
                                                    "to the next item, which clustersim does not follow")
    cmds = [c.strip() for c in commands if c.strip()]
    return cmds, (";;".join(rest).strip() if rest else None)


def case_to_if(lines: list[str]) -> list[str]:
    """The script's lines with every ``case ... esac`` rewritten as ``if``/``elif``/``fi``."""
    out: list[str] = []
    stack: list[list[object]] = []          # per open case: [word, items so far, expecting a pattern]
    for raw in lines:
        line = raw.strip()
        m = _CASE.match(line)
        if m:
            stack.append([m.group(1), 0, True])
            line = m.group(2).strip()
        elif not stack:
            out.append(raw)
            continue
        while line and stack:
            frame = stack[-1]
            if re.match(r"esac\b", line):
                if frame[1]:
                    out.append("fi")
                stack.pop()
                line = line[4:].lstrip(" ;")
                continue
            if frame[2]:
                p = _PATTERN.match(line)
                if p is None:              # not a pattern: bash would refuse the script; keep the line
                    out.append(line)
                    break
                frame[1] = int(frame[1]) + 1  # type: ignore[call-overload]
                out.append(f"{'if' if frame[1] == 1 else 'elif'} {_condition(str(frame[0]), p.group(1))}")
                frame[2] = False
                line = p.group(2).strip()
                continue
            cmds, after = _item_body(str(frame[0]), line)
            out.extend(cmds)
            frame[2] = after is not None
            line = after or ""
        if line and not stack:
            out.append(line)
    return out
