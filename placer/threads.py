"""Per-phase work on several threads, with results in input order.

The per-phase stages before the search (costing every phase, scanning its groups, the production rule's
decision) are independent across phases and spend most of their time in numpy loops that release the GIL, so on
the solver's worker count they run side by side. Results come back in the order of the inputs, never in the order
threads finish, so everything built from them is the same with one thread or several.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def ordered_map(fn: Callable[[T], R], items: Sequence[T], workers: int = 1) -> Iterator[R]:
    """``fn`` of each item, in item order, computed on up to ``workers`` threads (1: in this thread)."""
    if workers <= 1 or len(items) < 2:
        yield from map(fn, items)
        return
    pool = ThreadPoolExecutor(min(workers, len(items)), thread_name_prefix="placer-phase")
    try:
        futures = [pool.submit(fn, x) for x in items]
        for f in futures:
            yield f.result()
    finally:
        # an error or a signal stops the work not yet started instead of waiting for it
        pool.shutdown(wait=True, cancel_futures=True)
