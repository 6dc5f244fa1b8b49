"""Scenario files (docs/scenario.md): YAML -> validated, frozen Scenario.

Validation happens in two layers: pydantic checks each section's keys and types (unknown keys
are errors: clustersim.scenario.sections), then ``check_layout`` and ``check_recompute`` check what
spans fields (the product rule, divisibility: clustersim.scenario.checks). Every failure is an
InputError naming the field, the value and what is allowed. Loading runs no cost model: a job
over mixed GPUs is balanced to its groups' speeds after loading (clustersim.perrank.hetero.balanced).
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from clustersim.compute.precision import resolve_recipe
from clustersim.errors import InputError
from clustersim.frameworks import (
    check_framework_layout,
    check_grad_accum_dtype,
    grad_reduce_dtype,
    load_framework,
    zero3_overlaps_reduce,
)
from clustersim.goodput.config import goodput_spec
from clustersim.hardware.load import load_cluster
from clustersim.hardware.spec import ClusterSpec
from clustersim.inputs import parse_override_value, read_yaml_file
from clustersim.limits import MAX_GPUS
from clustersim.parallel.balance import check_layers_per_stage
from clustersim.parallel.layout import ParallelLayout, pipeline_schedule
from clustersim.parallel.rules import check_ep_overlap_dtype, default_sequence_parallel
from clustersim.parallel.split import framework_split, layout_schedule, split_is_set, weight_of
from clustersim.parallel.stage_graph import stage_graph
from clustersim.scenario.checks import check_layout, check_recompute
from clustersim.scenario.faults import fault_spec
from clustersim.scenario.node_groups import JOB_FABRIC_KEYS, NodeGroup, load_groups, one_kind
from clustersim.scenario.sections import (
    ClusterSection,
    FsdpSection,
    ModelSection,
    ParallelSection,
    ScenarioFile,
)
from clustersim.scenario.spec import Scenario, TrainingSpec
from clustersim.workload import hf_config as hf_reader
from clustersim.workload.model_fields import model_from_fields
from clustersim.workload.model_spec import ModelSpec
from clustersim.workload.presets import MODEL_PRESETS

DEFAULT_NAME = "llama3-8b on 2 DGX H100 (embedded default)"
DEFAULT_SCENARIO_YAML = f"name: {DEFAULT_NAME}\n" + """\
model: {preset: llama3-8b}
cluster: {preset: dgx-h100, nodes: 2}
parallel: {tp: 2, pp: 2, dp: 4, micro_batch: 1, global_batch: 64, schedule: 1f1b,
           zero_stage: 1, sequence_parallel: true, recompute: selective}
