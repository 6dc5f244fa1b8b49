"""The training runs `clustersim calibrate` fits to, from what a user has (docs/calibration.md):

* ``--log FILE`` (with ``--config FILE`` or '-' per log, in order): a Megatron-LM, torchtitan or
  DeepSpeed log; a TensorBoard event file; a CSV export of step times;
* ``--run SCENARIO.yaml=SECONDS``: a job described as a scenario and its measured step time
  (a dashboard's number);
* ``--runs FILE.csv``: several such, one per row: ``scenario`` (a path, relative to the CSV's
  folder) and one of ``step_time_s``, ``tokens_per_s``, ``mfu`` (0-1, or "41%"), the latter two
  converted with the scenario exactly as `clustersim run` defines them.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clustersim.errors import InputError
from clustersim.hardware.spec import COMPUTE_SCALE_RANGE
from clustersim.importers.common import MAX_STEP_TIME_S, MIN_STEP_TIME_S
from clustersim.importers.step_series import TIME_COLUMNS

# compute_scale values each run is simulated at; the fit interpolates between them (clustersim.calibrate.machine)
SCALE_GRID = (COMPUTE_SCALE_RANGE[0], 0.5, 0.625, 0.8, 1.0, 1.25, 1.6, 2.0, COMPUTE_SCALE_RANGE[1])
_DATE = re.compile(r"\b(20\d\d-\d\d-\d\d)[T ]\d\d:\d\d")
RUNS_COLUMNS = ("step_time_s", "step_time_ms", "tokens_per_s", "mfu")


@dataclass
class Run:
    """One run: its scenario, measured step and the simulated step over SCALE_GRID."""

    source: str
    kind: str
    scenario: dict[str, Any]
    measured_s: float
    grid_s: tuple[float, ...] = ()
    dates: list[str] = field(default_factory=list)
    option: str = "--log"      # the command-line option that gave it (--log, --run, --runs), for messages
    files: tuple[Path, ...] = ()   # the files it was read from (log, config, CSV, scenario): never an output
    device: str = ""               # the log's line naming the GPU it ran on ("" if it names none)
    notes: list[str] = field(default_factory=list)   # what reading it left out (a log's unterminated last line)

    def predicted_s(self, scale: float) -> float:
        """Step time at compute_scale ``scale``, interpolated linearly in 1/scale."""
        xs = [1 / k for k in SCALE_GRID]   # decreasing
        x = 1 / min(max(scale, SCALE_GRID[0]), SCALE_GRID[-1])
        for i in range(len(xs) - 1):
            if xs[i] >= x >= xs[i + 1]:
                f = (xs[i] - x) / (xs[i] - xs[i + 1])
                return self.grid_s[i] + f * (self.grid_s[i + 1] - self.grid_s[i])
        return self.grid_s[-1]


def distinct_sources(runs: list[Run]) -> list[Run]:
    """The runs, each named apart from the others: where two share a name (two --log files
    ``a/train.log`` and ``b/train.log``, two --run scenarios of one file name), each is named by the
    shortest end of its file's path that tells it apart (``a/train.log``), as a --runs row is by its
    line; the report, the profile's ``fitted_to`` and ``per_run`` read these names."""
    out = []
    for r in runs:
        mine = r.files[0].resolve().parts if r.files else ()
        # one file given twice keeps its name (calibrate refuses it, or takes it as reruns, by that name)
        others = {q.files[0].resolve().parts for q in runs if q.source == r.source and q.files} - {mine}
        if not mine or not others:
            out.append(r)
            continue
        name = next("/".join(mine[-d:]) for d in range(2, len(mine) + 1)
                    if all(o[-d:] != mine[-d:] for o in others))
        out.append(replace(r, source=name))
    return out


