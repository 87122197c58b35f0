"""What a solve and a compare report: the JSON documents (every ``--json`` of ``placer solve`` and ``placer
compare``, and the API results' ``to_json``) and the text the commands print."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from placer.capture.model import Capture
from placer.report.summary import PlanSummaryDoc, plan_summary
from placer.report.table import render
from placer.selection.floors import Certificate, CertificateDoc
from placer.selection.select import FrontPoint, Objectives, Outcome
from placer.solver import Deadline, Status
from placer.units import format_size

if TYPE_CHECKING:
    from placer.ordering.program import ProgramFigures

# The JSON objects a lower stage builds (``Objectives.to_json``, ``SolveResult.to_json``, ``Decision.to_json``,
# ``Scheduled.to_json``, ...) are typed where they are built; here they are plain JSON objects.
JsonObject = dict[str, Any]


class TimeDoc(TypedDict):
    """How a command's wall-clock limit was spent (``time`` of ``placer solve --json``, ``sweep_time`` of
    ``placer compare --json``)."""

    limit_s: float
    wall_s: float
    spent_s: dict[str, float]  # per step: load, options, production rule, search, output, schedule, ...
    work: float  # CP-SAT deterministic seconds spent
    work_budget: float
    backstop: bool  # the wall clock cut a search: the run is not reproducible
    write_capture_reserve_s: NotRequired[float]  # ``solve --write-capture``: held back for the write


class SolverDoc(TypedDict):
    """How a selection's search ended."""

    status: str
    plan_from: str
    stages: list[JsonObject]  # per lexicographic stage: ``{"stage": name, **SolveResult.to_json()}``
    runtime_s: float
    rounds: int
    note: str


class ScheduledDoc(TypedDict):
    """The scheduled figures the selection measured: the plan's, the production rule plan's, the cycle caps."""

    plan: JsonObject | None
    production_rule: JsonObject | None
    caps: JsonObject | None


class RuleDoc(TypedDict):
    """The production rule's plan: its figures and its decision per phase."""

    objectives: JsonObject
    decisions: list[JsonObject]


class OutcomeDoc(TypedDict):
    """One selection's report (``placer solve --json`` without ``schedule`` and ``time``; a sweep job's)."""

    summary: PlanSummaryDoc
    solver: SolverDoc
    objectives: JsonObject  # ``Objectives.to_json``
    scheduled: ScheduledDoc
    production_rule: RuleDoc
    certificate: CertificateDoc | None  # why no plan fits, when proved without search


class ProgramsDoc(TypedDict):
    """``placer solve --schedule --json``'s ``schedule``: each program's totals and the plan's phases."""

    totals: dict[str, JsonObject]  # "direct", "production_rule", "plan" -> totals, ``b1024_vs_rule``, ``valid``
    phases: list[JsonObject]  # the plan's program, per phase (``PhaseRow.to_json``)
    changed_phases: list[JsonObject]  # per phase a plan changes: each program's B1024, best order, lower bound


class _Scheduling(TypedDict, total=False):
    schedule: ProgramsDoc


class SolveDoc(OutcomeDoc):
    """``placer solve --json``."""

    schedule: NotRequired[ProgramsDoc]  # with ``--schedule``
    time: TimeDoc


def time_json(deadline: Deadline, outcomes: list[Outcome], *, cut: bool = False) -> TimeDoc:
    """How the command's wall-clock limit was spent, and whether the run is reproducible (``cut``: the clock
    stopped something after the searches, such as compare's front)."""
    return {
        "limit_s": deadline.seconds,
        "wall_s": round(deadline.elapsed(), 3),
        "spent_s": {k: round(v, 3) for k, v in deadline.spent().items()},
        "work": round(sum(o.work for o in outcomes), 3),
        "work_budget": round(sum(o.work_budget for o in outcomes), 3),
        "backstop": cut or any(o.backstop for o in outcomes),
    }


