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


# the shape of Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh: FP8 flags in an if block on DTYPE
BRANCHY = """#!/bin/bash
DTYPE="{dtype}"
PRETRAIN_SCRIPT_PATH="pretrain_gpt.py"
TOKENIZER_ARG=${{3:-"MOCK"}} # Path to tokenizer model, or "MOCK"
DTYPE_ARGS=()
if [[ "$DTYPE" == "fp8" ]]; then
    DTYPE_ARGS+=(
        "--fp8-format hybrid"
        "--fp8-amax-history-len 1024"
    )
fi
if [[ "$TOKENIZER_ARG" == "MOCK" ]] || [[ -z "$TOKENIZER_ARG" ]]; then
    DATA=( --tokenizer-type NullTokenizer --vocab-size 32000 )
else
    DATA=( --tokenizer-type HuggingFaceTokenizer --tokenizer-model $TOKENIZER_ARG --vocab-size 50000 )
fi
if [ ! -f "$PRETRAIN_SCRIPT_PATH" ]; then
    echo "Error: pretrain_gpt.py not found at $PRETRAIN_SCRIPT_PATH"
    exit 1
fi
torchrun --nproc_per_node 8 --nnodes 1 "$PRETRAIN_SCRIPT_PATH" --num-layers 32 --hidden-size 4096 \\
    --num-attention-heads 32 --seq-length 4096 --bf16 ${{DTYPE_ARGS[@]}} ${{DATA[@]}}
"""


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_if_blocks_on_the_files_own_variables_are_decided(dtype):
    """With DTYPE="bf16" the script trains in bf16: its fp8 block was read anyway (dtype fp8); the
    else branch's tokenizer replaced the MOCK branch's."""
    sc = _import(BRANCHY.format(dtype=dtype)).scenario
    assert sc["training"]["dtype"] == dtype
    assert sc["model"]["vocab"] == 32128   # NullTokenizer's 32000 + EOD, padded to 128 (the MOCK branch)


@pytest.mark.parametrize("cond, expected", [
    ('[ "$TP" -gt 4 ]', "fp8"), ('[ "$TP" -le 4 ]', "bf16"), ("[[ $NAME == llama* ]]", "fp8"),
    ('[ "$NAME" != "llama3" ] && [ -n "$TP" ]', "bf16"), ('! [ -z "$NAME" ]', "fp8"),
])
def test_conditions_elif_else_and_one_liners(cond, expected):
    script = f"""TP=8
NAME=llama3
if {cond}; then EXTRA="--fp8-format hybrid"; elif [ "$TP" = 8 ]; then EXTRA="--fp16"; else EXTRA=""; fi
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py {MODEL.replace('--bf16', '')} --bf16 $EXTRA
"""
    if expected == "bf16":      # the elif branch: --fp16 beside --bf16 is refused, naming both
        with pytest.raises(InputError) as exc:
            _import(script)
        assert exc.value.field == "--bf16 and --fp16"
    else:
        assert _import(script).scenario["training"]["dtype"] == expected


def test_an_undecidable_condition_around_flags_is_refused_naming_them():
    script = f"""if [[ "$SLURM_JOB_PARTITION" == "h100" ]]; then
    EXTRA="--fp8-format hybrid --fp8-recipe delayed"
fi
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py {MODEL} $EXTRA
"""
    with pytest.raises(InputError) as exc:
        _import(script)
    assert "SLURM_JOB_PARTITION" in exc.value.field and exc.value.value == "--fp8-format --fp8-recipe"


@pytest.mark.parametrize("per_vstage, vpp", [(4, 2), (8, None), (3, "refused"), (5, "refused")])
def test_layers_per_virtual_stage_must_divide_a_stage(per_vstage, vpp):
    """32 layers on pp 4 with 3 layers per virtual stage was imported as virtual_stages 2 (32 // 12);
    Megatron-LM's validate_args asserts 8 % 3 == 0."""
    line = (f"torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py {MODEL} --tensor-model-parallel-size 2 "
            f"--pipeline-model-parallel-size 4 --global-batch-size 128 "
            f"--num-layers-per-virtual-pipeline-stage {per_vstage}")
    if vpp == "refused":
        with pytest.raises(InputError) as exc:
            _import(line)
        assert exc.value.field == "--num-layers-per-virtual-pipeline-stage"
        return
    p = _import(line).scenario["parallel"]
    assert p.get("virtual_stages") == vpp and p["schedule"] == ("interleaved-1f1b" if vpp else "1f1b")


