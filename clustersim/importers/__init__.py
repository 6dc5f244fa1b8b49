"""Importers: a training framework's configs and logs -> a clustersim scenario (and, for logs,
the step time the run measured). One module per framework; ``megatron_args`` is the one place
that knows Megatron-LM's argument names, shared by the log and the command-line importers.

``import_file(kind, ...)`` is the entry point of `clustersim import KIND FILE` and of
`clustersim calibrate --log`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clustersim.errors import InputError
from clustersim.importers.common import ImportResult

KINDS = ("megatron-log", "megatron-args", "torchtitan-log", "torchtitan-toml", "deepspeed-log", "deepspeed-json")
LOG_KINDS = ("megatron-log", "torchtitan-log", "deepspeed-log")


def detect_log_kind(text: str) -> str | None:
    """Which framework wrote a training log (None if none of the three)."""
    from clustersim.importers import deepspeed, megatron_log, torchtitan
    from clustersim.importers.common import clean_lines
    lines = clean_lines(text)
    if any(megatron_log.ITERATION.search(line) for line in lines):
        return "megatron-log"
    if any(torchtitan.STEP.search(line) for line in lines):
        return "torchtitan-log"
    if any(deepspeed.THROUGHPUT.search(line) or deepspeed.PIPE.search(line) for line in lines):
        return "deepspeed-log"
    return None


def _named_model(model: str | None, hf_config: str | None) -> dict[str, str]:
    """The model section ``--model`` / ``--hf-config`` name (empty when neither is given)."""
    return {k: v for k, v in (("preset", model), ("hf_config", hf_config)) if v is not None}


def given_model(overrides: list[str] | tuple[str, ...], model: str | None = None,
                hf_config: str | None = None) -> dict[str, Any] | None:
    """The model the user gave on the command line (``--model``, ``--hf-config``, ``--set model...``),
    or None: an importer uses it where its file names no model clustersim knows, before ``finish``
    applies the same options to the scenario."""
    from clustersim.scenario import apply_overrides
    data = {"model": _named_model(model, hf_config)}
    data = apply_overrides(data, [o for o in overrides if o.split("=", 1)[0].split(".")[0].strip() == "model"])
    return data["model"] if isinstance(data["model"], dict) and data["model"] else None


def given_parallel(overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """The user's ``--set parallel.*`` values (before ``finish`` applies them): a DeepSpeed config
    holds no tensor or pipeline degree, and its batch arithmetic needs them (the GPUs of --nodes are
    tp x pp x cp x the data-parallel ranks)."""
    from clustersim.scenario import apply_overrides
    data = apply_overrides({}, [o for o in overrides if o.split("=", 1)[0].split(".")[0].strip() == "parallel"])
    par = data.get("parallel")
    return dict(par) if isinstance(par, dict) else {}


def import_text(kind: str, text: str, source: str, *, config: tuple[str, str] | None = None,
                cluster: str | None = None, nodes: int | None = None,
                model: dict[str, Any] | None = None, parallel: dict[str, Any] | None = None) -> ImportResult:
    """Import ``text`` (a file's content) as ``kind``; ``config`` is (text, name) of a job config
    that a torchtitan or DeepSpeed log needs beside it; ``model`` the user's (``given_model``);
    ``parallel`` the user's parallel fields (``given_parallel``: a DeepSpeed import's batch
    arithmetic counts its tp, pp and cp)."""
    from clustersim.importers.common import drop_unterminated_line
    if kind not in LOG_KINDS:
        return _import_text(kind, text, source, config, cluster, nodes, model, parallel)
    text, cut = drop_unterminated_line(text, source)
    result = _import_text(kind, text, source, config, cluster, nodes, model, parallel)
    if cut is not None:
        result.notes.append(cut)
    return result


def _import_text(kind: str, text: str, source: str, config: tuple[str, str] | None, cluster: str | None,
                 nodes: int | None, model: dict[str, Any] | None, parallel: dict[str, Any] | None) -> ImportResult:
    from clustersim.importers import deepspeed, megatron_args, megatron_log, megatron_parse, torchtitan
    cfg_text, cfg_name = config if config is not None else (None, "")
    if kind == "megatron-log":
        return megatron_log.import_megatron_log(text, source, cluster, nodes, config)
    if kind == "megatron-args":
        args = megatron_parse.parse_args_block(text) or megatron_parse.parse_command_line(text)
        mapped = megatron_args.scenario_from_args(args, cluster, nodes, f"imported from {source}")
        return ImportResult("megatron-args", source, mapped.framework, mapped.scenario, unknown=mapped.unknown,
                            notes=mapped.notes)
    if kind == "torchtitan-log":
        return torchtitan.import_torchtitan_log(text, source, cfg_text, cfg_name, cluster, nodes, given=model)
    if kind == "torchtitan-toml":
        return torchtitan.import_torchtitan_toml(text, source, cluster, nodes, given=model)
    if kind == "deepspeed-log":
        return deepspeed.import_deepspeed_log(text, source, cfg_text, cfg_name, cluster, nodes, parallel)
    if kind == "deepspeed-json":
        return deepspeed.import_deepspeed_json(text, source, cluster, nodes, parallel)
    raise InputError("KIND", kind, KINDS)


def model_options(model_flags: bool) -> str:
    """How to name the model on the command line of the command that runs: `clustersim import` has
    ``--model`` and ``--hf-config``, `clustersim calibrate` only ``--set`` (``model_flags`` False)."""
    if model_flags:
        return "--model PRESET (clustersim list models), --hf-config config.json or --set model.KEY=VALUE"
    return ("--set model.preset=PRESET (clustersim list models), --set model.hf_config=config.json or "
            "--set model.KEY=VALUE")


def finish(result: ImportResult, overrides: list[str], model: str | None = None,
           hf_config: str | None = None, model_flags: bool = True) -> ImportResult:
    """Apply ``--model``/``--hf-config``/``--set`` and validate: the scenario must load.
    ``model_flags``: whether the command has ``--model``/``--hf-config`` (calibrate has not): the
    messages name only options it has."""
    from clustersim.scenario import apply_overrides, scenario_from_dict
    data: dict[str, Any] = result.scenario
    if model is not None or hf_config is not None:
        data.setdefault("model", {})
        own, ran = _split_run_fields(data["model"])
        _refuse_a_second_model(own, _named_model(model, hf_config))
        data["model"] = {**_named_model(model, hf_config), **ran}
    named_by_set = apply_overrides({}, [o for o in overrides if _set_key(o) in ("model.preset", "model.hf_config")])
    if named_by_set:   # --set model.preset=NAME names a model as --model does: the same refusal
        own, _ = _split_run_fields(data.get("model") or {})
        named = {k: str(v) for k, v in named_by_set["model"].items()}
        _refuse_a_second_model(own, named, via="--set")
    data = apply_overrides(data, overrides)
    if not data.get("model"):
        auto = (f'; "auto" in {", ".join(f"zero_optimization.{k}" for k in result.hidden_auto)} is filled in by '
                "the HF Trainer from the model's hidden size (or write numbers there)") if result.hidden_auto else ""
        raise InputError("--model" if model_flags else "--set model.preset", None, "the model: a DeepSpeed config "
                         f"does not describe it; pass {model_options(model_flags)}" + auto)
    try:
        sc = scenario_from_dict(data)  # InputError (exit 2) if the imported scenario is not valid
        if result.hidden_auto:   # the HF Trainer's "auto" values, from the model's hidden size
            from clustersim.importers.deepspeed_zero import fill_hidden_auto
            given = {o.split("=", 1)[0].strip() for o in overrides}
            result.notes += fill_hidden_auto(data, result.hidden_auto, sc.model.hidden,
                                             "parallel.dp_bucket_params" in given)
            scenario_from_dict(data)
    except InputError as err:
        if not (err.field.startswith("model.") and err.value is None):
            option = {"model.preset": model and "--model", "model.hf_config": hf_config and "--hf-config"}.get(err.field)
            if option:   # --model nope was blamed on the imported file: the option's own name
                raise err.with_field(option) from None
            given = [o for o in overrides if _set_touches(_set_key(o), err.field)]
            if given:   # a value the user gave (parallel.tp=3 in a product the loader names "parallel"): say so
                raise InputError(err.field, err.value, f"{err.allowed} (from --set {', --set '.join(given)})") from None
            if (err.field.split(".")[0] in ("model", "cluster", "parallel", "training")
                    and "read from" not in err.allowed):
                # a field the importer wrote: say where it came from, so the flag can be found (fp8 on an
                # A100 named only training.dtype, a field the user never wrote)
                raise InputError(err.field, err.value, f"{err.allowed} (the value the {result.kind} importer read "
                                 f"from {result.source})") from None
            raise
        # a model field the file does not give (a command line's vocabulary, say): the loader's rule, and
        # how to give it here
        raise InputError(err.field, None, f"{err.allowed}; the imported file does not give it: pass "
                         f"--set {err.field}=N, or name the model: {model_options(model_flags)}") from None
    result.scenario = data
    return result


def _set_key(assignment: str) -> str:
    """The dotted key of a ``--set KEY=VALUE``."""
    return assignment.split("=", 1)[0].strip()


def _set_touches(key: str, field: str) -> bool:
    """Whether ``--set key`` gave (part of) the value the loader's error names as ``field``: the field
    itself, a field inside it (parallel.tp in the product "parallel"), or the section it is in."""
    return key == field or key.startswith(field + ".") or field.startswith(key + ".")


def _split_run_fields(section: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the model the file describes, how the job ran it): the sequence length and the MoE token
    dispatcher (torchtitan's expert_parallel_comm_backend) are kept under a model named with --model
    or --hf-config; the rest is the model, which must then agree with the named one."""
    own = dict(section)
    ran: dict[str, Any] = {}
    if own.get("seq_len") is not None:
        ran["seq_len"] = own.pop("seq_len")
    moe = dict(own.get("moe") or {})
    if "token_dispatcher" in moe:
        ran["moe"] = {"token_dispatcher": moe.pop("token_dispatcher")}
        if moe:
            own["moe"] = moe
        else:
            own.pop("moe")
    return own, ran


