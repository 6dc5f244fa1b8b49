"""torchtitan: its TOML job config -> a scenario; its training log -> measured step times.

Config (torchtitan/config/job_config.py before the 2026 move to Python registries; 2024 names in
brackets): ``[model] name, flavor, converters``; ``[training] local_batch_size [batch_size],
global_batch_size, seq_len, mixed_precision_param, mixed_precision_reduce`` (``_reduce_dtype``); ``[parallelism]
data_parallel_replicate_degree, data_parallel_shard_degree (-1 = the remaining ranks),
tensor_parallel_degree, pipeline_parallel_degree, context_parallel_degree,
expert_parallel_degree, pipeline_parallel_schedule, pipeline_parallel_microbatch_size,
pipeline_parallel_layers_per_stage, pipeline_parallel_first_stage_less_layers,
pipeline_parallel_last_stage_less_layers, module_fqns_per_model_part`` (the split: ``clustersim.importers.torchtitan_pipeline.pipeline_split``)
([training] data_parallel_degree, tensor_parallel_degree; [experimental]
pipeline_parallel_degree); ``[activation_checkpoint] mode, selective_ac_option``; ``[compile]
enable`` ([training] compile); ``[float8]`` / ``[quantize.linear.float8]`` and older fp8 keys
(``_low_precision``); ``[training] enable_cpu_offload``.

Log (torchtitan/train.py, components/metrics.py): "Building llama3 8B with ModelArgs(dim=4096,
n_layers=32, ...)" (a JSON dump in 2025), "Building N-D device mesh with ['dp_shard', 'tp'], [32,
8]" or "Building device mesh with parallelism: pp=1, dp_replicate=1, dp_shard=8, cp=1, tp=1", "CUDA
capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory", and every ``metrics.log_freq`` steps

    step: 10  loss:  9.1234  grad_norm: 1.2  memory: 42.17GiB(53.25%)  tps: 5,762  tflops: 334.84  mfu: 33.86%

(``wps:`` before "tps" in 2024). tps is tokens per second per GPU over the steps since the last
line: ``ntokens_since_last_log / (time_delta * non_data_parallel_size)`` (metrics.py), so one
step takes ``global_batch * seq_len / (tps * world_size)`` seconds.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Any

from clustersim.errors import InputError
from clustersim.importers.common import (
    NUMBER,
    ImportResult,
    clean_lines,
    cluster_gpus_per_node,
    config_bool,
    config_int,
    config_table,
    detected_cluster,
    steady_state,
)
from clustersim.importers.megatron_args import supports
from clustersim.importers.torchtitan_pipeline import pipeline_split
from clustersim.inputs import MAX_DEPTH, check_structure
from clustersim.limits import MAX_COUNT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the same parser as the tomli package, if installed
    try:
        import tomli as tomllib
    except ImportError:
        tomllib = None

# torchtitan/models/llama3/__init__.py (llama3_configs) and llama2: flavor -> clustersim preset
FLAVORS = {("llama3", "8b"): "llama3-8b", ("llama3", "70b"): "llama3-70b", ("llama3", "405b"): "llama3-405b",
           ("llama2", "7b"): "llama2-7b", ("llama2", "13b"): "llama2-13b", ("llama2", "70b"): "llama2-70b"}
# torchtitan/models/llama3/__init__.py: "debugmodel": dim=256, n_layers=6, n_heads=16, vocab_size=2048
DEBUG_MODEL = {"layers": 6, "hidden": 256, "heads": 16, "vocab": 2048, "ffn_act": "swiglu"}
# pipelining schedules (torch/distributed/pipelining/schedules.py class names) -> scenario schedule
# [activation_checkpoint] mode (torchtitan/config/job_config.py ActivationCheckpoint.mode)
AC_MODES = ("none", "full", "selective")
# [training] mixed_precision_param: Literal["bfloat16", "float32"] (job_config.py; the 2024 argparse choices)
PARAM_DTYPES = {"bfloat16": "bf16", "float32": "fp32"}
SCHEDULES = {"1f1b": "1f1b", "gpipe": "gpipe", "interleaved1f1b": "interleaved-1f1b",
             "zbvzerobubble": "zb-v", "dualpipev": "dualpipe-v"}
# torchtitan schedules clustersim has no counterpart for, and why (the importer names them)
UNMODELLED_SCHEDULES = {
    "interleavedzerobubble": "InterleavedZeroBubble runs two or more stages per rank with the weight gradients "
                             "split off; clustersim's zero-bubble schedules are ZB-H1 (one stage per rank) and "
                             "ZB-V (two, in a V): write ZBVZeroBubble, or Interleaved1F1B"}

STEP = re.compile(r"\bstep:\s*(\d+)\s.*?\b(?:tps|wps):\s*([\d,]+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?![\w.])")
MESH_OLD = re.compile(r"Building \d+-D device mesh with \[([^\]]*)\],\s*\[([^\]]*)\]")
MESH_NEW = re.compile(r"Building device mesh with parallelism:\s*(.*)")
MODEL_KEYS = ("dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "multiple_of", "ffn_dim_multiplier",
              "ffn_hidden_size", "hidden_dim")
_KV = re.compile(r"[\"']?(" + "|".join(MODEL_KEYS) + r")[\"']?\s*[=:]\s*(-?" + NUMBER + r"|None|null)(?![\w.])")


# parallelism.fsdp_reshard_after_forward -> parallel.fsdp.reshard_after_forward (None: the framework's default)
RESHARD_POLICIES: dict[str, bool | None] = {"always": True, "never": False, "default": None}

def read_toml(text: str, source: str) -> dict[str, Any]:
    if tomllib is None:  # pragma: no cover - Python 3.10 without tomli
        raise InputError("torchtitan-toml", source, "Python 3.11+ (tomllib) or `pip install tomli` to read TOML")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError("torchtitan-toml", source, f"a TOML job config ({exc})") from None
    except RecursionError:  # arrays nested thousands deep
        raise InputError("torchtitan-toml", source, f"a TOML job config nesting at most {MAX_DEPTH} levels") from None
    check_structure(data, "torchtitan-toml", source, "a TOML job config")
    if not isinstance(data, dict) or "model" not in data and "training" not in data:
        raise InputError("torchtitan-toml", source, "a torchtitan job config with [model] and [training] sections")
    return data


def _section(cfg: dict[str, Any], *names: str) -> dict[str, Any]:
    """The tables ``names`` merged ({} where absent); a value where a table belongs (``parallelism =
    "x"``) is an InputError naming it."""
    out: dict[str, Any] = {}
    for n in names:
        node: dict[str, Any] = cfg
        parts = n.split(".")
        for i, part in enumerate(parts):
            node = config_table(node.get(part), ".".join(parts[:i + 1]), f"a TOML table ([{n}])")
        out.update(node)
    return out


def llama_ffn(dim: int, multiple_of: int, multiplier: float | None) -> int:
    """Llama's FeedForward width (torchtitan/models/llama3/model.py FeedForward.__init__):
    int(2 * 4 * dim / 3), times ffn_dim_multiplier, rounded up to a multiple of multiple_of."""
    hidden = int(2 * 4 * dim / 3)
    if multiplier:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def model_from_log(lines: list[str]) -> dict[str, Any] | None:
    """Model fields from the "Building <model> <flavor> with ..." record of a torchtitan log."""
    for i, line in enumerate(lines):
        if "Building" in line and " with " in line and "mesh" not in line:
            found: dict[str, str] = {}
            for chunk in lines[i:i + 60]:
                for k, v in _KV.findall(chunk):
                    found.setdefault(k, v)
            if "dim" in found and "n_layers" in found:
                def num(k: str, found: dict[str, str] = found) -> float | None:
                    v = found.get(k)
                    return None if v in (None, "None", "null") else float(v)
                dim, heads = int(num("dim")), int(num("n_heads") or 0)
                fields: dict[str, Any] = {"layers": int(num("n_layers")), "hidden": dim, "heads": heads,
                                          "ffn_act": "swiglu"}
                if num("n_kv_heads"):
                    fields["kv_heads"] = int(num("n_kv_heads"))
                if num("vocab_size"):
                    fields["vocab"] = int(num("vocab_size"))
                ffn = num("ffn_hidden_size") or num("hidden_dim")
                fields["ffn_hidden"] = int(ffn) if ffn else llama_ffn(dim, int(num("multiple_of") or 256),
                                                                      num("ffn_dim_multiplier"))
                return fields
    return None


def mesh_from_log(lines: list[str]) -> dict[str, int]:
    for line in lines:
        m = MESH_NEW.search(line)
        if m:
            return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}
        m = MESH_OLD.search(line)
        if m:
            names = [n.strip(" '\"") for n in m.group(1).split(",") if n.strip()]
            dims = [int(d) for d in m.group(2).split(",") if d.strip()]
            return dict(zip(names, dims, strict=False))
    return {}


# [parallelism] keys of torchtitan's JobConfig (torchtitan/config/job_config.py, class Parallelism, 2025)
PARALLELISM_KEYS = frozenset((
    "data_parallel_replicate_degree", "data_parallel_shard_degree", "enable_compiled_autograd",
    "fsdp_reshard_after_forward", "tensor_parallel_degree", "disable_loss_parallel", "enable_async_tensor_parallel",
    "pipeline_parallel_degree", "module_fqns_per_model_part", "pipeline_parallel_first_stage_less_layers",
    "pipeline_parallel_last_stage_less_layers", "pipeline_parallel_layers_per_stage", "pipeline_parallel_schedule",
    "pipeline_parallel_schedule_csv", "pipeline_parallel_microbatch_size", "pipeline_parallel_split_points",
    "context_parallel_degree", "context_parallel_rotate_method", "context_parallel_load_balancer",
    "expert_parallel_degree", "expert_tensor_parallel_degree", "expert_parallel_comm_backend",
    "data_parallel_type", "data_parallel_degree", "fsdp_bucket_cap_mb"))


# [training] keys of torchtitan's JobConfig (torchtitan/config/job_config.py, class Training, 2025; the 2024
# argparse names batch_size, warmup_steps, the parallel degrees, loss parallel and the fp8 switches; dtype of
# the later job configs)
TRAINING_KEYS = frozenset((
    "dataset", "dataset_path", "local_batch_size", "global_batch_size", "seq_len", "max_norm", "steps",
    "enable_cpu_offload", "mixed_precision_param", "mixed_precision_reduce", "compile", "gc_freq", "gc_debug",
    "seed", "deterministic", "dtype", "batch_size", "warmup_steps", "data_parallel_degree",
    "data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
    "enable_loss_parallel", "disable_loss_parallel", "fp8_linear", "enable_fp8_linear", "enable_float8_linear"))


def _check_keys(section: str, table: dict[str, Any], known: frozenset[str], notes: list[str]) -> None:
    """A ``[section]`` key torchtitan does not have (``known``: PARALLELISM_KEYS, TRAINING_KEYS): one
    close to a known key is a typo and refused naming both (a misspelt tensor_parallel_degree was
    read as TP 1); any other is noted as not read (a key newer than the list)."""
    import difflib
    for key in sorted(table):
        if key in known:
            continue
        near = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
        if near:
            raise InputError(f"{section}.{key}", table[key], f"a [{section}] key of torchtitan's JobConfig (did you "
                             f"mean {near[0]}?)")
        notes.append(f"[{section}] {key} = {table[key]!r}: not a key clustersim knows; not read")


# [training] mixed_precision_reduce: the reduce_dtype of FSDP2's MixedPrecisionPolicy
# (torchtitan/models/llama3/infra/parallelize.py: reduce_dtype=TORCH_DTYPE_MAP[job_config.training.
# mixed_precision_reduce]), "only takes effect when data_parallel_shard_degree > 1" (job_config.py)
REDUCE_DTYPES = {"float32": "fp32", "bfloat16": "bf16"}


def _reduce_dtype(training: dict[str, Any], zero_stage: int, notes: list[str]) -> dict[str, str]:
    """The scenario's training.grad_reduce_dtype of ``[training] mixed_precision_reduce`` (fp32, the
    default, adds nothing); refuses ``[training] dtype = "bfloat16"`` (bf16 parameters without an
    fp32 master copy: no field for it, its memory is not torchtitan's modelled 4 + 4 + 8 bytes)."""
    full = training.get("dtype", "float32")
    if full != "float32":
        raise InputError("training.dtype", full, '"float32" (torchtitan\'s default: fp32 sharded parameters, the '
                         "master copy); full bf16 training without fp32 master weights is not modelled")
    reduce = training.get("mixed_precision_reduce", "float32")
    if reduce not in REDUCE_DTYPES:
        raise InputError("training.mixed_precision_reduce", reduce, list(REDUCE_DTYPES))
    if REDUCE_DTYPES[reduce] == "fp32":
        return {}
    if zero_stage != 3:
        notes.append(f'mixed_precision_reduce = "{reduce}": no effect without FSDP (data_parallel_shard_degree 1: '
                     "torchtitan applies it through fully_shard only)")
        return {}
    return {"grad_reduce_dtype": REDUCE_DTYPES[reduce]}


# [parallelism] expert_parallel_comm_backend (torchtitan/config/job_config.py: "standard" PyTorch
# all-to-all, "deepep" DeepEP's kernels; "no effect for non-MoE models or when ep = 1") -> the
# scenario's token dispatcher (DeepEP is the backend of the flex dispatcher, docs/moe.md)
EP_COMM_BACKENDS = {"standard": "alltoall", "deepep": "flex"}


def _comm_backend(par: dict[str, Any], ep: int, model: dict[str, Any], notes: list[str]) -> None:
    backend = par.get("expert_parallel_comm_backend", "standard")
    if backend not in EP_COMM_BACKENDS:
        raise InputError("parallelism.expert_parallel_comm_backend", backend, ", ".join(EP_COMM_BACKENDS))
    if EP_COMM_BACKENDS[backend] == "alltoall":
        return
    if ep == 1:
        notes.append(f"expert_parallel_comm_backend = \"{backend}\": no effect with expert_parallel_degree 1 "
                     "(as torchtitan)")
        return
    model["moe"] = {**model.get("moe", {}), "token_dispatcher": EP_COMM_BACKENDS[backend]}


# the degrees torchtitan lets be -1, "the remaining ranks" (JobConfig Parallelism.data_parallel_shard_degree)
REMAINING_DEGREES = ("data_parallel_shard_degree", "data_parallel_degree")


def _degree_allowed(key: str) -> str:
    """What ``parallelism.KEY`` may be: the one message for it, whichever check refuses the value."""
    return f"an integer from 1 to {MAX_COUNT:,}" + (", or -1 (the remaining ranks)" if key in REMAINING_DEGREES else "")


def _degree(par: dict[str, Any], *keys: str, default: int = 1) -> int:
    """The first of ``keys`` the [parallelism] table gives (``default`` if none): an integer >= 1, or
    -1 where torchtitan allows it (REMAINING_DEGREES); anything else names the key and ``_degree_allowed``."""
    for k in keys:
        if k in par:
            try:
                value = config_int(par[k], f"parallelism.{k}", lo=-1 if k in REMAINING_DEGREES else 1)
            except InputError:
                value = 0
            if value == 0:
                raise InputError(f"parallelism.{k}", par[k], _degree_allowed(k))
            return value
    return default


def scenario_from_toml(cfg: dict[str, Any], *, cluster: str | None, nodes: int | None, model_fields:
                       dict[str, Any] | None = None, mesh: dict[str, int] | None = None,
                       name: str = "imported torchtitan job",
                       given: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """(scenario dict, notes) of a torchtitan job config; InputError names what is missing.
    ``given``: the model the user named on the command line, for a flavor clustersim does not know."""
    notes: list[str] = []
    model_cfg = _section(cfg, "model")
    training = _section(cfg, "training")
    par = {**_section(cfg, "training", "experimental"), **_section(cfg, "parallelism")}
    mesh = mesh or {}
    # model
    mname, flavor = str(model_cfg.get("name", "")).lower(), str(model_cfg.get("flavor", "")).lower()
    model: dict[str, Any]
    if model_fields:
        model = dict(model_fields)
    elif (mname, flavor) in FLAVORS:
        model = {"preset": FLAVORS[(mname, flavor)]}
    elif flavor == "debugmodel":
        model = dict(DEBUG_MODEL)
    elif given:
        model = dict(given)
        notes.append(f"model {mname} {flavor}: a torchtitan flavor clustersim does not know; the model given on the "
                     "command line is used")
    else:
        raise InputError("model.flavor", f"{mname} {flavor}".strip() or None,
                         f"a torchtitan model clustersim knows ({', '.join(f'{a} {b}' for a, b in FLAVORS)}, "
                         "debugmodel), or a log that prints the model's arguments; else name the model: --set "
                         "model.preset=PRESET or --set model.hf_config=config.json (clustersim import also takes "
                         "--model PRESET / --hf-config FILE)")
    seq = training.get("seq_len")
    if seq is None:
        raise InputError("training.seq_len", None, "the sequence length: [training] seq_len in the TOML")
    model["seq_len"] = config_int(seq, "training.seq_len")
    # layout
    tp = _degree(par, "tensor_parallel_degree") if "tensor_parallel_degree" in par else mesh.get("tp", 1)
    pp = _degree(par, "pipeline_parallel_degree") if "pipeline_parallel_degree" in par else mesh.get("pp", 1)
    cp = _degree(par, "context_parallel_degree") if "context_parallel_degree" in par else mesh.get("cp", 1)
    ep = _degree(par, "expert_parallel_degree") if "expert_parallel_degree" in par else mesh.get("ep", 1)
    replicate = _degree(par, "data_parallel_replicate_degree", default=mesh.get("dp_replicate", 1))
    shard = _degree(par, "data_parallel_shard_degree", "data_parallel_degree", default=-1)
    for key, value in (("tensor_parallel_degree", tp), ("pipeline_parallel_degree", pp),
                       ("context_parallel_degree", cp), ("expert_parallel_degree", ep),
                       ("data_parallel_replicate_degree", replicate)):
        if not isinstance(value, int) or value < 1:   # a degree the log's device mesh gave
            raise InputError(f"parallelism.{key}", value, _degree_allowed(key))
    if shard == -1 and (mesh.get("dp_shard") or mesh.get("dp")):
        shard = mesh.get("dp_shard") or mesh.get("dp")
    gpn = cluster_gpus_per_node(cluster, "the config does not name the GPU")
    if shard == -1:
        if nodes is None:
            raise InputError("--nodes", None, "the node count (--nodes N): data_parallel_shard_degree is -1 (all "
                             "remaining ranks), so the TOML does not give the GPU count; a training log's device "
                             "mesh line would")
        shard = nodes * gpn // (replicate * tp * pp * cp)
    dp = replicate * shard
    world = dp * tp * pp * cp
    cluster_d: dict[str, Any] = {"preset": cluster}
    if nodes is None:
        if world % gpn == 0:
            nodes = world // gpn
        elif world < gpn:
            nodes = 1
            cluster_d["gpus_per_node"] = world
        else:
            raise InputError("--nodes", None, f"the node count: {world} ranks are not a multiple of {gpn}")
    cluster_d["nodes"] = nodes
    local = config_int(training.get("local_batch_size", training.get("batch_size", 8)), "training.local_batch_size")
    gb = config_int(training.get("global_batch_size", -1) or -1, "training.global_batch_size", lo=-1)
    global_batch = gb if gb > 0 else local * dp
    micro = config_int(par.get("pipeline_parallel_microbatch_size", 1),
                       "parallelism.pipeline_parallel_microbatch_size") if pp > 1 else local
    parallel: dict[str, Any] = {"tp": tp, "pp": pp, "cp": cp, "dp": dp, "ep": ep, "micro_batch": micro,
                                "global_batch": global_batch, "sequence_parallel": tp > 1}
    if ep > 1:   # torchtitan's default expert TP is 1 (JobConfig Parallelism.expert_tensor_parallel_degree), not tp
        etp = _degree(par, "expert_tensor_parallel_degree", default=1)
        if etp not in (1, tp):
            raise InputError("parallelism.expert_tensor_parallel_degree", etp, f"1 or tensor_parallel_degree ({tp})")
        parallel["expert_tp"] = etp
    _comm_backend(par, ep, model, notes)
    _check_keys("parallelism", _section(cfg, "parallelism"), PARALLELISM_KEYS, notes)
    _check_keys("training", training, TRAINING_KEYS, notes)
    if str(par.get("data_parallel_type", "fsdp")).lower() == "ddp" or shard == 1:
        parallel["zero_stage"] = 0
    else:
        parallel["zero_stage"] = 3
        fsdp: dict[str, Any] = {"version": 2}
        if replicate > 1:
            fsdp["hsdp_replicas"] = replicate
        # torchtitan's reshard_after_forward_policy (torchtitan/models/llama3/infra/parallelize.py
        # apply_fsdp): "always" True, "never" False, "default" left to clustersim.frameworks.reshards_after_forward
        # (not pp_enabled); anything else torchtitan refuses (ValueError "Invalid reshard_after_forward_policy")
        policy = par.get("fsdp_reshard_after_forward", "default")
        if not isinstance(policy, str) or policy not in RESHARD_POLICIES:
            raise InputError("parallelism.fsdp_reshard_after_forward", policy, list(RESHARD_POLICIES))
        if RESHARD_POLICIES[policy] is not None:
            fsdp["reshard_after_forward"] = RESHARD_POLICIES[policy]
        if supports("parallel.fsdp"):
            parallel["fsdp"] = fsdp
    if pp > 1:
        sched = str(par.get("pipeline_parallel_schedule", "1F1B")).lower().replace("_", "")
        if sched in UNMODELLED_SCHEDULES:   # it was read as ZB-H1 with one stage per rank, its stages dropped
            raise InputError("parallelism.pipeline_parallel_schedule", par.get("pipeline_parallel_schedule"),
                             UNMODELLED_SCHEDULES[sched])
        if sched not in SCHEDULES:
            raise InputError("parallelism.pipeline_parallel_schedule", par.get("pipeline_parallel_schedule"),
                             ", ".join(SCHEDULES))
        parallel["schedule"] = SCHEDULES[sched]
        parallel.update(pipeline_split(par, pp, parallel["schedule"],
                                        _model_layers(model)))
    # activation checkpointing
    ac = _section(cfg, "activation_checkpoint")
    mode = ac.get("mode", "selective")
    if mode not in AC_MODES:
        raise InputError("activation_checkpoint.mode", mode, f"{', '.join(AC_MODES)} (torchtitan's memory_budget, "
                         "torch.compile's automatic checkpointing, is not modelled)", choices=AC_MODES)
    if mode == "none":
        parallel["recompute"] = "none"
    elif mode == "full":
        parallel["recompute"] = "full"
    else:
        option = str(ac.get("selective_ac_option", "op"))
        if option == "op":
            parallel["recompute"] = "selective-op" if _recompute_allows("selective-op") else "selective"
        elif option.isdigit() and int(option) == 1:
            parallel["recompute"] = "full"
        elif option.isdigit():
            if not supports("parallel.recompute_every"):
                raise InputError("activation_checkpoint.selective_ac_option", option,
                                 "op or 1: full recompute of every N-th layer is not modelled yet")
            # torchtitan's layer-wise AC checkpoints every N-th block and leaves the others alone
            # (torchtitan/distributed/activation_checkpoint.py _apply_ac_to_transformer_block)
            parallel.update(recompute="none", recompute_every=int(option))
        else:
            raise InputError("activation_checkpoint.selective_ac_option", option, "op or a positive integer")
    # precision
    param = training.get("mixed_precision_param", "bfloat16")
    if param not in PARAM_DTYPES:
        raise InputError("training.mixed_precision_param", param, list(PARAM_DTYPES))
    dtype = PARAM_DTYPES[param]
    train: dict[str, Any] = {"dtype": dtype}
    train.update(_low_precision(cfg, model_cfg, training, cluster))
    train.update(_reduce_dtype(training, parallel["zero_stage"], notes))
    if config_bool(_section(cfg, "compile").get("enable", False), "compile.enable") or \
            config_bool(training.get("compile", False), "training.compile"):
        train["compile"] = True
        notes.append("torch.compile: element-wise ops priced as fused kernels; the compiler's own "
                     "saved-tensor choices are not modelled")
    if config_bool(training.get("enable_cpu_offload", False), "training.enable_cpu_offload"):
        # FSDP2's CPUOffloadPolicy (torchtitan/models/llama3/infra/parallelize.py apply_fsdp, cpu_offload): shards,
        # gradients and the optimizer step on the host; torchtitan applies it through fully_shard only
        if parallel["zero_stage"] != 3:
            raise InputError("training.enable_cpu_offload", True, "false without FSDP (data_parallel_shard_degree "
                             "> 1): torchtitan offloads through FSDP2's CPUOffloadPolicy")
        parallel["offload"] = {"params": True, "optimizer": True}
        notes.append("enable_cpu_offload: FSDP2 CPU offload as parallel.offload params and optimizer (parameter "
                     "shards, gradients and the Adam step on the host)")
    scenario = {"name": name, "framework": "torchtitan", "model": model, "cluster": cluster_d,
                "parallel": parallel, "training": train}
    return scenario, notes


def _low_precision(cfg: dict[str, Any], model_cfg: dict[str, Any], training: dict[str, Any],
                   cluster: str | None) -> dict[str, str]:
    """The float8 / MX training of a torchtitan config in each of its generations: ``[model] converters``
    ``"float8"`` / ``"quantize.linear.float8"`` (2025-), ``"mx"`` / ``"quantize.linear.mx"`` (MXFP8,
    torchao's MXLinear), ``[float8] enable_float8_linear`` (late 2024), ``[training] enable_float8_linear``,
    ``enable_fp8_linear`` and ``fp8_linear = "dynamic" | "delayed"`` (2024 job_config.py). An MX
    converter on a GPU without MXFP8 is refused by name."""
    raw = model_cfg.get("converters", [])
    converters = [str(c).lower() for c in (raw if isinstance(raw, list) else [raw])]
    if any(c.split(".")[-1] == "mx" for c in converters):
        from clustersim.hardware.load import describe
        gpu = describe("gpus", describe("clusters", cluster)["gpu"]) if cluster else {}
        if "mxfp8" not in (gpu.get("microscaling") or []):
            raise InputError("model.converters", raw, f"converters the GPU runs: the MX converter trains in "
                             f"MXFP8, which {cluster}'s GPU does not run natively (Blackwell does)")
        return {"dtype": "fp8", "fp8_recipe": "mxfp8"}
    old = training.get("fp8_linear")
    if old not in (None, ""):
        if old not in ("dynamic", "delayed"):
            raise InputError("training.fp8_linear", old, '"dynamic", "delayed" or "" (torchtitan 2024)')
        return {"dtype": "fp8", "fp8_recipe": "tensorwise" if old == "dynamic" else "delayed"}
    if any("float8" in c for c in converters) or any(
            config_bool(section.get(key, False), f"{where}.{key}")
            for where, section in (("float8", _section(cfg, "float8")), ("training", training))
            for key in ("enable_float8_linear", "enable_fp8_linear")):
        return {"dtype": "fp8"}
    return {}


def _model_layers(model: dict[str, Any]) -> int:
    """The model's layer count: its own field, else its HF config's, else its preset's."""
    from clustersim.workload.hf_config import read_hf_config
    from clustersim.workload.presets import MODEL_PRESETS
    if model.get("layers"):
        return int(model["layers"])
    if model.get("hf_config"):
        return int(read_hf_config(str(model["hf_config"])).get("layers", 1))
    return int(MODEL_PRESETS.get(model.get("preset") or "", {}).get("layers", 1))


def _recompute_allows(value: str) -> bool:
    from typing import get_args

    from clustersim.scenario import ParallelSection
    return value in get_args(ParallelSection.model_fields["recompute"].annotation)


def step_times(lines: list[str], tokens_per_step: int, world: int) -> list[tuple[int, float]]:
    """(step, seconds per step) from the step lines: global tokens / (tps x world size)."""
    points = []
    for line in lines:
        m = STEP.search(line)
        if m:
            tps = float(m.group(2).replace(",", ""))
            if tps > 0:
                points.append((int(m.group(1)), tokens_per_step / (tps * world)))
    return points


# torchtitan/train.py (2025-): "Trainer is initialized with local batch size L, global batch size G,
# gradient accumulation steps A, sequence length S, total steps T (warmup W)"
TRAINER_LINE = re.compile(r"Trainer is initialized with local batch size (\d+), global batch size (\d+),.*?"
                          r"sequence length (\d+)")


def _check_log_against_config(lines: list[str], global_batch: int, seq_len: int, config_name: str) -> None:
    """The batch and sequence length the log states against the config's: the step time is tps
    over the config's tokens per step, so a config of another run gave a step time off by their
    ratio (8x for a log at global batch 8 read with a config of 64)."""
    for line in lines:
        m = TRAINER_LINE.search(line)
        if m:
            said = (int(m.group(2)), int(m.group(3)))
            if said != (global_batch, seq_len):
                raise InputError("--config", config_name, f"the config of the run this log measured: the log says "
                                 f"global batch {said[0]}, sequence length {said[1]}; the config gives global batch "
                                 f"{global_batch}, sequence length {seq_len}")
            return


# torchtitan's device line at start-up (module docstring), e.g.
# "CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory"
CAPACITY = re.compile(r"capacity:\s*(?P<name>.+?) with (?P<gib>[0-9.]+)\s*GiB memory")
CAPACITY_TOLERANCE = 0.05   # torch reports the device's total memory a little under the profile's


def _check_capacity(lines: list[str], cluster: dict[str, Any], notes: list[str]) -> None:
    """A note where the GPU memory the log's device line reports differs by more than 5% from
    the GPU profile the scenario runs on (an H100 with 94.50 GiB is not the 80 GB part): the
    memory verdicts use the profile's capacity."""
    from clustersim.hardware.load import describe, load_gpu
    m = next((m for m in map(CAPACITY.search, lines[:400]) if m), None)
    preset = cluster.get("preset")
    if m is None or not preset:
        return
    gpu_name = cluster.get("gpu") or describe("clusters", preset)["gpu"]
    profile_gib = load_gpu(gpu_name).hbm_capacity_bytes / 2**30
    logged = float(m["gib"])
    if abs(logged - profile_gib) > CAPACITY_TOLERANCE * profile_gib:
        notes.append(f"the log's device line reports {m['name'].strip()} with {logged:.2f} GiB, the GPU profile "
                     f"{gpu_name} holds {profile_gib:.2f} GiB: memory verdicts use the profile's capacity (pass "
                     f"--cluster with a preset of that GPU, or --set cluster.gpu=...)")


def import_torchtitan_log(text: str, source: str, config_text: str | None, config_name: str,
                          cluster: str | None = None, nodes: int | None = None,
                          given: dict[str, Any] | None = None) -> ImportResult:
    lines = clean_lines(text)
    if not any(STEP.search(line) for line in lines):
        raise InputError("torchtitan-log", source, "a torchtitan training log with `step: N  loss: ...  tps: ...` "
                         "lines")
    cfg = read_toml(config_text, config_name) if config_text is not None else {}
    if not cfg:
        raise InputError("--config", None, "the job's TOML config (torchtitan logs do not print the batch size "
                         "and sequence length)")
    cluster, beside = detected_cluster(cluster, "\n".join(lines[:400]))
    logged = model_from_log(lines)
    model_cfg = _section(cfg, "model")
    flavor = FLAVORS.get((str(model_cfg.get("name", "")).lower(), str(model_cfg.get("flavor", "")).lower()))
    if logged and flavor:   # the model the log built against the config's flavor (importers.same_model)
        from clustersim.importers.same_model import refuse_another_model
        refuse_another_model(logged, {"preset": flavor}, "--config", config_name,
                             f"the config of the run this log measured: {source} builds its model")
    scenario, notes = scenario_from_toml(cfg, cluster=cluster, nodes=nodes, model_fields=logged,
                                         mesh=mesh_from_log(lines), name=f"imported from {source}", given=given)
    scenario["cluster"].update(beside)   # the GPU profile of a part without its own preset
    _check_capacity(lines, scenario["cluster"], notes)
    par = scenario["parallel"]
    _check_log_against_config(lines, par["global_batch"], scenario["model"]["seq_len"], config_name)
    world = par["dp"] * par["tp"] * par["pp"] * par["cp"]
    points = step_times(lines, par["global_batch"] * scenario["model"]["seq_len"], world)
    iterations, median = steady_state(points, "torchtitan-log", source)
    if not math.isfinite(median):
        raise InputError("torchtitan-log", source, "finite tps values")
    return ImportResult("torchtitan-log", f"{source} + {config_name}", "torchtitan", scenario, iterations, median,
                        notes=notes)


def import_torchtitan_toml(text: str, source: str, cluster: str | None, nodes: int | None,
                           given: dict[str, Any] | None = None) -> ImportResult:
    cfg = read_toml(text, source)
    scenario, notes = scenario_from_toml(cfg, cluster=cluster, nodes=nodes, name=f"imported from {source}",
                                         given=given)
    return ImportResult("torchtitan-toml", source, "torchtitan", scenario, notes=notes)