def _step_time(value: float, field_: str, what: str) -> float:
    if not (math.isfinite(value) and MIN_STEP_TIME_S <= value <= MAX_STEP_TIME_S):
        raise InputError(field_, what, f"a measured step time in seconds, {MIN_STEP_TIME_S:g} to {MAX_STEP_TIME_S:g} "
                                       "(a day); > 0")
    return value


def on_cluster(data: dict[str, Any], base: str | None) -> dict[str, Any]:
    """The scenario on ``--cluster``'s preset: it names the machine every run ran on (it replaces
    the runs' ``cluster.preset``; docs/calibration.md). Before anything is read off the scenario (an
    MFU is converted with --cluster's GPU, not the scenario's)."""
    return data if base is None else {**data, "cluster": {**data.get("cluster", {}), "preset": base}}


def _scenario(path: Path, field_: str, spec: str, overrides: list[str], base: str | None) -> dict[str, Any]:
    from clustersim.scenario import apply_overrides, read_scenario_dict, scenario_from_dict
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "is not a file" if path.exists() else "does not exist"
        form = "SCENARIO.yaml=SECONDS with a scenario file" if field_ == "--run" else "a scenario file"
        raise InputError(field_, spec, f"{form} that exists ({path} {what})")
    data = on_cluster(apply_overrides(read_scenario_dict(path), overrides), base)
    scenario_from_dict(data)   # exit 2 naming the field if the scenario is not valid
    return data


def runs_from_specs(specs: list[str], overrides: list[str], base: str | None = None) -> list[Run]:
    """``--run SCENARIO.yaml=SECONDS``, each."""
    runs = []
    for spec in specs:
        path, sep, seconds = spec.rpartition("=")
        if not sep or not path:
            raise InputError("--run", spec, "SCENARIO.yaml=SECONDS (a scenario file and its measured step time)")
        try:
            t = float(seconds)
        except ValueError:
            raise InputError("--run", spec, "SCENARIO.yaml=SECONDS with SECONDS a number > 0 (the measured step "
                                            "time)") from None
        _step_time(t, "--run", spec)
        runs.append(Run(Path(path).name, "scenario", _scenario(Path(path), "--run", spec, overrides, base), t,
                        option="--run", files=(Path(path),)))
    return runs


def _convert(data: dict[str, Any], column: str, value: float, where: str) -> float:
    """Step seconds from tokens/s or MFU, with `clustersim run`'s definitions (docs/scenario.md):
    tokens_per_s = global_batch x seq_len / step; mfu = model FLOPs / step / GPUs / dense peak."""
    from clustersim.compute.flops import model_flops_per_step
    from clustersim.scenario import scenario_from_dict
    sc = scenario_from_dict(data)
    if column in TIME_COLUMNS:   # step_time_s / step_time_ms, as --log CSVs read them
        return value * TIME_COLUMNS[column]
    if column == "tokens_per_s":
        return sc.parallel.global_batch * sc.model.seq_len / value
    peak = sc.cluster.gpu.peak(sc.training.dtype)
    return model_flops_per_step(sc.model, sc.parallel.global_batch) / (value * peak * sc.cluster.num_gpus)


def _number(text: str, column: str, where: str) -> float:
    raw = text.strip()
    pct = column == "mfu" and raw.endswith("%")
    try:
        v = float(raw[:-1] if pct else raw)
    except ValueError:
        raise InputError(where, text, f"a number in column {column}") from None
    if pct:
        v /= 100
    if not (math.isfinite(v) and v > 0) or (column == "mfu" and v > 1):
        allowed = "MFU as a fraction 0-1 or a percentage such as 41%" if column == "mfu" else f"{column} > 0"
        raise InputError(where, text, allowed)
    return v