@pytest.mark.parametrize("tp, vocab", [(1, 50304), (2, 50432), (8, 51200)])
def test_pretrain_gpt_without_tokenizer_type_uses_gpt2_bpe(tp, vocab):
    """pretrain_gpt.py passes args_defaults={'tokenizer_type': 'GPT2BPETokenizer'}: 50,257 tokens
    padded to a multiple of 128 x tp (_vocab_size_with_padding); model.vocab was left unset (exit 2)."""
    line = (f"torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
            f"--num-attention-heads 16 --seq-length 1024 --tensor-model-parallel-size {tp} "
            "--vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt --fp16")
    assert _import(line).scenario["model"]["vocab"] == vocab


def test_torchrun_without_nnodes_is_one_node():
    line = f"torchrun --nproc-per-node 4 pretrain_gpt.py {MODEL}"
    sc = _import(line).scenario
    assert sc["cluster"] == {"preset": "dgx-h100", "nodes": 1, "gpus_per_node": 4} and sc["parallel"]["dp"] == 4
    assert _import(f"torchrun --nproc-per-node 8 pretrain_gpt.py {MODEL}", nodes=2).scenario["cluster"]["nodes"] == 2


def test_arithmetic_expansion_of_the_files_own_variables():
    """``WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES))`` and ``GBS=$((DP * 16))``, as launch scripts
    compute sizes: the global batch was refused as a shell variable the file does not set."""
    script = f"""#!/bin/bash
GPUS_PER_NODE=8
NNODES=2
WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES))
TP=2
PP=2
DP=$(( WORLD_SIZE / (TP * PP) ))
GBS=$((DP * 16))
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \\
    --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP \\
    --micro-batch-size $(( GBS / DP / 8 )) --global-batch-size $GBS {MODEL}
"""
    sc = _import(script).scenario
    p = sc["parallel"]
    assert (p["tp"], p["pp"], p["dp"], p["micro_batch"], p["global_batch"], sc["cluster"]["nodes"]) == \
        (2, 2, 4, 2, 64, 2)


def test_arithmetic_on_a_variable_the_file_does_not_set_stays_unresolved():
    script = f"""GBS=$((DP * 16))
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --global-batch-size $GBS {MODEL}
"""
    with pytest.raises(InputError) as err:
        _import(script)
    assert err.value.field == "--global-batch-size"


@pytest.mark.parametrize(("expr", "env", "value"), [
    ("2 + 3 * 4", {}, "14"), ("(2 + 3) * 4", {}, "20"), ("7 / 2", {}, "3"), ("-7 / 2", {}, "-3"),
    ("-7 % 3", {}, "-1"), ("7 % -3", {}, "1"), ("2 ** 10", {}, "1024"), ("A*B", {"A": "3", "B": "5"}, "15"),
    ("A + 1", {"A": "x"}, None), ("A + 1", {}, None), ("1 / 0", {}, None), ("1 % 0", {}, None),
    ("10 ** 10 ** 10", {}, None), ("2 < 3", {}, None), ("__import__('os')", {}, None), ("1.5 * 2", {}, None),
])
def test_bash_arithmetic_in_integers(expr, env, value):
    """GNU Bash Reference Manual §6.5: integer arithmetic, ``/`` truncating toward zero and ``%``
    taking the dividend's sign (C); anything else is left as written (None)."""
    from clustersim.importers.shell_arith import evaluate, expand_arithmetic

    assert evaluate(expr, env) == value
    text = f"--x $(({expr})) --y"
    assert expand_arithmetic(text, env) == (text if value is None else f"--x {value} --y")


CASE_SCRIPT = """MODEL_SIZE={size}
case $MODEL_SIZE in
  7B)
    HIDDEN=4096
    LAYERS=32
    ;;
  13B|13b) HIDDEN=5120; LAYERS=40 ;;
  *)
    echo "unknown size"; exit 1
    ;;
esac
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-layers $LAYERS --hidden-size $HIDDEN \\
    --num-attention-heads 32 --seq-length 4096 --tokenizer-type NullTokenizer --vocab-size 32000 --bf16 \\
    --micro-batch-size 1 --global-batch-size 64
"""


@pytest.mark.parametrize(("size", "shape"), [("7B", (32, 4096)), ("13B", (40, 5120)), ("13b", (40, 5120)),
                                             ('"7B"', (32, 4096))])
