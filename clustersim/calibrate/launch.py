"""Start the ranks once per run, watch them, and end the run cleanly when one dies or hangs.

The ranks are ``python -m validation.worker PLAN.json`` processes (inside ``ip netns exec``
in namespace mode). The launcher polls them and rank 0's status file: a rank that exits
non-zero, or a case that runs past its ``timeout_s``, ends the run with a RunError that names
the rank, the case and the log, after every rank has been stopped. Records measured before
stay in the store; rerunning the same command resumes after them.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustersim.calibrate.store import RECORDS_FILE, done_names, read_records

POLL_S = 0.2
PG_TIMEOUT_S = 90  # gloo's own timeout: survivors of a dead peer give up by themselves


class RunError(RuntimeError):
    """The measurement run ended early; the message says why and what was kept."""


@dataclass(frozen=True, slots=True)
class RankLaunch:
    """How to start the ranks: loopback (``prefixes`` empty) or one namespace each."""

    nprocs: int
    backend: str
    master_addr: str
    rank_addrs: tuple[str, ...]
    ifnames: tuple[str, ...]
    prefixes: tuple[tuple[str, ...], ...]  # command prefix per rank (``ip netns exec NS``)
    netns: tuple[str, ...] = ()


def repo_root() -> Path:
    """The checkout that holds ``validation/`` next to the ``clustersim`` package."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "validation" / "worker.py").is_file():
        raise RunError(f"validation/ benchmarks not found next to the clustersim package ({root}); "
                       "run `clustersim validate` from a source checkout")
    return root


def config_id(config: dict[str, Any]) -> str:
    """A short stable id of everything that changes what is measured (for resuming)."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def loopback_launch(nprocs: int, backend: str) -> RankLaunch:
    return RankLaunch(nprocs=nprocs, backend=backend, master_addr="127.0.0.1",
                      rank_addrs=("127.0.0.1",) * nprocs, ifnames=("lo",) * nprocs,
                      prefixes=((),) * nprocs)


def free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In a rank, before it runs: SIGTERM when clustersim dies, however it dies (Linux prctl
    PR_SET_PDEATHSIG = 1; man 2 prctl), so that no rank outlives it and writes into the records
    a rerun reads. Elsewhere nothing (the ranks are stopped by ``_stop_all``)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 3.0
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


def run_cases(cases: list[dict[str, Any]], launch: RankLaunch, out_dir: Path, level: str, cfg_id: str,
              extra: dict[str, Any], progress: Callable[[int, int, str], None] | None = None,
              ) -> list[dict[str, Any]]:
    """Measure the cases not yet in ``out_dir/records.jsonl`` under ``cfg_id``; return all records.

    ``progress(done, total, name)`` is called as cases complete.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    records_path = out_dir / RECORDS_FILE
    done = done_names(records_path, cfg_id)
    todo = [c for c in cases if not set(c.get("emits", [c["name"]])) <= done]
    total = len(cases)
    if progress:
        progress(total - len(todo), total, "resumed" if done else "starting")
    if todo:
        _launch_and_watch(todo, launch, out_dir, level, cfg_id, extra, records_path,
                          lambda i, name: progress and progress(total - len(todo) + i, total, name))
    return [r for r in read_records(records_path) if r.get("config_id") == cfg_id]


def _launch_and_watch(todo: list[dict[str, Any]], launch: RankLaunch, out_dir: Path, level: str,
                      cfg_id: str, extra: dict[str, Any], records_path: Path,
                      progress: Callable[[int, str], Any]) -> None:
    status_path = out_dir / "status.json"
    status_path.unlink(missing_ok=True)
    plan = {"cases": todo, "level": level, "backend": launch.backend, "config_id": cfg_id,
            "records_path": str(records_path), "status_path": str(status_path),
            # ranks outside a case's world wait at the barrier that closes it: gloo must not give up first
            "pg_timeout_s": max([PG_TIMEOUT_S] + [c.get("timeout_s", 0) + 30 for c in todo]), **extra}
    plan_path = out_dir / "plan.json"
    plan_path.write_text(json.dumps(plan, indent=1, sort_keys=True))
    logs = out_dir / "logs"
    logs.mkdir(exist_ok=True)
    root = repo_root()
    port = free_port("127.0.0.1") if not launch.netns else 29500
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for r in range(launch.nprocs):
            env = {**os.environ, "RANK": str(r), "WORLD_SIZE": str(launch.nprocs),
                   "MASTER_ADDR": launch.master_addr, "MASTER_PORT": str(port),
                   "GLOO_SOCKET_IFNAME": launch.ifnames[r], "CLUSTERSIM_RANK_ADDR": launch.rank_addrs[r],
                   "CLUSTERSIM_NETNS": launch.netns[r] if launch.netns else "",
                   "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
                       [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
            with open(logs / f"rank{r}.log", "ab") as log:
                # own session: a Ctrl-C in the terminal reaches only clustersim, which stops the
                # ranks itself (_stop_all) and keeps what they measured
                procs.append(subprocess.Popen([*launch.prefixes[r], sys.executable, "-m", "validation.worker",
                                               str(plan_path)], cwd=root, env=env, stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True,
                                              preexec_fn=_die_with_parent if sys.platform == "linux" else None))
        _watch(procs, todo, status_path, records_path, logs, progress)
    finally:
        _stop_all(procs)


def _read_status(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _watch(procs: list[subprocess.Popen[bytes]], todo: list[dict[str, Any]], status_path: Path,
           records_path: Path, logs: Path, progress: Callable[[int, str], Any]) -> None:
    index, started = -1, time.monotonic()
    startup_timeout_s = 120.0
    while True:
        codes = [p.poll() for p in procs]
        if all(c == 0 for c in codes):
            progress(len(todo), "done")
            return
        status = _read_status(status_path)
        case_name = status.get("name", "start-up")
        if status.get("index", -1) != index:
            index, started = status.get("index", -1), time.monotonic()
            progress(max(0, index), case_name)
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            # the first to fail is usually the one killed by a signal (negative code)
            failed.sort(key=lambda rc: (rc[1] >= 0, rc[0]))
            rank, code = failed[0]
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            raise RunError(_failure_message(f"rank {rank} {how}", case_name, records_path, logs, rank))
        limit = todo[index]["timeout_s"] if 0 <= index < len(todo) else startup_timeout_s
        if time.monotonic() - started > limit:
            raise RunError(_failure_message(f"no progress for {limit:.0f} s (a rank hung)", case_name,
                                            records_path, logs, 0))
        time.sleep(POLL_S)


def _failure_message(what: str, case_name: str, records_path: Path, logs: Path, rank: int) -> str:
    kept = len(read_records(records_path))
    return (f"validation run stopped: {what} during case {case_name!r}. All ranks were stopped. "
            f"{kept} records measured so far are kept in {records_path}; rerun the same command "
            f"to resume after them. Log of rank {rank} ({logs / f'rank{rank}.log'}), last lines:\n"
            f"{_tail(logs / f'rank{rank}.log')}")
