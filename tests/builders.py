"""Tiny captures built in code, for tests: replica groups with holes, several senders, other traffic."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from placer.capture.model import Allocations, Capture, Phase

if TYPE_CHECKING:
    from placer.machine import Machine
    from placer.selection.plan import Plan
    from placer.selection.problem import SelectionProblem

BASE = 0x60000


def group_phase(
    phase_id: int,
    replicas: list[int],
    senders: list[int],
    fragments: int,
    frag_words: int = 8,
    holes: tuple[int, ...] = (),
    bases: list[int] | None = None,
    interleave: bool = False,
    seed: int = 0,
) -> Phase:
    """One replicated operand of ``fragments`` fragments (some slots left as holes), multicast to ``replicas``.

    Fragment slot j lives at offset j * frag_bytes; sender of slot j is senders[j % len(senders)]. With
    ``interleave`` the listing order is shuffled (pointer resets on the replicas).
    """
    rng = np.random.default_rng(seed)
    frag_bytes = frag_words * 4
    slots = [j for j in range(fragments) if j not in set(holes)]
    order = rng.permutation(len(slots)) if interleave else np.arange(len(slots))
    bases = bases or [BASE + 0x1000 * i for i in range(len(replicas))]
    src, dst_tile, dst_addr, src_addr = [], [], [], []
    for k in order:
        j = slots[k]
        s = senders[j % len(senders)]
        src.append(s)
        src_addr.append(0x50000 + frag_bytes * (j // len(senders)))
        for r, b in zip(replicas, bases, strict=True):
            dst_tile.append(r)
            dst_addr.append(b + j * frag_bytes)
    n = len(src)
    return Phase.build(phase_id, src, [frag_words] * n, [len(replicas)] * n, dst_tile, dst_addr, src_addr)


def small_capture(tiles: int = 16, **kw: object) -> Capture:
    phase = group_phase(0, replicas=[1, 2, 3], senders=[4, 5], fragments=12, holes=(5,), **kw)  # type: ignore[arg-type]
    other = Phase.build(1, [6], [16], [1], [7], [BASE], [0x50000])
    return Capture(tile_count=tiles, phases=[phase, other], allocations=Allocations.empty())


def relay_capture(tiles: int = 48, groups: int = 4, replicas: int = 4, fragments: int = 48, senders: int = 4,
                  phases: int = 2, seed: int = 0, interleave: bool = False, long_words: int = 0) -> Capture:
    """Several phases, each with ``groups`` replica groups on disjoint tiles; spare tiles at the top end.
    ``long_words``: each phase also sends one transfer of that many words between the two highest tiles, which
    sets the phase's length and leaves relays room in its schedule."""
    rng = np.random.default_rng(seed)
    out = []
    per_group = replicas + senders
    for ph in range(phases):
        parts = []
        for g in range(groups):
            first = g * per_group
            reps = list(range(first, first + replicas))
            snds = list(range(first + replicas, first + per_group))
            holes = tuple(int(h) for h in rng.choice(fragments, size=2, replace=False)) if fragments > 4 else ()
            parts.append(group_phase(ph, reps, snds, fragments, holes=holes, interleave=interleave,
                                     seed=seed + g + 7 * ph))
        if long_words:
            parts.append(Phase.build(ph, [tiles - 2], [long_words], [1], [tiles - 1], [0x70000], [0x50000]))
        out.append(Phase.concat(ph, parts))
    return Capture(tile_count=tiles, phases=out, allocations=Allocations.empty())


def striped_allocations(tiles: int, start: int, end: int, stripe: int, first: int = 0,
                        last: int = 1 << 30) -> Allocations:
    """[start, end) cut into back-to-back allocations of ``stripe`` bytes on every tile, live from phase ``first``
    to ``last``: receives that run on from one stripe into the next cross an allocation."""
    starts = np.arange(start, end, stripe, dtype=np.int64)
    tile = np.repeat(np.arange(tiles, dtype=np.int32), starts.size)
    lo = np.tile(starts, tiles)
    n = lo.size
    return Allocations(tile, lo, np.minimum(lo + stripe, end), np.full(n, first, np.int64),
                       np.full(n, last, np.int64), [""] * n)


def short_of_memory(cap: Capture, machine: Machine, free: Sequence[int] | np.ndarray) -> Capture:
    """``cap`` with each tile's SRAM taken by one allocation live in every phase except ``free[tile]`` bytes at the
    top (the traffic's own addresses lie inside it)."""
    top = min(machine.memory.end, machine.memory.loader_limit) // 32 * 32
    n = cap.tile_count
    alloc = Allocations(np.arange(n, dtype=np.int32), np.full(n, machine.memory.base, np.int64),
                        top - np.asarray(free, np.int64), np.zeros(n, np.int64),
                        np.full(n, max(cap.phase_ids()), np.int64), ["tile data"] * n)
    return Capture(tile_count=n, phases=cap.phases, allocations=alloc)


