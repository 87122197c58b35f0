"""The lowering of a ViT encoder to exchange phases, as the reference compiler would (docs/reference.md §2, §8).

See docs/workloads.md for the phase list, the grids and what is approximate. In short: every token row (batch
image b, token t; row r = b * tokens + t) has one canonical owner tile that holds the residual stream and the
row-wise buffers; each matmul spreads over an M x N x K tile grid (M token blocks carrying every batch image,
N output-column blocks, K contraction blocks), receives its activation block X[m, k] replicated over the N tiles
as 32-byte FP8 fragments multicast by the rows' owners, its weight block W[k, n] replicated over the M tiles as
long transfers from weight-holder tiles (one source address per layer), reduces partial sums over K and sends
the result back to the owners. Attention runs in rounds of heads over per-(head, image) tile blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.errors import InputError
from placer.units import ceil_div, round_up
from placer.workloads.builder import R0, R1, ParamSpace, Program
from placer.workloads.spec import GRAIN, MatmulLowering, ModelSpec, plan_grid

PARTIAL_BYTES = 2  # partial sums and matmul outputs travel as FP16
IO_TILES = 4  # tiles that stream the input image in and the embedding out (the top tiles)
CODE_BYTES = 80 * 1024  # code + exchange table per tile, plus up to CODE_JITTER (vertex code differs by tile)
CODE_JITTER = 24 * 1024
STACK_BYTES = 4 * 1024
SCRATCH_MAX = 32 * 1024  # per-tile kernel scratch: seeded, so free memory differs from tile to tile


def _reductions(spec: ModelSpec, name: str, label: str) -> list[tuple[str, str]]:
    """A matmul's reduction phases: one per serial pass (``name.red``, then ``name.red1``, ...)."""
    low = spec.lowering.get(name)
    passes = low.serial if low is not None else 1
    if passes == 1:
        return [(f"{name}.red", label)]
    return [(f"{name}.red{'' if s == 0 else s}", f"{label}, pass {s + 1} of {passes}") for s in range(passes)]


def phase_steps(spec: ModelSpec) -> tuple[list[tuple[str, str]], int, int]:
    """(key, label) per phase in program order, plus the first and one-past-last index of the layer body."""
    steps = [(f"input.{c}", f"input: image chunk {c} → token owners") for c in range(spec.input_chunks)]
    steps += [
        ("embed.prep", "embed: FP8 scale + bias → grid"),
        ("embed.in", "embed: patch input (replicated)"),
        ("embed.w", "embed: weights (replicated)"),
        *_reductions(spec, "embed", "embed: partial-sum reduction"),
        ("embed.out", "embed: output → owners"),
        ("embed.pos", "embed: position rows (+class token) → owners"),
    ]
    body = len(steps)
    steps += [
        ("ln1", "ln1: norm parameters → owners"),
        ("qkv.prep", "qkv: FP8 scale + bias → grid"),
        ("qkv.in", "qkv: input + weights (replicated)"),
        ("qkv.red", "qkv: partial-sum reduction"),
        ("qkv.out", "qkv: output → owners"),
    ]
    for r in range(spec.attention_rounds):
        steps += [
            (f"attn{r}.qk", f"attention round {r}: Q, K rows → attention tiles"),
            (f"attn{r}.v", f"attention round {r}: V rows → attention tiles"),
            (f"attn{r}.max", f"attention round {r}: softmax row-max exchange"),
            (f"attn{r}.sum", f"attention round {r}: softmax row-sum exchange"),
            (f"attn{r}.red", f"attention round {r}: AV partial-sum reduction"),
            (f"attn{r}.out", f"attention round {r}: output → owners"),
        ]
    steps += [
        ("proj.prep", "proj: FP8 scale + bias → grid"),
        ("proj.in", "proj: input (replicated)"),
        ("proj.w", "proj: weights (replicated)"),
        ("proj.red", "proj: partial-sum reduction"),
        ("proj.out", "proj: output → owners (residual add)"),
        ("ln2", "ln2: norm parameters → owners"),
        ("mlp_up.prep", "mlp-up: FP8 scale + bias → grid"),
        ("mlp_up.in", "mlp-up: input + weights (replicated)"),
        ("mlp_up.red", "mlp-up: partial-sum reduction"),
        ("mlp_up.out", "mlp-up: output → owners"),
        ("mlp_down.prep", "mlp-down: FP8 scale + bias → grid"),
        ("mlp_down.in", "mlp-down: input (replicated)"),
        ("mlp_down.w", "mlp-down: weights (replicated)"),
        ("mlp_down.red", "mlp-down: partial-sum reduction"),
        ("mlp_down.out", "mlp-down: output → owners (residual add)"),
    ]
    end = len(steps)
    steps += [
        ("post.ln", "post-norm parameters → owners"),
        ("map_kv.prep", "MAP head: FP8 scale + bias → grid"),
        ("map_kv.in", "MAP head: FP16 rows → key/value projection (replicated) + weights"),
        *_reductions(spec, "map_kv", "MAP head: key/value partial-sum reduction"),
        ("map_kv.out", "MAP head: key/value rows → owners"),
        ("map.heads", "MAP head: key/value head rows → probe-attention tiles"),
        ("map.reduce", "MAP head: probe-attention partials → head roots"),
        ("map.pool", "MAP head: pooled head outputs → projection tiles"),
        ("map.w", "MAP head: output projection weights → projection tiles"),
        ("head.out", "head: embedding → output rows"),
        ("output", "output: embedding → IO tiles"),
    ]
    return steps, body, end


