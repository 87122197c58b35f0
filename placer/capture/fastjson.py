"""A vectorised reader for the ``transfers`` arrays of a capture, straight from the raw bytes.

It is the fallback of the compiled scanner (:mod:`placer.capture.scan`): ``read_capture`` uses it when that
extension is not built or is turned off (``PLACER_CAPTURE_SCAN=numpy``).

``orjson.loads`` on a 520 MB batch-two SigLIP capture builds ~30 M Python objects (16 s) and turning them into
numpy columns costs another 4 s. Here each ``"transfers": [...]`` array is cut out of the text and parsed with
numpy; the rest of the document (small: phase ids, labels, extensions) is still parsed by orjson, with each cut
replaced by a marker so orjson also confirms that every cut really was ``phases[k].transfers``.

Safety first: the parser accepts only a strict subset of JSON (non-negative integers without sign, fraction or
exponent; the seven known keys; widths ``"Word32"``/``"Paired64"``; no escapes; every transfer with exactly one of
each field and non-empty lists) and returns ``None`` on anything else. The caller then runs the ordinary orjson
path, which gives the precise one-line error or accepts the unusual-but-valid file. Both paths produce identical
columns for every input the fast path accepts.

How it works. Each span is cut into chunks of ~4 MB of whitespace-free text at transfer boundaries (so temporaries
stay cache-sized; whitespace, if any, is stripped first, once it is shown that stripping cannot join two tokens or
change a string). In a chunk:

* the tokens are the structural bytes ``{}[],`` only; the text between two tokens (a "gap") must be empty, an
  integer, or ``"key":`` followed by that key's value, the key compared exactly through unaligned 8-byte windows;
* nesting depth is a cumulative sum over the tokens; (byte, depth, gap kind) is the token's class, which makes the
  restricted schema a finite automaton checked pairwise with one lookup table; per-transfer key counts are checked
  separately (a destination's two keys are exact by the automaton);
* every byte is then a token, part of a verified key or width, or inside an integer; a count of all digit bytes
  proves the integers are digits only, and they are decoded eight digits at a time from the same windows (SWAR).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

_WS = b" \t\n\r"
_CHUNK = 4 << 20  # bytes of transfer text per chunk: temporaries stay in cache and their memory is reused
_PAD = 24  # zero bytes after a chunk so every 8-byte window read stays inside the buffer

# Tokens are the structural bytes {}[], only; the text between two of them (a "gap") is verified as one unit:
# empty, an integer (in source_addresses), or '"key":' followed by the key's value (an integer, a width string, or
# nothing when the value is a list, which then opens with the next token).
_CHARS = b"{}[],"
_OPEN_OBJ, _CLOSE_OBJ, _OPEN_ARR, _CLOSE_ARR, _COMMA = 1, 2, 3, 4, 5
_CHAR_CODE = np.zeros(256, np.uint8)
for _code, _ch in enumerate(_CHARS, start=1):
    _CHAR_CODE[_ch] = _code
# gap kinds
_EMPTY, _NUM, _K_SOURCE, _K_SRCADDR, _K_DESTS, _K_WORDS, _K_WIDTH, _K_TILE, _K_ADDRESS, _BAD = range(10)
_N_GAP = 10
_KEYS = {_K_SOURCE: b'"source":', _K_SRCADDR: b'"source_addresses":', _K_DESTS: b'"destinations":',
         _K_WORDS: b'"words":', _K_WIDTH: b'"width":', _K_TILE: b'"tile":', _K_ADDRESS: b'"address":'}
_KEY_LEN = np.zeros(_N_GAP, np.int32)
for _k, _s in _KEYS.items():
    _KEY_LEN[_k] = len(_s)
_INT_KEYS = (_K_SOURCE, _K_WORDS, _K_TILE, _K_ADDRESS)
_TRANSFER_KEYS = (_K_SOURCE, _K_SRCADDR, _K_DESTS, _K_WORDS, _K_WIDTH)
_DEST_KEYS = (_K_TILE, _K_ADDRESS)
_WIDTHS = (b'"Word32"', b'"Paired64"')  # WORD32 = 0, PAIRED64 = 1, as in WIDTH_NAMES

_U64 = np.uint64
_LOW_MASK = [(1 << (8 * k)) - 1 if k < 8 else (1 << 64) - 1 for k in range(9)]


def _word(s: bytes) -> np.uint64:
    """The little-endian 8-byte word of ``s[:8]`` (zero-padded), as the unaligned window reads it."""
    return _U64(int.from_bytes(s[:8].ljust(8, b"\0"), "little"))


# contexts = depth before the token: 0 between transfers, 1 in a transfer, 2 in a list, 3 in a destination, 4 impossible
# (which list a token is in follows from its own gap: source_addresses separators carry an integer, destinations' none)
_N_CTX = 5
_N_CLASS = (len(_CHARS) + 1) * _N_CTX * _N_GAP


def _c(char: int, ctx: int, gap: int) -> int:
    return (char * _N_CTX + ctx) * _N_GAP + gap


def _transitions() -> np.ndarray:
    """Allowed (class, next class) pairs: with depth and gap folded into the class, the schema is a finite automaton
    whose state is the class of the last token, so checking every adjacent pair checks the whole grammar."""
    ok = np.zeros((_N_CLASS, _N_CLASS), bool)

    def allow(froms: list[int], tos: list[int]) -> None:
        for a in froms:
            for b in tos:
                ok[a, b] = True

    member = {k: [_c(_OPEN_OBJ, 0, k), _c(_COMMA, 1, k)] for k in _TRANSFER_KEYS}
    after_value = [_c(_COMMA, 1, k) for k in _TRANSFER_KEYS] + [_c(_CLOSE_OBJ, 1, _EMPTY)]
    for k in (_K_SOURCE, _K_WORDS, _K_WIDTH):
        allow(member[k], after_value)
    # source_addresses: a non-empty list of integers
    allow(member[_K_SRCADDR], [_c(_OPEN_ARR, 1, _NUM)])
    allow([_c(_OPEN_ARR, 1, _NUM), _c(_COMMA, 2, _NUM)], [_c(_COMMA, 2, _NUM), _c(_CLOSE_ARR, 2, _EMPTY)])
    # destinations: a non-empty list of objects with exactly the keys tile and address, in either order
    allow(member[_K_DESTS], [_c(_OPEN_ARR, 1, _EMPTY)])
    allow([_c(_OPEN_ARR, 1, _EMPTY), _c(_COMMA, 2, _EMPTY)], [_c(_OPEN_OBJ, 2, k) for k in _DEST_KEYS])
    allow([_c(_OPEN_OBJ, 2, _K_TILE)], [_c(_COMMA, 3, _K_ADDRESS)])
    allow([_c(_OPEN_OBJ, 2, _K_ADDRESS)], [_c(_COMMA, 3, _K_TILE)])
    allow([_c(_COMMA, 3, k) for k in _DEST_KEYS], [_c(_CLOSE_OBJ, 3, _EMPTY)])
    allow([_c(_CLOSE_OBJ, 3, _EMPTY)], [_c(_COMMA, 2, _EMPTY), _c(_CLOSE_ARR, 2, _EMPTY)])
    allow([_c(_CLOSE_ARR, 2, _EMPTY)], after_value)
    # between transfers
    allow([_c(_CLOSE_OBJ, 1, _EMPTY)], [_c(_COMMA, 0, _EMPTY)])
    allow([_c(_COMMA, 0, _EMPTY)], [_c(_OPEN_OBJ, 0, k) for k in _TRANSFER_KEYS])
    return ok.reshape(-1)


_OK = _transitions()
_FIRST = [_c(_OPEN_OBJ, 0, k) for k in _TRANSFER_KEYS]
_LAST = _c(_CLOSE_OBJ, 1, _EMPTY)
_DELTA = np.zeros(len(_CHARS) + 1, np.int8)
_DELTA[[_OPEN_OBJ, _OPEN_ARR]] = 1
_DELTA[[_CLOSE_OBJ, _CLOSE_ARR]] = -1
_IS_INT = np.zeros(_N_GAP, bool)
_IS_INT[[_NUM, *_INT_KEYS]] = True
_IS_MEMBER = np.zeros(_N_GAP, bool)
_IS_MEMBER[list(_TRANSFER_KEYS)] = True
# value length after each key: integers >= 1 digit (at most 16, checked when decoding), lists none (the list opens
# with the next token), widths 8 or 10 (checked exactly below)
_VMIN = np.zeros(_N_GAP, np.int32)
_VMAX = np.zeros(_N_GAP, np.int32)
_VMIN[list(_INT_KEYS)] = 1
_VMAX[list(_INT_KEYS)] = 2**30
_VMIN[_K_WIDTH], _VMAX[_K_WIDTH] = 8, 10
# a transfer's keys, weighted 8**rank: with exactly 5 members, the sum is _ALL_KEYS only if each key occurs once
_KEY_WEIGHT = np.zeros(_N_GAP, np.float64)
_KEY_WEIGHT[list(_TRANSFER_KEYS)] = [8.0**r for r in range(len(_TRANSFER_KEYS))]
_ALL_KEYS = float(sum(8**r for r in range(len(_TRANSFER_KEYS))))
# key dispatch: candidate kind by first letter (_BAD for anything else), then the key's bytes 8 at a time; _BAD
# expects a mask of 0 to equal 1, so it never matches
_BY_LETTER = np.full(256, _BAD, np.uint8)
for _k, _s in _KEYS.items():
    if _k not in (_K_SRCADDR, _K_WIDTH):
        _BY_LETTER[_s[1]] = _k
_KEY_MASK = np.zeros((3, _N_GAP), np.uint64)
_KEY_WORD = np.zeros((3, _N_GAP), np.uint64)
_KEY_WORD[0, _BAD] = 1
for _k, _s in _KEYS.items():
    for _part in range(3):
        _rest = _s[8 * _part : 8 * _part + 8]
        _KEY_MASK[_part, _k] = _LOW_MASK[len(_rest)]
        _KEY_WORD[_part, _k] = _word(_rest)


@dataclass
class Columns:
    """One phase's transfers as flat int64 columns, in the argument order of :meth:`Phase.build`."""

    source: np.ndarray
    words: np.ndarray
    dst_counts: np.ndarray
    dst_tile: np.ndarray
    dst_addr: np.ndarray
    src_addr: np.ndarray
    src_counts: np.ndarray
    width: np.ndarray


