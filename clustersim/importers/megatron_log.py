"""`clustersim import megatron-log FILE`: a Megatron-LM training log -> scenario + measured step.

The scenario comes from the log's ``arguments`` block (clustersim.importers.megatron_args), the
step times from its iteration lines. Megatron-LM prints one line per ``--log-interval``
iterations (megatron/training/training.py, training_log):

    [2024-06-01 12:00:00.123456] iteration      100/    5000 | consumed samples: ... |
    elapsed time per iteration (ms): 12345.6 | throughput per GPU (TFLOP/s/GPU): 412.3 | ...
    | global batch size:   512 | lm loss: ... |

The timestamp arrived in 2024, "consumed samples" in 2021, the throughput field with
--log-throughput; Megatron-DeepSpeed prints the same fields (BigScience's fork the time in seconds,
``elapsed time per iteration (s): 105.22 |``). Each line's elapsed time is the
mean over the iterations since the previous line (timers('interval-time')).
"""

from __future__ import annotations

import re

from clustersim.errors import InputError
from clustersim.importers.common import (
    ImportResult,
    Iteration,
    clean_lines,
    detected_cluster,
    stated_world,
    steady_state,
)
from clustersim.importers.megatron_args import scenario_from_args
from clustersim.importers.megatron_parse import MegatronArgs, args_blocks

# megatron/training/training.py training_log: ' iteration {:8d}/{:8d} |' ... ' elapsed time per
# iteration (ms): {:.1f} |' ... ' global batch size: {:5d} |'. Megatron-DeepSpeed as BigScience ran it
# (bigscience-workshop/Megatron-DeepSpeed megatron/training.py training_log, since 4c2aea04 "Fix throughput
# unit"): ' elapsed time per iteration (s): {:.2f} |', seconds. Both close the field with ' |': a line that
# stops inside the number (a killed run's last line, another rank's output cut into it) is no measurement
# and does not match. A negative, nan or inf time is read, and refused by steady_state naming it
ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*?)elapsed time per iteration \((ms|s)\):\s*"
                       r"(-?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|(?i:nan|inf)))\s*\|")
SECONDS_PER_UNIT = {"ms": 1e-3, "s": 1.0}
GLOBAL_BATCH = re.compile(r"global batch size:\s*(\d+)")


def iteration_times(text: str) -> list[tuple[int, float, int | None]]:
    """(iteration, step seconds, the global batch size printed or None) per iteration line."""
    points = []
    for line in clean_lines(text):
        m = ITERATION.search(line)
        if not m:
            continue
        b = GLOBAL_BATCH.search(line)
        points.append((int(m.group(1)), float(m.group(5)) * SECONDS_PER_UNIT[m.group(4)],
                       int(b.group(1)) if b else None))
    return points


WORLD = re.compile(r"using world size:\s*(\d+)")   # megatron/training/arguments.py, printed at start-up


def _check_world(text: str, scenario: dict, config_name: str) -> None:
    """The GPU count the log states against the --config job's: a config of another run paired
    the log's step time with another layout (a 16-GPU log read with a 32-GPU config)."""
    found = WORLD.findall(text)
    if not found:
        return
    world = stated_world(scenario)
    if world is not None and world != int(found[-1]):
        raise InputError("--config", config_name, f"the config of the run this log measured: the log says world size "
                         f"{found[-1]}, the config's layout runs {world} GPUs")


def _check_model(args: MegatronArgs, scenario: dict, cluster: str | None, nodes: int | None, source: str,
                 config_name: str) -> None:
    """The model the log's arguments block describes against the --config job's (importers.same_model,
    the check --set model.preset takes): a config of another model fitted the log's step time to it."""
    from clustersim.importers.same_model import refuse_another_model
    try:
        logged = scenario_from_args(args, cluster, nodes, source).scenario.get("model") or {}
    except InputError:
        return   # a block clustersim cannot describe: the config is the job's description
    refuse_another_model(logged, scenario.get("model") or {}, "--config", config_name,
                         f"the config of the run this log measured: the arguments block of {source} describes "
                         "its model")


