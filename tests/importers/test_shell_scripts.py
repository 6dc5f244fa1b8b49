"""Launch scripts read as bash would read them: parameter defaults and if/else blocks
(clustersim/importers/megatron_parse.py; docs/calibration.md, section 3)."""

import pytest

from clustersim.errors import InputError
from clustersim.importers import finish, import_text

MODEL = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
         "--tokenizer-type NullTokenizer --vocab-size 32000 --bf16")


def _import(script, nodes=None):
    return finish(import_text("megatron-args", script, "train.sh", cluster="dgx-h100", nodes=nodes), [])


def test_a_variable_defaulting_to_itself_takes_its_default():
    """``TP=${TP:-4}`` (the job's environment is not the file's: bash's default is the value) was left
    as '$...' and refused as a shell variable the file does not set."""
    script = f"""#!/bin/bash
NNODES=${{NNODES:-2}}
GPUS_PER_NODE=${{GPUS_PER_NODE-8}}
TP=${{TP:-4}}
PP=${{PP:-"2"}}
GBS=${{1:-256}}
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \\
    --tensor-model-parallel-size $TP --pipeline-model-parallel-size ${{PP}} \\
    --micro-batch-size ${{MBS:-1}} --global-batch-size $GBS {MODEL}
"""
    sc = _import(script).scenario
    p = sc["parallel"]
    assert (p["tp"], p["pp"], p["dp"], p["micro_batch"], p["global_batch"], sc["cluster"]["nodes"]) == \
        (4, 2, 2, 1, 256, 2)


def test_an_empty_variable_takes_the_colon_default_only():
    script = f"""TP=
PP=
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --tensor-model-parallel-size ${{TP:-2}} \\
    --pipeline-model-parallel-size ${{PP-4}}2 {MODEL}
"""
    p = _import(script).scenario["parallel"]
    assert (p["tp"], p["pp"]) == (2, 2)     # ${PP-4} of an empty PP is empty: "2"