def joined(*parts: Allocations) -> Allocations:
    """The allocations of every part, in order."""
    tile, start, end, first, last = (np.concatenate([getattr(p, k) for p in parts])
                                     for k in ("tile", "start", "end", "first", "last"))
    return Allocations(tile, start, end, first, last, [n for p in parts for n in p.name])


def small_machine(tiles: int = 48) -> Machine:
    from dataclasses import replace

    from placer.machine import load_machine

    return replace(load_machine(), tiles=tiles)


def every_rewrite(cap: Capture, problem: SelectionProblem, machine: Machine,
                  max_segments: int | None = None, memory: bool = False) -> Iterator[Capture]:
    """The program of every plan ``every_relay_plan`` makes."""
    for plan in every_relay_plan(cap, problem, machine, max_segments, memory):
        yield plan.rewritten(cap)


def every_relay_plan(cap: Capture, problem: SelectionProblem, machine: Machine,
                     max_segments: int | None = None, memory: bool = False) -> Iterator[Plan]:
    """Every plan of a tiny instance: each group direct or at each of its relay options (direct-receive and,
    where offered, local-pack), every injective choice of eligible hosts (with ``max_segments``: only the plans
    that relay at most that many segments). ``memory``: each buffer at the first address of its host that holds
    it in the phase (the production allocator's mirror), and only the plans whose buffers all find one."""
    from placer.alternatives.relay import direct_receive, local_pack
    from placer.modes import PlanMode
    from placer.selection.plan import Plan, RelayChoice

    groups = [(pi, gi) for pi, pd in enumerate(problem.phases) for gi in range(len(pd.options))]
    per_group = [problem.phases[pi].options[gi] for pi, gi in groups]
    for combo in itertools.product(*per_group):
        relays = [(pi, op) for (pi, _gi), op in zip(groups, combo, strict=True) if op.variant != "direct"]
        need = sum(op.count for _, op in relays)
        if max_segments is not None and need > max_segments:
            continue
        for perm in itertools.permutations(range(cap.tile_count), need):
            plan = Plan(PlanMode.CPSAT, machine, 10**6, 16384)
            ok, i = True, 0
            for pi, op in relays:
                hosts = np.array(perm[i: i + op.count], np.int64)
                i += op.count
                if any(int(h) in set(op.banned[s].tolist()) for s, h in enumerate(hosts)):
                    ok = False
                    break
                assert op.seg is not None
                pd = problem.phases[pi]
                buffers = np.full(op.count, 0x70000, np.int64)
                if memory:
                    placed = [pd.memory.allocate(int(h), int(op.buffer_bytes[s])) for s, h in enumerate(hosts)]
                    if any(a is None for a in placed):
                        ok = False
                        break
                    buffers = np.array(placed, np.int64)
                if op.variant == "direct-receive":
                    plan.relays.append(RelayChoice(op.group, op.variant, op.seg, hosts, buffers,
                                                   direct_receive(op.group, op.seg, hosts, buffers, pd.phase, 16592)))
                else:
                    plan.relays.append(RelayChoice(op.group, op.variant, op.seg, hosts, buffers,
                                                   local_pack(op.group, op.seg, hosts, buffers, pd.phase, 16592,
                                                              pd.extra_phase), pd.extra_phase))
            if ok:
                yield plan


def every_plan(cap: Capture, problem: SelectionProblem, machine: Machine,
               max_segments: int | None = None) -> list[tuple[int, int]]:
    """(estimate cycles, worst table) of every plan ``every_rewrite`` makes."""
    from placer.cost.model import program_cost

    costs = (program_cost(program, machine) for program in every_rewrite(cap, problem, machine, max_segments))
    return [(cost.cycles, cost.worst_table()) for cost in costs]


def excluding(values: Collection[int]) -> Callable[[int], bool]:
    """A hypothesis filter that keeps what is not in ``values`` (bound when it is made, not when it is called)."""
    return lambda value: value not in values


def random_buffers_csv(count: int = 20000, seed: int = 0) -> tuple[str, int]:
    """A placement instance in the MiniMalloc CSV format: ``count`` buffers with random lifetimes and sizes, and
    its peak live bytes (the capacity at which every buffer must fit: a tight instance no engine solves at once)."""
    import random

    rnd = random.Random(seed)
    rows = []
    for i in range(count):
        lo = rnd.randrange(0, 20000)
        rows.append((f"b{i}", lo, lo + rnd.randrange(1, 400), rnd.randrange(1, 64) * 16))
    change: dict[int, int] = {}
    for _, lo, hi, size in rows:
        change[lo] = change.get(lo, 0) + size
        change[hi] = change.get(hi, 0) - size
    peak = live = 0
    for t in sorted(change):
        live += change[t]
        peak = max(peak, live)
    return "id,lower,upper,size\n" + "".join(f"{b},{lo},{hi},{size}\n" for b, lo, hi, size in rows), peak