def test_a_case_block_runs_the_matching_item_only(size, shape):
    """Every item's assignments ran and the last won: a 7B script was read as 13B, exit 0."""
    m = _import(CASE_SCRIPT.format(size=size)).scenario["model"]
    assert (m["layers"], m["hidden"]) == shape


def test_a_case_on_the_jobs_environment_is_refused_naming_the_flag():
    with pytest.raises(InputError) as err:
        _import(CASE_SCRIPT.format(size="${1}"))
    assert err.value.field == "--num-layers" and "branch" in err.value.allowed


def test_a_value_set_in_an_undecided_if_is_not_the_last_branchs():
    """``if [ -f ... ]`` decides nothing here: a TP set in it was the else branch's 2 (or the
    file's earlier value), silently."""
    script = f"""TP=2
if [ -f /etc/big_cluster ]; then
  TP=8
fi
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --tensor-model-parallel-size $TP {MODEL}
"""
    with pytest.raises(InputError) as err:
        _import(script)
    assert err.value.field == "--tensor-model-parallel-size" and "branch" in err.value.allowed


def test_an_unresolved_flag_that_changes_the_cost_is_refused_and_others_noted():
    """``--num-query-groups $GQA`` with GQA unset was ignored with a note (full multi-head attention
    simulated); ``--lr $LR`` changes nothing simulated and stays a note."""
    script = f"torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-query-groups $GQA {MODEL}\n"
    with pytest.raises(InputError) as err:
        _import(script)
    assert err.value.field == "--num-query-groups"
    mapped = _import(f"torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --lr $LR {MODEL}\n")
    assert any("--lr" in n or "lr" in n for n in mapped.notes)


def test_fall_through_case_items_are_refused():
    script = CASE_SCRIPT.format(size="7B").replace("    ;;\n  13B", "    ;&\n  13B", 1)
    with pytest.raises(InputError) as err:
        _import(script)
    assert err.value.field == "case"


AND_OR = """USE_FP8={fp8}
ARGS=({model} --micro-batch-size 1 --global-batch-size 64)
[ "$USE_FP8" = "1" ] && ARGS+=(--fp8-format hybrid)
[[ $USE_FP8 == 1 ]] || ARGS+=(--recompute-granularity full --recompute-method uniform --recompute-num-layers 1)
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py "${{ARGS[@]}}"
"""


@pytest.mark.parametrize(("fp8", "dtype", "recompute"), [("0", "bf16", "full"), ("1", "fp8", "none")])
def test_a_command_guarded_by_a_test_runs_only_when_bash_would(fp8, dtype, recompute):
    """``[ "$USE_FP8" = "1" ] && ARGS+=(--fp8-format hybrid)``: the guarded flags were always taken
    (an fp8 job from a script that said USE_FP8=0)."""
    sc = _import(AND_OR.format(fp8=fp8, model=MODEL)).scenario
    assert (sc["training"]["dtype"], sc["parallel"]["recompute"]) == (dtype, recompute)


def test_a_guard_on_the_jobs_environment_is_refused_naming_the_flags():
    with pytest.raises(InputError) as err:
        _import(AND_OR.format(fp8="$1", model=MODEL))
    assert "--fp8-format" in str(err.value.value)


def test_torchrun_with_fewer_ranks_per_node_than_gpus_keeps_them_per_node():
    """--nproc-per-node 4 --nnodes 4 on 8-GPU nodes was imported as 2 full nodes: TP8 then sat in
    one node where it ran across two (4.60 s against 5.96 s as launched)."""
    sc = _import(f"torchrun --nproc-per-node 4 --nnodes 4 pretrain_gpt.py {MODEL} --tensor-model-parallel-size 8")
    assert sc.scenario["cluster"] == {"preset": "dgx-h100", "nodes": 4, "gpus_per_node": 4}
    assert sc.scenario["parallel"]["dp"] == 2
    assert any("--nproc-per-node 4" in n for n in sc.notes)
    full = _import(f"torchrun --nproc-per-node 8 --nnodes 2 pretrain_gpt.py {MODEL}").scenario
    assert full["cluster"] == {"preset": "dgx-h100", "nodes": 2}
    with pytest.raises(InputError) as exc:
        _import(f"torchrun --nproc-per-node 16 --nnodes 1 pretrain_gpt.py {MODEL}")
    assert exc.value.field == "--nproc-per-node"
