# The compiled balancing heap (_balance.cpp); see placer.ordering.greedy._balanced_picks_native.
import numpy as np

VERSION: int

def picks(rank: np.ndarray, wave: np.ndarray, words: np.ndarray, stream: np.ndarray, source: np.ndarray,
          dset: np.ndarray, set_ptr: np.ndarray, set_res: np.ndarray, work: np.ndarray, picked: np.ndarray,
          /) -> int: ...
