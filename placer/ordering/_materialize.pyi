# The compiled timing loop (_materialize.cpp); see placer.ordering.reference._materialize_native.
import numpy as np

VERSION: int

def materialize(order: np.ndarray, source: np.ndarray, words: np.ndarray, dst_ptr: np.ndarray,
                dst_tile: np.ndarray, dst_addr: np.ndarray, select: np.ndarray, pointer: np.ndarray,
                lead: np.ndarray, guard: np.ndarray, pred_ptr: np.ndarray, pred: np.ndarray,
                src_key_ptr: np.ndarray, src_key: np.ndarray, dst_key_ptr: np.ndarray, dst_key_entry: np.ndarray,
                dst_key: np.ndarray, keys: int, tx: np.ndarray, rx: np.ndarray, cutover: np.ndarray,
                carries: np.ndarray, horizon: np.ndarray, /) -> bool: ...