def render_time(doc: TimeDoc) -> str:
    """The ``time:`` line of a solve or compare (from :func:`time_json`), with the backstop's warning."""
    spent = dict(doc["spent_s"])
    scheduling = spent.pop("schedule", None)
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in spent.items())
    wall = doc["wall_s"] - (scheduling or 0.0)
    line = (f"time: {wall:.1f} s of a {doc['limit_s']:g} s limit ({parts}); CP-SAT work "
            f"{doc['work']:.1f} of {doc['work_budget']:.1f} deterministic s")
    if scheduling is not None:
        line += f"; then --schedule {scheduling:.1f} s (outside the limit: --order-time per changed phase)"
    reserve = doc.get("write_capture_reserve_s", 0.0)
    if reserve:
        line += f"; {reserve:.1f} s of the limit held back for --write-capture"
    if doc["backstop"]:
        line += ("\nwarning: the wall-clock backstop stopped a search before its deterministic work was done "
                 "(a busy machine, or a --time-limit too short for this program): this plan may differ from run "
                 "to run")
        if reserve > 0.25 * doc["limit_s"]:
            line += (f"; writing the capture takes about {reserve:.0f} s of the limit: --time-limit "
                     f"{doc['limit_s'] + reserve:.0f} gives the search its usual share")
    return line


def outcome_summary(capture: Capture, outcome: Outcome) -> PlanSummaryDoc:
    """The per-phase summary of the outcome's plan (``plan_summary``, against the direct program it costed)."""
    direct = outcome.problem.direct if outcome.problem is not None else None
    return plan_summary(capture, outcome.scans, outcome.plan, direct, outcome.scheduled)


def outcome_json(capture: Capture, outcome: Outcome, summary: PlanSummaryDoc | None = None) -> OutcomeDoc:
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
        "scheduled": {"plan": outcome.scheduled.to_json() if outcome.scheduled is not None else None,
                      "production_rule": outcome.greedy_scheduled.to_json()
                      if outcome.greedy_scheduled is not None else None,
                      "caps": outcome.caps.to_json() if outcome.caps is not None else None},
        "production_rule": {"objectives": outcome.greedy_objectives.to_json(),
                            "decisions": [d.to_json() for d in outcome.decisions]},
        "certificate": outcome.certificate.to_json() if outcome.certificate is not None else None,
    }


def solve_json(capture: Capture, outcome: Outcome, summary: PlanSummaryDoc | None, deadline: Deadline, *,
               programs: dict[str, ProgramFigures] | None = None, write_reserve: float = 0.0) -> SolveDoc:
    """``placer solve --json``: the outcome's report, ``schedule`` (``programs``, with ``--schedule``) and
    ``time`` (the clock as of this call; ``write_reserve`` seconds held back for ``--write-capture``)."""
    timing = time_json(deadline, [outcome])
    if write_reserve:
        timing["write_capture_reserve_s"] = round(write_reserve, 1)
    scheduling: _Scheduling = {"schedule": schedule_json(programs)} if programs is not None else {}
    return {**outcome_json(capture, outcome, summary), **scheduling, "time": timing}


PROGRAMS = (("direct", "all direct"), ("production_rule", "production rule"), ("plan", "this plan"))


def schedule_json(programs: dict[str, ProgramFigures]) -> ProgramsDoc:
    """``placer solve --schedule --json``'s ``schedule``: each program's totals and the plan's phases."""
    rule = programs["production_rule"]
    return {
        "totals": {name: {**programs[name].totals(),
                          "b1024_vs_rule": round(programs[name].b1024 / rule.b1024 - 1, 6) if rule.b1024 else 0.0,
                          "valid": programs[name].valid}
                   for name, _ in PROGRAMS},
        "phases": [r.to_json() for r in programs["plan"].rows],
        "changed_phases": [
            {"phase": d.phase, "label": d.label, **{name: {"b1024": programs[name].rows[i].b1024,
                                                           "best": programs[name].rows[i].best,
                                                           "lower_bound": programs[name].rows[i].bound}
                                                    for name, _ in PROGRAMS}}
            for i, d in enumerate(programs["plan"].rows) if d.searched],
    }


