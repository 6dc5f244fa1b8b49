"""What `run` and `goodput` say when the job does not fit in GPU memory (exit 3): how far it is
over, and the `clustersim sweep` command line that searches the layouts of the same job on the
same cluster for one that fits."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from clustersim import units
from clustersim.memory.report import MemoryReport
from clustersim.scenario import Scenario


def sweep_args(scenario: str | None, overrides: Sequence[str], gpus: int) -> tuple[list[str], int | None]:
    """(the ``--set`` items, the ``--gpus`` or None) of ``clustersim sweep SCENARIO`` for the same job
    on the same GPUs: the user's overrides except the layout fields that the sweep searches (it would
    hold them fixed, or refuse them) and the node count (``--gpus`` resizes the cluster after the
    scenario file's own layout is checked). Where the file's layout does not hold without the user's
    overrides, all of them are kept: that command runs as typed."""
    from clustersim.errors import InputError
    from clustersim.scenario import apply_overrides, read_scenario_dict, scenario_from_dict
    from clustersim.sweep.evaluate import KEY_FIELDS

    searched = {f"parallel.{k}" for k in KEY_FIELDS} | {"parallel.offload", "parallel.offload.optimizer",
                                                        "cluster.nodes"}
    kept = [o for o in overrides if o.split("=", 1)[0].strip() not in searched]
    try:
        own_gpus = scenario_from_dict(apply_overrides(read_scenario_dict(scenario), kept)).cluster.num_gpus
    except InputError:
        kept, own_gpus = list(overrides), gpus
    return kept, (gpus if own_gpus != gpus else None)


def sweep_command(scenario: str | None, overrides: Sequence[str], gpus: int, profiles: Sequence[str] = ()) -> str:
    """``clustersim sweep SCENARIO [--gpus N] --set ...`` (``sweep_args``) as one line."""
    kept, gpus_arg = sweep_args(scenario, overrides, gpus)
    words = ["clustersim", "sweep"] + ([scenario] if scenario else [])
    if gpus_arg is not None:
        words += ["--gpus", str(gpus_arg)]
    for item in kept:
        words += ["--set", item]
    for p in profiles:
        words += ["--profile", p]
    return shlex.join(words)


def does_not_fit_lines(memory: MemoryReport, gpus: int, scenario: str | None, overrides: Sequence[str],
                       profiles: Sequence[str] = (), job: Scenario | None = None) -> list[str]:
    """The two lines on stderr: what does not fit, and what to run or change instead. ``job``: the
    scenario as loaded; where the sweep refuses it (mixed GPUs, faults:
    clustersim.sweep.runner.check_uniform) the second line says what to change, not a sweep."""
    first = (f"error: does not fit: stage {memory.stage} needs at least {memory.interval[0] / units.GiB:.1f} GiB "
             f"(peak {memory.peak_bytes_per_gpu / units.GiB:.1f} GiB) > capacity "
             f"{memory.capacity_bytes_per_gpu / units.GiB:.1f} GiB per GPU")
    refused = _sweep_refuses(job)
    if refused == "cluster.groups":
        return [first, "clustersim sweep searches one kind of GPU and refuses cluster.groups: to fit stage "
                       f"{memory.stage}, give it fewer layers (parallel.layers_per_stage, or balance: auto), or "
                       "raise tp or pp, recompute more (parallel.recompute) or lower parallel.micro_batch, with "
                       "--set, and run again"]
    if refused == "faults":
        return [first, "clustersim sweep refuses a scenario with faults: (memory does not depend on them): "
                       "sweep a copy of the scenario without its faults: section to find the layouts that fit, "
                       "then run that layout with the faults"]
    command = sweep_command(scenario, overrides, gpus, profiles)
    why = _sweep_finds_none(scenario, overrides, gpus)
    if why is not None:   # the sweep would exit 2: say why instead of suggesting it
        return [first, f"no sweep of this job on these {gpus:,} GPUs helps: `{command}` exits 2 ({why}); a sweep on "
                       "more GPUs (its --gpus) may find a layout that fits"]
    return [first, f"to find the layouts that fit on these {gpus:,} GPUs, run: {command}"]


def _sweep_finds_none(scenario: str | None, overrides: Sequence[str], gpus: int) -> str | None:
    """Why the suggested sweep (``sweep_args``) would exit 2 before ranking a layout
    (clustersim.sweep.runner.why_none_fits, the sweep's own screen), or None where some layout fits."""
    from clustersim.cli.sweep_cmd import sweep_of
    from clustersim.errors import InputError
    from clustersim.sweep.runner import why_none_fits

    kept, gpus_arg = sweep_args(scenario, overrides, gpus)
    try:
        spec = sweep_of(scenario, kept, gpus_arg)[2]
    except InputError as err:
        return str(err)
    return why_none_fits(spec)


def _sweep_refuses(job: Scenario | None) -> str | None:
    """The field for which the sweep refuses ``job`` (its own check), or None."""
    from clustersim.errors import InputError
    from clustersim.sweep.runner import check_uniform

    if job is None:
        return None
    try:
        check_uniform(job)
    except InputError as err:
        return err.field
    return None
