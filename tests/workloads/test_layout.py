"""The replica layout of a matmul input block (``lowering._replica_layout``), for any panel width, panel order,
owner run and row blocks: every fragment lands inside the extent, the fragments tile it with no gap and no overlap,
every native segment starts at a fragment and is covered exactly by its fragments, and each (row, column) lands
once. These are what a replica group needs to be a relay candidate (docs/reference.md §4)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.workloads.lowering import _replica_layout
from placer.workloads.spec import MatmulLowering


@settings(max_examples=200, deadline=None)
@given(batch=st.integers(1, 3), tm=st.integers(1, 9), cols=st.integers(1, 9), panel=st.integers(1, 5),
       order=st.sampled_from(["row", "column"]), owner_run=st.integers(1, 12), row_blocks=st.integers(1, 4),
       narrow=st.booleans())
def test_fragments_tile_the_extent_and_every_native_segment(batch: int, tm: int, cols: int, panel: int, order: str,
                                                             owner_run: int, row_blocks: int, narrow: bool) -> None:
    if order == "column":
        row_blocks = 1  # a band of rows is not contiguous in a column-major panel (the spec refuses it)
    low = MatmulLowering(grid=(1, 1, 1), panel=panel, owner_run=owner_run, row_blocks=row_blocks,
                         panel_order=order)
    widths = np.full(cols, 32, np.int64)
    if narrow:
        widths[-1] = 16  # a last grain narrower than 32 bytes, as MLP-down's 4,304 columns end
    b_of = np.repeat(np.arange(batch), tm)
    tpos = np.tile(np.arange(tm), batch)
    ii, jj, off, extent, bounds = _replica_layout(low, b_of, tpos, widths, tm, batch)
    size = widths[jj]
    assert extent == batch * tm * int(widths.sum())
    assert sorted(zip(ii.tolist(), jj.tolist(), strict=True)) == [(i, j) for i in range(batch * tm)
                                                                  for j in range(cols)]
    at = np.argsort(off, kind="stable")
    starts, ends = off[at], off[at] + size[at]
    assert starts[0] == 0
    assert ends[-1] == extent
    assert (starts[1:] == ends[:-1]).all()  # no gap, no overlap
    assert bounds[0] == 0
    assert bounds[-1] == extent
    assert (np.diff(bounds) > 0).all()
    assert np.isin(bounds[:-1], starts).all()  # every native segment starts at a fragment
    seg = np.searchsorted(bounds, starts, side="right") - 1
    assert (ends <= np.asarray(bounds)[seg + 1]).all()  # and no fragment crosses into the next one
    if order == "column" and panel > 1:
        # column-major: a row's fragments inside one panel are never contiguous (each is its own receive)
        nxt = {(int(i), int(j)): int(o) for i, j, o in zip(ii, jj, off, strict=True)}
        for i in range(batch * tm):
            for j in range(cols - 1):
                if j // panel == (j + 1) // panel and tm > 1:
                    assert nxt[(i, j + 1)] != nxt[(i, j)] + int(widths[j])
