"""Model descriptions (``models/*.toml``): the transformer shapes a synthetic capture is lowered from.

A description names the encoder's shapes (hidden width, MLP width, heads, layers, patch grid, element sizes) and,
optionally, the compiler's lowering choices per matmul (``[lowering.NAME]``). Missing lowering tables are filled
by :func:`plan_grid`, so a new model needs only its shapes. Every malformed value raises :class:`InputError`
naming the file, the field and the value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from placer.errors import InputError
from placer.fileio import parse_toml, read_text
from placer.units import ceil_div

MATMULS = ("embed", "qkv", "proj", "mlp_up", "mlp_down", "map_kv")
BUNDLED_MODELS = ("siglip-so400m", "pe-core-l14")
GRAIN = 32  # bytes: the FP8 column grain of activation fragments
MAX_SERIAL = 8  # serial passes of one matmul at most (each adds a reduction phase)
SERIAL_MATMULS = ("embed", "map_kv")  # outside the layer body: a pass adds a phase to the head, not to every layer


@dataclass(frozen=True)
class MatmulLowering:
    """How one matmul is spread over tiles (see docs/workloads.md)."""

    grid: tuple[int, int, int]  # (M token blocks, N column blocks, K contraction blocks)
    panel: int = 1  # grain columns per native segment
    order: str = "k"  # grid axis that runs fastest in the tile numbering: "k" or "n"
    owner_run: int = 5  # token rows listed together per grain column (listing order; drives pointer resets)
    weight_slice: int = 2048  # bytes per weight transfer at most (a home's slice is cut into such pieces)
    row_blocks: int = 1  # native segments cut each panel's row axis into this many blocks
    weight_homes: int = 0  # tiles of its own M replicas that hold a weight block (0: M - 1, all but the first)
    panel_order: str = "row"  # inside a panel: "row" ([token][columns]) or "column" ([column][token])
    # passes over each tile's output columns: the partial sums of one pass are reduced before the next pass reuses
    # their buffers (a reduction phase per pass), trading phases for tile memory; only outside the layer body
    serial: int = 1

    def homes(self) -> int:
        """How many of a weight block's M replica tiles hold a slice of it (its "homes")."""
        m = self.grid[0]
        return self.weight_homes or max(1, m - 1)

    @property
    def tiles(self) -> int:
        m, n, k = self.grid
        return m * n * k


@dataclass(frozen=True)
class ModelSpec:
    """A validated model description."""

    name: str
    hidden: int
    mlp: int
    heads: int
    head_dim: int
    layers: int
    patch_grid: tuple[int, int]
    patch_size: int
    channels: int
    class_token: bool
    act_bytes: int = 1
    weight_bytes: int = 1
    attn_bytes: int = 2
    attention_rounds: int = 4
    input_chunks: int = 8
    attention_grain: int = 0  # bytes per attention fragment (Q/K/V rows, AV partials, outputs); 0 = whole rows
    lowering: dict[str, MatmulLowering] = field(default_factory=dict)
    description: str = ""
    path: str = ""

    @property
    def tokens(self) -> int:
        return self.patch_grid[0] * self.patch_grid[1] + int(self.class_token)

    @property
    def patch_tokens(self) -> int:
        return self.patch_grid[0] * self.patch_grid[1]

    @property
    def patch_bytes(self) -> int:
        return self.patch_size * self.patch_size * self.channels * self.act_bytes

    def input_element_bytes(self, name: str) -> int:
        """Bytes per element of a matmul's activation input (its weights are ``weight_bytes`` per element)."""
        return self.attn_bytes if name == "map_kv" else self.act_bytes

    def matmul_shape(self, name: str) -> tuple[int, int]:
        """(contraction bytes of one activation row, output columns) of a matmul."""
        shapes = {
            "embed": (self.patch_bytes, self.hidden),
            "qkv": (self.hidden * self.act_bytes, 3 * self.hidden),
            "proj": (self.hidden * self.act_bytes, self.hidden),
            "mlp_up": (self.hidden * self.act_bytes, self.mlp),
            "mlp_down": (self.mlp * self.act_bytes, self.hidden),
            # the MAP head's key/value projection reads the post-norm rows in FP16
            "map_kv": (self.hidden * self.attn_bytes, 2 * self.hidden),
        }
        return shapes[name]