def _last_job(text: str, blocks: list[tuple[int, MegatronArgs]], cluster: str | None, nodes: int | None,
              source: str) -> tuple[str, str, str | None]:
    """(the part of the log that ran the last arguments block's job, the part before it that ran
    another job ("" if none), a note). A restarted run prints
    one block per start; where the blocks describe different jobs (another layout, GPU count or
    batch), the iteration lines before the last block belong to another job and are left out."""
    if len(blocks) < 2:
        return text, "", None
    jobs = []
    for _, args in blocks:
        try:
            jobs.append(scenario_from_args(args, cluster, nodes, source).scenario)
        except InputError:
            jobs.append(None)   # an earlier job clustersim cannot describe: not the last one's
    if all(job == jobs[-1] for job in jobs):
        return text, "", f"{len(blocks)} arguments blocks of the same job (a restarted run): every segment's iteration lines"
    lines = text.splitlines()
    cut = blocks[-1][0]
    return "\n".join(lines[cut:]), "\n".join(lines[:cut]), (
        f"{len(blocks)} arguments blocks describing different jobs (a restart with another layout): the job and "
        "the iteration lines of the last one; the lines before it are another job's")


def import_megatron_log(text: str, source: str, cluster: str | None = None, nodes: int | None = None,
                        config: tuple[str, str] | None = None) -> ImportResult:
    """``config`` (text, name): the job, for a log whose arguments block is missing or cut (a pasted
    excerpt, a wrapper that does not print it); any format of clustersim.importers.config. Given,
    it describes the job even where the log has a block."""
    blocks = args_blocks(text)
    args = blocks[-1][1] if blocks else None
    segment, before, restart_note = _last_job(text, blocks, cluster, nodes, source)
    earlier = [(it, t) for it, t, _ in iteration_times(before)]
    points = iteration_times(segment)
    if not points:
        what = "it has the arguments but no training iteration was logged" if args is not None else "it has none"
        if earlier:
            what = "no training iteration was logged after its last arguments block (the lines before it are another job's)"
        raise InputError("megatron-log", source, "a Megatron-LM training log with `iteration N/ M | ... | elapsed "
                         f"time per iteration (ms): X |` (or `(s): X |`) lines ({what})")
    cluster, beside = detected_cluster(cluster, text)
    if config is not None:
        from clustersim.importers.config import import_config
        cfg = import_config(config[0], config[1], cluster, nodes)
        framework, scenario, unknown, notes = cfg.framework, cfg.scenario, cfg.unknown, list(cfg.notes)
        if args is None:
            notes.append(f"no complete arguments block in {source}: the job from {config[1]}")
        _check_world(segment, scenario, config[1])
        if args is not None:
            _check_model(args, scenario, cluster, nodes, source, config[1])
    elif args is None:
        raise InputError("megatron-log", source, "a log with its `------------------------ arguments "
                         "------------------------` block (Megatron-LM prints it at start-up on rank 0), or the "
                         "job beside it: --config FILE (the launch command line or arguments, or a clustersim "
                         "scenario); this log has iteration lines only, or a cut block")
    else:
        mapped = scenario_from_args(args, cluster, nodes, f"imported from {source}")
        framework, scenario, unknown, notes = mapped.framework, mapped.scenario, mapped.unknown, mapped.notes
    if restart_note:
        notes.append(restart_note)
    scenario.setdefault("cluster", {}).update(beside)   # the GPU profile of a part without its own preset
    # a batch-size ramp (--rampup-batch-size): the step time is measured at the final global batch only
    final_batch = next((b for _, _, b in reversed(points) if b is not None), None)
    steady = [(it, t) for it, t, b in points if b is None or b == final_batch]
    ramp = [Iteration(it, t, f"batch-size ramp (global batch {b}, not the final {final_batch})")
            for it, t, b in points if b is not None and b != final_batch]
    iterations, median = steady_state(steady, "megatron-log", source)
    iterations = sorted([*iterations, *ramp, *(Iteration(it, t, "another job (before the last arguments block)")
                                               for it, t in earlier)], key=lambda i: i.iteration)
    par = scenario.setdefault("parallel", {})
    if final_batch is not None and final_batch != par.get("global_batch"):
        if config is not None and not ramp and par.get("global_batch") is not None:
            # every line at one batch, not the config's: the config of another job (as _check_world)
            raise InputError("--config", config[1], f"the config of the run this log measured: its iteration lines "
                             f"run global batch {final_batch} throughout, the config's job "
                             f"{par.get('global_batch')}")
        why = "a batch-size ramp" if ramp else f"the arguments say {par.get('global_batch')}"
        notes.append(f"global batch {final_batch} from the iteration lines ({why})")
        par["global_batch"] = final_batch
    if ramp:
        notes.append(f"the step time is that of the lines at the final global batch {final_batch}; the {len(ramp)} "
                     "lines of the ramp before it, at smaller batches, are left out")
    return ImportResult("megatron-log", source, framework, scenario, iterations, median, unknown, notes=notes)
