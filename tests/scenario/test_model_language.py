"""The model fields of today's families as a user writes them: accepted shapes, and bad input
stopped with exit 2 naming the field and what is allowed (the CLI, as users run it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clustersim.errors import InputError
from clustersim.scenario import load_scenario


def _run(*sets: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "clustersim", "run", "--json"]
    for s in sets:
        argv += ["--set", s]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("sets,field,allowed", [
    (["model.head_dim=100", "model.query_width=4096"], "model.query_width",
     "model.heads x model.head_dim = 32 x 100 = 3200"),
    (["model.query_width=5000"], "model.query_width", "a multiple of model.heads (32)"),
    (["model.attention_window=0"], "model.attention_window", ">= 1"),
    (["model.attention_window=-128"], "model.attention_window", ">= 1"),
    (["model.attention_pattern=diagonal"], "model.attention_pattern", "'full', 'sliding' or 'chunked'"),
    (["model.attention_pattern=sliding"], "model.attention_window", "a window of at least 1 token"),
    # more key/value heads than query heads, or a count that does not divide them: was simulated
    # (a 9.9B "llama3-8b" that then ran out of memory; kv_heads 3 ran with exit 0)
    (["model.kv_heads=64"], "model.kv_heads", "a divisor of model.heads (32)"),
    (["model.kv_heads=3", "parallel.tp=1", "parallel.dp=8", "parallel.sequence_parallel=false"],
     "model.kv_heads", "a divisor of model.heads (32)"),
    (["model.ffn_act=swish"], "model.ffn_act", "'gelu', 'swiglu', 'geglu', 'squared-relu' or 'relu'"),
    (["model.global_every=4"], "model.global_every", "unless attention_pattern is sliding or chunked"),
    (["model.preset=deepseek-v3", "model.head_dim=128"], "model.head_dim", "left out for attention: mla"),
    (["model.hidden=4010"], "model.hidden", "a multiple of model.heads (32), or give model.head_dim"),
    (["model.preset=mixtral-8x7b", "model.moe.every=40", "parallel.ep=1"], "model.moe.every", "1..32"),
    (["model.preset=gpt-oss-20b", "parallel.tp=1", "parallel.pp=1", "parallel.cp=2", "parallel.dp=8",
      "parallel.ep=8", "parallel.sequence_parallel=false"], "parallel.cp_comm", "a2a"),
    # Ulysses splits the key/value heads too: 8 KV heads over tp 2 leave 4 per rank, not a multiple
    # of cp 8 (ran with exit 0, the kernel's heads rounded)
    (["parallel.tp=2", "parallel.pp=1", "parallel.cp=8", "parallel.dp=1", "parallel.cp_comm=a2a"],
     "parallel.cp_comm", "dividing the key/value heads per TP rank (4: model.kv_heads 8 over tp 2)"),
    # SP splits a CP rank's share of the sequence: 8200 / 4 = 2050 tokens over tp 4 (ran, rounded)
    (["model.seq_len=8200", "parallel.tp=4", "parallel.pp=1", "parallel.cp=4", "parallel.dp=1"],
     "parallel.sequence_parallel", "tp (4) dividing each CP rank's share of the sequence"),
])
def test_bad_model_fields_exit_2_naming_the_field(sets: list[str], field: str, allowed: str) -> None:
    out = _run(*sets)
    assert out.returncode == 2, out.stdout[-300:] + out.stderr
    assert field in out.stderr and allowed in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_head_dim_widens_the_attention_without_touching_the_hidden_size() -> None:
    """GLM-4.5's 96 heads of 128 beside hidden 5120 (5120 / 96 is no integer)."""
    sc = load_scenario(None, ["model.preset=glm-4.5", "model.layers=4", "model.moe.first_dense_layers=1",
                              "model.mtp_layers=0", "parallel.tp=8", "parallel.pp=1", "parallel.dp=2",
                              "parallel.ep=2", "parallel.global_batch=16"])
    m = sc.model
    assert (m.q_width, m.kv_hidden, m.hidden) == (12288, 1024, 5120)
    assert m.attention_params() == 5120 * (12288 + 2 * 1024) + 12288 * 5120 + 2 * 128   # + the QK-Norm weights


