"""DeepSeek-V2 (``deepseek_v2``) and Qwen2-MoE (``qwen2_moe``) configs, run as ``model: {hf_config: ...}``
through ``python -m clustersim run --json``, against their owners' published parameter counts.

Published counts (the owners' model cards; Qwen2's blog for the 57B total):

* deepseek-ai/DeepSeek-V2 model card: "236B total parameters, of which 21B are activated for each token";
* deepseek-ai/DeepSeek-V2-Lite model card: "15.7B total parameters ... 2.4B activated";
* Qwen/Qwen1.5-MoE-A2.7B model card: "14.3B parameters in total and 2.7B activated parameters";
* Qwen/Qwen2-57B-A14B: 57.41B parameters (Qwen2 blog, qwenlm.github.io/blog/qwen2, the model table's
  "Params" row), 14B activated (the model's name, A14B, on its model card).

DeepSeek counts a token's row of the embedding table, not the table (``active_params_without_embedding``,
as for DeepSeek-V3's "37B activated"); Qwen's activated counts hold the embedding and the output layer
(``active_params``, as Qwen3's, tests/workload/test_presets_published.py). A count passes within 1%,
or, for a figure published to few digits ("2.4B", "A14B"), within that figure's last digit (from half
a unit below to one unit above), the rule of tests/workload/test_presets_published.py.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from math import floor, log10
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "hf_configs"

# fixture: (published total, published active, digits of the active figure, active field of run --json)
PUBLISHED = {
    "DeepSeek-V2": (236e9, 21e9, 2, "active_params_without_embedding"),
    "DeepSeek-V2-Lite": (15.7e9, 2.4e9, 2, "active_params_without_embedding"),
    "Qwen1.5-MoE-A2.7B": (14.3e9, 2.7e9, 2, "active_params"),
    "Qwen2-57B-A14B": (57.41e9, 14e9, 2, "active_params"),
}
SEQ_LEN = 4096


def _close(ours: float, published: float, digits: int) -> bool:
    if abs(ours / published - 1) <= 0.01:
        return True
    unit = 10 ** (floor(log10(published)) - digits + 1)
    return -unit / 2 <= ours - published < unit


def _run(config: Path, *extra: str) -> subprocess.CompletedProcess:
    args = ["run", "--json", "--set", "model.preset=null", "--set", f"model.hf_config={config}",
            "--set", f"model.seq_len={SEQ_LEN}", "--set", "cluster.nodes=2", "--set", "parallel.tp=1",
            "--set", "parallel.pp=1", "--set", "parallel.dp=16", "--set", "parallel.ep=4",
            "--set", "parallel.sequence_parallel=false", "--set", "parallel.global_batch=64", *extra]
    return subprocess.run([sys.executable, "-m", "clustersim", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_config_runs_at_the_published_counts(name: str) -> None:
    total, active, digits, field = PUBLISHED[name]
    out = _run(HERE / name / "config.json")
    assert out.returncode in (0, 3), out.stderr          # 3: read and simulated, does not fit 16 GPUs
    model = json.loads(out.stdout)["model"]
    assert model["seq_len"] == SEQ_LEN
    assert abs(model["params"] / total - 1) <= 0.01, (name, model["params"] / 1e9)
    assert _close(model[field], active, digits), (name, model[field] / 1e9)


def test_deepseek_v2_reads_mla_and_the_routing_of_each_model() -> None:
    """V2: q_lora_rank 1536 and group-limited routing (topk_method group_limited_greedy, 3 of 8
    groups); V2-Lite: a plain query projection (q_lora_rank null) and greedy routing over all 64
    experts (DeepSeek-V2's MoEGate)."""
    from clustersim.workload.hf_config import read_hf_config
    v2 = read_hf_config(str(HERE / "DeepSeek-V2" / "config.json"))
    lite = read_hf_config(str(HERE / "DeepSeek-V2-Lite" / "config.json"))
    assert (v2["attention"], v2["q_lora_rank"], v2["kv_lora_rank"]) == ("mla", 1536, 512)
    assert (v2["moe"]["router_num_groups"], v2["moe"]["router_group_topk"]) == (8, 3)
    assert (v2["moe"]["shared_experts"], v2["moe"]["first_dense_layers"]) == (2, 1)
    assert (lite["attention"], lite["q_lora_rank"]) == ("mla", 0)
    assert "router_num_groups" not in lite["moe"]


def test_greedy_routing_ignores_n_group(tmp_path: Path) -> None:
    """topk_method greedy takes the top-k over every expert whatever n_group says."""
    from clustersim.workload.hf_config import read_hf_config
    cfg = json.loads((HERE / "DeepSeek-V2" / "config.json").read_text())
    cfg["topk_method"] = "greedy"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert "router_num_groups" not in read_hf_config(str(path))["moe"]


def test_qwen2_moe_reads_its_shared_expert_width() -> None:
    from clustersim.workload.hf_config import read_hf_config
    small = read_hf_config(str(HERE / "Qwen1.5-MoE-A2.7B" / "config.json"))
    big = read_hf_config(str(HERE / "Qwen2-57B-A14B" / "config.json"))
    assert small["moe"] == {"experts": 60, "top_k": 4, "expert_ffn_hidden": 1408, "shared_ffn_hidden": 5632}
    assert big["moe"] == {"experts": 64, "top_k": 8, "expert_ffn_hidden": 2560, "shared_ffn_hidden": 20480}
    assert "qk_norm" not in small and (big["heads"], big["kv_heads"]) == (28, 4)


@pytest.mark.parametrize("name,change,key", [
    ("DeepSeek-V2", lambda c: c.update(some_new_moe_trick=4), "some_new_moe_trick"),
    ("Qwen1.5-MoE-A2.7B", lambda c: c.update(some_new_moe_trick=4), "some_new_moe_trick"),
    ("DeepSeek-V2", lambda c: c.update(topk_method="noaux_tc"), "topk_method"),
    ("DeepSeek-V2", lambda c: c.update(topk_group=9), "topk_group"),
    ("Qwen2-57B-A14B", lambda c: c.update(use_sliding_window=True), "use_sliding_window"),
    ("Qwen2-57B-A14B", lambda c: c.update(mlp_only_layers=list(range(28))), "mlp_only_layers"),
    ("DeepSeek-V2-Lite", lambda c: c.update(num_nextn_predict_layers=1), "num_nextn_predict_layers"),
])
def test_a_key_that_changes_cost_is_refused_by_name(tmp_path: Path, name, change, key) -> None:
    cfg = copy.deepcopy(json.loads((HERE / name / "config.json").read_text()))
    change(cfg)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    out = _run(path)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert key in out.stderr, out.stderr
