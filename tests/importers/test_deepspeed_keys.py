"""Every key of a DeepSpeed config that changes cost is mapped or refused by name, the others are
listed (notes, unknown_args): they were dropped silently (deepspeedai/DeepSpeed edaa722: runtime/config.py,
constants.py, zero/config.py, zero/offload_config.py, engine.py)."""

from __future__ import annotations

import json

import pytest

from clustersim.cli import main
from clustersim.errors import InputError
from clustersim.importers import finish, import_text

BASE = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8,
        "bf16": {"enabled": True}}


def imported(cfg: dict, overrides: list[str] | None = None, nodes: int | None = None, parallel: dict | None = None):
    res = import_text("deepspeed-json", json.dumps(cfg), "ds.json", cluster="dgx-a100", nodes=nodes,
                      parallel=parallel)
    return finish(res, overrides or [], model="llama2-7b")


def test_the_legacy_cpu_offload_is_optimizer_offload():
    res = imported({**BASE, "fp16": {"enabled": True}, "bf16": {"enabled": False},
                    "zero_optimization": {"stage": 2, "cpu_offload": True}})
    assert res.scenario["parallel"]["offload"] == {"optimizer": True}


def test_overlap_comm_and_the_bucket_are_mapped():
    par = imported({**BASE, "zero_optimization": {"stage": 2, "overlap_comm": True,
                                                  "reduce_bucket_size": 5e7}}).scenario["parallel"]
    assert par["overlap_grad_reduce"] is True and par["dp_bucket_params"] == 50_000_000
    par = imported({**BASE, "zero_optimization": {"stage": 2, "overlap_comm": False}}).scenario["parallel"]
    assert par["overlap_grad_reduce"] is False


def test_overlap_comm_left_out_follows_deepspeeds_default_per_stage():
    """DeepSpeed turns overlap_comm on by default for ZeRO stage 3 only (deepspeed/runtime/zero/config.py
    overlap_comm_valid: ``self.overlap_comm = self.stage == ZeroStageEnum.weights`` when unset); a stage-3
    config without the key was imported with the deepspeed framework's default, off."""
    res = imported({**BASE, "zero_optimization": {"stage": 3}})
    assert res.scenario["parallel"]["overlap_grad_reduce"] is True
    assert any("overlap_comm" in n for n in res.notes)
    par = imported({**BASE, "zero_optimization": {"stage": 3, "overlap_comm": False}}).scenario["parallel"]
    assert par["overlap_grad_reduce"] is False
    for stage in (0, 1, 2):
        res = imported({**BASE, "zero_optimization": {"stage": stage}})
        assert "overlap_grad_reduce" not in res.scenario["parallel"], stage
        assert not any("overlap_comm" in n for n in res.notes)
    res = imported(BASE)   # no zero_optimization: stage 0
    assert "overlap_grad_reduce" not in res.scenario["parallel"]


def test_overlap_comm_null_is_the_stage_default():
    """DeepSpeed declares ``overlap_comm: Optional[bool] = None`` and overlap_comm_valid turns None
    into ``stage == 3`` (deepspeed/runtime/zero/config.py): a null was refused as no boolean."""
    res = imported({**BASE, "zero_optimization": {"stage": 3, "overlap_comm": None}})
    assert res.scenario["parallel"]["overlap_grad_reduce"] is True
    assert any("overlap_comm" in n for n in res.notes)
    res = imported({**BASE, "zero_optimization": {"stage": 2, "overlap_comm": None}})
    assert "overlap_grad_reduce" not in res.scenario["parallel"]


def test_cpu_checkpointing_offloads_the_activations():
    res = imported({**BASE, "zero_optimization": {"stage": 3},
                    "activation_checkpointing": {"partition_activations": True, "cpu_checkpointing": True}})
    par = res.scenario["parallel"]
    assert par["offload"] == {"activations": True} and par["recompute"] == "full"
    assert any("activation_checkpointing.partition_activations" in n for n in res.notes)


@pytest.mark.parametrize(("change", "field"), [
    ({"amp": {"enabled": True, "opt_level": "O1"}, "bf16": {"enabled": False}}, "amp.enabled"),
    ({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.3}}},
     "zero_optimization.offload_optimizer.ratio"),
    ({"sequence_parallel_size": 4, "train_batch_size": 16, "zero_optimization": {"stage": 3}},
     "sequence_parallel_size"),
    ({"optimizer": {"type": "OneBitAdam", "params": {"lr": 1e-4}}}, "optimizer.type"),
    ({"optimizer": {"type": "Lamb"}}, "optimizer.type"),
    ({"optimizer": {"type": "Lion"}}, "optimizer.type"),
    ({"communication_data_type": "fp16", "zero_optimization": {"stage": 2}}, "communication_data_type"),
    ({"zero_optimization": {"stage": 2, "reduce_scatter": False}}, "zero_optimization.reduce_scatter"),
    ({"zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}},
     "zero_optimization.offload_optimizer.device"),
    ({"zero_optimization": {"stage": 0, "cpu_offload": True}}, "zero_optimization.cpu_offload"),
    ({"pipeline": {"pipe_partitioned": True}, "train_batch_size": 256, "gradient_accumulation_steps": 64},
     "pipeline"),
])
def test_what_is_not_modelled_is_refused_by_name(change, field):
    with pytest.raises(InputError) as exc:
        imported({**BASE, **change})
    assert exc.value.field == field


