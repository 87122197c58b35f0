"""From a model's selection to a concrete plan: which segment on which tile, at which address.

Segments of a host class are matched to the class's chosen tiles by a maximum bipartite matching (an edge where
the tile may host the segment: not one of the group's replicas or the segment's senders). The matching is exact:
when it is perfect, the model's loads are realised as modelled (each host carries at most its class's load). A
segment left unmatched takes any other free eligible tile; the exact re-costing that follows catches any budget
effect, and the caller tightens the model if needed.

The matching is our own augmenting-path search over tiles in list order, not networkx's: networkx keeps the two
sides in sets, whose iteration order follows the per-process string hash, so the same model gave different hosts
(and different plan files) from run to run.
"""

from __future__ import annotations

import numpy as np

from placer.alternatives.relay import direct_receive, local_pack
from placer.modes import PlanMode
from placer.selection.cpsat import ANY, HostKey, Selection
from placer.selection.options import Option
from placer.selection.plan import Plan, RelayChoice
from placer.selection.problem import SelectionProblem


def realise(problem: SelectionProblem, selection: Selection, mode: PlanMode, *, only: set[int] | None = None,
            keep: Plan | None = None) -> Plan:
    """Build the plan from the model's selection.

    With ``only``, just those selection phases are realised and the others' relays are copied from ``keep``."""
    machine = problem.machine
    plan = Plan(mode, machine, problem.table_budget, problem.fragment_limit)
    max_bytes = machine.exchange.max_transfer_words * 4
    # how many segments each aggregated tile hosts over the program: hosts are spread, least loaded first
    hosted = np.zeros(problem.tiles, np.int64)
    for pi, pd in enumerate(problem.phases):
        if only is not None and pi not in only:
            assert keep is not None
            plan.relays.extend(r for r in keep.relays if r.group.phase == pd.phase.phase)
            continue
        chosen = [(gi, pd.options[gi][oi]) for gi, oi in enumerate(selection.choice[pi])
                  if pd.options[gi][oi].variant != "direct"]
        if not chosen:
            continue
        hosts_by_class = selection.hosts[pi] if pi < len(selection.hosts) else {}
        used = set()
        assignment: dict[tuple[int, int], int] = {}
        by_class: dict[HostKey, list[tuple[int, Option, int]]] = {}
        coarse = ANY in hosts_by_class
        for gi, op in chosen:
            for s, sig in enumerate(pd.classes(op)):
                by_class.setdefault(ANY if coarse else sig, []).append((gi, op, s))
        counts = selection.counts[pi] if pi < len(selection.counts) else {}
        for key, members in by_class.items():
            slots = [t for t in hosts_by_class.get(key, []) if t not in used]
            for (cls, ei), n in sorted(counts.items(), key=lambda kv: kv[0][1]):
                if cls != key:
                    continue
                pool = [t for t in problem.tile_classes[ei].tiles.tolist() if t not in used and t not in slots]
                pool.sort(key=lambda t: (hosted[t], -t))
                slots += pool[:n]
            edges = []
            for _gi, op, s in members:
                banned = set(op.banned[s].tolist())
                edges.append([t for t in slots if t not in banned and pd.largest_gap[t] >= op.buffer_bytes[s]])
            for (gi, _op, s), t in zip(members, match_segments(edges), strict=True):
                if t is not None:
                    assignment[(gi, s)] = t
                    used.add(t)
                    hosted[t] += 1
        # unmatched segments: any other eligible tile with room, highest-numbered first (the production order)
        st_used = pd.state.used()
        for gi, op in chosen:
            for s in range(op.count):
                if (gi, s) in assignment:
                    continue
                banned = set(op.banned[s].tolist())
                free = [t for t in range(problem.tiles - 1, -1, -1)
                        if t not in used and t not in banned and pd.largest_gap[t] >= op.buffer_bytes[s]]
                free.sort(key=lambda t: (bool(st_used[t]), -t))
                if not free:
                    raise RuntimeError(f"phase {pd.phase.phase}: no tile can host a segment of group {gi}")
                assignment[(gi, s)] = free[0]
                used.add(free[0])
                hosted[free[0]] += 1
        for gi, op in chosen:
            assert op.seg is not None
            hosts = np.array([assignment[(gi, s)] for s in range(op.count)], np.int64)
            buffers = []
            for s, t in enumerate(hosts.tolist()):
                addr = pd.memory.place(t, int(op.buffer_bytes[s]))
                if addr is None:
                    raise RuntimeError(f"phase {pd.phase.phase}: buffer does not fit on tile {t}")
                buffers.append(addr)
            buf = np.array(buffers, np.int64)
            if op.variant == "direct-receive":
                rw = direct_receive(op.group, op.seg, hosts, buf, pd.phase, max_bytes)
                plan.relays.append(RelayChoice(op.group, op.variant, op.seg, hosts, buf, rw))
            else:
                rw = local_pack(op.group, op.seg, hosts, buf, pd.phase, max_bytes, pd.extra_phase)
                plan.relays.append(RelayChoice(op.group, op.variant, op.seg, hosts, buf, rw, pd.extra_phase))
    return plan


def match_segments(edges: list[list[int]]) -> list[int | None]:
    """A maximum matching of segments (``edges[i]``: the tiles segment i may use, in preference order) to distinct
    tiles; deterministic: a greedy pass in order, then augmenting paths searched depth-first, tiles in list order."""
    owner: dict[int, int] = {}  # tile -> segment
    match: list[int | None] = [None] * len(edges)
    for i, ts in enumerate(edges):
        for t in ts:
            if t not in owner:
                owner[t] = i
                match[i] = t
                break
    for i in range(len(edges)):
        if match[i] is not None:
            continue
        # iterative DFS over alternating paths: stack of (segment, next edge index)
        seen: set[int] = set()
        stack = [(i, 0)]
        via: list[int] = []  # tile taken at each stack level
        while stack:
            seg, k = stack[-1]
            if k >= len(edges[seg]):
                stack.pop()
                if via:
                    via.pop()
                continue
            stack[-1] = (seg, k + 1)
            t = edges[seg][k]
            if t in seen:
                continue
            seen.add(t)
            via.append(t)
            if t not in owner:
                # flip the path: each segment on the stack takes the tile chosen at its level
                for (sg, _), tt in zip(stack, via, strict=True):
                    owner[tt] = sg
                    match[sg] = tt
                break
            stack.append((owner[t], 0))
    return match
