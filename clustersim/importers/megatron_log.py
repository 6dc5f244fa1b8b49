"""`clustersim import megatron-log FILE`: a Megatron-LM training log -> scenario + measured step.

The scenario comes from the log's ``arguments`` block (clustersim.importers.megatron_args), the
step times from its iteration lines. Megatron-LM prints one line per ``--log-interval``
iterations (megatron/training/training.py, training_log):

    [2024-06-01 12:00:00.123456] iteration      100/    5000 | consumed samples: ... |
    elapsed time per iteration (ms): 12345.6 | throughput per GPU (TFLOP/s/GPU): 412.3 | ...
    | global batch size:   512 | lm loss: ... |

The timestamp arrived in 2024, "consumed samples" in 2021, the throughput field with
--log-throughput; Megatron-DeepSpeed prints the same fields. Each line's elapsed time is the
mean over the iterations since the previous line (timers('interval-time')).
"""

from __future__ import annotations

import re

from clustersim.errors import InputError
from clustersim.importers.common import ImportResult, clean_lines, detected_cluster, steady_state
from clustersim.importers.megatron_args import scenario_from_args
from clustersim.importers.megatron_parse import parse_args_block

# megatron/training/training.py training_log: ' iteration {:8d}/{:8d} |' ... ' elapsed time per
# iteration (ms): {:.1f} |' ... ' global batch size: {:5d} |'. A negative, nan or inf time is read, and
# refused by steady_state naming it (it is no measurement)
ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*?)elapsed time per iteration \(ms\):\s*"
                       r"(-?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|(?i:nan|inf)))(?![\w.])")
GLOBAL_BATCH = re.compile(r"global batch size:\s*(\d+)")


def iteration_times(text: str) -> tuple[list[tuple[int, float]], list[int]]:
    """(iteration, step seconds) per iteration line, and the global batch sizes printed."""
    points, batches = [], []
    for line in clean_lines(text):
        m = ITERATION.search(line)
        if not m:
            continue
        points.append((int(m.group(1)), float(m.group(4)) / 1e3))
        b = GLOBAL_BATCH.search(line)
        if b:
            batches.append(int(b.group(1)))
    return points, batches


def import_megatron_log(text: str, source: str, cluster: str | None = None, nodes: int | None = None,
                        config: tuple[str, str] | None = None) -> ImportResult:
    """``config`` (text, name): the job, for a log whose arguments block is missing or cut (a pasted
    excerpt, a wrapper that does not print it); any format of clustersim.importers.config. Given,
    it describes the job even where the log has a block."""
    args = parse_args_block(text)
    points, batches = iteration_times(text)
    if not points:
        what = "it has the arguments but no training iteration was logged" if args is not None else "it has none"
        raise InputError("megatron-log", source, "a Megatron-LM training log with `iteration N/ M | ... | elapsed "
                         f"time per iteration (ms): X |` lines ({what})")
    cluster, beside = detected_cluster(cluster, text)
    if config is not None:
        from clustersim.importers.config import import_config
        cfg = import_config(config[0], config[1], cluster, nodes)
        framework, scenario, unknown, notes = cfg.framework, cfg.scenario, cfg.unknown, list(cfg.notes)
        if args is None:
            notes.append(f"no complete arguments block in {source}: the job from {config[1]}")
    elif args is None:
        raise InputError("megatron-log", source, "a log with its `------------------------ arguments "
                         "------------------------` block (Megatron-LM prints it at start-up on rank 0), or the "
                         "job beside it: --config FILE (the launch command line or arguments, or a clustersim "
                         "scenario); this log has iteration lines only, or a cut block")
    else:
        mapped = scenario_from_args(args, cluster, nodes, f"imported from {source}")
        framework, scenario, unknown, notes = mapped.framework, mapped.scenario, mapped.unknown, mapped.notes
    scenario.setdefault("cluster", {}).update(beside)   # the GPU profile of a part without its own preset
    iterations, median = steady_state(points, "megatron-log", source)
    steady_batches = [b for (it, _), b in zip(points, batches, strict=False) if it > iterations[0].iteration]
    par = scenario.setdefault("parallel", {})
    if steady_batches and steady_batches[-1] != par.get("global_batch"):
        notes.append(f"global batch {steady_batches[-1]} from the iteration lines (a batch-size ramp)")
        par["global_batch"] = steady_batches[-1]
    return ImportResult("megatron-log", source, framework, scenario, iterations, median, unknown, notes=notes)