def test_a_window_alone_means_sliding_and_a_long_window_changes_nothing() -> None:
    base = ["model.seq_len=4096", "parallel.global_batch=64"]
    full = json.loads(_run(*base).stdout)
    wide = json.loads(_run(*base, "model.attention_window=4096").stdout)
    narrow = json.loads(_run(*base, "model.attention_window=512").stdout)
    assert wide["model"]["attention_pattern"] == "sliding"
    assert wide["step_time_s"] == full["step_time_s"] and wide["model_flops_per_step"] == full["model_flops_per_step"]
    assert narrow["step_time_s"] < full["step_time_s"] and narrow["model_flops_per_step"] < full["model_flops_per_step"]
    assert narrow["memory"]["peak_bytes_per_gpu"] == full["memory"]["peak_bytes_per_gpu"]   # flash keeps O(s)


@pytest.mark.parametrize("setting,allowed", [
    ("parallel.sequence_parallel=y", "true or false"),      # lax mode read "y", "on", "1", 1 as true
    ("parallel.sequence_parallel=1", "true or false"),
    ('parallel.tp="2"', "a number, not a string"),          # and a quoted number as the number
    ("parallel.global_batch=6.4e1", "YAML reads 6.4e1 as text; write 6.4e+1"),   # YAML 1.1: no sign, no float
    # the hint said "write 1e+400", which YAML reads as text too (no dot), and 1e+400 then got
    # only "a number, not a string"
    ("parallel.tp=1e400", "write 1.0e+400"), ("parallel.tp=1e+400", "YAML reads 1e+400 as text; write 1.0e+400"),
])
def test_flags_and_numbers_are_not_coerced(setting: str, allowed: str) -> None:
    out = _run(setting)
    assert out.returncode == 2 and allowed in out.stderr, out.stderr


def test_full_attention_or_a_null_window_clears_a_presets_local_layers():
    """`attention_pattern: full` over mistral-7b's sliding window was refused naming a key the user
    never wrote, and `attention_window: null` kept the window; both now give full attention, which
    costs more than the preset's sliding window at a sequence longer than the window."""
    from clustersim.api import simulate
    from clustersim.scenario import scenario_from_dict
    base = {"cluster": {"preset": "dgx-h100", "nodes": 1},
            "parallel": {"tp": 8, "pp": 1, "dp": 1, "micro_batch": 1, "global_batch": 8}}
    sliding = scenario_from_dict({**base, "model": {"preset": "mistral-7b", "seq_len": 16384}})
    full = scenario_from_dict({**base, "model": {"preset": "mistral-7b", "seq_len": 16384, "attention_pattern": "full"}})
    cleared = scenario_from_dict({**base, "model": {"preset": "mistral-7b", "seq_len": 16384, "attention_window": None}})
    assert sliding.model.attention_pattern == "sliding"
    assert full.model.attention_pattern == cleared.model.attention_pattern == "full"
    assert full.model.attention_window == 0
    assert simulate(full).step_time_s > simulate(sliding).step_time_s


@pytest.mark.parametrize("key, value", [("query_width", 12345), ("attention_sinks", True)])
def test_mla_refuses_fields_of_standard_attention(key, value):
    """On an MLA model query_width and attention_sinks were echoed and changed nothing."""
    from clustersim.scenario import scenario_from_dict
    with pytest.raises(InputError) as exc:
        scenario_from_dict({"model": {"preset": "deepseek-v3", key: value}, "cluster": {"preset": "dgx-h100", "nodes": 1},
                            "parallel": {"tp": 8, "pp": 1, "dp": 1, "global_batch": 8}})
    assert exc.value.field == f"model.{key}"