def render_schedule(doc: ProgramsDoc) -> str:
    """``placer solve --schedule``'s tables: each program's scheduled totals, then the phases the plans change."""
    totals = doc["totals"]
    rows = [[label, f"{totals[n]['b1024']:,}", f"{totals[n]['b1024_vs_rule']:+.2%}", f"{totals[n]['best']:,}",
             f"{totals[n]['lower_bound']:,}", f"{totals[n]['best_gap']:.2%}", "ok" if totals[n]["valid"] else
             "INVALID"] for n, label in PROGRAMS]
    text = render(["program", "Σ B1024 horizon", "vs rule", "Σ best-order horizon", "Σ lower bound",
                   "best vs bound", "schedules"], rows,
                  title="\nscheduled cycles (every phase, sync excluded, times Repeat iterations; the best order is "
                        "placer's search on the phases the plans change):")
    changed = [[c["phase"], c["label"], *(f"{c[n]['b1024']:,} / {c[n]['best']:,} / {c[n]['lower_bound']:,}"
                                          for n, _ in PROGRAMS)] for c in doc["changed_phases"]]
    if changed:
        text += "\n" + render(["phase", "label", *(label for _, label in PROGRAMS)], changed,
                               title="\nthe phases the plans change (B1024 / best order / lower bound):")
    return text


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
        return (f"mode greedy: the production rule (docs/reference.md §5, no search): {accepted} of {candidates} "
                "phases with a candidate relayed")
    stages = "; ".join(f"{n}: {r.describe()}" for n, r in outcome.staged.stages)
    extra = f" — {outcome.note}" if outcome.note else ""
    return f"cp-sat {outcome.status.value} [{stages}]; plan from {plan_source(outcome.source)}{extra}"


class BriefDoc(TypedDict):
    """A plan's figures in a compare summary row."""

    fits: bool
    table: int
    relays: int
    cycles: int
    b1024_change: int
    estimate: int


class PlacerBriefDoc(BriefDoc):
    table_bound: int | None  # the table stage's proved bound
    table_gap: float | None


class CompareSummaryDoc(TypedDict):
    production_rule: BriefDoc
    cpsat: PlacerBriefDoc


class DirectDoc(TypedDict):
    """The all-direct program in a compare entry."""

    fits: bool
    estimate: int
    cycles: int | None  # Σ scheduled lower bound, when measured
    table: int
    row_estimate: int
    fragments: int


class CompareGroupDoc(TypedDict):
    """One replica group in a compare entry: each plan's choice for it."""

    phase: int
    group: int
    replicas: int
    fragments: int
    production_rule: str  # "direct", or "DR×n" / "LP×n" (variant × segments)
    cpsat: str
    production_rule_scratch: int
    cpsat_scratch: int


class CompareEntryDoc(TypedDict):
    """One budget of ``placer compare --json``: the production rule against placer."""

    budget: int
    summary: CompareSummaryDoc
    front: list[JsonObject]  # ``FrontPoint.to_json``; at the largest budget only
    status: str
    plan_from: str
    stages: list[JsonObject]
    runtime_s: float
    production_rule: JsonObject  # ``Objectives.to_json`` and ``row_estimate``
    cpsat: JsonObject
    direct: DirectDoc
    phases: list[JsonObject]  # per phase with groups: each plan's figures and the rule's reason
    groups: list[CompareGroupDoc]
    production_rule_decisions: list[JsonObject]
    sweep_time: NotRequired[TimeDoc]  # the whole sweep's clock (``compare_json``)


def compare_json(entries: list[CompareEntryDoc], timing: TimeDoc) -> list[CompareEntryDoc]:
    """The ``placer compare --json`` document: one entry per budget, each with the sweep's ``sweep_time``."""
    return [{**entry, "sweep_time": timing} for entry in entries]