def _replica_layout(low: MatmulLowering, b_of: np.ndarray, tpos: np.ndarray, widths: np.ndarray, tm: int,
                    batch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, list[int]]:
    """Where each (row, grain column) fragment of one replicated block X[m, k] lands on every replica, in listed
    order: (row index, column index, offset) per fragment, the replicas' extent and the native segment bounds.

    Layout [image][panel][token][the panel's columns] (``panel_order = "row"``) or [image][panel][column][token]
    (``"column"``): a panel is ``panel`` grain columns (the last one may be narrower), rows are packed inside it
    with no gap; ``tm`` is this M block's token count, so a group's extent has no padding hole and every native
    segment is complete (an M block with fewer tokens simply has a smaller extent: replicas of one group still
    share theirs). With one-column panels (``panel = 1``: the AMP layout of the reference's matmul inputs, QKV,
    proj and MLP-up) a source's fragments land one per panel, each its own receive with its own pointer, as the
    reference's timed rows imply (docs/workloads.md, "Calibration"); wider row-major panels make a source's
    fragments in one panel one contiguous run, column-major ones keep them apart (each its own receive, as with
    one-column panels) with fewer native segments.
    Listing: rows in runs of ``owner_run``; inside a run in address order: panel by panel, then row by row and
    column by column (row-major panels) or column by column and row by row (column-major ones); ``owner_run = 1``
    lists each source's fragments together. Native segments: image x panel, the row axis cut into ``row_blocks``
    blocks.
    """
    w = widths.shape[0]
    nrows = b_of.shape[0]
    panel_of = np.arange(w) // low.panel
    n_panels = int(panel_of[-1]) + 1
    pw = np.bincount(panel_of, weights=widths).astype(np.int64)  # bytes of one row in each panel
    p0 = np.concatenate([[0], np.cumsum(pw)[:-1]]) * tm  # panel start inside an image
    c0 = np.concatenate([[0], np.cumsum(widths)[:-1]]) - np.concatenate([[0], np.cumsum(pw)[:-1]])[panel_of]
    seg = tm * int(widths.sum())
    ii, jj = (a.reshape(-1) for a in np.meshgrid(np.arange(nrows), np.arange(w), indexing="ij"))
    run = np.arange(nrows) // low.owner_run
    column = low.panel_order == "column"
    # inside a run in address order: panel, then column and row (column-major) or row and column (row-major)
    order = np.lexsort((ii, jj, run[ii]) if column else (jj, ii, panel_of[jj], run[ii]))
    ii, jj = ii[order], jj[order]
    pj = panel_of[jj]
    if column:
        off = b_of[ii] * seg + p0[pj] + c0[jj] * tm + tpos[ii] * widths[jj]
    else:
        off = b_of[ii] * seg + p0[pj] + tpos[ii] * pw[pj] + c0[jj]
    cuts = [int(c[0]) for c in np.array_split(np.arange(tm), min(low.row_blocks, tm))]
    bounds = sorted({b * seg + int(p0[p]) + c * int(pw[p]) for b in range(batch) for p in range(n_panels)
                     for c in cuts} | {batch * seg})
    return ii, jj, off, batch * seg, bounds