training: {dtype: bf16}
"""


# ---------------------------------------------------------------------------------------------
# raw dict handling

def read_scenario_dict(path: str | Path | None) -> dict[str, Any]:
    """The scenario file as a plain dict (the embedded default when ``path`` is None)."""
    if path is None:
        return yaml.safe_load(DEFAULT_SCENARIO_YAML)
    data = read_yaml_file(path, "SCENARIO", "a YAML scenario file")
    if not isinstance(data, dict):
        raise InputError("SCENARIO", str(path), "a YAML mapping with sections model, cluster, parallel, training")
    _paths_beside(data, Path(path))
    return data


def _paths_beside(data: dict[str, Any], scenario_path: Path) -> None:
    """A relative ``model.hf_config`` names a file (or folder) beside the scenario file when one is there (a
    scenario and its config.json travel together); otherwise it is read from the current directory."""
    model = data.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("hf_config"), str):
        return
    written = Path(model["hf_config"]).expanduser()
    beside = scenario_path.parent / written
    if not written.is_absolute() and beside.exists():
        model["hf_config"] = str(beside)


def apply_overrides(data: dict[str, Any], assignments: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Apply ``--set a.b=VALUE`` overrides (VALUE parsed as YAML) to a copy of ``data``."""
    out = copy.deepcopy(data)
    for item in assignments:
        if "=" not in item:
            raise InputError("--set", item, "KEY=VALUE with a dotted KEY such as parallel.tp=4")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if not all(p.strip() for p in parts):   # "=4", ".tp=4", "parallel..tp=4": an empty key part
            raise InputError("--set", item, "KEY=VALUE with a dotted KEY such as parallel.tp=4 (no empty part)")
        value = parse_override_value(raw, item)
        node: Any = out
        for depth, part in enumerate(parts[:-1]):
            if isinstance(node, list):   # a list's entry by its index: cluster.groups.0.nodes
                node = _entry(node, part, item)
                continue
            child = node.get(part)
            if child is None:
                if parts[depth + 1].isdigit():   # an entry of a list the scenario does not have
                    raise InputError("--set", item, f"an index into a list the scenario has; {part} is not set "
                                     f"(set the whole list: --set '{'.'.join(parts[:depth + 1])}=[...]')")
                child = node[part] = {}
            if not isinstance(child, dict | list):
                raise InputError("--set", item, f"a key below a section; {part} is not a section")
            node = child
        if isinstance(node, list):
            node[_index(node, parts[-1], item)] = value
        else:
            node[parts[-1]] = value
    changed = [item.split("=", 1)[0].strip() for item in assignments if item.split("=", 1)[0].strip() != "name"]
    if changed and out.get("name") == DEFAULT_NAME:   # the embedded default's title no longer describes it
        out["name"] = f"embedded default with --set {', '.join(changed)}"
    return out


def _index(entries: list[Any], part: str, item: str) -> int:
    if not part.isdigit() or int(part) >= len(entries):
        raise InputError("--set", item, f"an index from 0 to {len(entries) - 1} after a list's key (got {part!r})")
    return int(part)


def _entry(entries: list[Any], part: str, item: str) -> Any:
    entry = entries[_index(entries, part, item)]
    if not isinstance(entry, dict | list):
        raise InputError("--set", item, f"a key below a section; entry {part} is not a section")
    return entry