def runs_from_csv(path: Path, overrides: list[str], base: str | None = None) -> list[Run]:
    """``--runs FILE.csv``: one run per row."""
    from clustersim.inputs import read_text
    text = read_text(path, "--runs", "a CSV of runs (scenario, step_time_s | step_time_ms | tokens_per_s | mfu)")
    rows = list(csv.DictReader(io.StringIO(text)))
    header = [h.strip() for h in next(csv.reader(io.StringIO(text)), [])]
    value_cols = [c for c in RUNS_COLUMNS if c in header]
    if "scenario" not in header or not value_cols:
        raise InputError("--runs", str(path), "a CSV with a `scenario` column (a scenario file per row) and one of "
                         f"{', '.join(RUNS_COLUMNS)}; its columns are {', '.join(header) or 'none'}")
    runs = []
    for i, row in enumerate(rows, start=2):
        row = {(k or "").strip(): (v or "") for k, v in row.items()}
        if not row["scenario"].strip():
            continue
        given = [c for c in value_cols if row.get(c, "").strip()]
        column = given[0] if given else None
        where = f"--runs {path.name} line {i}"
        if column is None:
            raise InputError(where, row, f"a value in one of {', '.join(value_cols)}")
        if len(given) > 1:   # which one was measured? (the first was taken, the others ignored)
            raise InputError(where, {c: row[c] for c in given}, f"one measurement per row: a value in one of "
                             f"{', '.join(value_cols)}, the others empty")
        value = _number(row[column], column, where)
        scenario_path = Path(row["scenario"].strip())
        if not scenario_path.is_absolute():
            scenario_path = path.parent / scenario_path
        data = _scenario(scenario_path, where, row["scenario"], overrides, base)
        t = _step_time(_convert(data, column, value, where), where, f"{column} {row[column]}")
        runs.append(Run(f"{path.name}:{i} {scenario_path.name}", "scenario", data, t, option="--runs",
                        files=(path, scenario_path)))
    if not runs:
        raise InputError("--runs", str(path), "at least one row with a scenario")
    return runs


_MISSING = object()