@dataclass
class FastSplit:
    """The document without its transfers (parsed by orjson; each phase's ``transfers`` is ``[]``) + the columns."""

    doc: Any
    columns: list[Columns]


class _Reject(Exception):
    """Anything the fast path does not fully understand; the caller falls back to the orjson path."""


def fast_split(raw: bytes) -> FastSplit | None:
    """Parse ``raw`` (a whole capture) with the transfers read by numpy, or ``None`` if unsure."""
    try:
        return _fast_split(raw)
    except _Reject:
        return None


def _fast_split(raw: bytes) -> FastSplit:
    a = np.frombuffer(raw, np.uint8)
    # First try the common case cheaply: compact text, span ends guessed without a scan. If that is rejected (a
    # guessed end ran into a list after "transfers", or there is whitespace), retry with exact ends, stripping
    # whitespace; a malformed file is then rejected a second time.
    spans = _transfer_spans(raw, a, guess=True)
    try:
        columns = _parse_regions(raw, spans, strip=False)
    except _Reject:
        spans = _transfer_spans(raw, a, guess=False)
        columns = _parse_regions(raw, spans, strip=True)
    nonce = b"x" + os.urandom(16).hex().encode()  # unguessable, so no marker can come from the file itself
    parts = []
    prev = 0
    for k, (p, e) in enumerate(spans):
        parts += [raw[prev:p], b'["' + nonce + b'",' + str(k).encode() + b"]"]
        prev = e
    parts.append(raw[prev:])
    try:
        doc = orjson.loads(b"".join(parts))
    except orjson.JSONDecodeError:
        raise _Reject from None
    # every cut must be exactly phases[k].transfers, in order, and every phase must have been cut
    phases = doc.get("phases") if isinstance(doc, dict) else None
    if not isinstance(phases, list) or len(phases) != len(spans):
        raise _Reject
    marker = nonce.decode()
    for k, ph in enumerate(phases):
        if not isinstance(ph, dict) or ph.get("transfers") != [marker, k]:
            raise _Reject
        ph["transfers"] = []
    return FastSplit(doc, columns)


