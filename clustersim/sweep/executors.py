"""Where sweep tasks run: in this process, a local process pool, or a Dask cluster.

Every executor has one method, ``run(fn, items, on_done)``: it calls ``fn(item)`` for each item,
calls ``on_done(index)`` as each finishes (in completion order, for the progress bar) and returns
the results in the order of ``items``. Results therefore never depend on which worker finished
first, and the sweep's final sort (clustersim.sweep.rank) fixes the order of equal results.
"""

from __future__ import annotations

import concurrent.futures.process
import contextlib
import gc
import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Protocol

from clustersim.errors import InputError
from clustersim.limits import MAX_WORKERS_PER_CORE

EXECUTORS = ("local", "dask", "serial")
OnDone = Callable[[int], None]


class Executor(Protocol):
    def run(self, fn: Callable[[Any], Any], items: Sequence[Any], on_done: OnDone | None = None) -> list[Any]: ...

    def close(self) -> None: ...

    def terminate(self) -> None:
        """Stop at once, dropping queued and running tasks (Ctrl-C)."""
        ...


def ignore_sigint() -> None:
    """Worker start-up: Ctrl-C in a terminal reaches every process of its group; the workers leave
    it to the parent, which stops them (``terminate``) instead of each printing a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def call_then_freeze(fn: Callable[[Any], Any], item: Any) -> Any:
    """``fn(item)`` in a worker with the cyclic collector paused, then one collection of what the
    task allocated (``gc.collect(0)``: all of it is still in the youngest generation) and
    ``gc.freeze()``: what the task left (the screen's caches: compiled units, schedule profiles,
    memory parts, millions of objects) moves to the permanent generation, which later
    collections skip. Objects that become garbage later are still freed by reference counting.
    Measured on the 1,024-GPU Mixtral sweep (2 vCPUs): 133-139 s of CPU with the collector as it
    was, 113-123 s with this."""
    gc.disable()
    try:
        return fn(item)
    finally:
        gc.collect(0)
        gc.freeze()
        gc.enable()


class SerialExecutor:
    """In this process: no start-up cost, for small sweeps and tests."""

    workers = 1

    def run(self, fn: Callable[[Any], Any], items: Sequence[Any], on_done: OnDone | None = None) -> list[Any]:
        out = []
        for i, item in enumerate(items):
            out.append(fn(item))
            if on_done:
                on_done(i)
        return out

    def close(self) -> None:
        pass

    def terminate(self) -> None:
        pass


class LocalExecutor:
    """A ``concurrent.futures.ProcessPoolExecutor`` of ``workers`` processes (default: all cores).

    Processes are started with "spawn": a fresh interpreter is safe whatever threads this process
    runs (the progress bar has one), and behaves the same on Linux, macOS and Windows.
    """

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or os.cpu_count() or 1
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=ignore_sigint)
        self._terminated = False

    def run(self, fn: Callable[[Any], Any], items: Sequence[Any], on_done: OnDone | None = None) -> list[Any]:
        futures = {self._pool.submit(call_then_freeze, fn, item): i for i, item in enumerate(items)}
        out: list[Any] = [None] * len(items)
        for fut in as_completed(futures):
            i = futures[fut]
            out[i] = fut.result()
            if on_done:
                on_done(i)
        return out

    def close(self) -> None:
        if not self._terminated:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def terminate(self) -> None:
        # concurrent.futures has no public way to stop running tasks: end the worker processes
        # (the pool's own table of them) after cancelling what is queued
        self._terminated = True
        procs = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=5)
        # the pool's manager thread closes its wake-up pipe once the workers are gone; the
        # interpreter's exit hook would then write to the closed pipe and print a traceback
        # ("OSError: Bad file descriptor" after Ctrl-C): let it finish and drop it from the hook
        thread = getattr(self._pool, "_executor_manager_thread", None)
        if thread is not None:
            thread.join(timeout=5)
            wakeups = getattr(concurrent.futures.process, "_threads_wakeups", None)
            wakeup = wakeups.get(thread) if wakeups is not None else None
            if wakeup is not None:
                wakeup.wakeup = _quiet(wakeup.wakeup)


def _quiet(wakeup: Callable[[], None]) -> Callable[[], None]:
    """The pool's wake-up, silent when its pipe is already closed (the exit hook still wakes a
    manager thread that is alive, so the interpreter never waits on it)."""
    def call() -> None:
        with contextlib.suppress(OSError):
            wakeup()
    return call


class DaskExecutor:
    """Dask ``distributed``: a running scheduler at ``address`` (``tcp://host:8786``), or a
    ``LocalCluster`` of ``workers`` single-threaded processes when no address is given.

    Workers must be able to import clustersim (install it on every worker machine).
    """

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise InputError("--executor", "dask",
                             "local, or install Dask first: pip install 'clustersim[dask]'") from None
        self._cluster = None
        if address:
            try:
                self._client = Client(address, timeout="10s")
            except (OSError, TimeoutError, ValueError) as exc:   # ValueError: no port, an unknown scheme
                raise InputError("--scheduler", address, f"the address of a running Dask scheduler ({exc})") from None
        else:
            self._cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                                         processes=True, dashboard_address=None)
            self._client = Client(self._cluster)
        self.workers = max(1, sum(self._client.nthreads().values()))

    def run(self, fn: Callable[[Any], Any], items: Sequence[Any], on_done: OnDone | None = None) -> list[Any]:
        from distributed import as_completed as dask_as_completed

        # pure=False: a task is never skipped as a duplicate of another; key order is irrelevant.
        futures = self._client.map(fn, list(items), pure=False)
        index = {fut.key: i for i, fut in enumerate(futures)}
        out: list[Any] = [None] * len(items)
        for fut in dask_as_completed(futures):
            i = index[fut.key]
            out[i] = fut.result()
            if on_done:
                on_done(i)
        return out

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()

    def terminate(self) -> None:
        self.close()


def make_executor(kind: str, scheduler: str | None = None, workers: int | None = None) -> Executor:
    """The executor named on the command line (``--executor``, ``--scheduler``, ``--workers``)."""
    if kind not in EXECUTORS:
        raise InputError("--executor", kind, EXECUTORS)
    if scheduler and kind != "dask":
        raise InputError("--scheduler", scheduler, "only together with --executor dask")
    cores = os.cpu_count() or 1
    if workers is not None and workers > MAX_WORKERS_PER_CORE * cores:
        raise InputError("--workers", workers, f"1..{MAX_WORKERS_PER_CORE * cores} ({MAX_WORKERS_PER_CORE} per CPU core "
                                               f"of this machine's {cores}; clustersim's limit: more only add start-up)")
    if kind == "dask":
        return DaskExecutor(scheduler, workers)
    if kind == "serial" or workers == 1:
        return SerialExecutor()
    return LocalExecutor(workers)
