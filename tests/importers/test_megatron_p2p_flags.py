"""Megatron's pipeline-exchange flags in a launch command: none is read as unknown and ignored."""

from __future__ import annotations

from clustersim.importers import import_text

CMD = ("torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
       "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --ffn-hidden-size 14336 --swiglu "
       "--seq-length 4096 --max-position-embeddings 4096 --tokenizer-type NullTokenizer --vocab-size 128256 "
       "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --micro-batch-size 1 --global-batch-size 64 "
       "--bf16 --overlap-p2p-communication-warmup-flush {extra}")


def _import(extra: str):
    return import_text("megatron-args", CMD.format(extra=extra), "cmd", cluster="dgx-h100")


def test_warmup_flush_is_known_and_noted_as_not_modelled_when_interleaved() -> None:
    mapped = _import("--num-layers-per-virtual-pipeline-stage 4")
    assert mapped.unknown == []
    assert mapped.scenario["parallel"]["schedule"] == "interleaved-1f1b"
    note = next(n for n in mapped.notes if n.startswith("--overlap-p2p-communication-warmup-flush"))
    assert "not modelled" in note and "cool-down" in note


def test_warmup_flush_without_interleaving_is_noted_as_without_effect() -> None:
    mapped = _import("")
    assert mapped.unknown == []
    assert any(n.startswith("--overlap-p2p-communication-warmup-flush: no effect") for n in mapped.notes)
