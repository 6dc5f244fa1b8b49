"""Launches Megatron-LM refuses at start-up are refused by the importer, naming the flag
(megatron/training/arguments.py validate_args at d98e8a64d; clustersim.importers.megatron_split
check_split_asserts), and an export of a split Megatron builds only from a flag states it."""

import pytest

from clustersim.errors import InputError
from clustersim.importers import import_text
from clustersim.importers.megatron_export import megatron_command
from clustersim.scenario import load_scenario

HEAD = ("torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --hidden-size 4096 --num-attention-heads 32 "
        "--group-query-attention --num-query-groups 8 --ffn-hidden-size 14336 --swiglu --seq-length 4096 "
        "--max-position-embeddings 4096 --tokenizer-type NullTokenizer --vocab-size 128256 "
        "--make-vocab-size-divisible-by 1 --tensor-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 64 "
        "--bf16 ")


@pytest.mark.parametrize("flags, named", [
    ("--num-layers 30 --pipeline-model-parallel-size 4", "--pipeline-model-parallel-size"),
    ("--num-layers 32 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
     "--no-overlap-p2p-communication", "--no-overlap-p2p-communication"),
    ("--num-layers 32 --pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*8|t*8|t*8|t*8L' "
     "--num-virtual-stages-per-pipeline-rank 2", "mutually exclusive"),
    ("--num-layers 32 --pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*8|t*8|t*8|t*8L' "
     "--num-virtual-stages-per-pipeline-rank 4", "mutually exclusive"),
])
def test_refused_launch_names_the_flag(flags, named):
    with pytest.raises(InputError) as exc:
        import_text("megatron-args", HEAD + flags, "cmd", cluster="dgx-h100")
    assert named in str(exc.value)


def test_export_states_an_uneven_default_split_as_a_layout():
    text = megatron_command(load_scenario("scenarios/llama3_405b_h100x16384.yaml"))
    assert "--pipeline-model-parallel-layout" in text
