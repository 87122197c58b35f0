"""
Compiled list-building heaps (placer.streams.balance.balanced_picks, placer.refschedule.nondelay).
"""

from typing import Annotated

import numpy
from numpy.typing import NDArray


VERSION: int = 4

def picks(*, rank: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], wave: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], words: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], stream: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], source: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], dset: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], set_ptr: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], set_res: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], work: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu')], picked: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu')], tiered: bool) -> int:
    """
    The pick number of every item, written into `picked` (`work`: each endpoint's remaining work, updated); returns how many items were picked. `tiered`: each endpoint's items in two heaps (positive words only) instead of one. See placer.streams.balance.balanced_picks.
    """

def nondelay(*, source: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], words: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], dst_ptr: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], dst_tile: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], rank: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], succ_ptr: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], succ: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], lag: int, tiles: int, order: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu')]) -> int:
    """
    The non-delay list order, written into `order`; returns how many transfers were listed (fewer than all on a dependency cycle). See placer.refschedule.nondelay.nondelay_order.
    """
