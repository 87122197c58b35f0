"""Ray, started or joined, and a fan-out of independent pieces of work over it.

Ray is optional (``pip install -e '.[ray]'``) and is imported only here, inside functions: nothing the CLI loads at
start-up imports it.

- No address (or ``auto``): join the cluster in ``RAY_ADDRESS`` when that is set, else start a private local instance
  sized to this machine (one CPU resource per core), with no dashboard, its temporary files in a fresh folder that is
  removed at shutdown, and the workers' output not echoed. It is shut down when the work is done.
- An address (``HOST:PORT`` or ``ray://HOST:PORT``): join that cluster; the cluster stays up afterwards. Its nodes
  need placer installed (the same version); captures travel through Ray's object store, so they need no files.
- A Ray instance this process already started (a test fixture, a notebook) is reused and left running.

A task reserves as many Ray CPUs as it runs CP-SAT workers, so Ray never runs more tasks at once than
(CPUs / workers): the machine is not oversubscribed.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from placer.errors import InputError

LOCAL = ("auto", "local")
OBJECT_STORE_BYTES = 2 * 1024**3  # a shared machine: cap Ray's shared-memory store (it spills to disk beyond)


def ray_module() -> Any:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report, no prompt
    try:
        import ray
    except ImportError:
        raise InputError("Ray is not installed: pip install -e '.[ray]' (or run without Ray: --serial)") from None
    return ray


@contextmanager
def ray_session(address: str | None = None) -> Iterator[Any]:
    """Ray, connected for the duration of the block (see the module docstring for what ``address`` means)."""
    ray = ray_module()
    if ray.is_initialized():
        yield ray
        return
    target = address if address not in (None, *LOCAL) else os.environ.get("RAY_ADDRESS") or None
    temp = None
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False, "configure_logging": True}
    if target is not None:
        reachable(target)
    try:
        if target is not None:
            ray.init(address=target, **quiet)
        else:
            # Ray's memory monitor kills the newest task when the *machine* passes 95 % memory, counting everyone's
            # processes: on a shared machine it killed sweep jobs that used little (set the variable to re-enable)
            os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
            temp = tempfile.mkdtemp(prefix="placer-ray-")
            ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, _temp_dir=temp,
                     object_store_memory=OBJECT_STORE_BYTES, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        where = f"Ray cluster {target}" if target else "local Ray instance"
        hint = " (a cluster with token authentication also needs RAY_AUTH_MODE=token and its token here; see " \
            "docs/sweep.md)" if target and "RAY_AUTH_MODE" not in os.environ else ""
        raise InputError(f"cannot start or join the {where}: {str(exc).splitlines()[0] if str(exc) else exc}{hint}",
                         where="--address" if target else None) from None
    previous = None
    if threading.current_thread() is threading.main_thread():
        # a terminated run (a batch system's time-out, `kill`) shuts Ray down as Ctrl-C does: no stray processes
        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield ray
    finally:
        ray.shutdown()
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


CONNECT_SECONDS = 10.0  # how long joining a cluster may take to answer at all (Ray's own retries take minutes)


def reachable(address: str, seconds: float = CONNECT_SECONDS) -> None:
    """Refuse an address nothing answers on: Ray retries an unreachable cluster for minutes (``RAY_ADDRESS=
    127.0.0.1:1 placer schedule --ray auto`` did not exit within 60 s), so the port is tried first."""
    import socket

    rest = address.split("://", 1)[-1]
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        return  # no port to try: Ray's own resolution decides
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=seconds):
            pass
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise InputError(f"cannot reach the Ray cluster at {address} within {seconds:g} s ({why}); start it with "
                         "`ray start --head`, or run without Ray", where="--address / RAY_ADDRESS") from None


def _terminate(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def largest_node_cpus(ray: Any) -> float:
    """The most CPUs any one live node offers: a task needing more would wait forever."""
    return max((n.get("Resources", {}).get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")), default=0.0)


def check_task_cpus(ray: Any, cpus: int, what: str) -> None:
    largest = largest_node_cpus(ray)
    if cpus > largest:
        raise InputError(f"{what} = {cpus} CPUs per task, but the largest Ray node has {largest:g}: no task could "
                         "ever start")


def ray_map(fn: Callable[..., Any], items: Sequence[Any], *, shared: Sequence[Any] = (), cpus: int = 1,
            address: str | None = None) -> list[Any]:
    """``[fn(*shared, item) for item in items]`` with every call a Ray task; results in ``items`` order.

    ``shared`` values (a capture, a machine) are put in the object store once and handed to every task by
    reference. An exception in a task is raised here as the task raised it (an InputError stays one)."""
    with ray_session(address) as ray:
        check_task_cpus(ray, cpus, "the work")
        refs = [ray.put(v) for v in shared]
        task = ray.remote(fn).options(num_cpus=cpus, max_retries=1)  # a dead worker only; exceptions are not retried
        futures = [task.remote(*refs, item) for item in items]
        try:
            return list(ray.get(futures))
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else None
            if cause is not None:
                raise cause from None
            raise
