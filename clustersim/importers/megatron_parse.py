"""Megatron-LM's arguments as text -> ``{dest: value}``: the ``arguments`` block of a training log,
or a launch command line (a file of arguments, a shell script with variables, a torchrun line).

Names are Megatron's own attribute names (``tensor_model_parallel_size``, the argparse ``dest`` of
``--tensor-model-parallel-size``; megatron/training/arguments.py). The mapping onto a scenario is
``clustersim.importers.megatron_args``.
"""

from __future__ import annotations

import ast
import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from clustersim.errors import InputError
from clustersim.importers.common import clean_line, config_int
from clustersim.importers.shell_arith import arith_span, expand_arithmetic
from clustersim.importers.shell_case import case_to_if
from clustersim.importers.shell_lists import and_or_to_if
from clustersim.limits import MAX_COUNT

# megatron/training/arguments.py _print_args: a title line, "  name ....... value" lines sorted by
# name (48 - len(name) dots), and "-------------------- end of arguments ---------------------"
ARGS_START = re.compile(r"-{3,}\s*arguments\s*-{3,}")
ARGS_END = re.compile(r"-{3,}\s*end of arguments\s*-{3,}")
ARGS_LINE = re.compile(r"^\s*([A-Za-z_]\w*)\s+(?:\.+\s+)?(.*?)\s*$")


@dataclass
class MegatronArgs:
    values: dict[str, Any]
    source: str                              # "arguments block" | "command line"
    launcher: dict[str, Any] = field(default_factory=dict)   # torchrun: nproc_per_node, nnodes
    unresolved: list[str] = field(default_factory=list)      # flags whose value was a shell variable
    undecided: list[str] = field(default_factory=list)       # ... one set in a branch the reader cannot decide
    script: str = ""                                         # the launched script (pretrain_gpt.py), if seen

    def get(self, name: str, default: Any = None) -> Any:
        v = self.values.get(name, default)
        return default if v is None else v


def parse_value(text: str) -> Any:
    """A printed Python value: None, True, 8, 0.0001, [1, 2], 'x'; anything else as text."""
    text = text.strip()
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # TypeError: {[1]: 2}
        return text
    return value if not isinstance(value, float) or math.isfinite(value) else text  # 1e999 is not a number


def args_blocks(text: str) -> list[tuple[int, MegatronArgs]]:
    """Every complete ``arguments`` block of a log, in order, each with the index of its first
    line in ``text.splitlines()`` (a restarted run prints one per start)."""
    lines = [clean_line(line) for line in text.splitlines()]
    start = None
    blocks = []
    for i, line in enumerate(lines):
        if ARGS_START.search(line) and "end of" not in line:
            start = i
        elif ARGS_END.search(line) and start is not None:
            blocks.append((start, i))
            start = None
    out = []
    for a, b in blocks:
        values: dict[str, Any] = {}
        for line in lines[a + 1:b]:
            m = ARGS_LINE.match(line)
            if m:
                values[m.group(1)] = parse_value(m.group(2))
        out.append((a, MegatronArgs(values, "arguments block")))
    return out


def parse_args_block(text: str) -> MegatronArgs | None:
    """The last complete ``arguments`` block of a log (None if it has none)."""
    blocks = args_blocks(text)
    return blocks[-1][1] if blocks else None


# -- command lines ----------------------------------------------------------------------------