def _split_cols(n: int, parts: int) -> list[np.ndarray]:
    """Split ``n`` FP16 columns into ``parts`` near-equal runs of whole 32-bit words (column pairs)."""
    pairs = np.array_split(np.arange(n // 2), parts)
    return [np.arange(2 * p[0], 2 * p[-1] + 2) if p.shape[0] else np.zeros(0, np.int64) for p in pairs]


class Rows:
    """Canonical owners, spread over every tile: row r = b * tokens + t is the k-th in token order (k = t * batch
    + b) and lives on tile (k * tiles // rows + tiles // 2) mod tiles. A matmul's M-block m (a contiguous run of
    tokens, every image) sits on a contiguous run of grid tiles at about the same fraction of the machine as its
    tokens, so owners half a machine away are never replicas of their own rows: no transfer's source is one of
    its destinations."""

    def __init__(self, batch: int, tokens: int, tiles: int) -> None:
        self.batch, self.tokens = batch, tokens
        n = batch * tokens
        r = np.arange(n, dtype=np.int64)
        k = (r % tokens) * batch + r // tokens
        unrotated = k * tiles // n
        first = ceil_div(np.arange(tiles, dtype=np.int64) * n, tiles)
        self.slot = k - first[unrotated]
        self.owner = (unrotated + tiles // 2) % tiles
        self.per_owner = np.bincount(self.owner, minlength=tiles)
        self.owners = np.flatnonzero(self.per_owner)

    def row(self, b: np.ndarray, t: np.ndarray) -> np.ndarray:
        rows: np.ndarray = b * self.tokens + t
        return rows


@dataclass(frozen=True, eq=False)
class WeightBlocks:
    """A matmul's weight blocks W[k, n] (index b over (k, n)) and where their slices live."""

    name: str
    low: MatmulLowering
    grid: np.ndarray  # (M, N, K) tile of each grid position
    gk: np.ndarray  # K index of block b
    gn: np.ndarray  # N index of block b
    gsize: np.ndarray  # bytes of block b
    home_m: np.ndarray  # the M-blocks that hold a slice (home j on M-block home_m[j])
    share: np.ndarray  # (blocks, homes) bytes of each home's slice

    def home_bytes(self, tiles: int) -> np.ndarray:
        """Per tile, the bytes of one layer's copy it holds as a home."""
        out = np.zeros(tiles, np.int64)
        held = self.grid[self.home_m][:, self.gn, self.gk].T  # (blocks, homes) home tile
        np.add.at(out, held.reshape(-1), self.share.reshape(-1))
        return out


@dataclass
class OwnerBuf:
    kind: int
    stride: int  # bytes per row slot


class Lowering:
    def __init__(self, spec: ModelSpec, batch: int, prog: Program) -> None:
        self.spec, self.batch, self.prog = spec, batch, prog
        self.tiles = prog.tiles
        self.steps, self.body, self.end = phase_steps(spec)
        self.id = {key: i for i, (key, _) in enumerate(self.steps)}
        for step, (_, label) in enumerate(self.steps):
            prog.labels[step] = label
        self.last = len(self.steps) - 1
        self.rows = Rows(batch, spec.tokens, self.tiles)
        self.root = self.tiles - 1
        h, mlp = spec.hidden, spec.mlp
        own, per = self.rows.owners, self.rows.per_owner[self.rows.owners]
        i = self.id

        def owner_buf(name: str, row_bytes: int, first: int, last: int, region: str = "any") -> OwnerBuf:
            stride = round_up(row_bytes, GRAIN)
            return OwnerBuf(prog.kind(f"owner.{name}", own, per * stride, first, last, region), stride)

        self.residual = owner_buf("residual", h * 4, 0, self.last)
        self.patch = owner_buf("patch", spec.patch_bytes, i["input.0"], i["embed.in"])
        self.x8 = owner_buf("x8", h * spec.act_bytes, self.body, self.end - 1)
        self.h8 = owner_buf("h8", mlp * spec.act_bytes, i["mlp_up.out"], i["mlp_down.in"])
        self.qkv = owner_buf("qkv", 3 * h * spec.attn_bytes, i["qkv.out"], i[f"attn{spec.attention_rounds - 1}.v"])
        self.attn = owner_buf("attn", h * spec.attn_bytes, i["attn0.out"], i["proj.in"])
        self.out16 = owner_buf("out16", max(h, mlp) * PARTIAL_BYTES, i["embed.out"], self.last)
        self.pos = owner_buf("pos", h * 2, i["embed.pos"], i["embed.pos"])
        self.ln = owner_buf("ln", 2 * h * 2, self.body, self.last)
        self.xln16 = owner_buf("xln16", h * 2, i["post.ln"], i["map_kv.in"])
        all_tiles = np.arange(self.tiles)
        rng = prog.rng
        code = CODE_BYTES + rng.integers(0, CODE_JITTER // GRAIN, self.tiles) * GRAIN
        prog.kind("code+exchange", all_tiles, code, 0, self.last, R0, fixed=prog.machine.memory.base)
        prog.kind("stack", all_tiles, STACK_BYTES, 0, self.last, R0)
        prog.kind("scratch", all_tiles, rng.integers(0, SCRATCH_MAX // GRAIN, self.tiles) * GRAIN, 0, self.last)
        self.scales = prog.kind("fp8-scales", all_tiles, 64, 0, self.last)
        # one parameter sequence for the layer body (a copy per layer, fixed stride) and one for the rest
        self.w_layer = prog.space("weights.layers", True, 0, self.last)
        self.w_static = prog.space("weights.static", False, 0, self.last)
        # the weight homes are known before anything is placed: the small parameters placed least-loaded first
        # (norms, biases) then go where no home will be, and every tile holds about the same bytes
        for sp in (self.w_layer, self.w_static):
            sp.planned = np.zeros(self.tiles, np.int64)
        for name in ("embed", "qkv", "proj", "mlp_up", "mlp_down", "map_kv"):
            space = self.w_static if name in ("embed", "map_kv") else self.w_layer
            assert space.planned is not None
            space.planned += round_up(self._weight_blocks(name).home_bytes(self.tiles), 8)

    # ---- whole program -------------------------------------------------------------------------------------
    def build(self) -> None:
        spec = self.spec
        self.embed()
        self.norm_params("ln1", self.w_layer)
        mm = self.matmul
        mm("qkv", 0, self.x8, None, self.qkv, 0)
        for r in range(spec.attention_rounds):
            self.attention(r)
        mm("proj", 1, self.x8, None, self.out16, 0)
        self.norm_params("ln2", self.w_layer)
        mm("mlp_up", 2, self.x8, None, self.out16, 0)
        mm("mlp_down", 3, self.h8, None, self.out16, 0)
        self.head()

    def lowering_of(self, name: str) -> MatmulLowering:
        low = self.spec.lowering.get(name)
        if low is None:
            kd, nd = self.spec.matmul_shape(name)
            low = plan_grid(self.spec.tokens, kd, nd, self.tiles)
        if low.tiles > self.tiles:
            raise InputError(f"grid {list(low.grid)} needs {low.tiles} tiles, the machine has {self.tiles}",
                             path=self.spec.path, where=f"lowering.{name}.grid")
        return low

    # ---- matmul ----------------------------------------------------------------------------------------------
    def matmul(self, name: str, scale_slot: int, src: OwnerBuf, tokens: np.ndarray | None, out: OwnerBuf,
               out_col0: int) -> None:
        """Prep (scale + bias), replicated input and weights, partial-sum reduction, output to the owners."""
        prog, spec, rows, i = self.prog, self.spec, self.rows, self.id
        kd, nd = spec.matmul_shape(name)
        low = self.lowering_of(name)
        m_blocks, n_blocks, k_blocks = low.grid
        toks = np.arange(spec.tokens) if tokens is None else tokens
        cols = ceil_div(kd, GRAIN)
        if m_blocks > toks.shape[0] or k_blocks > cols or n_blocks > nd:
            raise InputError(f"grid {list(low.grid)} is finer than the shape ({toks.shape[0]} tokens, {cols} "
                             f"grain columns, {nd} output columns)", path=spec.path, where=f"lowering.{name}.grid")
        tblocks = np.array_split(toks, m_blocks)
        kblocks = np.array_split(np.arange(cols), k_blocks)
        nblocks = _split_cols(nd, n_blocks)
        col_bytes = np.minimum(GRAIN, kd - GRAIN * np.arange(cols))
        nsize = np.array([b.shape[0] for b in nblocks], np.int64)
        n0 = np.array([int(b[0]) for b in nblocks], np.int64)
        mm_, nn_, kk_ = np.meshgrid(np.arange(m_blocks), np.arange(n_blocks), np.arange(k_blocks), indexing="ij")
        fast_k = (mm_ * n_blocks + nn_) * k_blocks + kk_
        grid = fast_k if low.order == "k" else (mm_ * k_blocks + kk_) * n_blocks + nn_
        n_tiles = m_blocks * n_blocks * k_blocks
        serial = low.serial
        p_prep, p_in, p_out = i[f"{name}.prep"], i[f"{name}.in"], i[f"{name}.out"]
        p_reds = [i[f"{name}.red{'' if s == 0 else s}"] for s in range(serial)]
        p_red, p_red_last = p_reds[0], p_reds[-1]
        p_w = i.get(f"{name}.w", p_in)
        # the inputs and weights stay until the last pass has computed (before its reduction)
        p_used = p_reds[-2] if serial > 1 else p_w
        wspace = self.w_static if name in ("embed", "map_kv") else self.w_layer
        batch = self.batch

        # reduction chunks: N-block n is cut into K column chunks; chunk j = n*K + c is reduced on the j-th tile
        # of the M-block in tile order (order "k": the K tiles of a column reduce-scatter among themselves;
        # order "n": the chunk goes to a tile of another column block, as the reference MLP-down does)
        ch_n, ch_c, ch_col0, ch_cols = [], [], [], []
        for n in range(n_blocks):
            for c, part in enumerate(_split_cols(int(nsize[n]), k_blocks)):
                ch_n.append(n)
                ch_c.append(c)
                ch_col0.append(int(part[0]) if part.shape[0] else 0)
                ch_cols.append(part.shape[0])
        ch_n_a, ch_col0_a, ch_cols_a = np.array(ch_n), np.array(ch_col0), np.array(ch_cols)
        n_chunks = ch_n_a.shape[0]

        # -- prep: the FP8 scale from the root to every grid tile, each reduction chunk's bias to its reducers
        all_grid = np.arange(n_tiles)
        prog.add(p_prep, [self.root], 4, self.scales, scale_slot * 4, [n_tiles], all_grid, self.scales,
                 np.full(n_tiles, scale_slot * 4))
        live = ch_cols_a > 0
        holder, hoff = prog.place(wspace, ch_cols_a[live] * PARTIAL_BYTES)
        jl = np.flatnonzero(live)
        reducers = (np.arange(m_blocks)[None, :] * n_tiles // m_blocks + jl[:, None]).reshape(-1)
        bias_kind = prog.kind(f"{name}.bias", reducers, np.repeat(ch_cols_a[live] * PARTIAL_BYTES, m_blocks),
                              p_prep, p_red_last)
        prog.add(p_prep, holder, ch_cols_a[live] * PARTIAL_BYTES, wspace.kind, hoff, m_blocks, reducers,
                 bias_kind, 0)

        # -- replicated activation blocks X[m, k] -> the N tiles of (m, :, k)
        x_tiles, x_sizes = [], []
        for m, tb in enumerate(tblocks):
            ntm = tb.shape[0]
            b_of = np.repeat(np.arange(batch), ntm)
            tpos = np.tile(np.arange(ntm), batch)
            r = rows.row(b_of, tb[tpos])
            for k, kb in enumerate(kblocks):
                ii, jj, off, extent, bounds = _replica_layout(low, b_of, tpos, col_bytes[kb], ntm, batch)
                c = kb[jj]
                rr = r[ii]
                dst = grid[m, :, k]
                nd_ = dst.shape[0]
                prog.add(p_in, rows.owner[rr], col_bytes[c], src.kind, rows.slot[rr] * src.stride + c * GRAIN,
                         nd_, np.tile(dst, ii.shape[0]), -1, np.repeat(off, nd_))
                x_tiles.append(dst)
                x_sizes.append(np.full(nd_, extent))
                prog.hint(p_in, dst, bounds, f"{name}.x")
        x_kind = prog.kind(f"{name}.x", np.concatenate(x_tiles), np.concatenate(x_sizes), p_in, p_used, R1)
        self._patch_kind(p_in, x_kind)

        # -- replicated weight blocks W[k, n] -> the M tiles of (:, n, k). A block lives, unreplicated, in slices on
        # `homes` of the tiles that use it (the last M-blocks': the first M-block holds none), so a home's own
        # slice never travels; each slice goes out in pieces of at most `weight_slice` bytes, multicast to the
        # block's other M - 1 tiles, read at one source address per layer
        blocks = self._weight_blocks(name)
        w_kind = prog.kind(f"{name}.w", blocks.grid[:, blocks.gn, blocks.gk].T.reshape(-1),
                           np.repeat(blocks.gsize, m_blocks), p_w, p_used, R1)
        self._weight_pieces(p_w, name, blocks, wspace, w_kind)
        # -- partial-sum reduction and output to the owners. With serial passes each pass computes and reduces the
        # partial sums of a run of the M-block's rows, reusing the partial and reduce buffers
        rm = np.array([batch * b.shape[0] for b in tblocks], np.int64)
        pass_rows = [np.array([r.shape[0] for r in np.array_split(np.arange(int(rm[m])), serial)], np.int64)
                     for m in range(m_blocks)]
        widest = np.array([int(p.max()) for p in pass_rows], np.int64)
        part_kind = prog.kind(f"{name}.partial", grid.reshape(-1),
                              (widest[mm_] * nsize[nn_]).reshape(-1) * PARTIAL_BYTES, p_w, p_red_last)
        red_t, red_s, sum_s = [], [], []
        for m in range(m_blocks):
            base = m * n_tiles // m_blocks
            red_t.append(base + np.arange(n_chunks))
            red_s.append(widest[m] * ch_cols_a * PARTIAL_BYTES * k_blocks)
            sum_s.append(rm[m] * ch_cols_a * PARTIAL_BYTES)
        red_kind = prog.kind(f"{name}.reduce", np.concatenate(red_t), np.concatenate(red_s), p_red, p_red_last)
        sum_kind = prog.kind(f"{name}.sum", np.concatenate(red_t), np.concatenate(sum_s), p_red, p_out)
        for m, tb in enumerate(tblocks):
            base = m * n_tiles // m_blocks
            for p_r, rows_s in zip(p_reds, pass_rows[m], strict=True):
                j = np.repeat(np.arange(n_chunks), k_blocks)
                kk = np.tile(np.arange(k_blocks), n_chunks)
                contributor = grid[m, ch_n_a[j], kk]
                reducer = base + j
                nbytes = rows_s * ch_cols_a[j] * PARTIAL_BYTES
                keep = (contributor != reducer) & (nbytes > 0)
                j, kk, contributor, nbytes = j[keep], kk[keep], contributor[keep], nbytes[keep]
                prog.add(p_r, contributor, nbytes, part_kind, rows_s * ch_col0_a[j] * PARTIAL_BYTES, 1, base + j,
                         red_kind, kk * nbytes)
            # output rows: chunk by chunk (column order), so an owner's receives follow its row left to right
            ntm = tb.shape[0]
            r = rows.row(np.repeat(np.arange(batch), ntm), np.tile(tb, batch))
            jj = np.repeat(np.flatnonzero(ch_cols_a > 0), r.shape[0])
            ri = np.tile(np.arange(r.shape[0]), int((ch_cols_a > 0).sum()))
            rr = r[ri]
            cb = ch_cols_a[jj] * PARTIAL_BYTES
            col = out_col0 + n0[ch_n_a[jj]] + ch_col0_a[jj]
            prog.add(p_out, base + jj, cb, sum_kind, ri * cb, 1, rows.owner[rr], out.kind,
                     rows.slot[rr] * out.stride + col * PARTIAL_BYTES)

    def _weight_blocks(self, name: str) -> WeightBlocks:
        """The matmul's weight blocks W[k, n]: their replica tiles and sizes, and each block's home slices."""
        spec = self.spec
        kd, nd = spec.matmul_shape(name)
        low = self.lowering_of(name)
        m_blocks, n_blocks, k_blocks = low.grid
        nsize = np.array([b.shape[0] for b in _split_cols(nd, n_blocks)], np.int64)
        mm_, nn_, kk_ = np.meshgrid(np.arange(m_blocks), np.arange(n_blocks), np.arange(k_blocks), indexing="ij")
        grid = (mm_ * n_blocks + nn_) * k_blocks + kk_ if low.order == "k" else (mm_ * k_blocks + kk_) * n_blocks + nn_
        gk, gn = (a.reshape(-1) for a in np.meshgrid(np.arange(k_blocks), np.arange(n_blocks), indexing="ij"))
        # every K block of the weight holds the same padded row count (a multiple of 8): MLP-down's 4,304 rows are
        # stored as 12 x 360, which is what the reference's 94.92 MiB for its weight phase implies
        k_elems = kd // spec.input_element_bytes(name)
        w_rows = ceil_div(k_elems, 8 * k_blocks) * 8
        gsize = w_rows * spec.weight_bytes * nsize[gn]
        homes = min(low.homes(), m_blocks)
        # 32-byte grains split evenly over the homes, the remainder on the last one
        grains = gsize // GRAIN
        share = (grains[:, None] // homes + (np.arange(homes)[None, :] < (grains % homes)[:, None])) * GRAIN
        share[:, -1] += gsize - share.sum(axis=1)
        return WeightBlocks(name, low, grid, gk, gn, gsize, np.arange(m_blocks - homes, m_blocks), share)

    def _weight_pieces(self, phase: int, low_name: str, blocks: WeightBlocks, wspace: ParamSpace,
                       w_kind: int) -> None:
        """Each block's slices on its homes, each slice's pieces multicast from its home to the block's other
        replicas, block by block in listing order."""
        grid, gk, gn, low = blocks.grid, blocks.gk, blocks.gn, blocks.low
        m_blocks = grid.shape[0]
        s = low.weight_slice
        home_m = blocks.home_m
        src, plen, doff, dst = [], [], [], []
        for b in range(gk.shape[0]):
            tiles = grid[:, gn[b], gk[b]]
            share = blocks.share[b]
            start = np.concatenate([[0], np.cumsum(share)[:-1]])
            for j in range(home_m.shape[0]):
                if share[j] == 0 or m_blocks == 1:
                    continue
                home = int(tiles[home_m[j]])
                cuts = np.arange(0, int(share[j]), s, dtype=np.int64)
                src.append(np.full(cuts.shape[0], home, np.int64))
                plen.append(np.minimum(s, share[j] - cuts))
                doff.append(start[j] + cuts)
                others = np.delete(tiles, home_m[j])
                dst.append(np.tile(others, (cuts.shape[0], 1)))
                # row-major on every replica: its column panels are strided, so the operand has no native panels
                self.prog.hint(phase, others, [], f"{low_name}.w", splits=False)
        if not src:
            return
        source = np.concatenate(src)
        nbytes = np.concatenate(plen)
        # a home's pieces are contiguous in its copy of the layer's parameters
        piece_home = self.prog.place_at(wspace, source, nbytes)
        dsts = np.concatenate(dst)
        self.prog.add(phase, source, nbytes, wspace.kind, piece_home, m_blocks - 1, dsts.reshape(-1), w_kind,
                      np.repeat(np.concatenate(doff), m_blocks - 1))

    def _add_grains(self, phase: int, source: np.ndarray, nbytes: object, src_kind: int, src_off: object,
                    fan: int, dst_tile: np.ndarray, dst_kind: int, dst_off: np.ndarray) -> None:
        """Add transfers (``fan`` destinations apiece), each cut into fragments of ``attention_grain`` bytes (0:
        whole). SigLIP's 144-byte FP16 head rows are not grain multiples and travel as 32-byte fragments (its
        largest batch-two phase has 586,368 transfers; this reproduces its fragment maximum and row estimate);
        PE-core's 128-byte rows travel whole (with 32-byte fragments it would not fit 80 KiB, which it does)."""
        n = source.shape[0]
        nb = np.broadcast_to(np.asarray(nbytes, np.int64), (n,))
        grain = self.spec.attention_grain or int(nb.max(initial=GRAIN))
        pieces = ceil_div(nb, grain)
        rep = np.repeat(np.arange(n), pieces)
        sh = (np.arange(rep.shape[0]) - np.repeat(np.cumsum(pieces) - pieces, pieces)) * grain
        plen = np.minimum(grain, nb[rep] - sh)
        soff = np.broadcast_to(np.asarray(src_off, np.int64), (n,))
        d = dst_off.reshape(n, fan)
        self.prog.add(phase, source[rep], plen, src_kind, soff[rep] + sh, fan,
                      dst_tile.reshape(n, fan)[rep].reshape(-1), dst_kind, (d[rep] + sh[:, None]).reshape(-1))

    def _patch_kind(self, phase: int, kind: int) -> None:
        """Point the destinations added with the placeholder kind -1 at ``kind`` (known only after the loop)."""
        for part in self.prog.parts[phase]:
            part.dst_kind[part.dst_kind == -1] = kind

    # ---- norms, embedding, attention, head ------------------------------------------------------------------
    def norm_params(self, key: str, space: ParamSpace) -> None:
        """gamma and beta (FP16) from their holder, multicast to every owner."""
        h2 = self.spec.hidden * 2
        holder, off = self.prog.place(space, [h2, h2])
        own = self.rows.owners
        self.prog.add(self.id[key], holder, h2, space.kind, off, own.shape[0], np.tile(own, 2), self.ln.kind,
                      np.repeat([0, h2], own.shape[0]))

    def embed(self) -> None:
        prog, spec, rows, i = self.prog, self.spec, self.rows, self.id
        batch, cls = self.batch, int(spec.class_token)
        patch_toks = np.arange(cls, spec.tokens)
        # the image streams in through the IO tiles, a chunk of patch rows per phase
        io = np.arange(self.tiles - IO_TILES, self.tiles)
        r_all = rows.row(np.repeat(np.arange(batch), patch_toks.shape[0]), np.tile(patch_toks, batch))
        chunks = np.array_split(r_all, spec.input_chunks)
        pb = spec.patch_bytes
        stream_rows = max(ceil_div(c.shape[0], IO_TILES) for c in chunks)
        io_kind = prog.kind("io.stream", io, stream_rows * self.patch.stride, i["input.0"],
                            i[f"input.{spec.input_chunks - 1}"])
        for c, rr in enumerate(chunks):
            q = np.arange(rr.shape[0])
            prog.add(i[f"input.{c}"], io[q % IO_TILES], pb, io_kind, (q // IO_TILES) * self.patch.stride, 1,
                     rows.owner[rr], self.patch.kind, rows.slot[rr] * self.patch.stride)
        self.matmul("embed", 4, self.patch, patch_toks, self.out16, 0)
        # position rows are shared by the batch images: one multicast per token to its B owners
        h2 = spec.hidden * 2
        holder, off = prog.place(self.w_static, np.full(spec.tokens, h2))
        t = np.arange(spec.tokens)
        rr = rows.row(np.tile(np.arange(batch), spec.tokens), np.repeat(t, batch))
        prog.add(i["embed.pos"], holder, h2, self.w_static.kind, off, batch, rows.owner[rr], self.pos.kind,
                 rows.slot[rr] * self.pos.stride)
        if cls:
            holder, off = prog.place(self.w_static, [h2])
            rr = rows.row(np.arange(batch), np.zeros(batch, np.int64))
            prog.add(i["embed.pos"], holder, h2, self.w_static.kind, off, batch, rows.owner[rr], self.out16.kind,
                     rows.slot[rr] * self.out16.stride)

    def attention(self, rnd: int) -> None:
        """One round: heads [rnd*H/R, (rnd+1)*H/R) x every image; each (head, image) pair gets a block of
        Mq x Nk tiles (query blocks x key blocks) and runs a key-split softmax with an AV reduction."""
        prog, spec, rows, i = self.prog, self.spec, self.rows, self.id
        batch, t_count = self.batch, spec.tokens
        hpr = spec.heads // spec.attention_rounds
        pairs = hpr * batch
        per_pair = self.tiles // pairs
        nk = int(np.sqrt(per_pair))
        mq = per_pair // max(nk, 1)
        if nk < 2 or mq < 1:
            raise InputError(f"batch {batch} is too large for {spec.attention_rounds} attention rounds on "
                             f"{self.tiles} tiles (each (head, image) pair needs at least 2 tiles)", where="batch")
        nk, mq = min(nk, t_count), min(mq, t_count)
        qb = np.array_split(np.arange(t_count), mq)
        kb = np.array_split(np.arange(t_count), nk)
        q_of = np.concatenate([np.full(b.shape[0], n) for n, b in enumerate(qb)])
        k_of = np.concatenate([np.full(b.shape[0], n) for n, b in enumerate(kb)])
        q0 = np.array([b[0] for b in qb])
        k0 = np.array([b[0] for b in kb])
        qn = np.array([b.shape[0] for b in qb])
        kn = np.array([b.shape[0] for b in kb])
        hd2 = spec.head_dim * spec.attn_bytes
        h = spec.hidden
        first, last = i["attn0.qk"], i[f"attn{spec.attention_rounds - 1}.out"]
        key = f"attn{rnd}"
        pair = np.arange(pairs)
        head = rnd * hpr + pair // batch
        img = pair % batch
        base = pair * per_pair
        tiles_q = (base[:, None, None] + np.arange(mq)[None, :, None] * nk + np.arange(nk)[None, None, :])
        tl = tiles_q.reshape(-1)
        qsz = np.tile(np.repeat(qn, nk), pairs)
        ksz = np.tile(np.tile(kn, mq), pairs)
        qmax, cmax = int(qn.max()), ceil_div(int(qn.max()), nk)
        if rnd == 0:
            self.k_q = prog.kind("attn.q", tl, qsz * hd2, first, last)
            self.k_k = prog.kind("attn.k", tl, ksz * hd2, first, last)
            self.k_v = prog.kind("attn.v", tl, ksz * hd2, first, last)
            prog.kind("attn.scores", tl, qsz * ksz * spec.attn_bytes, first, last)
            self.k_stats = prog.kind("attn.stats", tl, (2 * nk + 2) * qmax * 4, first, last)
            self.k_o = prog.kind("attn.o", tl, qsz * hd2, first, last)
            self.k_osum = prog.kind("attn.osum", tl, (nk + 1) * cmax * hd2, first, last)
        # Q rows to the Nk tiles of their query block, K and V rows to the Mq tiles of their key block
        pp = np.repeat(pair, t_count)
        tt = np.tile(np.arange(t_count), pairs)
        rr = rows.row(img[pp], tt)
        src_q = rows.slot[rr] * self.qkv.stride + (head[pp] * spec.head_dim) * spec.attn_bytes
        dq = tiles_q[pp, q_of[tt], :].reshape(-1)
        self._add_grains(i[f"{key}.qk"], rows.owner[rr], hd2, self.qkv.kind, src_q, nk, dq, self.k_q,
                 np.repeat((tt - q0[q_of[tt]]) * hd2, nk))
        dk = tiles_q[pp, :, k_of[tt]].reshape(-1)
        koff = np.repeat((tt - k0[k_of[tt]]) * hd2, mq)
        self._add_grains(i[f"{key}.qk"], rows.owner[rr], hd2, self.qkv.kind, src_q + h * spec.attn_bytes, mq, dk,
                 self.k_k, koff)
        self._add_grains(i[f"{key}.v"], rows.owner[rr], hd2, self.qkv.kind, src_q + 2 * h * spec.attn_bytes, mq, dk,
                 self.k_v, koff)
        # softmax statistics: every tile's row max (then row sum) to the other key-block tiles of its row block
        p3, q3, k3 = (a.reshape(-1) for a in np.meshgrid(pair, np.arange(mq), np.arange(nk), indexing="ij"))
        others = np.array([[x for x in range(nk) if x != j] for j in range(nk)], np.int64)
        dst = tiles_q[p3[:, None], q3[:, None], others[k3]].reshape(-1)
        for stat, slot0 in (("max", 0), ("sum", nk)):
            prog.add(i[f"{key}.{stat}"], tiles_q[p3, q3, k3], qn[q3] * 4, self.k_stats, (2 * nk + slot0 // nk) *
                     qmax * 4, nk - 1, dst, self.k_stats, np.repeat((slot0 + k3) * qmax * 4, nk - 1))
        # AV partials: query rows of block q cut into Nk chunks, chunk c reduced on key-block tile c
        red_src, red_n, red_soff, red_dst, red_doff = [], [], [], [], []
        out_src, out_soff, out_row, out_head = [], [], [], []
        for q in range(mq):
            parts = np.array_split(np.arange(qn[q]), nk)
            for c, part in enumerate(parts):
                if part.shape[0] == 0:
                    continue
                nbytes = part.shape[0] * hd2
                js = np.array([x for x in range(nk) if x != c])
                red_src.append(tiles_q[:, q, js].reshape(-1))
                red_n.append(np.full(pairs * js.shape[0], nbytes))
                red_soff.append(np.full(pairs * js.shape[0], int(part[0]) * hd2))
                red_dst.append(np.repeat(tiles_q[:, q, c], js.shape[0]))
                red_doff.append(np.tile(js * cmax * hd2, pairs))
                out_src.append(np.repeat(tiles_q[:, q, c], part.shape[0]))
                out_soff.append(np.tile(nk * cmax * hd2 + np.arange(part.shape[0]) * hd2, pairs))
                out_row.append(np.repeat(img, part.shape[0]) * t_count + np.tile(q0[q] + part, pairs))
                out_head.append(np.repeat(head, part.shape[0]))
        self._add_grains(i[f"{key}.red"], np.concatenate(red_src), np.concatenate(red_n), self.k_o,
                 np.concatenate(red_soff), 1, np.concatenate(red_dst), self.k_osum, np.concatenate(red_doff))
        # outputs to the owners, head after head, so an owner's receives for a round are contiguous
        src, soff = np.concatenate(out_src), np.concatenate(out_soff)
        row, hh = np.concatenate(out_row), np.concatenate(out_head)
        order = np.lexsort((row, hh))
        src, soff, row, hh = src[order], soff[order], row[order], hh[order]
        self._add_grains(i[f"{key}.out"], src, hd2, self.k_osum, soff, 1, rows.owner[row], self.attn.kind,
                 rows.slot[row] * self.attn.stride + hh * hd2)

    def head(self) -> None:
        """The MAP head (multi-head attention pooling with one learned probe query): post-norm, the key/value
        projection of every token row (an FP16 matmul on its own grid), each (head, image) pair's keys and values
        spread over a block of probe-attention tiles, the partial softmax-weighted sums reduced on the pair's root,
        the pooled rows to the projection tiles, the output projection, the embedding out through the IO tiles."""
        prog, spec, rows, i = self.prog, self.spec, self.rows, self.id
        batch, h2 = self.batch, spec.hidden * 2
        holder, off = prog.place(self.w_static, [h2, h2])
        own = rows.owners
        prog.add(i["post.ln"], holder, h2, self.w_static.kind, off, own.shape[0], np.tile(own, 2), self.ln.kind,
                 np.repeat([0, h2], own.shape[0]))
        self.matmul("map_kv", 5, self.xln16, None, self.out16, 0)
        # keys and values of head h, image b: token block j of the pair goes to the pair's j-th tile
        hd2 = spec.head_dim * spec.attn_bytes
        pairs = spec.heads * batch
        per_pair = max(1, self.tiles // pairs)
        t_count = spec.tokens
        blocks = np.array_split(np.arange(t_count), min(per_pair, t_count))
        blk_of = np.concatenate([np.full(b.shape[0], j) for j, b in enumerate(blocks)])
        pos_in = np.concatenate([np.arange(b.shape[0]) for b in blocks])
        tmax = max(b.shape[0] for b in blocks)
        n_blk = len(blocks)
        pair_tiles = np.arange(pairs)[:, None] * per_pair + np.arange(n_blk)[None, :]
        first, last = i["map.heads"], i["map.reduce"]
        kv_kind = prog.kind("map.kv", pair_tiles.reshape(-1), 2 * tmax * hd2, first, first)
        part_kind = prog.kind("map.partial", pair_tiles.reshape(-1), hd2 + 8, first, last)
        roots = pair_tiles[:, 0]
        acc_kind = prog.kind("map.acc", roots, n_blk * (hd2 + 8), last, i["map.pool"])
        p_ = np.repeat(np.arange(pairs), t_count)
        t_ = np.tile(np.arange(t_count), pairs)
        head, img = p_ // batch, p_ % batch
        rr = rows.row(img, t_)
        dst = pair_tiles[p_, blk_of[t_]]
        for which in (0, 1):  # keys, then values (the projection's output columns [0, h) and [h, 2h))
            src_off = rows.slot[rr] * self.out16.stride + (which * spec.hidden + head * spec.head_dim) * 2
            prog.add(i["map.heads"], rows.owner[rr], hd2, self.out16.kind, src_off, 1, dst, kv_kind,
                     (which * tmax + pos_in[t_]) * hd2)
        src = pair_tiles[:, 1:].reshape(-1)
        j = np.tile(np.arange(1, n_blk), pairs)
        prog.add(i["map.reduce"], src, hd2 + 8, part_kind, 0, 1, np.repeat(roots, n_blk - 1), acc_kind,
                 j * (hd2 + 8))
        # pooled rows: each root sends its head's 72-wide slice of image b to every projection tile
        n_head = min(36, self.tiles)
        head_tiles = np.arange(n_head)
        hx = prog.kind("head.x", head_tiles, batch * h2, i["map.pool"], i["head.out"])
        pr = np.arange(pairs)
        prog.add(i["map.pool"], roots, hd2, acc_kind, 0, n_head, np.tile(head_tiles, pairs), hx,
                 np.repeat((pr % batch) * h2 + (pr // batch) * hd2, n_head))
        nblocks = _split_cols(spec.hidden, n_head)
        nsz = np.array([b.shape[0] for b in nblocks], np.int64)
        s = 2048
        gsize = spec.hidden * spec.weight_bytes * nsz
        pieces = ceil_div(gsize, s)
        g = np.repeat(np.arange(n_head), pieces)
        idx = np.arange(g.shape[0]) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        holder, off = prog.place(self.w_static, np.minimum(s, gsize[g] - idx * s))
        hw = prog.kind("head.w", head_tiles, gsize, i["map.w"], i["map.w"], R1)
        prog.add(i["map.w"], holder, np.minimum(s, gsize[g] - idx * s), self.w_static.kind, off, 1, g, hw, idx * s)
        # output rows live on the owner of token 0 of each image, then stream out through the IO tiles
        hy = prog.kind("head.y", head_tiles, batch * nsz * 2, i["map.w"], i["head.out"])
        out_owner = rows.owner[rows.row(np.arange(batch), np.zeros(batch, np.int64))]
        out_slot = rows.slot[rows.row(np.arange(batch), np.zeros(batch, np.int64))]
        n_col0 = np.array([b[0] for b in nblocks], np.int64)
        bb = np.tile(np.arange(batch), n_head)
        nn = np.repeat(np.arange(n_head), batch)
        prog.add(i["head.out"], head_tiles[nn], nsz[nn] * 2, hy, bb * nsz[nn] * 2, 1, out_owner[bb], self.out16.kind,
                 out_slot[bb] * self.out16.stride + n_col0[nn] * 2)
        io = np.arange(self.tiles - IO_TILES, self.tiles)
        io_out = prog.kind("io.out", io, ceil_div(batch, IO_TILES) * h2, i["output"], i["output"])
        b = np.arange(batch)
        prog.add(i["output"], out_owner, h2, self.out16.kind, out_slot * self.out16.stride, 1, io[b % IO_TILES],
                 io_out, (b // IO_TILES) * h2)
