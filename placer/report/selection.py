"""What a solve and a compare report: the JSON documents (every ``--json`` of ``placer solve`` and ``placer
compare``, and the API results' ``to_json``) and the text the commands print."""

from __future__ import annotations

from typing import Any

from placer.capture.model import Capture
from placer.report.summary import plan_summary
from placer.report.table import render
from placer.selection.select import Outcome
from placer.solver import Deadline, Status
from placer.units import format_size


def time_json(deadline: Deadline, outcomes: list[Outcome]) -> dict[str, Any]:
    """How the command's wall-clock limit was spent, and whether the run is reproducible."""
    return {
        "limit_s": deadline.seconds,
        "wall_s": round(deadline.elapsed(), 3),
        "spent_s": {k: round(v, 3) for k, v in deadline.spent().items()},
        "work": round(sum(o.work for o in outcomes), 3),
        "work_budget": round(sum(o.work_budget for o in outcomes), 3),
        "backstop": any(o.backstop for o in outcomes),
    }


def render_time(doc: dict[str, Any]) -> str:
    """The ``time:`` line of a solve or compare (from :func:`time_json`), with the backstop's warning."""
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in doc["spent_s"].items())
    line = (f"time: {doc['wall_s']:.1f} s of a {doc['limit_s']:g} s limit ({parts}); CP-SAT work "
            f"{doc['work']:.1f} of {doc['work_budget']:.1f} deterministic s")
    reserve = doc.get("write_capture_reserve_s", 0.0)
    if reserve:
        line += f"; {reserve:.1f} s of the limit held back for --write-capture"
    if doc["backstop"]:
        line += ("\nwarning: the wall-clock backstop stopped the search before its deterministic work was done "
                 "(a busy machine, or a --time-limit too short for this program): this plan may differ from run "
                 "to run")
        if reserve > 0.25 * doc["limit_s"]:
            line += (f"; writing the capture takes about {reserve:.0f} s of the limit: --time-limit "
                     f"{doc['limit_s'] + reserve:.0f} gives the search its usual share")
    return line


def outcome_summary(capture: Capture, outcome: Outcome) -> dict[str, Any]:
    """The per-phase summary of the outcome's plan (``plan_summary``, against the direct program it costed)."""
    direct = outcome.problem.direct if outcome.problem is not None else None
    return plan_summary(capture, outcome.scans, outcome.plan, direct)