def comparison_json(capture: Capture, budget: int, out: Outcome, front: list[FrontPoint] | None = None
                    ) -> CompareEntryDoc:
    """One budget of ``placer compare --json``: the production rule against CP-SAT -- the summary, the trade-off
    front between the worst tile and the scheduled cycles, then per phase and group."""
    g_by = {(r.group.phase, r.group.index): r for r in out.greedy.relays}
    c_by = {(r.group.phase, r.group.index): r for r in out.plan.relays}
    direct = out.problem.direct if out.problem is not None else None
    g_sum = plan_summary(capture, out.scans, out.greedy, direct, out.greedy_scheduled)
    c_sum = plan_summary(capture, out.scans, out.plan, direct, out.scheduled)
    phases = []
    verdict = {d.phase: d.reason for d in out.decisions}
    for gp, cp in zip(g_sum["phases"], c_sum["phases"], strict=True):
        if not gp["groups"]:
            continue
        keys = ("relayed", "relays", "table_after", "estimate_after", "bound_after", "b1024_after")
        phases.append({"phase": gp["phase"], "label": gp["label"], "groups": gp["groups"],
                       "production_rule": {**{k: gp.get(k) for k in keys}, "reason": verdict.get(gp["phase"], "")},
                       "cpsat": {k: cp.get(k) for k in keys},
                       **{k: gp.get(k) for k in ("table_before", "estimate_before", "bound_before", "b1024_before")}})
    group_rows: list[CompareGroupDoc] = []
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
    stages = dict(out.staged.stages) if out.staged else {}
    table_stage = stages.get("table")
    return {
        "budget": budget,
        "summary": {
            "production_rule": _brief(out.greedy_objectives),
            "cpsat": {**_brief(out.objectives),
                      "table_bound": None if table_stage is None or table_stage.bound is None
                      else int(table_stage.bound),
                      "table_gap": None if table_stage is None else table_stage.gap},
        },
        "front": [p.to_json() for p in front or []],
        "status": out.status.value,
        "plan_from": plan_source(out.source),
        "stages": [{"stage": n, **r.to_json()} for n, r in (out.staged.stages if out.staged else [])],
        "runtime_s": round(out.runtime, 3),
        "production_rule": {**out.greedy_objectives.to_json(),
                            "row_estimate": g_sum["program"]["row_estimate_after"]},
        "cpsat": {**out.objectives.to_json(), "row_estimate": c_sum["program"]["row_estimate_after"]},
        "direct": {"fits": g_sum["program"]["fits_before"], "estimate": g_sum["program"]["estimate_before"],
                   "cycles": out.scheduled.direct_bound if out.scheduled is not None else None,
                   "table": g_sum["program"]["worst_table_before"],
                   "row_estimate": g_sum["program"]["row_estimate_before"],
                   "fragments": g_sum["program"]["worst_fragments_before"]},
        "phases": phases,
        "groups": group_rows,
        "production_rule_decisions": [d.to_json() for d in out.decisions],
    }


def _brief(o: Objectives) -> BriefDoc:
    return {"fits": o.fits, "table": o.table, "relays": o.relays, "cycles": o.cycles, "b1024_change": o.b1024,
            "estimate": o.estimate}


def front_label(p: Any) -> str:
    """A front point's cap as a table cell: "+1.00%", "+1.00%, B1024 not capped" or "no cap"."""
    if p["slack"] is None:
        return "no cap"
    return f"+{p['slack']:.2%}" + ("" if p.get("b1024_capped", True) else ", B1024 not capped")