def _refuse_a_second_model(found: dict[str, Any], named: dict[str, str], via: str = "") -> None:
    """``--model`` / ``--hf-config`` name the model where the file does not say it (a DeepSpeed config, a
    torchtitan flavor clustersim does not know, a command line without a known vocabulary); a file that
    describes a whole model of its own and another named beside it is an InputError naming the option
    (it replaced the file's model without a word; importers.same_model, the check a --config beside a
    log takes too)."""
    from clustersim.importers.same_model import refuse_another_model
    option, value = ("--model", named.get("preset")) if "preset" in named else ("--hf-config", named.get("hf_config"))
    if via:   # ``--set model.preset=NAME`` / ``model.hf_config=FILE``
        option = f"{via} model.{'preset' if 'preset' in named else 'hf_config'}"
    refuse_another_model(found, named, option, value, "left out: --model, --hf-config and --set model.preset / "
                         "model.hf_config name the model where the file does not say it; for another model, change "
                         "a field of the imported scenario (clustersim import ... --set model.KEY=VALUE); the imported "
                         "file describes its model")


def read_input(path: str, field: str, what: str) -> tuple[str, str]:
    """(text, display name) of a file, or of standard input for ``-``."""
    from clustersim.inputs import read_stdin_text, read_text
    if path == "-":
        return read_stdin_text(field, what), "<stdin>"
    return read_text(path, field, what), Path(path).name
