"""One rank of a validation run: ``python -m validation.worker PLAN.json``.

Started once per run by clustersim.calibrate.launch (loopback or one network namespace per
rank); reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment, measures every
case of the plan in order and, on rank 0, appends one record per case to the JSONL store
(clustersim.calibrate.store: one write + flush + fsync per record). Ranks outside a case's
world size wait at the barrier that closes the case.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from clustersim.calibrate.plan import SAMPLING
from clustersim.calibrate.store import append_record
from validation.bench_comm import run_collective
from validation.bench_compute import run_compute_sweep
from validation.bench_steps import run_step

# Test hooks (tests/validation): make one rank die or hang at a named case, to check that the
# launcher ends the run with a clear error and keeps what was measured.
DIE_AT_ENV = "CLUSTERSIM_TEST_DIE_AT"    # "RANK:CASE_NAME"
HANG_AT_ENV = "CLUSTERSIM_TEST_HANG_AT"  # "RANK:CASE_NAME"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _environment(backend: str, device: torch.device, plan: dict[str, Any], world: int) -> dict[str, Any]:
    me = {"host": socket.gethostname(), "netns": os.environ.get("CLUSTERSIM_NETNS", ""),
          "addr": os.environ.get("CLUSTERSIM_RANK_ADDR", ""),
          "device": torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_model(),
          "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []}
    everyone: list[Any] = [None] * world
    dist.all_gather_object(everyone, me)
    nccl = None
    if torch.cuda.is_available():
        try:
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        except (AttributeError, RuntimeError):
            nccl = None
    return {"torch": torch.__version__, "nccl": nccl, "backend": backend, "python": platform.python_version(),
            "world_size": world, "threads_per_rank": torch.get_num_threads(), "ranks": everyone,
            "link": plan.get("link", {}), "mode": plan.get("mode", ""), "date": plan.get("date", "")}


def _hook(env_name: str, rank: int, case_name: str) -> bool:
    spec = os.environ.get(env_name, "")
    return bool(spec) and spec == f"{rank}:{case_name}"


def _write_status(path: str, status: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(status, f)
    os.replace(tmp, path)  # atomic: the launcher never reads half a status


def run_case(case: dict[str, Any], groups: dict[int, Any], rank: int, device: torch.device,
             sampling: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(item, result) pairs: one per record the case yields."""
    kind, params = case["kind"], case["params"]
    group = groups[params.get("world", 2)]
    if kind == "collective":
        return [(case, run_collective(params, group, rank, device, sampling))]
    if kind == "compute_sweep":
        return list(zip(params["items"], run_compute_sweep(params, group, device, sampling), strict=True))
    return [(case, run_step(kind, params, group, rank, sampling, device))]


def main(plan_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    backend = plan["backend"]
    if backend == "nccl":
        device = torch.device("cuda", rank % max(1, torch.cuda.device_count()))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if plan.get("pin_cores") and cpus:
            os.sched_setaffinity(0, {cpus[rank % len(cpus)]})  # one core per rank where there are enough
        torch.set_num_threads(1)
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=plan["pg_timeout_s"]))
    groups = {w: dist.new_group(list(range(w))) for w in range(2, world + 1)}
    env = _environment(backend, device, plan, world)
    sampling = SAMPLING[plan["level"]]
    for index, case in enumerate(plan["cases"]):
        if rank == 0:
            _write_status(plan["status_path"], {"index": index, "name": case["name"]})
        if _hook(DIE_AT_ENV, rank, case["name"]):
            os.kill(os.getpid(), signal.SIGKILL)
        if _hook(HANG_AT_ENV, rank, case["name"]):
            time.sleep(10**6)
        load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else -1.0
        dist.barrier()
        result = None
        if rank < case["params"].get("world", 2):
            result = run_case(case, groups, rank, device, sampling)
        dist.barrier()
        if rank == 0:
            assert result is not None
            load = [round(load_before, 2), round(os.getloadavg()[0], 2)]
            for item, res in result:
                record = {**{k: item[k] for k in ("name", "kind", "role", "params")}, **res,
                          "config_id": plan["config_id"], "env": env,
                          # machine load (1-minute average, all processes) around the case:
                          # other work on the machine slows compute and TCP alike
                          "loadavg_1m": load}
                append_record(plan["records_path"], record)
    if rank == 0:
        _write_status(plan["status_path"], {"index": len(plan["cases"]), "name": "done"})
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