def render_comparisons(entries: list[CompareEntryDoc], *, detail: bool = False, all_groups: bool = False) -> str:
    """``placer compare`` as text: one summary row per budget, the trade-off front, then (``detail``) each budget's
    phases and groups."""
    rows = []
    for e in entries:
        g, c = e["summary"]["production_rule"], e["summary"]["cpsat"]
        gap = "-" if c["table_gap"] is None else f"{c['table_gap']:.1%}"
        rows.append([format_size(e["budget"]), "yes" if g["fits"] else "NO", g["table"], g["relays"],
                     f"{g['cycles']:,}", f"{g['b1024_change']:+,}", "yes" if c["fits"] else "NO", c["table"],
                     c["relays"], f"{c['cycles']:,}", f"{c['b1024_change']:+,}", gap, e["status"]])
    lines = [render(["budget", "rule fits", "rule worst B", "rule relays", "rule Σ bound", "rule B1024 Δ",
                     "placer fits", "placer worst B", "placer relays", "placer Σ bound", "placer B1024 Δ",
                     "table gap", "status"], rows,
                    title="production rule against placer, per budget (Σ bound: the program's scheduled lower bound, "
                          "cycles; B1024 Δ: the B1024 horizon against the all-direct program's):")]
    last = max(entries, key=lambda e: e["budget"]) if entries else None
    if last is not None and last["front"]:
        lines.append(render(["Σ bound within", "worst tile B", "fits", "Σ bound", "B1024 Δ", "relays"],
                            [[front_label(p), p["table"],
                              "yes" if p["fits"] else "NO", f"{p['cycles']:,}", f"{p['b1024_change']:+,}", p["relays"]]
                             for p in last["front"]],
                            title=f"\nthe front at {format_size(last['budget'])}: the least worst tile the measured "
                                  "configurations allow, per cycle cap (B1024 no worse than the rule's, except where "
                                  "the row says so):"))
    if detail:
        for e in entries:
            lines.append("\n" + render_comparison(e, all_groups=all_groups))
    else:
        lines.append("\n(--detail for each budget's phases and groups)")
    return "\n".join(lines)


def _choice(r: Any) -> str:
    if r is None:
        return "direct"
    return f"{'DR' if r.variant == 'direct-receive' else 'LP'}×{r.segmentation.count}"


def render_comparison(entry: CompareEntryDoc, *, all_groups: bool = False) -> str:
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
    def sched(p: dict[str, Any]) -> str:
        return "-" if p.get("bound_after") is None else f"{p['bound_after']:,} / {p['b1024_after']:,}"

    rows = [[p["phase"], p["label"], p["groups"], p["production_rule"]["reason"],
             f"{p['production_rule']['relayed']} / {p['production_rule']['relays']}",
             f"{p['cpsat']['relayed']} / {p['cpsat']['relays']}",
             p["table_before"], p["production_rule"]["table_after"], p["cpsat"]["table_after"],
             "-" if p.get("bound_before") is None else f"{p['bound_before']:,} / {p['b1024_before']:,}",
             sched(p["production_rule"]), sched(p["cpsat"])]
            for p in entry["phases"]]
    lines.append(render(["phase", "label", "groups", "rule verdict", "rule grp/relays", "cp-sat grp/relays",
                         "table direct", "table rule", "table cp-sat", "bound / B1024 direct", "rule", "cp-sat"],
                        rows, title="per phase ('rule' is the production rule; scheduled cycles without sync, where "
                                    "the selection measured the phase):"))
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
    lines.append(render(["", "fits", "Σ lower bound", "B1024 Δ", "estimate", "worst tile table B",
                         "row estimate B (Σ phase maxima)", "fragment max", "scratch B", "relays"], [
        ["all direct", d["fits"], d["cycles"], 0, d["estimate"], d["table"], d["row_estimate"], d["fragments"], 0, 0],
        ["production rule", g["fits"], g["cycles"], g["b1024"], g["estimate"], g["table"], g["row_estimate"],
         g["fragments"], g["scratch"], g["relays"]],
        ["cp-sat", c["fits"], c["cycles"], c["b1024"], c["estimate"], c["table"], c["row_estimate"], c["fragments"],
         c["scratch"], c["relays"]],
    ], title="\ntotals (the budget is checked against the worst tile; the row estimate is the reference's figure):"))
    return "\n".join(lines)


SHOWN_CERTIFICATES = 3  # tiles the text report explains; ``--json`` lists up to ``floors.CERTIFIED_TILES``


def render_certificate(certificate: Certificate) -> str:
    """Why no plan fits (``placer solve``'s text report when a check that needs no search proves it)."""
    head = ("no plan fits: these tiles stay over the budget whatever is chosen (every group touching them at its most "
            "favourable option, nothing hosted):" if certificate.tiles else "no plan fits:")
    return "\n".join([head, *("  " + line for line in certificate.lines(SHOWN_CERTIFICATES))])