def _allowed_for(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """The allowed keys of the section that ``loc`` points into."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            break
        current = _section_model(field.annotation) or current
    return ", ".join(getattr(current, "model_fields", {}))


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The section model inside a field's annotation (``X``, ``X | None``, ``list[X] | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _section_model(arg)
        if found is not None:
            return found
    return None


_TYPE_TAG = re.compile(r"^(bool|int|float|str|none|list\[.*\]|tuple\[.*\]|function-\w+\[.*\])$")


def _field_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """The field's path without pydantic's tag of the union member it tried (``...account_for_embedding.bool``)."""
    while loc and isinstance(loc[-1], str) and _TYPE_TAG.match(loc[-1]):
        loc = loc[:-1]
    return loc


def _pydantic_to_input_error(exc: ValidationError, data: dict[str, Any]) -> InputError:
    errors = exc.errors()
    err = errors[0]
    loc = _field_loc(tuple(err["loc"]))
    field = ".".join(str(p) for p in loc) or "scenario"
    members = [e for e in errors if _field_loc(tuple(e["loc"])) == loc and tuple(e["loc"]) != loc]
    if len(members) > 1:   # a union (true, false or a number): every member's words, once each
        words = list(dict.fromkeys(_PYDANTIC_WORDS.get(e["type"]) or str(e["msg"]).removeprefix("Input should be ")
                                   for e in members))
        return InputError(field, err.get("input"), " or ".join(words))
    value = err.get("input")
    if err["type"] == "extra_forbidden":
        keys = _allowed_for(ScenarioFile, loc)
        return InputError(field, value, f"unknown key; allowed keys: {keys}", choices=keys.split(", "),
                          key=str(loc[-1]) if loc else None)
    if err["type"] == "missing":
        return InputError(field, None, "this field is required")
    ctx = err.get("ctx") or {}
    if "expected" in ctx:  # a literal: "'gpipe', '1f1b' or 'zb-v'" names the choices for "did you mean"
        return InputError(field, value, f"one of {ctx['expected']}", choices=re.findall(r"'([^']*)'", ctx["expected"]))
    if "ge" in ctx:
        allowed = f"a number >= {ctx['ge']}"
    elif "gt" in ctx:
        allowed = f"a number > {ctx['gt']}"
    elif "le" in ctx:
        allowed = f"a number <= {ctx['le']}"
    elif err["type"] in _SECTION_TYPES:  # a section given as a scalar or a list: name its keys
        allowed = f"a mapping (KEY: VALUE) with keys {_allowed_for(ScenarioFile, (*loc, ''))}"
    else:  # pydantic's own words ("Input should be a valid integer, ...") in the command line's
        allowed = _PYDANTIC_WORDS.get(err["type"]) or str(err["msg"]).removeprefix("Input should be ").removeprefix(
            "Value error, ")   # the words of a validator of ours (clustersim.section_model)
    return InputError(field, value, allowed)


_SECTION_TYPES = ("dict_type", "model_type", "model_attributes_type")
_PYDANTIC_WORDS = {"int_parsing": "a whole number", "int_type": "a whole number",
                   "int_from_float": "a whole number (this one has a fractional part)",
                   "float_parsing": "a number", "float_type": "a number", "bool_parsing": "true or false",
                   "bool_type": "true or false", "string_type": "text", "list_type": "a list, such as [a, b]",
                   "tuple_type": "a list, such as [a, b]",
                   "finite_number": "a finite number"}


# ---------------------------------------------------------------------------------------------
# model resolution

def read_hf_config(path: str) -> dict[str, Any]:
    """The model fields of a Hugging Face ``config.json`` (clustersim.workload.hf_config), checked
    with the same types and bounds as explicit model fields."""
    return _read_hf_model(path)[0]


def _read_hf_model(path: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``read_hf_config``'s fields and the reader's notes (the config class defaults it took)."""
    fields, notes = hf_reader.read_hf_model(path)
    try:
        ModelSection.model_validate(fields)
    except ValidationError as exc:
        err = _pydantic_to_input_error(exc, fields)
        raise err.with_field(f"model.hf_config ({path}): {err.field}") from None
    return fields, notes


def resolve_model(section: dict[str, Any]) -> ModelSpec:
    """The ModelSpec of a scenario file's ``model`` section, resolved as a scenario's is (preset,
    ``hf_config``, explicit fields); InputError where the loader would refuse it."""
    try:
        valid = ModelSection.model_validate(section)
    except ValidationError as exc:
        err = _pydantic_to_input_error(exc, section)
        raise err.with_field(f"model.{err.field}") from None
    return _resolve_model(valid)


def _resolve_model(section: ModelSection) -> ModelSpec:
    fields: dict[str, Any] = {}
    name = section.name or section.preset or "custom"
    if section.preset is not None:
        if section.preset not in MODEL_PRESETS:
            raise InputError("model.preset", section.preset, sorted(MODEL_PRESETS))
        fields.update(MODEL_PRESETS[section.preset])
    notes: tuple[str, ...] = ()
    if section.hf_config is not None:
        # the config.json is the whole architecture: a preset beside it (the embedded default's, or
        # one left in the file) would lend it fields the config never sets (a dense Mistral file over
        # mixtral-8x7b ran as a 46.7B MoE)
        read, taken = _read_hf_model(section.hf_config)
        fields = dict(read)
        name = section.name or hf_reader.model_name(section.hf_config)
        notes = (f"read from {hf_reader.locate(section.hf_config)}", *taken)
        if section.preset is not None:
            notes += (f"model.preset {section.preset} set aside: model.hf_config gives the architecture",)
        if section.seq_len is None and "seq_len" not in fields:   # a job setting, not the config's context
            fields["seq_len"] = hf_reader.DEFAULT_SEQ_LEN
            notes += (f"seq_len defaulted to {hf_reader.DEFAULT_SEQ_LEN} (the config gives no training sequence length; "
                      "set model.seq_len)",)
    explicit = section.model_dump(exclude_none=True, exclude={"preset", "hf_config", "name", "moe"})
    if explicit.get("attention_pattern") == "full" or ("attention_window" in section.model_fields_set
                                                        and section.attention_window is None):
        # full attention stated (or the window cleared with null) over a preset's or config's local
        # layers: their window and local/global interleave go with them ("each explicit key replaces
        # the one before it"; the preset's window made `attention_pattern: full` an error)
        for key in ("attention_window", "global_every", "attention_pattern"):
            fields.pop(key, None)
    fields.update(explicit)
    if section.moe is not None:  # explicit moe fields override the preset's one by one
        moe = dict(fields.get("moe") or {})
        given = section.moe.model_dump(exclude_unset=True)
        if given.get("pattern") is not None:
            # a pattern states every layer: the preset's (or config's) rule goes with it, as a stated
            # full attention takes the window with it (docs/scenario.md model.preset); deepseek-v3's
            # first_dense_layers 3 under an explicit pattern was refused over a value the user never wrote
            for key in ("first_dense_layers", "every"):
                moe.pop(key, None)
        moe.update(given)
        fields["moe"] = moe
    for key in ("layers", "hidden", "heads", "vocab", "seq_len"):
        if key not in fields:
            raise InputError(f"model.{key}", None,
                             f"required unless model.preset is given (presets: {', '.join(sorted(MODEL_PRESETS))})")
    return model_from_fields(name, fields, notes)


def _recompute_fields(p: ParallelSection, model: ModelSpec) -> dict[str, Any]:
    """recompute_every / recompute_method / recompute_num_layers, checked against recompute."""
    if p.recompute_every is not None and not 1 <= p.recompute_every <= model.layers:
        raise InputError("parallel.recompute_every", p.recompute_every,
                         f"an integer from 1 to model.layers ({model.layers})")
    if p.recompute_num_layers is not None and p.recompute_num_layers < 1:
        raise InputError("parallel.recompute_num_layers", p.recompute_num_layers,
                         "an integer from 1 to the layers of a pipeline stage")
    if p.recompute_method is not None and p.recompute != "full":
        raise InputError("parallel.recompute_method", p.recompute_method,
                         "only with parallel.recompute: full (Megatron --recompute-granularity full)")
    if p.recompute_num_layers is not None and p.recompute != "full":
        raise InputError("parallel.recompute_num_layers", p.recompute_num_layers,
                         "only with parallel.recompute: full")
    return {"recompute_every": 0 if p.recompute_every is None else p.recompute_every,
            "recompute_method": p.recompute_method or "uniform",
            "recompute_num_layers": 1 if p.recompute_num_layers is None else p.recompute_num_layers}


def scenario_from_dict(data: dict[str, Any]) -> Scenario:
    """Validate a raw scenario dict and build the frozen Scenario. Raises InputError."""
    if not isinstance(data, dict):
        raise InputError("scenario", type(data).__name__, "a mapping")
    try:
        raw = ScenarioFile.model_validate(data)
    except ValidationError as exc:
        raise _pydantic_to_input_error(exc, data) from None
    model = _resolve_model(raw.model)
    cluster, groups = _resolve_cluster(raw.cluster)
    if cluster.num_gpus > MAX_GPUS:
        raise InputError("cluster.nodes", cluster.num_nodes, f"a cluster of at most {MAX_GPUS:,} GPUs (clustersim's "
                         f"limit; {cluster.num_nodes:,} nodes x {cluster.gpus_per_node} GPUs = {cluster.num_gpus:,})")
    p = raw.parallel
    if p.pipeline_layout:   # the layout's stages are pp x virtual stages (docs/scenario.md: it sets them too)
        p = p.model_copy(update=layout_schedule(p.pipeline_layout, p.pp, p.schedule, p.model_fields_set))
    if p.dp is None:
        denom = p.tp * p.pp * p.cp
        if cluster.num_gpus % denom:
            raise InputError("parallel", f"tp({p.tp}) * pp({p.pp}) * cp({p.cp}) = {denom}",
                             f"a divisor of the GPU count {cluster.num_gpus} (dp is left out)")
        dp = cluster.num_gpus // denom
    else:
        dp = p.dp
    global_batch = p.global_batch if p.global_batch is not None else dp * p.micro_batch * max(1, p.pp) * 4
    framework = load_framework(raw.framework)
    fsdp = p.fsdp or FsdpSection()
    if p.fsdp is not None and p.zero_stage != 3:
        raise InputError("parallel.fsdp", p.fsdp.model_dump(), "only with parallel.zero_stage: 3")
    overlaps = {key: framework_value if value is None else value for key, value, framework_value in (
        ("overlap_grad_reduce", p.overlap_grad_reduce, framework.overlap_grad_reduce),
        ("overlap_param_gather", p.overlap_param_gather, framework.overlap_param_gather))}
    overlaps["zero3_overlap_reduce"] = zero3_overlaps_reduce(p.overlap_grad_reduce)
    explicit_layers = None
    if p.layers_per_stage is not None:
        # one entry per model stage: a V schedule has two per rank (they were taken per rank and not simulated)
        graph = stage_graph(p.schedule, p.pp, p.virtual_stages)
        explicit_layers = check_layers_per_stage(p.layers_per_stage, model.layers, graph.num_model_stages, p.pp,
                                                 graph=graph)
    recompute = _recompute_fields(p, model)
    split = {"first_stage_layers": p.first_stage_layers or 0, "last_stage_layers": p.last_stage_layers or 0,
             "account_for_embedding": weight_of("account_for_embedding", p.account_for_embedding),
             "account_for_loss": weight_of("account_for_loss", p.account_for_loss),
             "pipeline_layout": p.pipeline_layout or ""}
    par = ParallelLayout(**{**p.model_dump(exclude={"fsdp", "offload", "layers_per_stage", "balance", *recompute,
                                                    *split}), **split,
                            **overlaps, **recompute, "dp": dp, "global_batch": global_batch,
                            "sequence_parallel": default_sequence_parallel(model, p.tp) if p.sequence_parallel is None
                            else p.sequence_parallel,
                            "layers_per_stage": explicit_layers or (),
                            "fsdp_version": fsdp.version or 0, "fsdp_prefetch": fsdp.prefetch,
                            "reshard_after_forward": fsdp.reshard_after_forward,
                            "hsdp_replicas": fsdp.hsdp_replicas, "expert_tp": p.expert_tp or 0,
                            "hierarchical_cp_sizes": _hierarchical_cp(p, cluster.gpus_per_node),
                            "offload_optimizer": p.offload.optimizer, "offload_activations": p.offload.activations,
                            "offload_params": p.offload.params,
                            "adam_moment_bytes": 2 if raw.training.adam_moments == "bf16" else 4,
                            "grad_reduce_dtype": raw.training.grad_reduce_dtype,
                            "grad_accum_dtype": raw.training.grad_accum_dtype,
                            "optimizer_moments": 1 if raw.training.optimizer == "sgd" else 2})
    if split_is_set(par):   # Megatron-Core's / torchtitan's own split, resolved once (clustersim.parallel.split)
        explicit_layers = framework_split(par, model.layers, model.mtp_layers)
        par = replace(par, layers_per_stage=explicit_layers)
    t = raw.training
    # every group's GPUs must run the dtype and recipe (clustersim.compute.precision.resolve_recipe)
    recipes = {resolve_recipe(t.dtype, t.fp8_recipe, t.fp4_recipe, spec.gpu) for spec in [g.cluster for g in groups]
               or [cluster]}
    if len(recipes) > 1:
        raise InputError("training.fp8_recipe" if t.dtype == "fp8" else "training.fp4_recipe", sorted(recipes),
                         "one scaling recipe that every group's GPUs run (set it explicitly)")
    recipe = recipes.pop()
    if t.adam_moments == "bf16" and (t.optimizer != "adam" or t.dtype == "fp32"):
        # Megatron's precision-aware optimizer keeps Adam's m and v in bf16 beside fp32 master
        # weights; neither SGD's momentum nor fp32 training has them (it was accepted and ignored)
        why = "training.optimizer sgd" if t.optimizer != "adam" else "training.dtype fp32"
        raise InputError("training.adam_moments", "bf16", f"fp32 with {why} (bf16 moments are Adam's under mixed "
                         "precision)")
    # the reduction runs in fp32 or the job's own 16-bit dtype: the rule refuses the rest by name
    # (frameworks.reduce_dtypes_allowed: bf16 with fp32 or fp16 training, fp16 with any other)
    grad_reduce_dtype(par.zero_stage, par.fsdp_version, framework, par.grad_reduce_dtype, dtype=t.dtype)
    check_grad_accum_dtype(par.zero_stage, par.fsdp_version, framework, par.grad_accum_dtype, dtype=t.dtype)
    check_layout(model, cluster, par)
    check_framework_layout(framework, par.pp, par.zero_stage, par.schedule, par.offload_optimizer)
    check_ep_overlap_dtype(par, t.dtype)
    check_recompute(model, par)
    attention = framework.attention if t.attention == "auto" else t.attention
    training = TrainingSpec(dtype=t.dtype, optimizer=t.optimizer, attention=attention, compile=t.compile,
                            recipe=recipe)
    gp = goodput_spec(raw.goodput) if raw.goodput is not None else None
    nics = tuple(g.cluster.nics_per_node for g in groups for _ in range(g.nodes)) if groups else None
    faults = fault_spec(raw.faults, cluster, nics) if raw.faults is not None else None
    # what the split of a mixed cluster runs (heterogeneous.balance, docs/perrank.md): a split the
    # user or a framework option gives keeps its layers (the micro-batches are still balanced), and
    # groups of one hardware run as the plain preset, evenly
    balance = p.balance
    if groups and balance == "auto":
        if split_is_set(par):
            balance = "framework"
        elif p.layers_per_stage is not None:
            balance = "layers_per_stage"
        elif one_kind(groups):
            balance = "even"
    return Scenario(name=raw.name, model=model, cluster=cluster, parallel=par, training=training,
                    framework=framework, goodput=gp, faults=faults, node_groups=groups, balance=balance,
                    notes=_scenario_notes(p))


def _scenario_notes(p: Any) -> tuple[str, ...]:
    """Fields the scenario states that have no effect: ``overlap_param_gather`` is the ZeRO-1/2
    all-gather of the updated parameters after the optimizer step (clustersim.plan.data_parallel
    params_after_step); under ZeRO-3 the gathers run before each unit's use, ahead by the
    implementation's prefetch (parallel.fsdp.prefetch; DeepSpeed's stage3_prefetch_bucket_size),
    whatever it says; ``schedule: gpipe`` with pp 1, which runs as 1F1B (clustersim.parallel.layout
    pipeline_schedule). Not refused: imports write them."""
    notes: tuple[str, ...] = ()
    if pipeline_schedule(p.schedule, p.pp) != p.schedule:   # the layout holds the schedule that runs
        notes += (f"parallel.schedule {p.schedule} with pp {p.pp}: no pipeline, so it runs as "
                  f"{pipeline_schedule(p.schedule, p.pp)}, one forward and one backward per micro-batch (Megatron "
                  "forward_backward_no_pipelining; torchtitan without PP)",)
    if p.zero_stage == 3 and p.overlap_param_gather is not None:
        return notes + (f"parallel.overlap_param_gather {str(p.overlap_param_gather).lower()}: no effect with zero_stage 3 "
                "(it overlaps ZeRO-1/2's parameter all-gather after the optimizer step; ZeRO-3 gathers each "
                "unit ahead of use by its prefetch, parallel.fsdp.prefetch)",)
    return notes


DEFAULT_CLUSTER_PRESET = "dgx-h100"  # a scenario's cluster without a preset


def _resolve_cluster(c: ClusterSection) -> tuple[ClusterSpec, tuple[NodeGroup, ...]]:
    """The cluster spec (and, with ``cluster.groups``, the node groups)."""
    # the fabric and the data centre are the whole job's, with or without node groups
    fabric = {k: getattr(c, k) for k in JOB_FABRIC_KEYS if getattr(c, k) is not None}
    if c.groups is not None:
        if not c.groups:
            raise InputError("cluster.groups", [], "one or more node groups: [{preset: NAME, nodes: N}, ...]")
        extra = sorted(k for k, v in c.model_dump(exclude={"groups", *JOB_FABRIC_KEYS}).items() if v is not None)
        if extra:
            raise InputError(f"cluster.{extra[0]}", getattr(c, extra[0]),
                             "absent with cluster.groups (set it per group: cluster.groups.N.KEY)")
        return load_groups(c.groups, fabric)
    overrides = c.model_dump(exclude={"preset", "nodes", "groups"}, exclude_none=True)
    preset = c.preset or DEFAULT_CLUSTER_PRESET
    try:
        cluster = load_cluster(preset, c.nodes, **overrides)   # None: the profile's own nodes, else 1
    except InputError as exc:  # name the scenario key whose value the profile lookup rejected
        if exc.field.startswith("cluster."):
            raise
        key = next((f"cluster.{k}" for k, v in sorted(overrides.items()) if v == exc.value),
                   f"cluster.preset ({preset}): {exc.field}")
        raise exc.with_field(key) from None
    return cluster, ()


def _hierarchical_cp(p: ParallelSection, gpus_per_node: int) -> tuple[int, int] | None:
    """(a2a, p2p) sizes of hierarchical context parallelism. Megatron requires
    --hierarchical-context-parallel-sizes with a2a+p2p; left out, the all-to-all takes the largest
    divisor of cp whose group (times tp) stays inside one node and the ring spans the rest."""
    if p.cp_comm != "a2a+p2p":
        if p.hierarchical_cp_sizes is not None:   # it was accepted and ignored (negative sizes too)
            raise InputError("parallel.hierarchical_cp_sizes", list(p.hierarchical_cp_sizes),
                             "left out unless parallel.cp_comm is a2a+p2p")
        return None
    if p.hierarchical_cp_sizes is not None:
        a2a, p2p = p.hierarchical_cp_sizes
        if a2a < 1 or p2p < 1 or a2a * p2p != p.cp:
            raise InputError("parallel.hierarchical_cp_sizes", list(p.hierarchical_cp_sizes),
                             f"two positive sizes [a2a, p2p] whose product is parallel.cp ({p.cp})")
        return a2a, p2p
    a2a = max(d for d in range(1, p.cp + 1) if p.cp % d == 0 and d * p.tp <= max(gpus_per_node, p.tp))
    return a2a, p.cp // a2a


def load_scenario(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Read, override and validate a scenario (the embedded default when ``path`` is None);
    ``overrides``: ``KEY=VALUE`` strings, as ``--set`` takes them."""
    if isinstance(overrides, str) or not all(isinstance(o, str) for o in overrides):
        raise InputError("overrides", overrides, "a list of KEY=VALUE strings, such as ['parallel.tp=2']")
    return scenario_from_dict(apply_overrides(read_scenario_dict(path), list(overrides)))
