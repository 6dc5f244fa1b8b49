"""Hypothesis suites per command: random arguments and random file contents through the real
command line (``clustersim.cli.main`` in-process). Whatever the input, a command ends in exit 0
(it was valid after all), 2 (refused, one message) or 3 (the job does not fit), within 10 s, with
no exception escaping. Bounded examples, no deadline: the whole layer stays within about a minute
of CI time."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile import cases as C
from tests.hostile.harness import run_in_process

OK_CODES = (0, 2, 3)
FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

ODD = ["0", "-1", "1e30", str(10**30), str(10**400), "nan", "inf", "-0", "1.5", "0x10", "", " ", "١٢", "\x00",
       "[1", "{a: 1}", "&x [*x]", "null", "true", "1,2", "1:2:3", "8GiB", "-1e-300", "~", "'", '"']
VALID = ["1", "2", "4", "8", "16", "64", "1024", "0.5", "3.5", "1MiB", "1:1GiB", "ring", "dgx-h100", "bf16", "gpu=50000"]
tokens = st.one_of(st.sampled_from(VALID), st.sampled_from(ODD), st.integers(-(2**70), 2**70).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr), st.text(max_size=16))
SET_KEYS = ["parallel.tp", "parallel.pp", "parallel.dp", "parallel.cp", "parallel.ep", "parallel.micro_batch",
            "parallel.global_batch", "parallel.zero_stage", "parallel.schedule", "parallel.virtual_stages",
            "parallel.recompute", "parallel.fsdp.prefetch", "model.layers", "model.hidden", "model.heads",
            "model.seq_len", "model.vocab", "model.preset", "model.moe.experts", "cluster.nodes",
            "cluster.gpus_per_node", "cluster.preset", "cluster.oversubscription", "cluster.scale_up_domain",
            "training.dtype", "training.recipe", "framework", "goodput.mtbf_hours", "x", "model", ""]
sets = st.lists(st.tuples(st.sampled_from(SET_KEYS), tokens).map(lambda kv: f"{kv[0]}={kv[1]}"), max_size=3)


def _judge(argv: list[str]) -> None:
    outcome = run_in_process(argv)
    assert outcome.code in OK_CODES and not outcome.traceback and outcome.seconds < 10, (argv, outcome)


def _with_sets(head: list[str], overrides: list[str]) -> list[str]:
    return head + [a for kv in overrides for a in ("--set", kv)]


@FUZZ
@given(overrides=sets, engine=st.sampled_from(["event", "analytical"]))
def test_fuzz_run(overrides: list[str], engine: str) -> None:
    _judge(_with_sets(["run", "--engine", engine], overrides))


@FUZZ
@given(overrides=sets, gpus=st.one_of(st.none(), tokens), top=st.one_of(st.none(), tokens))
def test_fuzz_sweep(overrides: list[str], gpus: str | None, top: str | None) -> None:
    argv = ["sweep", "--executor", "serial", "--no-progress", "--rerank", "1"]
    argv += ["--gpus", gpus] if gpus is not None else ["--set", "model.preset=llama3-8b"]
    argv += ["--top", top] if top is not None else []
    _judge(_with_sets(argv, overrides))


@FUZZ
@given(nodes=st.one_of(st.none(), tokens), clusters=st.one_of(st.sampled_from(["dgx-h100", "dgx-a100,dgx-h100"]),
                                                               tokens),
       tokens_=st.one_of(st.none(), tokens), price=st.one_of(st.none(), tokens))
def test_fuzz_compare(nodes: str | None, clusters: str, tokens_: str | None, price: str | None) -> None:
    argv = ["compare", "--clusters", clusters, "--executor", "serial"]
    for opt, v in (("--nodes", nodes), ("--tokens", tokens_), ("--price-per-gpu-hour", price)):
        argv += [opt, v] if v is not None else []
    _judge(argv)


@FUZZ
@given(op=st.one_of(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "alltoall"]), tokens),
       size=tokens, gpus=st.one_of(st.none(), tokens), sizes=st.booleans(),
       algo=st.one_of(st.none(), st.sampled_from(["ring", "tree", "nvls"]), tokens))
def test_fuzz_collective(op: str, size: str, gpus: str | None, sizes: bool, algo: str | None) -> None:
    argv = ["collective", op, "--sizes" if sizes else "--size", size]
    argv += ["--gpus", gpus] if gpus is not None else []
    argv += ["--algo", algo] if algo is not None else []
    _judge(argv)


@FUZZ
@given(what=st.one_of(st.sampled_from(["gpus", "clusters", "models", "fabrics"]), tokens),
       extra=st.lists(tokens, max_size=2))
def test_fuzz_list(what: str, extra: list[str]) -> None:
    _judge(["list", what, *extra])


@FUZZ
@given(days=tokens, mtbf=st.one_of(st.none(), st.tuples(st.sampled_from(["gpu", "node", "x"]), tokens)),
       trials=st.one_of(st.none(), tokens), overrides=sets)
def test_fuzz_goodput(days: str, mtbf: tuple[str, str] | None, trials: str | None, overrides: list[str]) -> None:
    argv = ["goodput", "--days", days]
    argv += ["--mtbf", f"{mtbf[0]}={mtbf[1]}"] if mtbf else []
    argv += ["--trials", trials] if trials is not None else []
    _judge(_with_sets(argv, overrides))


# --- file contents: a valid file of each format, mutated, handed to the commands that read it ------

FILE_SLOTS = ["run SCENARIO", "collective --profile", "calibrate --nccl-tests", "calibrate --log",
              "calibrate --trace", "import megatron-log", "import megatron-args", "import torchtitan-log",
              "import torchtitan-toml", "import deepspeed-log", "import deepspeed-json", "run model.hf_config"]


@st.composite
def mutated(draw: st.DrawFn, kind: str) -> str:
    """A valid ``kind`` file (with a drawn number where the template takes one), then a few edits:
    a slice deleted, a hostile token inserted, the text cut short."""
    text = C.VALUE_FILES[kind](draw(st.sampled_from(["2", "8", "4096", "0.5", "1e308", "-3", "nan"])))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["delete", "insert", "cut"]))
        if action == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 40)):]
        elif action == "insert":
            text = text[:at] + draw(tokens) + text[at:]
        else:
            text = text[:at]
    return text


_TMP = Path(tempfile.mkdtemp(prefix="clustersim-fuzz-"))
_GOOD = C.good_files(_TMP)


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), slot=st.sampled_from(FILE_SLOTS))
def test_fuzz_file_contents(data: st.DataObject, slot: str) -> None:
    text = data.draw(mutated(C.SLOTS[slot].kind))
    path = C.value_file(_TMP, C.SLOTS[slot].kind, "-0")
    path.write_text(text, encoding="utf-8")
    out = _TMP / "out"
    argv = C.file_argv(slot, path, _TMP, _GOOD)
    _judge(argv)
    for p in out.glob("*") if out.exists() else []:
        p.unlink()


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(blob=st.binary(max_size=4096), slot=st.sampled_from(FILE_SLOTS))
def test_fuzz_file_bytes(blob: bytes, slot: str) -> None:
    path = _TMP / f"blob-{C.SLOTS[slot].kind}"
    path.write_bytes(blob)
    _judge(C.file_argv(slot, path, _TMP, _GOOD))