def _transfer_spans(raw: bytes, a: np.ndarray, guess: bool) -> list[tuple[int, int]]:
    """``[p, e)`` byte spans of every ``"transfers": [...]`` value, brackets included.

    With ``guess``, a span ends at the last ``]`` before the next ``"transfers"`` key (no scan needed): that is at
    or after the true end, and if it is after, the span holds a ``]`` at depth 0 and its parse is rejected.
    """
    spans = []
    pos = 0
    n = len(raw)
    while True:
        h = raw.find(b'"transfers"', pos)
        if h < 0:
            return spans
        j = _skip_ws(raw, h + 11)
        pos = h + 11
        if j >= n or raw[j] != ord(":"):
            continue  # not a key: orjson's check of the markers decides whether that matters
        j = _skip_ws(raw, j + 1)
        if j >= n or raw[j] != ord("["):
            continue
        nxt = raw.find(b'"transfers"', j) if guess else -1
        e = raw.rfind(b"]", j, nxt) + 1 if nxt >= 0 else _match_bracket(a, j)
        if e <= j:
            raise _Reject
        spans.append((j, e))
        pos = e


def _skip_ws(raw: bytes, j: int) -> int:
    while j < len(raw) and raw[j] in _WS:
        j += 1
    return j


def _match_bracket(a: np.ndarray, p: int) -> int:
    """One past the ``]`` closing the ``[`` at ``p``, counting brackets only.

    Strings are ignored here: the span is then validated strictly (its strings may hold no brackets), so a wrong
    end can only lead to a rejection.
    """
    depth = 0
    start = p
    step = 1 << 16
    n = a.shape[0]
    while start < n:
        x = a[start : start + step]
        br = np.flatnonzero((x & np.uint8(0xF9)) == 0x59)  # [ ] and also Y _, dropped next
        v = x[br]
        br = br[(v == 91) | (v == 93)]
        if br.shape[0]:
            d = depth + np.cumsum(np.where(x[br] == 91, 1, -1))
            zero = np.flatnonzero(d <= 0)
            if zero.shape[0]:
                if d[zero[0]] < 0:
                    raise _Reject
                return start + int(br[zero[0]]) + 1
            depth = int(d[-1])
        start += step
        step = min(step * 2, _CHUNK)
    raise _Reject


