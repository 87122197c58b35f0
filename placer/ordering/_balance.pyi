# The compiled list-building heaps (_balance.cpp); see placer.ordering.greedy._balanced_picks_native and
# placer.ordering.nondelay.
import numpy as np

VERSION: int

def picks(rank: np.ndarray, wave: np.ndarray, words: np.ndarray, stream: np.ndarray, source: np.ndarray,
          dset: np.ndarray, set_ptr: np.ndarray, set_res: np.ndarray, work: np.ndarray, picked: np.ndarray,
          /) -> int: ...
def nondelay(source: np.ndarray, words: np.ndarray, dst_ptr: np.ndarray, dst_tile: np.ndarray, rank: np.ndarray,
             succ_ptr: np.ndarray, succ: np.ndarray, lag: int, tiles: int, order: np.ndarray, /) -> int: ...
