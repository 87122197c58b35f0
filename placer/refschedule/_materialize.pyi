"""
Compiled reference timing (see placer.refschedule.reference.materialize).
"""

from typing import Annotated

import numpy
from numpy.typing import NDArray


VERSION: int = 2

def materialize(*, order: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], source: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], words: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], dst_ptr: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], dst_tile: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], dst_addr: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], select: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], pointer: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], lead: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], guard: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], pred_ptr: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], pred: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], src_key_ptr: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], src_key: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], dst_key_ptr: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], dst_key_entry: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], dst_key: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], keys: int, tx: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu')], rx: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu')], cutover: Annotated[NDArray[numpy.bool_], dict(shape=(None,), order='C', device='cpu')], carries: Annotated[NDArray[numpy.bool_], dict(shape=(None,), order='C', device='cpu')], horizon: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu')]) -> bool:
    """
    Time the transfers in `order` by the reference's rules, writing tx, rx, cutover, carries and horizon; False (nothing decided) where a transfer's checks would reach outside the event rows.
    """
