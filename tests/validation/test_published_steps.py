"""The MoE and CP validation tables (validation/reference/*.yaml, benchmarks/accuracy_moe.py and
accuracy_cp.py): the files load, every run is a valid scenario, the measured step times are derived
as the files state, and the cheap rows stay within 20% of what was published."""

import re
from pathlib import Path

import pytest

from validation.published_steps import CP_FILE, MOE_FILE, megatron_flops_per_step, not_simulated, runs


@pytest.mark.parametrize("path", [MOE_FILE, CP_FILE])
def test_every_run_is_a_valid_scenario_with_a_source(path):
    rows = runs(path)
    assert len(rows) >= 5
    assert len({r.id for r in rows}) == len(rows)
    for r in rows:
        assert r.source and r.build().cluster.num_gpus > 0
        assert 0.5 < r.measured_step_time_s() < 120


def test_measured_step_times_follow_the_published_figures():
    by_id = {r.id: r for r in runs(MOE_FILE)}
    # Megatron-Bridge 25.09: 1297 tokens/s/GPU on 1024 H100, 8192 sequences of 4096 tokens
    assert by_id["dsv3-h100x1024-mbridge-25.09"].measured_step_time_s() == pytest.approx(8192 * 4096 / (1297 * 1024))
    # DeepSeek-V3: 180K GPU-hours per trillion tokens, 15,360 x 4,096 tokens on 2,048 GPUs
    assert by_id["dsv3-h800x2048-deepseek"].measured_step_time_s() == pytest.approx(
        180_000 * 3600 / 1e12 * 15360 * 4096 / 2048, rel=1e-3)
    # Mixtral 8x7B, 468 TFLOP/s by Megatron's formula: 12 B s L h^2 ((1 + 8/32 + s/h) + 3.5 * 2 * 1.5 + V / 2Lh)
    mix = by_id["mixtral-8x7b-h100x64-mcore-readme"]
    flops = 12 * 256 * 4096 * 32 * 4096**2 * ((1 + 8 / 32 + 1) + 14336 / 4096 * 2 * 1.5 + 32000 / (2 * 32 * 4096))
    assert megatron_flops_per_step(mix.build()) == pytest.approx(flops)
    assert mix.measured_step_time_s() == pytest.approx(flops / (468e12 * 64))


def test_rows_left_out_say_why():
    assert all(item["reason"] and item["source"] for item in not_simulated(MOE_FILE))


@pytest.mark.parametrize("path, run_id", [
    (MOE_FILE, "mixtral-8x7b-h100x64-mcore-readme"),
    (MOE_FILE, "dsv3-gb200x256-bf16-mbridge-25.11"),
    (CP_FILE, "llama31-405b-b200x128-cp2-8k-mbridge-25.11"),
])
def test_cheap_rows_within_20_percent(path, run_id):
    (run,) = [r for r in runs(path) if r.id == run_id]
    p = run.predict()
    assert abs(p.error) < 0.20, p


def test_the_qwen3_and_gpt_oss_rows_are_simulated_with_their_layouts():
    """Megatron-Bridge 26.04.01's Qwen3-30B-A3B, Qwen3-235B-A22B and GPT-OSS-120B rows (H100 and
    B200) are runs, not rows left out, and their step times follow the published tokens/s."""
    by_id = {r.id: r for r in runs(MOE_FILE)}
    for model in ("qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b"):
        for system in ("h100", "b200"):
            assert any(i.startswith(f"{model}-{system}") for i in by_id), (model, system)
    assert not any(item["id"].startswith(("qwen3", "gpt-oss")) for item in not_simulated(MOE_FILE))
    q = by_id["qwen3-30b-a3b-h100x16-mbridge-26.04.01"]
    assert q.measured_step_time_s() == pytest.approx(1024 * 4096 / (8960 * 16))
    assert q.build().model.head_dim == 128 and q.build().model.qk_norm


@pytest.mark.parametrize("run_id", ["qwen3-30b-a3b-h100x16-mbridge-26.04.01", "gpt-oss-120b-h100x64-mbridge-26.04.01",
                                    "gpt-oss-120b-b200x64-mbridge-26.04.01"])
def test_cheap_new_rows_stay_where_docs_moe_md_says(run_id):
    """docs/moe.md's table records each row's error (nothing fitted); a change that moves one by more
    than ten points from it should update that table."""
    doc = (Path(__file__).parents[2] / "docs" / "moe.md").read_text()
    (line,) = [ln for ln in doc.splitlines() if ln.startswith(f"| {run_id} |")]
    (cell,) = [c for c in (c.strip().strip("*") for c in line.split("|")) if re.fullmatch(r"[+-]\d+\.\d%", c)]
    (run,) = [r for r in runs(MOE_FILE) if r.id == run_id]
    assert abs(run.predict().error - float(cell[:-1]) / 100) < 0.10