# flags whose argparse dest is not the flag's name, or that store a constant
# (megatron/training/arguments.py; older names from Megatron-LM 2021-2023)
FLAG_DEST: dict[str, tuple[str, Any]] = {
    "disable-bias-linear": ("add_bias_linear", False),
    "no-position-embedding": ("add_position_embedding", False),
    "no-masked-softmax-fusion": ("masked_softmax_fusion", False),
    "no-bias-gelu-fusion": ("bias_gelu_fusion", False),
    "no-bias-swiglu-fusion": ("bias_swiglu_fusion", False),
    "no-bias-dropout-fusion": ("bias_dropout_fusion", False),
    "no-gradient-accumulation-fusion": ("gradient_accumulation_fusion", False),
    "no-overlap-p2p-communication": ("overlap_p2p_comm", False),
    "overlap-p2p-communication-warmup-flush": ("overlap_p2p_comm_warmup_flush", True),
    "no-persist-layer-norm": ("persist_layer_norm", False),
    "no-async-tensor-model-parallel-allreduce": ("async_tensor_model_parallel_allreduce", False),
    "no-load-optim": ("load_optim", False),
    "no-load-rng": ("load_rng", False),
    "no-save-optim": ("save_optim", False),
    "no-save-rng": ("save_rng", False),
    "fp8-format": ("fp8", None),                      # --fp8-format hybrid -> args.fp8 = "hybrid"
    "fp4-format": ("fp4", None),                      # --fp4-format e2m1 -> args.fp4 = "e2m1" (Megatron-Core NVFP4)
    "model-parallel-size": ("tensor_model_parallel_size", None),   # pre-2020 alias
    # microsoft/Megatron-DeepSpeed megatron/arguments.py: store_false flags of its MoE
    "disable-moe-token-dropping": ("moe_token_dropping", False),
    "disable-moe-top2-2nd-expert-sampling": ("moe_top2_2nd_expert_sampling", False),
}
TORCHRUN_FLAGS = {"nproc_per_node", "nproc-per-node", "nnodes", "node_rank", "node-rank", "master_addr",
                  "master-addr", "master_port", "master-port", "rdzv_endpoint", "rdzv-endpoint", "rdzv_backend",
                  "rdzv-backend", "rdzv_id", "rdzv-id", "standalone", "max_restarts", "max-restarts", "log_dir",
                  "log-dir", "redirects", "tee", "local_addr", "local-addr", "monitor_interval", "role", "no_python",
                  "module", "run_path"}
_ASSIGN = re.compile(r"^\s*(?:export\s+|declare\s+(?:-\w+\s+)?|local\s+|readonly\s+)?([A-Za-z_]\w*)=")
# $NAME, ${NAME}, ${NAME:-default}, ${NAME-default} (bash parameter expansion; a positional $1 or ${1:-x} too)
_VAR = re.compile(r"\$\{([A-Za-z_]\w*|\d+)(?:(:?-)((?:[^{}]|\{[^{}]*\})*))?\}|\$([A-Za-z_]\w*|\d)")


def _assigned_word(rest: str) -> str | None:
    """The value word of ``NAME=...`` up to unquoted white space (None for an array ``NAME=(``, an
    unquoted command substitution ``$(...)``, or a command after the assignment: the reader runs
    nothing; quoted text is taken as it stands; an arithmetic expansion ``$((...))`` is one part
    of the word, clustersim.importers.shell_arith)."""
    i, quote, depth = 0, "", 0
    while i < len(rest):
        c = rest[i]
        if rest.startswith("$((", i) and (end := arith_span(rest, i)) is not None:
            i = end
            continue
        if quote:
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif rest.startswith("${", i):
            depth += 1
            i += 1
        elif c == "}" and depth:
            depth -= 1
        elif c.isspace() and not depth:
            break
        elif c in "();|&<>" and not depth:
            return None
        i += 1
    tail = rest[i:].strip()
    if quote or depth or (tail and not tail.startswith("#")):
        return None
    return rest[:i]


def _unquote(word: str) -> str:
    """A shell word without its quotes (single-quoted text is taken as it stands)."""
    out, quote = [], ""
    for c in word:
        if quote:
            if c == quote:
                quote = ""
            else:
                out.append(c)
        elif c in "\"'":
            quote = c
        else:
            out.append(c)
    return "".join(out)


