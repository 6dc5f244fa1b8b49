"""The hostile-input table: files a user hands over by mistake x every place a command reads a file,
per-format files with absurd values, and hostile arguments.

Adding a command or a file kind is one entry: a ``Slot`` in ``SLOTS`` (how the command takes a
file, and which of the generic files its format accepts as valid), a template in ``VALUE_FILES``
(a valid file of that kind with ``@V@`` where a hostile number goes), or an ``ArgCase`` in
``ARGS``. Every case must end in exit 2 (3 where a job legitimately does not fit) within 10 s,
without a traceback and without leaving a file behind (tests/hostile/test_table.py).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from validation.logs.formats import (
    deepspeed_config,
    deepspeed_log,
    megatron_args_block,
    megatron_log,
    torchtitan_log,
    torchtitan_toml,
)

# --- generic hostile files -----------------------------------------------------------------------

SCENARIO_TEXT = "name: hostile\nmodel: {preset: llama3-8b}\ncluster: {preset: dgx-h100, nodes: 2}\n"
BIG_BYTES = 50 * 10**6


def _bytes(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        p = d / name
        p.write_bytes(data)
        return p
    return make


def _big(d: Path) -> Path:
    """50 MB: a scenario with a pasted log in comments (the issue's example)."""
    p = d / "50MB-of-comments.yaml"
    line = b"# " + b"x" * 97 + b"\n"
    with p.open("wb") as f:
        f.write(SCENARIO_TEXT.encode())
        f.write(line * (BIG_BYTES // len(line)))
    return p


def _directory(d: Path) -> Path:
    p = d / "a-directory"
    p.mkdir()
    return p


def _fifo(d: Path) -> Path:
    p = d / "a-fifo"
    os.mkfifo(p)  # opening it for reading would block until a writer comes
    return p


def _dangling(d: Path) -> Path:
    p = d / "dangling-link.yaml"
    p.symlink_to(d / "nowhere" / "target.yaml")  # root reads every file: a link to nothing instead
    return p


def _through_file(d: Path) -> Path:
    f = d / "plain-file"
    f.write_text("x\n")
    return f / "child.yaml"  # ENOTDIR: a path that cannot be opened


BOMB = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + "".join(f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)))

GENERIC: dict[str, Callable[[Path], Path]] = {
    "utf-16 without BOM": _bytes("utf16.yaml", SCENARIO_TEXT.encode("utf-16-le")),
    "latin-1": _bytes("latin1.yaml", "name: caf\xe9 r\xe9sum\xe9\nmodel: {preset: llama3-8b}\n".encode("latin-1")),
    "ELF binary": _bytes("a.out", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 16),
    "PNG image": _bytes("plot.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 16),
    "empty": _bytes("empty.yaml", b""),
    "whitespace only": _bytes("blank.yaml", b"  \n\t\n   \n"),
    "truncated mid-token": _bytes("truncated.json", b'{"model": {"preset": "llama3-8b"}, "parallel": {"tp": 2, "p'),
    "50 MB of comments": _big,
    "deep nesting": _bytes("deep.json", b"[" * 100_000 + b"]" * 100_000),
    "YAML alias bomb": _bytes("bomb.yaml", BOMB.encode()),
    "top-level list": _bytes("list.json", b"[1, 2, 3]\n"),
    "top-level number": _bytes("number.yaml", b"42\n"),
    "another tool's JSON": _bytes("package.json", json.dumps(
        {"name": "my-app", "version": "1.0.0", "scripts": {"test": "jest"}, "dependencies": {"react": "^18"}}).encode()),
    "another tool's YAML": _bytes("ci.yaml", b"name: CI\non: [push]\njobs:\n  build:\n    runs-on: ubuntu-latest\n"
                                             b"    steps:\n      - uses: actions/checkout@v4\n"),
    "a directory": _directory,
    "a FIFO": _fifo,
    "nonexistent path": lambda d: d / "no-such-file.yaml",
    "dangling symlink": _dangling,
    "path through a file": _through_file,
}


# --- valid files that some slots need beside the hostile one --------------------------------------

LLAMA3_8B_ARGS = ("TransformerModelArgs(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, vocab_size=128256, "
                  "multiple_of=1024, ffn_dim_multiplier=1.3, norm_eps=1e-05, rope_theta=500000, max_seq_len=8192)")
MEGATRON_ARGS = {"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "seq_length": 4096,
                 "max_position_embeddings": 4096, "padded_vocab_size": 32000, "ffn_hidden_size": 11008,
                 "swiglu": True, "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1,
                 "data_parallel_size": 8, "world_size": 16, "global_batch_size": 128, "micro_batch_size": 1,
                 "group_query_attention": False}


def good_files(d: Path) -> dict[str, Path]:
    """Valid companions: a torchtitan log and TOML, a DeepSpeed log."""
    files = {
        "torchtitan-log": torchtitan_log(model_args=LLAMA3_8B_ARGS, mesh=(["dp_shard"], [8]),
                                         gpu="NVIDIA H100 80GB HBM3", tps=5762),
        "torchtitan-toml": torchtitan_toml(name="llama3", flavor="8B", local_batch=2, seq_len=8192),
    }
    out = {}
    for name, text in files.items():
        out[name] = d / f"good-{name}"
        out[name].write_text(text)
    return out


# --- where each command reads a file --------------------------------------------------------------

@dataclass(frozen=True)
class Slot:
    """One place a command reads a user file: ``argv(path, tmp, good)`` runs it on ``path``."""

    argv: Callable[[str, Path, dict[str, Path]], list[str]]
    kind: str                          # the format, for VALUE_FILES
    valid: frozenset[str] = frozenset()  # generic files this format accepts (not hostile for it)
    expect: tuple[int, ...] = (2,)


def _s(*head: str, tail: tuple[str, ...] = ()) -> Callable[[str, Path, dict[str, Path]], list[str]]:
    return lambda p, tmp, good: [*head, p, *tail]


def _out(tmp: Path, name: str) -> str:
    return str(tmp / "out" / name)


SERIAL = ("--executor", "serial", "--no-progress")
IMPORT_EXTRA: dict[str, Callable[[dict[str, Path]], list[str]]] = {
    "torchtitan-log": lambda good: ["--config", str(good["torchtitan-toml"])],
    "torchtitan-toml": lambda good: ["--nodes", "1"],
    "deepspeed-json": lambda good: ["--model", "llama3-8b", "--nodes", "1"],
    "deepspeed-log": lambda good: ["--model", "llama3-8b", "--nodes", "1"],
}
SLOTS: dict[str, Slot] = {
    "run SCENARIO": Slot(_s("run"), "scenario"),
    "run --profile": Slot(_s("run", "--profile"), "profile"),
    "run model.hf_config": Slot(lambda p, tmp, good: ["run", "--set", "model.preset=null", "--set",
                                                      f"model.hf_config={p}"], "hf-config"),
    "sweep SCENARIO": Slot(_s("sweep", tail=SERIAL), "scenario"),
    "sweep --profile": Slot(_s("sweep", "--profile", tail=SERIAL), "profile"),
    "compare SCENARIO": Slot(_s("compare", tail=("--clusters", "dgx-h100", "--executor", "serial")), "scenario"),
    "compare --profile": Slot(_s("compare", "--clusters", "dgx-h100", "--executor", "serial", "--profile"),
                              "profile"),
    "collective --profile": Slot(_s("collective", "all_reduce", "--size", "1MiB", "--profile"), "profile"),
    "goodput SCENARIO": Slot(_s("goodput", tail=("--days", "1")), "scenario"),
    "goodput --profile": Slot(_s("goodput", "--days", "1", "--profile"), "profile"),
    "calibrate --nccl-tests": Slot(lambda p, tmp, good: ["calibrate", "--nccl-tests", p, "--out",
                                                         _out(tmp, "nccl.yaml")], "nccl-tests"),
    "calibrate --log": Slot(lambda p, tmp, good: ["calibrate", "--log", p, "--cluster", "dgx-h100", "--out",
                                                  _out(tmp, "log.yaml")], "megatron-log"),
    "calibrate --trace": Slot(lambda p, tmp, good: ["calibrate", "--trace", p, "--out", _out(tmp, "trace.yaml")],
                              "trace"),
    "calibrate --config": Slot(lambda p, tmp, good: ["calibrate", "--log", str(good["torchtitan-log"]), "--config", p,
                                                     "--out", _out(tmp, "cfg.yaml")], "torchtitan-toml"),
    # a valid companion where the format needs one (--cluster: logs and configs rarely name the GPU;
    # --config: torchtitan logs do not print the batch), so that the hostile file is what is judged
    **{f"import {kind}": Slot(lambda p, tmp, good, kind=kind: ["import", kind, p, "--cluster", "dgx-h100",
                                                               *IMPORT_EXTRA.get(kind, lambda g: [])(good),
                                                               "--out", _out(tmp, "imported.yaml")], kind)
       for kind in ("megatron-log", "megatron-args", "torchtitan-log", "torchtitan-toml", "deepspeed-log",
                    "deepspeed-json")},
    "import --config": Slot(lambda p, tmp, good: ["import", "torchtitan-log", str(good["torchtitan-log"]),
                                                  "--config", p], "torchtitan-toml"),
    "import --hf-config": Slot(lambda p, tmp, good: ["import", "torchtitan-toml", str(good["torchtitan-toml"]),
                                                     "--nodes", "1", "--cluster", "dgx-h100", "--hf-config", p], "hf-config"),
}


# --- per format: a valid file with a hostile number ------------------------------------------------

HOSTILE_NUMBERS = {  # name -> (YAML / TOML / plain text spelling, JSON spelling)
    "NaN": (".nan", "NaN"),
    "infinity": (".inf", "Infinity"),
    "1e308": ("1.0e+308", "1e308"),
    "-0": ("-0", "-0"),
    "huge int": ("123456789012345678901234567890123", "123456789012345678901234567890123"),
    "negative": ("-4", "-4"),
}
TOML_NUMBERS = {"NaN": "nan", "infinity": "inf", "1e308": "1e308", "-0": "-0",
                "huge int": "123456789012345678901234567890123", "negative": "-4"}
PLAIN_NUMBERS = {"NaN": "nan", "infinity": "inf", "1e308": "1e308", "-0": "-0",
                 "huge int": "123456789012345678901234567890123", "negative": "-4"}


def _megatron_log(value: str) -> str:
    text = megatron_log({**MEGATRON_ARGS}, 2.5)
    return "\n".join(_sub_after(line, "elapsed time per iteration (ms): ", value) for line in text.splitlines()) + "\n"


def _sub_after(line: str, key: str, value: str) -> str:
    if key not in line:
        return line
    head, rest = line.split(key, 1)
    return head + key + value + rest[rest.index(" "):]


def _torchtitan_log(value: str) -> str:
    text = torchtitan_log(model_args=LLAMA3_8B_ARGS, mesh=(["dp_shard"], [8]), gpu="NVIDIA H100 80GB HBM3", tps=5762)
    return "\n".join(_sub_after(line, "tps: ", value) for line in text.splitlines()) + "\n"


def _deepspeed_log(value: str) -> str:
    cfg = deepspeed_config(train_batch=1536, micro=4, accum=1, stage=1)
    text = deepspeed_log(cfg, 150.0)
    return "\n".join(re.sub(r"SamplesPerSec=[^,]*", f"SamplesPerSec={value}", line) for line in text.splitlines()) + "\n"


def _nccl_log(value: str) -> str:
    rows = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor)",
            "#  Rank  0 Group  0 Pid  1 on host-a device  0 [0x10] NVIDIA H100 80GB HBM3",
            "#  Rank  1 Group  0 Pid  2 on host-a device  1 [0x18] NVIDIA H100 80GB HBM3",
            "NCCL version 2.21.5+cuda12.4",
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"]
    for k in range(20, 31):
        size = 2**k
        rows.append(f"{size:12d} {size // 4:13d}     float     sum      -1 {value:>8} {value:>7} {value:>7}       0 "
                    f"{value:>8} {value:>7} {value:>7}       0")
    return "\n".join(rows) + "\n"


def _megatron_args(value: str) -> str:
    return "\n".join(megatron_args_block({**MEGATRON_ARGS, "hidden_size": value, "num_layers": value})) + "\n"


def _trace(value: str) -> str:
    kernel = ('{"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "ts": 1, "dur": @V@, '
              '"args": {"External id": 1, "stream": 7, "device": 0}}')
    return ('{"deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}], "traceEvents": ['
            + ", ".join([kernel.replace("@V@", value)] * 4) + "]}")


VALUE_FILES: dict[str, Callable[[str], str]] = {
    "scenario": lambda v: f"model: {{preset: llama3-8b}}\ncluster: {{preset: dgx-h100, nodes: {v}}}\n",
    "profile": lambda v: ("gpus:\n  evil-gpu:\n    peak_TFLOPS: {bf16: " + v + "}\n    hbm_capacity_GiB: 80\n"
                          "    hbm_bw_GBps: 3350\n"),
    "hf-config": lambda v: ('{"num_hidden_layers": @V@, "hidden_size": 4096, "num_attention_heads": 32, '
                            '"vocab_size": 32000, "max_position_embeddings": 4096}').replace("@V@", v),
    "nccl-tests": _nccl_log,
    "megatron-log": _megatron_log,
    "megatron-args": _megatron_args,
    "torchtitan-log": _torchtitan_log,
    "torchtitan-toml": lambda v: torchtitan_toml(name="llama3", flavor="8B", local_batch=2, seq_len=8192).replace(
        "seq_len = 8192", f"seq_len = {v}"),
    "deepspeed-log": _deepspeed_log,
    "deepspeed-json": lambda v: json.dumps(deepspeed_config(train_batch=1536, micro=4, accum=1, stage=1)).replace(
        '"train_batch_size": 1536', f'"train_batch_size": {v}'),
    "trace": _trace,
}
JSON_KINDS = {"hf-config", "deepspeed-json", "trace"}
TOML_KINDS = {"torchtitan-toml"}
PLAIN_KINDS = {"nccl-tests", "megatron-log", "megatron-args", "torchtitan-log", "deepspeed-log"}


def number_spelling(kind: str, number: str) -> str:
    if kind in JSON_KINDS:
        return HOSTILE_NUMBERS[number][1]
    if kind in TOML_KINDS:
        return TOML_NUMBERS[number]
    if kind in PLAIN_KINDS:
        return PLAIN_NUMBERS[number]
    return HOSTILE_NUMBERS[number][0]


# --- hostile arguments -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ArgCase:
    name: str
    argv: tuple[str, ...]
    expect: tuple[int, ...] = (2,)
    subprocess: bool = field(default=False)  # also in the representative subprocess subset


BIG = str(10**30)
HUGE = str(10**400)
DEEP = "[" * 5000 + "]" * 5000


def _a(name: str, *argv: str, expect: tuple[int, ...] = (2,), sub: bool = False) -> ArgCase:
    return ArgCase(name, argv, expect, sub)


ARGS: list[ArgCase] = [
    # --set with odd values
    *[_a(f"run --set {kv[:40]}", "run", "--set", kv) for kv in (
        "parallel.tp=0", "parallel.tp=-1", "parallel.tp=1e30", f"parallel.tp={HUGE}", "parallel.tp=.nan",
        "cluster.oversubscription=.inf", "parallel.tp=[1", "parallel.tp={a: 1}", "parallel.tp=", "=", "a..b=1",
        "model=[]", "parallel=3", "noequals", "cluster.nodes=100000000", f"cluster.nodes={BIG}",
        "parallel.global_batch=1000000000000", "model.layers=1000000000", f"model.hidden={HUGE}",
        f"model.vocab={HUGE}", f"model.seq_len={HUGE}", f"a={DEEP}", "a=&x [1, *x]",
        "parallel.global_batch=16384", "model.layers=4096",
        "cluster.gpus_per_node=100000", "cluster.nics_per_node=" + BIG, "parallel.fsdp.prefetch=" + BIG,
        "parallel.micro_batch=" + BIG, "parallel.dp_bucket_params=" + HUGE, "model.moe.experts=" + BIG,
        "training.dtype=fp3", "framework=jax")],
    _a("run model.layers=4096 gb 16384", "run", "--set", "model.layers=4096", "--set", "parallel.global_batch=16384",
       sub=True),
    _a("run 100,000,000 nodes", "run", "--set", "cluster.nodes=100000000", "--set", "parallel.dp=null", sub=True),
    _a("run event engine over budget", "run", "--set", "parallel.global_batch=16384"),
    _a("run closed form over budget", "run", "--engine", "analytical", "--set", "parallel.global_batch=16384",
       "--set", "parallel.zero_stage=3"),
    _a("run huge hidden (does not fit)", "run", "--set", f"model.hidden={2**30}", "--set", "model.heads=1",
       "--set", "parallel.tp=1", "--set", "parallel.dp=null", "--set", "model.kv_heads=1", expect=(2, 3)),
    _a("run --engine bogus", "run", "--engine", "bogus"),
    _a("run unknown option", "run", "--frobnicate"),
    _a("run --trace into a directory", "run", "--trace", "/"),
    _a("run --trace through a file", "run", "--trace", "/dev/null/t.json"),
    _a("run --trace with --engine analytical", "run", "--engine", "analytical", "--trace", "t.json"),
    # output paths: checked before the work for every command (clustersim/output_file.py)
    _a("run --trace empty", "run", "--trace", ""),
    _a("run --html empty", "run", "--html", ""),
    _a("run --trace 256-byte name", "run", "--trace", "a" * 251 + ".json"),
    _a("goodput --out through a file", "goodput", "--days", "1", "--out", "/dev/null/g.json"),
    _a("goodput --out empty", "goodput", "--days", "1", "--out", ""),
    _a("calibrate --out empty", "calibrate", "--run", "x.yaml=1", "--out", ""),
    _a("calibrate --out into a directory", "calibrate", "--run", "x.yaml=1", "--out", "/"),
    _a("import --out through a file", "import", "megatron-log", "x", "--out", "/dev/null/x.yaml"),
    _a("sweep --out empty", "sweep", "--out", "", *SERIAL),
    # --gpus 0/-1/10^12
    *[_a(f"sweep --gpus {g}", "sweep", "--gpus", g, *SERIAL) for g in ("0", "-1", "1000000000000", BIG, "1.5", "x")],
    *[_a(f"collective --gpus {g}", "collective", "all_reduce", "--size", "1MiB", "--gpus", g)
      for g in ("0", "-1", "1000000000000", BIG, "12")],
    _a("collective --gpus 10^12", "collective", "all_reduce", "--size", "1MiB", "--gpus", "1000000000000", sub=True),
    _a("collective --engine event 800000 GPUs", "collective", "all_reduce", "--size", "1MiB", "--gpus", "800000",
       "--engine", "event"),
    _a("collective --gpus-per-node 10^8", "collective", "all_reduce", "--size", "1", "--gpus-per-node", "100000000"),
    _a("collective --nodes 1,2", "collective", "all_reduce", "--size", "1", "--nodes", "1,2"),
    _a("collective --nodes 10^12", "collective", "all_reduce", "--size", "1", "--nodes", "1000000000000"),
    # --size garbage
    *[_a(f"collective --size {s[:30]}", "collective", "all_reduce", "--size", s) for s in (
        "garbage", "-1", "1e30", BIG, "1.5.5GiB", "1 PiB", "", "nan", "inf", "0x10", "٣")],
    # --sizes
    *[_a(f"collective --sizes {s[:30]}", "collective", "all_reduce", "--sizes", s) for s in (
        "1:1e30", f"1:{BIG}", "8:1", "1:1TiB:1", "1:1TiB:0", "1:1TiB:-2", "a:b", "1:2:3:4", ":", "1:1TiB:1.5")],
    _a("collective --sizes 1:10^30", "collective", "all_reduce", "--sizes", f"1:{BIG}", sub=True),
    _a("collective --size with --sizes", "collective", "all_reduce", "--size", "1GiB", "--sizes", "8:1MiB"),
    _a("compare --pue 1000", "compare", "--clusters", "dgx-h100", "--pue", "1000", "--executor", "serial"),
    _a("collective bogus op", "collective", "all_reduce_bogus", "--size", "1"),
    _a("collective --algo bogus", "collective", "all_reduce", "--size", "1", "--algo", "quantum"),
    _a("collective --engine bogus", "collective", "all_reduce", "--size", "1", "--engine", "warp"),
    _a("collective --cluster bogus", "collective", "all_reduce", "--size", "1", "--cluster", "nope"),
    # sweep and compare options
    _a("sweep --top 0", "sweep", "--top", "0", *SERIAL),
    _a("sweep --top 10^30", "sweep", "--top", BIG, *SERIAL),
    _a("sweep --top 1001", "sweep", "--top", "1001", *SERIAL),
    _a("compare --rerank 10^6", "compare", "--clusters", "dgx-h100", "--rerank", "1000000", "--executor", "serial"),
    _a("import --nodes 10^30", "import", "megatron-log", "x", "--nodes", BIG),
    _a("sweep --rerank 10^6", "sweep", "--rerank", "1000000", *SERIAL),
    _a("sweep --workers 100000", "sweep", "--workers", "100000", "--no-progress", sub=True),
    _a("sweep --workers 0", "sweep", "--workers", "0"),
    _a("sweep --rerank -1", "sweep", "--rerank", "-1", *SERIAL),
    _a("sweep --out bad suffix", "sweep", "--out", "x.txt", *SERIAL),
    _a("sweep --out a directory", "sweep", "--out", "/", *SERIAL),
    _a("sweep --out through a file", "sweep", "--out", "/dev/null/x.csv", *SERIAL),
    _a("sweep --plot bad suffix", "sweep", "--plot", "x.gif", *SERIAL),
    _a("sweep --executor bogus", "sweep", "--executor", "mpi"),
    _a("sweep --scheduler without dask", "sweep", "--scheduler", "tcp://x:1", *SERIAL),
    _a("sweep 16,777,216 GPUs, billions of layouts", "sweep", "--gpus", "16777216", "--set",
       f"parallel.global_batch={2**34}", "--set", "model.layers=4096", *SERIAL, sub=True),
    *[_a(f"compare --nodes {n[:30]}", "compare", "--clusters", "dgx-h100", "--nodes", n, "--executor", "serial")
      for n in ("0", "-1", ",", "a", "1e9", BIG, ",".join(["2"] * 100), "3000000")],
    _a("compare --nodes 10^30", "compare", "--clusters", "dgx-h100", "--nodes", BIG, "--executor", "serial", sub=True),
    *[_a(f"compare --clusters {c[:30]}", "compare", "--clusters", c, "--executor", "serial")
      for c in ("nope", "", ",,,", ",".join(["dgx-h100"] * 100))],
    *[_a(f"compare --tokens {t}", "compare", "--clusters", "dgx-h100", "--tokens", t, "--executor", "serial")
      for t in ("1e400", "nan", "-1", "0", "1X", "")],
    *[_a(f"compare --price-per-gpu-hour {p}", "compare", "--clusters", "dgx-h100", "--price-per-gpu-hour", p,
         "--executor", "serial") for p in ("nan", "-1", "nope=1", "dgx-h100=inf", "=")],
    *[_a(f"compare --gpus {g[:30]}", "compare", "--clusters", c, "--gpus", g, "--executor", "serial")
      for c, g in (("dgx-h100", "0"), ("dgx-h100", BIG), ("gb200-nvl72", "100000000"), ("dgx-h100", "8,x"))],
    _a("compare --gpus and --nodes", "compare", "--clusters", "dgx-h100", "--gpus", "8", "--nodes", "1"),
    *[_a(f"compare {opt} {v}", "compare", "--clusters", "dgx-h100", opt, v, "--executor", "serial") for opt, v in (
        ("--pue", "nan"), ("--pue", "0.5"), ("--rank-by", "speed"), ("--price-per-kwh", "nan"),
        ("--price-per-kwh", "-1"))],
    *[_a(f"run --tokens {t}", "run", "--tokens", t) for t in ("nan", "1e400", "-5", "1Q")],
    *[_a(f"run --set {kv[:40]}", "run", "--set", kv) for kv in (
        "cluster.pue=1e308", f"cluster.scale_up_domain={BIG}", "training.recipe=bogus",
        f"parallel.recompute_every={BIG}", "parallel.recompute=bogus", "cluster.topology=torus")],
    *[_a(f"run cluster.groups {g[:40]}", "run", "--set", "cluster.nodes=null", "--set", "cluster.preset=null",
         "--set", f"cluster.groups={g}") for g in (
        "[{preset: dgx-h100, nodes: 100000000}]", "[{preset: dgx-h100, nodes: 2000000}, {preset: dgx-a100, nodes: 2000000}]",
        "[]", "3", "[{preset: nope, nodes: 1}]", "[{preset: dgx-h100, nodes: 1, gpus_per_node: 100000}]")],
    # list, goodput, import, calibrate, validate arguments
    _a("list bogus", "list", "bogus"),
    _a("unknown command", "frobnicate"),
    *[_a(f"goodput --days {d}", "goodput", "--days", d) for d in ("0", "-1", "nan", "inf", "1e30", BIG, "x")],
    *[_a(f"goodput {opt} {v}", "goodput", "--days", "1", opt, v) for opt, v in (
        ("--mtbf", "gpu=nan"), ("--mtbf", "warp=1"), ("--mtbf", "gpu"), ("--checkpoint-interval-min", "0"),
        ("--checkpoint-interval-min", "inf"), ("--trials", "0"), ("--trials", BIG), ("--seed", "-1"),
        ("--storage-write-bw-GBps", "nan"), ("--detect-s", "-1"))],
    _a("import bogus kind", "import", "bogus", "x"),
    _a("import --nodes 0", "import", "megatron-log", "x", "--nodes", "0"),
    _a("calibrate without inputs", "calibrate"),
    _a("calibrate --min-size garbage", "calibrate", "--nccl-tests", "x.log", "--min-size", "lots"),
    _a("calibrate --name with a slash", "calibrate", "--nccl-tests", "x.log", "--name", "../../etc/evil"),
    *[_a(f"validate {opt} {v}", "validate", opt, v) for opt, v in (
        ("--nprocs", "0"), ("--nprocs", "1000000000"), ("--rate-mbit", "nan"), ("--rate-mbit", "inf"),
        ("--rate-mbit", "-1"), ("--delay-us", "nan"), ("--delay-us", "-5"), ("--backend", "mpi"))],
    _a("validate --out a device", "validate", "--ci", "--out", "/dev/null"),
    _a("validate --out through a file", "validate", "--ci", "--out", "/dev/null/sub"),
]

# The representative subset also run as real subprocesses (tests/hostile/test_subprocess.py):
# one file case per command family and format, plus the ARGS marked ``sub``.
SUBPROCESS_FILE_CASES = [
    ("run SCENARIO", "utf-16 without BOM"),
    ("run SCENARIO", "50 MB of comments"),
    ("compare SCENARIO", "deep nesting"),
    ("collective --profile", "YAML alias bomb"),
    ("goodput SCENARIO", "a FIFO"),
    ("calibrate --nccl-tests", "PNG image"),
    ("calibrate --log", "50 MB of comments"),
    ("import torchtitan-toml", "deep nesting"),
]


# --- the cases, enumerated without touching the disk (pytest ids), made in a directory on demand ---

def file_cases() -> list[tuple[str, str]]:
    """(slot, generic file) pairs: every hostile file at every place a command reads one."""
    return [(slot, name) for slot, s in SLOTS.items() for name in GENERIC if name not in s.valid]


def number_cases() -> list[tuple[str, str]]:
    """(slot, hostile number) pairs: a valid file of the slot's format with one absurd number."""
    return [(slot, number) for slot in SLOTS for number in HOSTILE_NUMBERS]


def make_generic(d: Path) -> dict[str, Path]:
    """Every generic hostile file under ``d`` (each in its own directory: names may repeat)."""
    out = {}
    for i, (name, make) in enumerate(GENERIC.items()):
        sub = d / f"g{i:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        out[name] = make(sub)
    return out


def value_file(d: Path, kind: str, number: str) -> Path:
    """A valid ``kind`` file with the hostile ``number`` in it."""
    suffix = ".json" if kind in JSON_KINDS else ".toml" if kind in TOML_KINDS else (
        ".log" if kind in PLAIN_KINDS else ".yaml")
    p = d / f"{kind}-{number.replace(' ', '-')}{suffix}"
    p.write_text(VALUE_FILES[kind](number_spelling(kind, number)))
    return p


def file_argv(slot: str, path: Path, tmp: Path, good: dict[str, Path]) -> list[str]:
    return SLOTS[slot].argv(str(path), tmp, good)