def test_the_training_dtype_as_communication_dtype_and_adamw_import():
    res = imported({**BASE, "communication_data_type": "bf16", "optimizer": {"type": "AdamW"},
                    "zero_optimization": {"stage": 2}})
    assert res.scenario["training"]["optimizer"] == "adam"


def test_cost_free_keys_are_noted_and_unknown_keys_listed(tmp_path, capsys):
    cfg = tmp_path / "ds.json"
    cfg.write_text(json.dumps({**BASE, "steps_per_print": 10, "wall_clock_breakdown": True, "totally_made_up_key": 7,
                               "zero_optimization": {"stage": 3, "no_such_zero_key": 3,
                                                     "stage3_prefetch_bucket_size": 1e8,
                                                     "stage3_param_persistence_threshold": 1e4}}))
    with pytest.raises(SystemExit) as exc:
        main(["import", "deepspeed-json", str(cfg), "--cluster", "dgx-a100", "--model", "llama2-7b", "--json"])
    assert exc.value.code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["unknown_args"] == ["totally_made_up_key", "zero_optimization.no_such_zero_key"]
    notes = " | ".join(doc["notes"])
    assert "steps_per_print" in notes and "wall_clock_breakdown" in notes
    assert "not modelled: the ZeRO-3 plan uses DeepSpeed's defaults" in notes
    assert "stage3_prefetch_bucket_size" in notes and "stage3_param_persistence_threshold" in notes


def test_bf16_zero1_with_cpu_offload_runs_deepspeeds_zero_optimizer():
    res = imported({**BASE, "data_types": {"grad_accum_dtype": "fp32"},
                    "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}})
    assert res.scenario["framework"] == "deepspeed" and res.framework == "deepspeed"
    assert res.scenario["parallel"]["offload"] == {"optimizer": True}


def test_the_pipeline_degree_is_read_or_asked_for():
    cfg = {**BASE, "train_batch_size": 256, "gradient_accumulation_steps": 64, "zero_optimization": {"stage": 1},
           "pipeline": {"activation_checkpoint_interval": 1}}
    # stages "auto": pp must be given; then the batch arithmetic counts it (4 dp ranks x 4 stages = 16 GPUs)
    res = imported(cfg, ["parallel.pp=4"], parallel={"pp": 4})
    par = res.scenario["parallel"]
    assert (par["pp"], par["dp"]) == (4, 4) and res.scenario["cluster"]["nodes"] == 2
    res = imported({**cfg, "pipeline": {"stages": 2}})
    par = res.scenario["parallel"]
    assert (par["pp"], par["dp"]) == (2, 4) and res.scenario["cluster"]["nodes"] == 1


def test_model_parallel_sizes_of_set_count_before_the_batch_arithmetic(tmp_path, capsys):
    cfg = tmp_path / "ds.json"
    cfg.write_text(json.dumps({"train_batch_size": 256, "train_micro_batch_size_per_gpu": 1,
                               "gradient_accumulation_steps": 32, "bf16": {"enabled": True},
                               "zero_optimization": {"stage": 1}}))
    base = ["import", "deepspeed-json", str(cfg), "--cluster", "dgx-a100", "--set", "model.preset=llama2-70b"]
    with pytest.raises(SystemExit) as exc:
        main([*base, "--nodes", "8", "--set", "parallel.tp=8", "--json"])
    out = capsys.readouterr()
    assert exc.value.code == 0, out.err
    sc = json.loads(out.out)["scenario"]
    assert (sc["parallel"]["tp"], sc["parallel"]["dp"], sc["cluster"]["nodes"]) == (8, 8, 8)
    # without the tp the message says how to give it (it said "--nodes 8 gives 64 data-parallel ranks")
    with pytest.raises(SystemExit) as exc:
        main([*base, "--nodes", "4"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--set parallel.tp=N" in err



@pytest.mark.parametrize("option,typed,allowed", [("--model", "nope", "llama3-8b"),
                                                  ("--model", "llama3-8", "did you mean 'llama3-8b'"),
                                                  ("--hf-config", "/nonexistent/config.json", "config.json")])
def test_an_unknown_model_option_is_named_as_the_option(tmp_path, capsys, option, typed, allowed):
    """--model NAME and --hf-config FILE are the user's, not the file's: the message said
    "model.preset: got 'nope' ... (the value the deepspeed-json importer read from ds.json)"."""
    cfg = tmp_path / "ds.json"
    cfg.write_text(json.dumps({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 1,
                               "zero_optimization": {"stage": 1}}))
    with pytest.raises(SystemExit) as exc:
        main(["import", "deepspeed-json", str(cfg), "--cluster", "dgx-a100", "--nodes", "1", option, typed])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert f"{option}: got '{typed}'" in err and allowed in err and "read from" not in err