_IS_WS = np.zeros(256, bool)
_IS_WS[list(_WS)] = True
_IS_LETTER = np.zeros(256, bool)
_IS_LETTER[[*range(ord("a"), ord("z") + 1), *range(ord("A"), ord("Z") + 1), ord("_")]] = True
_IS_DIGIT = np.zeros(256, bool)
_IS_DIGIT[ord("0") : ord("9") + 1] = True


def _ws_hazard(a: np.ndarray) -> bool:
    """Could deleting the whitespace in ``a`` (which starts and ends with a non-whitespace byte) change the text's
    meaning? In a valid span whitespace never touches a letter (letters occur only inside the known keys and
    widths), never separates two digits and never comes between a digit and a quote (``"Word32 "`` is not a width);
    anything else deleted whitespace could join is rejected by the parser anyway."""
    start, n = 0, a.shape[0]
    while start < n - 1:
        end = min(start + _CHUNK, n - 1)
        while _IS_WS[a[end]]:  # end each block on a non-whitespace byte, so no run straddles two blocks
            end += 1
        x = a[start : end + 1]
        ws = (x == 32) | (x == 10) | (x == 9) | (x == 13)
        first = np.flatnonzero(ws[1:] & ~ws[:-1])  # the byte before each whitespace run
        last = np.flatnonzero(ws[:-1] & ~ws[1:]) + 1  # the byte after it
        before, after = x[first], x[last]
        if (_IS_LETTER[before] | _IS_LETTER[after] | (_IS_DIGIT[before] & (_IS_DIGIT[after] | (after == 34)))).any():
            return True
        start = end
    return False