def outcome_json(capture: Capture, outcome: Outcome, summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report of one selection (``placer solve --json`` without its ``schedule`` and ``time``); ``summary``
    when the caller has it already (``outcome_summary``)."""
    summary = outcome_summary(capture, outcome) if summary is None else summary
    staged = outcome.staged
    return {
        "summary": summary,
        "solver": {
            "status": outcome.status.value if staged is not None or outcome.source != "greedy" or
            outcome.status is Status.INFEASIBLE else "not-run",
            "plan_from": plan_source(outcome.source),
            "stages": [{"stage": n, **r.to_json()} for n, r in (staged.stages if staged else [])],
            "runtime_s": round(outcome.runtime, 3),
            "rounds": outcome.rounds,
            "note": outcome.note,
        },
        "objectives": outcome.objectives.to_json(),
        "production_rule": {"objectives": outcome.greedy_objectives.to_json(),
                            "decisions": [d.to_json() for d in outcome.decisions]},
        "irreducible_tiles": [{"tile": t, "bytes_over": b} for t, b in outcome.irreducible],
    }


def render_schedule(rows: list[dict[str, Any]]) -> str:
    """``placer solve --schedule``'s table: every phase's stream order against its bound, and its check."""
    table = render(["phase", "label", "transfers", "horizon", "lower bound", "gap", "checked"],
                   [[r["phase"], r["label"], r["transfers"], r["horizon"], r["lower_bound"],
                     f"{r['gap']:.1%}", "ok" if r["valid"] else "INVALID"] for r in rows],
                   title="\nstream order (B1024 greedy), cycles without sync:")
    total = sum(r["horizon"] for r in rows)
    bound = sum(r["lower_bound"] for r in rows)
    return table + f"\nsum of horizons {total:,} against a summed lower bound of {bound:,}"


def plan_source(source: str) -> str:
    """Where a plan came from, named for the reader: the selection driver calls the production rule "greedy"."""
    return "production rule" if source == "greedy" else source


def status_line(outcome: Outcome) -> str:
    """The one line of a solve that says how the search ended and where the plan came from."""
    if outcome.staged is None and outcome.status is Status.INFEASIBLE:
        return f"infeasible (proved): {outcome.note}; the plan shown is the best incumbent"
    if outcome.staged is None:
        accepted = sum(d.accepted for d in outcome.decisions)
        candidates = sum(d.has_candidate for d in outcome.decisions)
        return (f"mode greedy: the production rule (BRIEF §5, no search): {accepted} of {candidates} phases with a "
                "candidate relayed")
    stages = "; ".join(f"{n}: {r.describe()}" for n, r in outcome.staged.stages)
    extra = f" — {outcome.note}" if outcome.note else ""
    return f"cp-sat {outcome.status.value} [{stages}]; plan from {plan_source(outcome.source)}{extra}"


def comparison_json(capture: Capture, budget: int, out: Outcome) -> dict[str, Any]:
    """One budget of ``placer compare --json``: the production rule against CP-SAT, per phase and group."""
    g_by = {(r.group.phase, r.group.index): r for r in out.greedy.relays}
    c_by = {(r.group.phase, r.group.index): r for r in out.plan.relays}
    direct = out.problem.direct if out.problem is not None else None
    g_sum = plan_summary(capture, out.scans, out.greedy, direct)
    c_sum = plan_summary(capture, out.scans, out.plan, direct)
    phases = []
    verdict = {d.phase: d.reason for d in out.decisions}
    for gp, cp in zip(g_sum["phases"], c_sum["phases"], strict=True):
        if not gp["groups"]:
            continue
        phases.append({"phase": gp["phase"], "label": gp["label"], "groups": gp["groups"],
                       "production_rule": {**{k: gp[k] for k in ("relayed", "relays", "table_after", "cycles_after")},
                                           "reason": verdict.get(gp["phase"], "")},
                       "cpsat": {k: cp[k] for k in ("relayed", "relays", "table_after", "cycles_after")},
                       "table_before": gp["table_before"], "cycles_before": gp["cycles_before"]})
    group_rows = []
    scanned = {g.key() for scan in out.scans for g in scan.groups}
    # the production rule also relays groups the optimiser's scan prunes: list those too
    extra = [r.group for r in out.greedy.relays if r.group.key() not in scanned]
    for scan in out.scans:
        for g in [*scan.groups, *(e for e in extra if e.phase == scan.phase)]:
            gr, cr = g_by.get(g.key()), c_by.get(g.key())
            group_rows.append({
                "phase": g.phase, "group": g.index, "replicas": g.replica_count, "fragments": g.fragments,
                "production_rule": _choice(gr), "cpsat": _choice(cr),
                "production_rule_scratch": int(gr.scratch_bytes.sum()) if gr else 0,
                "cpsat_scratch": int(cr.scratch_bytes.sum()) if cr else 0,
            })
    return {
        "budget": budget,
        "status": out.status.value,
        "plan_from": plan_source(out.source),
        "stages": [{"stage": n, **r.to_json()} for n, r in (out.staged.stages if out.staged else [])],
        "runtime_s": round(out.runtime, 3),
        "production_rule": {**out.greedy_objectives.to_json(),
                            "row_estimate": g_sum["program"]["row_estimate_after"]},
        "cpsat": {**out.objectives.to_json(), "row_estimate": c_sum["program"]["row_estimate_after"]},
        "direct": {"fits": g_sum["program"]["fits_before"], "cycles": g_sum["program"]["cycles_before"],
                   "table": g_sum["program"]["worst_table_before"],
                   "row_estimate": g_sum["program"]["row_estimate_before"],
                   "fragments": g_sum["program"]["worst_fragments_before"]},
        "phases": phases,
        "groups": group_rows,
        "production_rule_decisions": [d.to_json() for d in out.decisions],
    }


def _choice(r: Any) -> str:
    if r is None:
        return "direct"
    return f"{'DR' if r.variant == 'direct-receive' else 'LP'}×{r.segmentation.count}"


def render_comparison(entry: dict[str, Any], *, all_groups: bool = False) -> str:
    """One budget of ``placer compare`` as text (from :func:`comparison_json`)."""
    g, c = entry["production_rule"], entry["cpsat"]
    lines = [f"budget {format_size(entry['budget'])}: cp-sat {entry['status']} (plan from {entry['plan_from']}, "
             f"{entry['runtime_s']:.1f} s)"]
    for st in entry["stages"]:
        gap = f", gap {st['gap']:.2%}" if st["gap"] is not None else ""
        obj = "-" if st["objective"] is None else f"{st['objective']:,.0f}"
        bnd = "-" if st["bound"] is None else f"{st['bound']:,.0f}"
        lines.append(f"  stage {st['stage']}: {st['status']}, objective {obj}, bound {bnd}{gap}, "
                     f"{st['runtime_s']:.2f} s")
    rows = [[p["phase"], p["label"], p["groups"], p["production_rule"]["reason"],
             f"{p['production_rule']['relayed']} / {p['production_rule']['relays']}",
             f"{p['cpsat']['relayed']} / {p['cpsat']['relays']}",
             p["table_before"], p["production_rule"]["table_after"], p["cpsat"]["table_after"], p["cycles_before"],
             p["production_rule"]["cycles_after"], p["cpsat"]["cycles_after"]]
            for p in entry["phases"]]
    lines.append(render(["phase", "label", "groups", "rule verdict", "rule grp/relays", "cp-sat grp/relays",
                         "table direct", "table rule", "table cp-sat", "cycles direct", "cycles rule",
                         "cycles cp-sat"], rows,
                        title="per phase ('rule' is the production rule, BRIEF §5):"))
    diff = [r for r in entry["groups"] if all_groups or r["production_rule"] != r["cpsat"]]
    if diff:
        shown = diff[:40]
        lines.append(render(["phase", "group", "replicas", "fragments", "production rule", "cp-sat", "rule scratch",
                             "cp-sat scratch"],
                            [[r["phase"], r["group"], r["replicas"], r["fragments"], r["production_rule"], r["cpsat"],
                             r["production_rule_scratch"], r["cpsat_scratch"]] for r in shown],
                            title="\ngroups where the choices differ:" if not all_groups else "\ngroups:"))
        if len(diff) > len(shown):
            lines.append(f"… and {len(diff) - len(shown)} more (--json for all)")
    d = entry["direct"]
    lines.append(render(["", "fits", "cycles", "worst tile table B", "row estimate B (Σ phase maxima)",
                         "fragment max", "scratch B", "relays"], [
        ["all direct", d["fits"], d["cycles"], d["table"], d["row_estimate"], d["fragments"], 0, 0],
        ["production rule", g["fits"], g["cycles"], g["table"], g["row_estimate"], g["fragments"], g["scratch"],
         g["relays"]],
        ["cp-sat", c["fits"], c["cycles"], c["table"], c["row_estimate"], c["fragments"], c["scratch"], c["relays"]],
    ], title="\ntotals (the budget is checked against the worst tile; the row estimate is the reference's figure):"))
    return "\n".join(lines)