def resolve_model_path(name: str | Path) -> tuple[str, str]:
    """Find a model description: a path to a ``.toml`` file, or the name of a bundled model (``models/NAME.toml``
    in the repository, installed as the package ``placer.models``: the only copy). A bare name never looks in the
    working directory, so the description a name means does not depend on where placer runs.
    Returns (text, where) for error messages."""
    spec = str(name)
    if spec.endswith(".toml") or "/" in spec or Path(spec).suffix:
        p = Path(spec)
        if not p.exists():
            raise InputError(f"no such model description (bundled models: {', '.join(BUNDLED_MODELS)})", path=spec)
        return read_text(p), str(p)
    if spec in BUNDLED_MODELS:
        res = resources.files("placer.models").joinpath(f"{spec}.toml")
        return res.read_text(encoding="utf-8"), f"models/{spec}.toml"  # whatever the locale's encoding
    raise InputError(f"unknown model (bundled: {', '.join(BUNDLED_MODELS)}; or give a path to a .toml)", path=spec)


def load_model(name: str | Path) -> ModelSpec:
    """Load and validate a model description by name (``siglip-so400m``) or path."""
    text, where = resolve_model_path(name)
    data = parse_toml(text, where)
    return model_from_dict(data, where)


def _int(table: dict[str, Any], key: str, where: str, prefix: str = "", *, lo: int = 1, hi: int | None = None,
         default: int | None = None) -> int:
    if key not in table:
        if default is not None:
            return default
        raise InputError("missing field", path=where, where=f"{prefix}{key}")
    v = table[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise InputError(f"must be an integer {bound}, got {v!r}", path=where, where=f"{prefix}{key}")
    return v


def _table(data: dict[str, Any], key: str, where: str, prefix: str = "", required: bool = True) -> dict[str, Any]:
    t = data.get(key)
    if t is None and not required:
        return {}
    if not isinstance(t, dict):
        raise InputError(f"missing or not a table, got {t!r}", path=where, where=f"[{prefix}{key}]")
    return t


def model_from_dict(data: dict[str, Any], where: str) -> ModelSpec:
    name = data.get("name", Path(where).stem)
    if not isinstance(name, str) or not name:
        raise InputError(f"must be a non-empty string, got {name!r}", path=where, where="name")
    hidden = _int(data, "hidden", where)
    mlp = _int(data, "mlp", where)
    heads = _int(data, "heads", where)
    head_dim = _int(data, "head_dim", where)
    layers = _int(data, "layers", where)
    if heads * head_dim != hidden:
        raise InputError(f"heads x head_dim = {heads} x {head_dim} = {heads * head_dim} must equal hidden "
                         f"{hidden}", path=where, where="head_dim")
    patches = _table(data, "patches", where)
    grid = patches.get("grid")
    if (not isinstance(grid, list) or len(grid) != 2
            or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 1 for g in grid)):
        raise InputError(f"must be [rows, columns] of positive integers, got {grid!r}", path=where,
                         where="patches.grid")
    cls = patches.get("class_token", False)
    if not isinstance(cls, bool):
        raise InputError(f"must be true or false, got {cls!r}", path=where, where="patches.class_token")
    size = _int(patches, "size", where, "patches.")
    channels = _int(patches, "channels", where, "patches.")
    dtype = _table(data, "dtype", where, required=False)
    act = _int(dtype, "activation", where, "dtype.", hi=1, default=1)
    weight = _int(dtype, "weight", where, "dtype.", hi=1, default=1)
    attn = _int(dtype, "attention", where, "dtype.", hi=4, default=2)
    lowering = _table(data, "lowering", where, required=False)
    rounds = _int(lowering, "attention_rounds", where, "lowering.", hi=heads, default=4)
    if heads % rounds:
        raise InputError(f"must divide heads ({heads}), got {rounds}", path=where, where="lowering.attention_rounds")
    chunks = _int(lowering, "input_chunks", where, "lowering.", hi=64, default=8)
    grain = _int(lowering, "attention_grain", where, "lowering.", lo=0, default=0)
    if grain % 4:
        raise InputError(f"must be a multiple of 4 bytes, got {grain}", path=where, where="lowering.attention_grain")
    unknown = set(lowering) - set(MATMULS) - {"attention_rounds", "input_chunks", "attention_grain"}
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)}; matmuls are {', '.join(MATMULS)}", path=where,
                         where="lowering")
    per: dict[str, MatmulLowering] = {}
    for mm in MATMULS:
        if mm in lowering:
            per[mm] = _lowering(lowering[mm], where, f"lowering.{mm}.")
            if per[mm].serial > 1 and mm not in SERIAL_MATMULS:
                raise InputError(f"serial passes are for matmuls outside the layer body ({', '.join(SERIAL_MATMULS)})"
                                 f", got {per[mm].serial}", path=where, where=f"lowering.{mm}.serial")
    spec = ModelSpec(name=name, hidden=hidden, mlp=mlp, heads=heads, head_dim=head_dim, layers=layers,
                     patch_grid=(grid[0], grid[1]), patch_size=size, channels=channels, class_token=cls,
                     act_bytes=act, weight_bytes=weight, attn_bytes=attn, attention_rounds=rounds,
                     input_chunks=chunks, attention_grain=grain, lowering=per,
                     description=str(data.get("description", "")), path=where)
    for what, width in (("hidden", hidden), ("mlp", mlp), ("patch bytes", spec.patch_bytes)):
        if width % 4:
            raise InputError(f"{what} row of {width} bytes is not a whole number of 32-bit words", path=where,
                             where=what if what != "patch bytes" else "patches.size")
    if head_dim * attn % 4:
        raise InputError(f"a head row of {head_dim * attn} bytes is not whole words", path=where, where="head_dim")
    return spec