_TRANSFER_SPLIT = re.compile(rb'\},\{"(?:source"|source_addresses"|destinations"|words"|width")')


def _compact(raw: bytes, p: int, e: int, strip: bool) -> memoryview:
    mv = memoryview(raw)[p:e]
    if not strip:
        if mv[1:2] not in (b"{", b"]"):
            raise _Reject  # fail fast on indented text; any whitespace further on is rejected by the parser
        return mv
    if all(raw.find(c, p, e) < 0 for c in (b" ", b"\n", b"\t", b"\r")):
        return mv
    if _ws_hazard(np.frombuffer(mv, np.uint8)):
        raise _Reject
    return memoryview(bytes(mv).translate(None, _WS))


def _parse_regions(raw: bytes, spans: list[tuple[int, int]], strip: bool) -> list[Columns]:
    # pieces: (region, text) where text is a run of whole transfers "{...},{...}" of that region
    pieces: list[tuple[int, memoryview]] = []
    for r, (p, e) in enumerate(spans):
        text = _compact(raw, p, e, strip)
        if text[:1] != b"[" or text[-1:] != b"]":
            raise _Reject
        body = text[1:-1]
        n = len(body)
        start = 0
        while n - start > _CHUNK:
            # cut before a transfer: "},{" followed by a transfer key (a destination's keys are tile/address)
            m = _TRANSFER_SPLIT.search(body, start + _CHUNK // 2)
            if m is None:
                break
            pieces.append((r, body[start : m.start() + 1]))
            start = m.start() + 2
        if n - start > 0:
            pieces.append((r, body[start:]))
    batches: list[list[tuple[int, memoryview]]] = []
    size = 0
    for r, text in pieces:
        if not batches or size + len(text) + 1 > _CHUNK:
            batches.append([])
            size = 0
        batches[-1].append((r, text))
        size += len(text) + 1
    parts: list[list[tuple[np.ndarray, ...]]] = [[] for _ in spans]
    results = [_run_batch(b) for b in batches]
    for filed in results:
        for r, cols in filed:
            parts[r].append(cols)
    return [_concat(ps) for ps in parts]


_Filed = list[tuple[int, tuple[np.ndarray, ...]]]


def _run_batch(batch: list[tuple[int, memoryview]]) -> _Filed:
    """Join the pieces with commas into one buffer, parse it, and split the rows by region."""
    total = sum(len(t) + 1 for _, t in batch) - 1
    buf = np.empty(total + _PAD, np.uint8)
    starts = np.empty(len(batch), np.int64)
    off = 0
    for i, (_, text) in enumerate(batch):
        starts[i] = off
        buf[off : off + len(text)] = np.frombuffer(text, np.uint8)
        off += len(text)
        if i + 1 < len(batch):
            buf[off] = ord(",")
            off += 1
    buf[total:] = 0
    cols, t_start = _parse_chunk(buf, total, starts)
    regions = np.array([r for r, _ in batch], np.int64)
    region_of = regions[np.searchsorted(starts, t_start, side="right") - 1]
    source, words, width, src_counts, src_addr, dst_counts, dst_tile, dst_addr = cols
    src_ptr = np.concatenate([[0], np.cumsum(src_counts)])
    dst_ptr = np.concatenate([[0], np.cumsum(dst_counts)])
    filed: _Filed = []
    for r in np.unique(regions).tolist():
        lo, hi = np.searchsorted(region_of, [r, r + 1]).tolist()
        filed.append((r, (source[lo:hi], words[lo:hi], width[lo:hi], src_counts[lo:hi],
                          src_addr[src_ptr[lo] : src_ptr[hi]], dst_counts[lo:hi],
                          dst_tile[dst_ptr[lo] : dst_ptr[hi]], dst_addr[dst_ptr[lo] : dst_ptr[hi]])))
    return filed


def _concat(ps: list[tuple[np.ndarray, ...]]) -> Columns:
    if not ps:
        z = np.zeros(0, np.int64)
        return Columns(z, z.copy(), z.copy(), z.copy(), z.copy(), z.copy(), z.copy(), np.zeros(0, np.uint8))
    cat = [np.concatenate(c) if len(ps) > 1 else c[0] for c in zip(*ps, strict=True)]
    source, words, width, src_counts, src_addr, dst_counts, dst_tile, dst_addr = cat
    return Columns(source, words, dst_counts, dst_tile, dst_addr, src_addr, src_counts, width.astype(np.uint8))


def _parse_chunk(buf: np.ndarray, n: int, piece_starts: np.ndarray) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Parse ``buf[:n]`` = ``{transfer},{transfer},...`` (no whitespace); raise :class:`_Reject` on any doubt."""
    x = buf[:n]
    # unaligned little-endian 8-byte window starting at every byte
    win = np.ndarray(shape=(buf.shape[0] - 7,), dtype="<u8", buffer=buf, strides=(1,))
    # structural bytes: x & 0xDF folds { } onto [ ] (0x7B/0x7D -> 0x5B/0x5D) and nothing else onto them
    folded = x & np.uint8(0xDF)
    tpos = np.flatnonzero((folded == 0x5B) | (folded == 0x5D) | (x == 0x2C)).astype(np.int32)  # halves traffic
    del folded
    if tpos.shape[0] < 2 or tpos[0] != 0 or tpos[-1] != n - 1:
        raise _Reject
    char = _CHAR_CODE[x[tpos]]
    # gaps
    gs = tpos[:-1] + 1
    glen = tpos[1:] - gs
    gap = np.zeros(tpos.shape[0], np.uint8)  # the last token (the final "}") has no gap
    nz = np.flatnonzero(glen)
    first = x[gs[nz]]
    is_num = (first >= ord("0")) & (first <= ord("9"))
    gap[nz[is_num]] = _NUM
    kq = nz[first == ord('"')]
    if kq.shape[0] + int(is_num.sum()) != nz.shape[0]:
        raise _Reject
    kstart, klen = gs[kq], glen[kq]
    w = win[kstart]
    # a candidate kind from the first letter (and byte 7 / the second letter where two keys share it), then an
    # exact comparison of the whole key, 8 bytes at a time
    kind = _BY_LETTER[((w >> _U64(8)) & _U64(0xFF)).astype(np.uint8)]
    kind[(kind == _K_SOURCE) & ((w >> _U64(56)) == _U64(ord("_")))] = _K_SRCADDR
    kind[(kind == _K_WORDS) & (((w >> _U64(16)) & _U64(0xFF)) == _U64(ord("i")))] = _K_WIDTH
    bad = (w & _KEY_MASK[0][kind]) != _KEY_WORD[0][kind]
    for part in (1, 2):
        h = np.flatnonzero(_KEY_LEN[kind] > 8 * part)
        bad[h] |= (win[kstart[h] + 8 * part] & _KEY_MASK[part][kind[h]]) != _KEY_WORD[part][kind[h]]
    if bad.any() or (klen < _KEY_LEN[kind]).any():
        raise _Reject
    gap[kq] = kind
    # the value after each key: integer keys need >= 1 digit, list keys nothing (the list opens next), widths one of
    # the two strings
    vlen = klen - _KEY_LEN[kind]
    if ((vlen < _VMIN[kind]) | (vlen > _VMAX[kind])).any():
        raise _Reject
    wi = np.flatnonzero(kind == _K_WIDTH)
    wpos, wlen = kstart[wi] + _KEY_LEN[_K_WIDTH], vlen[wi]
    ww = win[wpos]
    w32 = (wlen == 8) & (ww == _word(_WIDTHS[0]))
    p64 = (wlen == 10) & (ww == _word(_WIDTHS[1])) & ((win[wpos + 8] & _U64(0xFFFF)) == _word(_WIDTHS[1][8:]))
    if not (w32 | p64).all():
        raise _Reject
    width = p64.astype(np.uint8)
    # depth before each token
    delta = _DELTA[char]
    after = np.cumsum(delta, dtype=np.int32)
    before = after - delta
    ctx = np.clip(before, 0, 4)
    ctx[before < 0] = 4
    klass = (char.astype(np.int32) * _N_CTX + ctx) * _N_GAP + gap
    if klass[0] not in _FIRST or klass[-1] != _LAST or after[-1] != 0:
        raise _Reject
    if not _OK[klass[:-1] * _N_CLASS + klass[1:]].all():
        raise _Reject
    # every piece starts a transfer (no transfer may straddle two regions)
    pi = np.searchsorted(tpos, piece_starts)
    if (pi >= tpos.shape[0]).any() or (tpos[np.minimum(pi, tpos.shape[0] - 1)] != piece_starts).any() or \
            (before[pi] != 0).any():
        raise _Reject
    # exactly one of each key per transfer (destinations are exact by the transitions)
    t_open = (char == _OPEN_OBJ) & (before == 0)
    d_open = (char == _OPEN_OBJ) & (before == 2)
    tid = np.cumsum(t_open, dtype=np.int32) - 1
    n_t = int(tid[-1]) + 1
    members = np.flatnonzero(_IS_MEMBER[gap])
    owner = tid[members]
    if not ((np.bincount(owner, minlength=n_t) == len(_TRANSFER_KEYS)).all()
            and (np.bincount(owner, weights=_KEY_WEIGHT[gap[members]], minlength=n_t) == _ALL_KEYS).all()):
        raise _Reject
    n_d = int(np.count_nonzero(d_open))
    # integers, in token order: a whole _NUM gap, or the value after an integer key
    nt = np.flatnonzero(_IS_INT[gap])
    ng = gap[nt]
    skip = _KEY_LEN[ng]
    npos = gs[nt] + skip
    nlen = glen[nt] - skip
    # every byte is now a token, a verified key or width, or inside an integer: all of the latter must be digits
    digits = int(np.count_nonzero((x - np.uint8(48)) < 10))
    if digits != int(nlen.sum()) + 2 * wi.shape[0]:
        raise _Reject
    values = _decode(win, x, npos, nlen)
    source = values[ng == _K_SOURCE]
    words = values[ng == _K_WORDS]
    tile = values[ng == _K_TILE]
    address = values[ng == _K_ADDRESS]
    in_sa = ng == _NUM
    src_addr = values[in_sa]
    src_counts = np.bincount(tid[nt[in_sa]], minlength=n_t)
    dst_counts = np.bincount(tid[d_open], minlength=n_t)
    if not (source.shape[0] == words.shape[0] == width.shape[0] == n_t and tile.shape[0] == address.shape[0] == n_d
            and src_counts.shape[0] == dst_counts.shape[0] == n_t and (src_counts > 0).all()
            and (dst_counts > 0).all()):
        raise _Reject
    return (source, words, width, src_counts, src_addr, dst_counts, tile, address), tpos[t_open]


def _swar8(w: np.ndarray) -> np.ndarray:
    """Eight ASCII digits (first digit in the lowest byte; zero bytes count as leading zeros) -> their value."""
    w = ((w & _U64(0x0F0F0F0F0F0F0F0F)) * _U64(2561)) >> _U64(8)
    w = ((w & _U64(0x00FF00FF00FF00FF)) * _U64(6553601)) >> _U64(16)
    return ((w & _U64(0x0000FFFF0000FFFF)) * _U64(42949672960001)) >> _U64(32)


def _decode(win: np.ndarray, x: np.ndarray, pos: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Values of the digit runs ``x[pos:pos+length]`` (at most 16 digits, no leading zero, else reject)."""
    if pos.shape[0] == 0:
        return np.zeros(0, np.int64)
    if int(length.max()) > 16 or ((x[pos] == ord("0")) & (length > 1)).any():
        raise _Reject
    short = np.minimum(length, 8).astype(np.uint64)
    # left-align the digits so the zero bytes shifted in act as leading zeros
    w = _swar8(win[pos] << ((_U64(8) - short) * _U64(8)))
    out = w.astype(np.int64)
    long_ = np.flatnonzero(length > 8)
    if long_.shape[0]:
        lp, ll = pos[long_], length[long_].astype(np.uint64)
        hi = _swar8(win[lp] << ((_U64(16) - ll) * _U64(8)))
        lo = _swar8(win[lp + (ll - 8).astype(np.int64)])
        out[long_] = (hi * _U64(10**8) + lo).astype(np.int64)
    return out