def _stated(data: dict[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _world(parallel: dict[str, Any]) -> int:
    return math.prod(int(parallel.get(k) or 1) for k in ("tp", "pp", "cp", "dp"))


# --set keys another rule judges: the cluster (--cluster names the machine, importers.common.check_nodes
# its node count, calibrate.machine._check_preset_hardware its hardware) and the model a preset or HF
# config names (importers.finish's second-model rule)
_JUDGED_ELSEWHERE = ("model.preset", "model.hf_config", "model.name", "name")


def check_sets_keep_the_job(data: dict[str, Any], source: str, overrides: list[str]) -> None:
    """A log's step time is the time of the job it states: ``--set`` gives what the file does not
    state (docs/calibration.md, "Training logs"), and one that changes a field the file states (the
    model, the layout, the micro-batch, recomputation, ZeRO stage, dtype, ...) or the GPU count is an
    InputError naming the --set, the value and the file's value (a model of neither source, 24 nodes
    under a log of world size 96 fitted compute_scale 0.47, global batch 384 under one of 192 fitted
    1.87; a micro-batch, ZeRO stage or dtype the log states was overridden silently). ``data``: the
    imported scenario, before the overrides; the model preset or HF config a --set names:
    importers.finish's second-model rule."""
    from clustersim.importers.common import check_nodes, cluster_gpus_per_node, stated_world
    from clustersim.scenario import apply_overrides
    par = data.get("parallel") or {}
    world = stated_world(data)
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        after = _stated(apply_overrides(data, [item]), key)
        if key == "cluster.nodes" and world is not None and isinstance(after, int):
            cluster = data.get("cluster") or {}
            gpn = int(cluster.get("gpus_per_node") or cluster_gpus_per_node(cluster.get("preset"), "GPUs per node"))
            check_nodes(world, after, gpn, str(cluster.get("preset")), "--set cluster.nodes")
    after_par = apply_overrides(data, overrides).get("parallel") or {}
    after_world = stated_world(apply_overrides(data, overrides))
    given = [o.split("=", 1) for o in overrides
             if o.split("=", 1)[0].strip() in ("parallel.tp", "parallel.pp", "parallel.cp", "parallel.dp")]
    if world is not None and after_world is not None and after_world != world and given:
        layout = " x ".join(f"{k} {int(par.get(k) or 1)}" for k in ("tp", "pp", "cp", "dp"))
        now = " x ".join(f"{k} {int(after_par.get(k) or 1)}" for k in ("tp", "pp", "cp", "dp"))
        raise InputError("--set " + ", ".join(k.strip() for k, _ in given), ", ".join(v for _, v in given),
                         f"a layout of the world size {world} that {source} states ({layout}), or leave the "
                         f"--set out: --set gives a field the file does not state (the --set layout {now} runs "
                         f"{after_world} GPUs)")
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        if key.startswith("cluster.") or key in _JUDGED_ELSEWHERE:
            continue
        stated = _stated(data, key)
        after = _stated(apply_overrides(data, [item]), key)
        if stated is not _MISSING and after != stated:
            raise InputError(f"--set {key}", after, f"{stated!r}, the value {source} states (the job whose step "
                             "time it measured), or leave the --set out: --set gives a field the file does not state")


def runs_from_logs(logs: list[Path], configs: list[Path], base: str | None, nodes: int | None,
                   overrides: list[str]) -> list[Run]:
    """``--log FILE ...`` with their ``--config`` (one per log, '-' for none, in order)."""
    from clustersim.importers import LOG_KINDS, detect_log_kind, finish, given_model, import_text
    from clustersim.importers import step_series as series
    from clustersim.importers.common import drop_unterminated_line, gpu_line_in
    from clustersim.inputs import read_text
    if configs and len(configs) != len(logs):
        raise InputError("--config", [str(c) for c in configs], f"one per --log ({len(logs)}), '-' for a log "
                         "that needs none")
    runs = []
    for i, path in enumerate(logs):
        cfg = None
        if configs and str(configs[i]) != "-":
            cfg = (read_text(configs[i], "--config", "a job config"), configs[i].name)
        device, notes = "", []
        if series.is_tensorboard(path) or path.is_dir():
            points, how = series.tensorboard_points(path)
            res = series.import_step_series("tensorboard", points, how, path.name, cfg, base, nodes)
            dates: list[str] = []
        else:
            text, cut = drop_unterminated_line(read_text(path, "--log", "a training log"), path.name)
            notes = [cut] if cut is not None else []
            kind = detect_log_kind(text)
            if kind is None and path.suffix.lower() == ".csv":
                points, how = series.csv_points(text, path.name)
                res = series.import_step_series("steps-csv", points, how, path.name, cfg, base, nodes)
            elif kind is None:
                raise InputError("--log", str(path), "a training log with step lines: " + ", ".join(LOG_KINDS)
                                 + " (Megatron-LM `iteration ... elapsed time per iteration (ms|s)`, torchtitan `step: "
                                 "... tps: ...`, DeepSpeed `...SamplesPerSec=...`), a TensorBoard event file or a "
                                 "CSV of step times")
            else:
                try:
                    res = import_text(kind, text, path.name, config=cfg, cluster=base, nodes=nodes,
                                      model=given_model(overrides))
                except InputError as err:   # a bad line of the log: name the option given (the value names the file)
                    if err.field != kind:
                        raise
                    raise err.with_field(f"--log ({kind})") from None
            dates = _DATE.findall(text)
            device = gpu_line_in(text) or ""
        check_sets_keep_the_job(res.scenario, path.name, overrides)
        res = finish(res, overrides, model_flags=False)
        if res.measured_step_time_s is None:
            raise InputError("--log", str(path), "a log with training step lines")
        runs.append(Run(path.name, res.kind, on_cluster(res.scenario, base), res.measured_step_time_s, dates=dates,
                        files=(path, *([configs[i]] if cfg is not None else [])), device=device, notes=notes))
    return runs