def _expand(text: str, env: dict[str, str]) -> str:
    """Substitute the file's own variables as bash would. ``${NAME:-default}`` / ``${NAME-default}`` of a
    variable the file has not set gives the default: the job's environment and arguments are not the
    file's, so its stated default is the value (``TP=${TP:-4}`` is 4); ``$NAME`` of an unset variable
    stays as written (a flag holding it is reported unresolved). ``$(( expr ))`` of set integer
    variables becomes its value (clustersim.importers.shell_arith)."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        value = env.get(name)
        # ${NAME-default}: unset; ${NAME:-default}: unset or empty
        if m.group(2) is not None and (value is None or (m.group(2) == ":-" and value == "")):
            return _unquote(_expand(m.group(3), env))
        return m.group(0) if value is None else value
    for _ in range(3):  # values may hold other variables; then $(( arithmetic )) of them
        new = expand_arithmetic(_VAR.sub(sub, text), env)
        if new == text:
            break
        text = new
    return text


def _shell_env(lines: list[str]) -> dict[str, str]:
    """The simple assignments ``NAME=value`` of a script, in order (each value expanded with the
    variables set before it; bash arrays ``NAME=( ... )`` are read as their flags directly)."""
    env: dict[str, str] = {}
    for line in lines:
        _assign(line, env)
    return env


def _assign(line: str, env: dict[str, str]) -> None:
    """Record ``line``'s simple assignment ``NAME=value`` in ``env``, its value expanded with the
    variables set before it (nothing for other lines)."""
    m = _ASSIGN.match(line)
    if m:
        word = _assigned_word(line[m.end():])
        if word is not None:
            env[m.group(1)] = _unquote(_expand(word, env))


UNDECIDED = "CLUSTERSIM_UNDECIDED_BRANCH"   # stands for a value set in a branch the reader cannot decide
_IF = re.compile(r"^(if|elif)\s+(.*?)\s*(?:;\s*then)?\s*$")
_KEYWORD_SPLIT = re.compile(r";\s*(?=(?:then|else|elif|fi)\b)")   # ``; then`` ``; else`` ``; elif`` ``; fi``
_FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
_UNARY = {"-z": lambda v: v == "", "-n": lambda v: v != ""}
_BINARY = {"=": lambda a, b: a == b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
_NUMERIC = {"-eq": lambda a, b: a == b, "-ne": lambda a, b: a != b, "-lt": lambda a, b: a < b,
            "-le": lambda a, b: a <= b, "-gt": lambda a, b: a > b, "-ge": lambda a, b: a >= b}


def _split_keywords(lines: list[str]) -> list[str]:
    """One compound keyword per line: ``if C; then X; else Y; fi`` -> ``if C``, ``then``, ``X``,
    ``else``, ``Y``, ``fi`` (a ``;`` inside quotes there is not told apart)."""
    out: list[str] = []
    for line in lines:
        line = line.strip()
        if not re.match(r"(?:if|elif|then|else)\b", line):
            out.append(line)
            continue
        for piece in _KEYWORD_SPLIT.split(line):
            m = re.match(r"(then|else)\s+(\S.*)$", piece.strip())
            out.extend([m.group(1), m.group(2)] if m else [piece.strip()])
    return out


def _test(words: list[str], double: bool) -> bool | None:
    """One ``[ ... ]`` / ``[[ ... ]]`` / ``test`` expression on expanded words (None: not decidable here)."""
    if words[:1] == ["!"]:
        inner = _test(words[1:], double)
        return None if inner is None else not inner
    if len(words) == 1:
        return words[0] != ""
    if len(words) == 2 and words[0] in _UNARY:
        return _UNARY[words[0]](words[1])
    if len(words) == 3 and words[1] in _BINARY:
        a, b = words[0], words[2]
        if double and words[1] != "=" and any(c in b for c in "*?["):
            import fnmatch
            same = fnmatch.fnmatchcase(a, b)
            return same if words[1] == "==" else not same
        return _BINARY[words[1]](a, b)
    if len(words) == 3 and words[1] in _NUMERIC:
        try:
            return _NUMERIC[words[1]](int(words[0]), int(words[2]))
        except ValueError:
            return None
    return None            # file tests (-f, -d), commands, arithmetic: the reader runs nothing


def _condition(cond: str, env: dict[str, str]) -> bool | None:
    """The value of a bash condition on the file's own variables: ``[[ "$DTYPE" == "fp8" ]]``, ``[ -z
    "$X" ]``, ``!``, ``&&``, ``||`` (left to right, as bash runs a list); None when it reads a variable the
    file does not set (the job's environment decides it) or tests anything else."""
    parts = re.split(r"\s*(&&|\|\|)\s*", cond.strip())
    value: bool | None = None
    op = ""
    for i in range(0, len(parts), 2):
        part = parts[i].strip()
        neg = part.startswith("! ")
        part = part[2:].strip() if neg else part
        m = re.fullmatch(r"\[\[\s*(.*?)\s*\]\]|\[\s+(.*?)\s+\]|test\s+(.*)", part)
        one: bool | None = None
        if m:
            body = next(g for g in m.groups() if g is not None)
            names = [(v.group(1) or v.group(4), v.group(2)) for v in _VAR.finditer(body)]
            expanded = _expand(body, env)
            # a variable set from one the file does not set (MODEL=$1) is no more known than that one
            if all(name in env or default is not None for name, default in names) and "$" not in expanded:
                try:
                    one = _test(shlex.split(expanded), m.group(1) is not None)
                except ValueError:
                    one = None
        if one is not None and neg:
            one = not one
        if i == 0:
            value = one
        elif op == "&&":
            value = False if value is False or one is False else None if None in (value, one) else True
        else:
            value = True if value is True or one is True else None if None in (value, one) else False
        if i + 1 < len(parts):
            op = parts[i + 1]
    return value


def _branches(text: str) -> str:
    """The script with the branches bash would not run removed: each ``if``/``elif`` condition on the
    file's own variables is decided (``_condition``) with the assignments made before it. A condition that
    cannot be decided keeps its lines where they hold no flag (``exit 1`` beside a file test), and is an
    InputError naming the flags where they do: clustersim never takes a branch silently."""
    env: dict[str, str] = {}
    out: list[str] = []
    # a frame per open if: [active (this branch runs), taken (an earlier branch ran), undecided, flags, head]
    stack: list[list[Any]] = []

    def live() -> bool:
        return all(f[0] for f in stack)

    lines = _split_keywords(and_or_to_if(case_to_if(text.splitlines())))
    for line in lines:
        m = _IF.match(line)
        if m and m.group(1) == "if":
            if not live():
                stack.append([False, True, False, [], line])
                continue
            v = _condition(m.group(2), env)
            stack.append([v is not False, v is True, v is None, [], line])
            continue
        if stack and (m or line == "else" or line == "fi" or line == "then"):
            frame = stack[-1]
            if line == "then":
                continue
            parent = all(f[0] for f in stack[:-1])
            if line == "fi":
                stack.pop()
                if frame[2] and frame[3]:
                    raise InputError(f"`{frame[4]}`", " ".join(dict.fromkeys(frame[3])),
                                     "a condition on variables the file sets, which clustersim decides; this one "
                                     "reads the job's environment or the file system, so neither branch is taken "
                                     "silently: set the variables in the file or keep only the branch that runs")
                continue
            if frame[2]:                       # undecided chain: every branch kept, its flags collected
                frame[0] = parent
                continue
            if line == "else":
                frame[0] = parent and not frame[1]
            else:                              # elif
                v = _condition(m.group(2), env) if parent and not frame[1] else False
                if v is None:
                    frame[2] = True
                frame[0] = parent and not frame[1] and v is not False
                frame[1] = frame[1] or v is True
            continue
        if not live():
            continue
        if any(f[2] for f in stack):
            for f in stack:
                if f[2]:
                    f[3].extend(_FLAG.findall(line))
            assigned = _ASSIGN.match(line)
            if assigned:   # its value depends on the branch: unknown after it, never the last branch's
                line = f"{assigned.group(1)}=${UNDECIDED}"
        _assign(line, env)
        out.append(line)
    return "\n".join(out)


def _expand_variables(text: str) -> str:
    """Substitute simple ``NAME=value`` shell assignments of the same file into ``$NAME`` and
    ``${NAME:-default}`` (``_expand``)."""
    return _expand(text, _shell_env(text.splitlines()))


def _pad_parens(text: str) -> str:
    """Every ``)`` outside quotes as a word of its own (a bash array's end); one inside quotes is
    the value's (Megatron's --moe-layer-freq "([1]*3+[0]*1)*3" is kept as written)."""
    out, quote, escaped = [], "", False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == ")":
            out.append(" ) ")
            continue
        out.append(ch)
    return "".join(out)


def _tokens(text: str) -> list[str]:
    # comments first: bash ends a comment at the newline, so a backslash inside one continues nothing
    # (BLOOM's tr11-176B-ml.slurm comments out "#    --universal-checkpoint \" before `export CMD=`)
    text = "\n".join(line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
                     for line in text.splitlines())
    text = re.sub(r"\\\r?\n", " ", text)                       # line continuations
    text = _branches(text)                                      # if/elif/else as bash decides them
    text = _expand_variables(text)
    text = re.sub(r"\"?\$\{\w+\[[@*]\]\}\"?", " ", text)        # "${ARR[@]}": arrays are read where defined
    text = _pad_parens(re.sub(r"=\(", "=( ", text))          # bash arrays: NAME=( --flag value ... )
    try:
        words = shlex.split(text, comments=False)
    except ValueError as exc:
        raise InputError("megatron-args", "file", f"shell words (quotes must close: {exc})") from None
    out: list[str] = []
    for word in words:   # flags gathered in a quoted string (CMD="... $GPT_ARGS ...", bash -c "... $CMD")
        if " --" in f" {word}" and any(c.isspace() for c in word):
            try:
                out.extend(shlex.split(word, comments=False))
                continue
            except ValueError:
                pass
        out.append(word)
    return out


def _number(text: str) -> Any:
    return parse_value(text) if re.fullmatch(r"-?[\d.]+(?:e-?\d+)?", text, re.IGNORECASE) else text


def parse_command_line(text: str) -> MegatronArgs:
    """Flags of a Megatron-LM launch (``torchrun ... pretrain_gpt.py --flag value ...``), an
    arguments file (one flag per line) or a shell script that builds one."""
    toks = _tokens(text)
    # the launched script; the last one where a script defines the command in a variable and runs it
    script = next((i for i in range(len(toks) - 1, -1, -1) if toks[i].endswith(".py")), None)
    values: dict[str, Any] = {}
    launcher: dict[str, Any] = {}
    unresolved: list[str] = []
    undecided: list[str] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        if not tok.startswith("--") or len(tok) < 3:
            i += 1
            continue
        name, _, inline = tok[2:].partition("=")
        vals = [inline] if inline else []
        j = i + 1
        while not inline and j < len(toks) and not toks[j].startswith("--") and not toks[j].endswith(".py") \
                and not re.fullmatch(r"\w+=\(|\)|.*[|;&]", toks[j]):
            vals.append(toks[j])
            j += 1
        before_script = script is not None and i < script
        i = j
        if any("$" in v for v in vals):
            unresolved.append(name)
            if any(UNDECIDED in v for v in vals):
                undecided.append(name)
            continue
        if before_script and name in TORCHRUN_FLAGS:
            launcher[name.replace("-", "_")] = _number(vals[0]) if vals else True
            continue
        dest, const = FLAG_DEST.get(name, (name.replace("-", "_"), None))
        if const is not None:
            values[dest] = const
        elif not vals:
            values[dest] = True
        elif len(vals) == 1:
            values[dest] = _number(vals[0])
        else:
            values[dest] = [_number(v) for v in vals]
    if not values:
        raise InputError("megatron-args", "file", "a Megatron-LM command line or arguments file "
                         "(flags such as --num-layers 32 --tensor-model-parallel-size 8)")
    return MegatronArgs(values, "command line", launcher, unresolved, undecided,
                        toks[script] if script is not None else "")


# -- reading one value ------------------------------------------------------------------------

def neutral(value: Any) -> bool:
    return value is None or value is False or value in (0, "", [], "None")


def neutral_or_one(value: Any) -> bool:
    return neutral(value) or value == 1 or (isinstance(value, list) and set(value) == {1})


def int_arg(a: MegatronArgs, name: str, default: int | None = None, lo: int = -MAX_COUNT) -> int | None:
    """An integer argument (None when not given and no default), from ``lo`` to MAX_COUNT; else an
    InputError naming the flag."""
    v = a.get(name, default)
    if v is None:
        return None
    return config_int(v, f"--{name.replace('_', '-')}", lo=lo)


def size_arg(a: MegatronArgs, name: str) -> int:
    """A size Megatron-LM requires to be at least 1 (a parallel size, the micro-batch): 1 when not
    given; 0 or a negative value is an InputError naming the flag (it is not read as 1)."""
    return config_int(a.get(name, 1), f"--{name.replace('_', '-')}")
