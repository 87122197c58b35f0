"""numpy's set routines, sort-based: ``unique``, ``isin``, ``intersect1d``, ``setdiff1d`` and ``union1d``.

Why: numpy 2.3 and later take a hash table for ``np.unique`` of integers (and so for ``isin``, ``intersect1d`` and
the rest, which call it). On this project's machines that path is about a hundred times slower than sorting: 3.1 s
against 0.03 s for three million int64 values (numpy 2.4.6, 2 cores), and a batch-four SigLIP timing spent a fifth
of its time there. These functions give the same values by sorting; other dtypes (strings, floats, whose NaNs
numpy collapses) go to numpy unchanged. ``np.unique`` asked for an index, an inverse or counts sorts already.
``tests/test_arrays.py`` keeps the package off the slow names, the validator and the schedule checker aside (they
share no code with the stages they check)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]


def _integral(*arrays: Array) -> bool:
    return all(a.dtype.kind in "biu" for a in arrays)


def unique(values: npt.ArrayLike) -> Array:
    """The sorted distinct values of ``values`` (flattened), as ``np.unique(values)``."""
    a = np.asarray(values)
    if not _integral(a):
        return np.unique(a)
    a = np.sort(a.ravel())
    if a.size < 2:
        return a
    keep = np.empty(a.size, bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def isin(element: npt.ArrayLike, test: npt.ArrayLike, *, invert: bool = False) -> npt.NDArray[np.bool_]:
    """Whether each of ``element`` is among ``test``, in ``element``'s shape, as ``np.isin``."""
    a, b = np.asarray(element), np.asarray(test)
    if not _integral(a, b):
        return np.isin(a, b, invert=invert)
    values = unique(b)
    if values.size == 0:
        found = np.zeros(a.shape, bool)
    else:
        at = np.minimum(np.searchsorted(values, a), values.size - 1)
        found = values[at] == a
    return ~found if invert else found


def intersect1d(a: npt.ArrayLike, b: npt.ArrayLike) -> Array:
    """The sorted distinct values in both, as ``np.intersect1d(a, b)``."""
    x, y = np.asarray(a), np.asarray(b)
    if not _integral(x, y) or np.result_type(x, y).kind not in "biu":
        return np.intersect1d(x, y)
    u = unique(x)
    return u[isin(u, y)].astype(np.result_type(x, y))  # numpy's dtype: both arrays' common one


def setdiff1d(a: npt.ArrayLike, b: npt.ArrayLike) -> Array:
    """The sorted distinct values of ``a`` not in ``b``, as ``np.setdiff1d(a, b)``."""
    x, y = np.asarray(a), np.asarray(b)
    if not _integral(x, y):
        return np.setdiff1d(x, y)
    u = unique(x)
    return u[isin(u, y, invert=True)]


def union1d(a: npt.ArrayLike, b: npt.ArrayLike) -> Array:
    """The sorted distinct values in either, as ``np.union1d(a, b)``."""
    x, y = np.asarray(a), np.asarray(b)
    if not _integral(x, y) or np.result_type(x, y).kind not in "biu":
        return np.union1d(x, y)
    return unique(np.concatenate([x.ravel(), y.ravel()]))


__all__ = ["intersect1d", "isin", "setdiff1d", "union1d", "unique"]
