"""The one executor for work that splits into independent pieces (GEMM output tiles, input
ranges of a sweep, checkpoint shards): in this process, on a local process pool, or on a
Dask cluster. The pieces are pure functions of their inputs, so the results are the same
whatever runs them; only the wall time changes.

    ex = get_executor(jobs=4)                   # a local process pool of 4
    ex = get_executor(scheduler="tcp://host:8786")  # a Dask cluster (fmtsim[dask])
    for result in ex.imap(work, pieces): ...    # results in the order of the pieces

``imap`` keeps a bounded number of pieces in flight (twice the workers), so the memory a
run holds is that of a few pieces, not of the whole job; a worker holds one piece at a time.
The work function must be a module-level function (it is pickled to the workers).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from . import argcheck

__all__ = ["Executor", "InProcess", "ProcessPool", "DaskCluster", "get_executor", "check_jobs", "check_scheduler",
           "SCHEDULER_SCHEMES"]

# the address schemes of dask.distributed's comms ('host:port' alone is tcp)
SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "inproc", "ucx")
_FORMS = (f"a dask.distributed.Client or an address like 'tcp://host:8786' (scheme {', '.join(SCHEDULER_SCHEMES)}; "
          "'host:port' is tcp), or None")


class Executor:
    """Runs work(piece) for every piece; ``workers`` is how many run at once."""

    workers = 1
    in_process = True

    def imap(self, work: Callable[[Any], Any], pieces: Iterable[Any]) -> Iterator[Any]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the executor started (a pool, a client it opened itself)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InProcess(Executor):
    """Every piece in this process, one after the other."""

    def imap(self, work: Callable[[Any], Any], pieces: Iterable[Any]) -> Iterator[Any]:
        for piece in pieces:
            yield work(piece)

    def __repr__(self) -> str:
        return "InProcess()"


def _windowed(submit: Callable[[Any], Any], pieces: Iterable[Any], window: int) -> Iterator[Any]:
    """Results of submitted futures in submission order, at most ``window`` in flight."""
    pending: deque[Any] = deque()
    it = iter(pieces)
    for piece in it:
        pending.append(submit(piece))
        if len(pending) >= window:
            break
    while pending:
        result = pending.popleft().result()
        for piece in it:
            pending.append(submit(piece))
            break
        yield result


class ProcessPool(Executor):
    """A local pool of ``workers`` processes (concurrent.futures)."""

    in_process = False

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def imap(self, work: Callable[[Any], Any], pieces: Iterable[Any]) -> Iterator[Any]:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers)
        pool = self._pool
        yield from _windowed(lambda p: pool.submit(work, p), pieces, 2 * self.workers)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def __repr__(self) -> str:
        return f"ProcessPool({self.workers})"


class DaskCluster(Executor):
    """The workers of a Dask cluster, through a ``dask.distributed.Client`` (given, or opened
    on a scheduler address and closed again by :meth:`close`)."""

    in_process = False

    def __init__(self, scheduler: Any) -> None:
        check_scheduler(scheduler)  # before importing Dask: a wrong value is not a missing package
        try:
            from dask.distributed import Client
        except ImportError:
            raise ImportError("scheduler=... needs Dask: pip install 'fmtsim[dask]'") from None
        if isinstance(scheduler, str):
            try:
                self.client = Client(scheduler, timeout="30s")
            except OSError as e:
                raise OSError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
            self._own = True
        elif isinstance(scheduler, Client):
            self.client, self._own = scheduler, False
        else:  # pragma: no cover - check_scheduler refused it
            raise TypeError(f"scheduler must be {_FORMS}, not {type(scheduler).__name__}")
        threads = self.client.nthreads()
        self.workers = max(1, sum(threads.values()))

    def imap(self, work: Callable[[Any], Any], pieces: Iterable[Any]) -> Iterator[Any]:
        client = self.client
        # pure=False: two equal pieces are still two tasks (no result shared by key)
        yield from _windowed(lambda p: client.submit(work, p, pure=False), pieces, 2 * self.workers)

    def close(self) -> None:
        if self._own:
            self.client.close()
            self._own = False

    def __repr__(self) -> str:
        scheduler = self.client.scheduler
        return f"DaskCluster({getattr(scheduler, 'address', None)!r}, {self.workers} workers)"


def _is_client(obj: object) -> bool:
    """A dask.distributed.Client (or a subclass), known without importing Dask."""
    return any(c.__name__ == "Client" and c.__module__.split(".")[0] == "distributed" for c in type(obj).__mro__)


def check_scheduler(scheduler: object, what: str = "scheduler") -> None:
    """``scheduler`` is None, a dask.distributed.Client or an address Dask can parse (a known
    scheme, a host and a port number for the network ones): TypeError / ValueError naming
    ``what`` and the forms it takes otherwise, before Dask is imported or a Client is made
    (a Client on an address Dask refuses raises Dask's own ValueError, then waits at exit)."""
    if scheduler is None or _is_client(scheduler):
        return
    if not isinstance(scheduler, str):
        raise TypeError(f"{what} must be {_FORMS}, not {type(scheduler).__name__}")
    scheme, sep, rest = scheduler.partition("://")
    if not sep:
        scheme, rest = "tcp", scheduler
    why = None
    if not scheduler.strip():
        why = "it is empty"
    elif any(ch.isspace() for ch in scheduler):
        why = "it holds white space"
    elif scheme not in SCHEDULER_SCHEMES:
        why = f"unknown scheme {scheme!r}"
    elif scheme in ("inproc", "ucx"):
        why = None if rest else "no address after the scheme"
    else:  # host:port, the host possibly [IPv6]
        host, colon, port = rest.rpartition(":")
        if not colon or (host.startswith("[") and not host.endswith("]")):
            why = "no port number (host:port, e.g. tcp://host:8786)"
        elif not port.isdigit() or not 0 < int(port) < 65536:
            why = f"port {port!r} is not a number 1..65535"
    if why is not None:
        raise ValueError(f"{what} must be {_FORMS}; got {scheduler!r}: {why}")


def check_jobs(jobs: object) -> None:
    """jobs is None or a whole number >= 1 (TypeError / ValueError otherwise)."""
    if jobs is not None:
        argcheck.jobs(jobs)


def get_executor(jobs: int | None = None, scheduler: Any = None, pieces: int | None = None) -> Executor:
    """The executor for ``jobs`` local processes (None or 1: this process; at most one per CPU
    and per piece) or, with ``scheduler`` (a Client or an address), a Dask cluster."""
    if scheduler is not None:
        if jobs not in (None, 1):
            raise ValueError("give jobs or scheduler, not both (a Dask cluster has its own workers)")
        return DaskCluster(scheduler)
    if jobs is None:
        return InProcess()
    jobs = argcheck.jobs(jobs)
    n = min(jobs, os.cpu_count() or 1, pieces if pieces else jobs)
    return InProcess() if n <= 1 else ProcessPool(n)