def _lowering(raw: Any, where: str, prefix: str) -> MatmulLowering:
    if not isinstance(raw, dict):
        raise InputError(f"must be a table, got {raw!r}", path=where, where=prefix.rstrip("."))
    grid = raw.get("grid")
    if (not isinstance(grid, list) or len(grid) != 3
            or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 1 for g in grid)):
        raise InputError(f"must be [M, N, K] positive integers, got {grid!r}", path=where, where=f"{prefix}grid")
    order = raw.get("order", "k")
    if order not in ("k", "n"):
        raise InputError(f"must be \"k\" or \"n\", got {order!r}", path=where, where=f"{prefix}order")
    slice_bytes = _int(raw, "weight_slice", where, prefix, lo=32, hi=16384, default=2048)
    if slice_bytes % 32:
        raise InputError(f"must be a multiple of 32, got {slice_bytes}", path=where, where=f"{prefix}weight_slice")
    homes = _int(raw, "weight_homes", where, prefix, lo=0, hi=max(1, grid[0]), default=0)
    unknown = set(raw) - {"grid", "panel", "order", "owner_run", "weight_slice", "row_blocks", "weight_homes",
                          "panel_order", "serial"}
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)}", path=where, where=prefix.rstrip("."))
    panel_order = raw.get("panel_order", "row")
    if panel_order not in ("row", "column"):
        raise InputError(f"must be \"row\" or \"column\", got {panel_order!r}", path=where,
                         where=f"{prefix}panel_order")
    row_blocks = _int(raw, "row_blocks", where, prefix, default=1)
    if panel_order == "column" and row_blocks != 1:
        # a block of rows is not contiguous in a column-major panel, so it cannot be a native segment
        raise InputError(f"must be 1 with panel_order = \"column\", got {row_blocks}", path=where,
                         where=f"{prefix}row_blocks")
    return MatmulLowering(
        grid=(grid[0], grid[1], grid[2]),
        panel=_int(raw, "panel", where, prefix, default=1),
        order=order,
        owner_run=_int(raw, "owner_run", where, prefix, default=5),
        weight_slice=slice_bytes,
        row_blocks=row_blocks,
        weight_homes=homes,
        panel_order=panel_order,
        serial=_int(raw, "serial", where, prefix, hi=MAX_SERIAL, default=1),
    )


def plan_grid(rows_tokens: int, kd: int, nd: int, tiles: int) -> MatmulLowering:
    """A default 3-D grid for a matmul without a ``[lowering.NAME]`` table.

    Picks (M, N, K) with M*N*K <= tiles that minimises the bytes the busiest tile receives (its activation
    block, its weight block and its share of the partial-sum reduction), using at least 90 % of the tiles when
    the shapes allow. The bundled models carry the reference compiler's own grids instead.
    """
    cols = ceil_div(kd, GRAIN)
    best: tuple[float, tuple[int, int, int]] | None = None
    for m in range(1, min(rows_tokens, 64) + 1):
        for k in range(1, min(cols, 64) + 1):
            n = min(tiles // (m * k), nd)
            if n < 1:
                continue
            used = m * n * k
            tm, kb, nb = ceil_div(rows_tokens, m), ceil_div(cols, k) * GRAIN, ceil_div(nd, n)
            cost = tm * kb + kb * nb + (k - 1) * tm * nb * 2 / max(k, 1)
            cost *= 1.0 if used >= 0.9 * min(tiles, rows_tokens * cols * nd) else 1.5
            if best is None or cost < best[0]:
                best = (cost, (m, n, k))
    assert best is not None
    return MatmulLowering(grid=best[1])
