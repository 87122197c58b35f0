"""What every CP-SAT model in placer shares: parameters, the status vocabulary, the result record, progress.

Each stage builds its own ``cp_model.CpModel``; it then calls :func:`run` so that every solve is configured the
same way (explicit worker count, seed, time limit) and reported the same way (status, objective, bound, time).
"""

from __future__ import annotations

import enum
import importlib.util
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from placer import interrupt
from placer.errors import InputError
from placer.progress import SolverCallback

MAX_WORKERS = 256  # CP-SAT starts one thread per worker; far beyond the cores only costs memory and time
MAX_SEED = 2**31 - 1  # CP-SAT's random_seed is a 32-bit signed integer
MAX_TIME_LIMIT = 7 * 24 * 3600.0


def check_param(key: str, value: Any, path: str, field: str) -> None:
    """Refuse a parameter value CP-SAT would misread, overflow on, or silently skip the search for."""
    def bad(need: str) -> InputError:
        return InputError(f"must be {need}, got {value!r}", path=path, where=field)

    if key == "backstop" and value is None:
        return
    if key in ("log", "deterministic"):
        if not isinstance(value, bool):
            raise bad("true or false")
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad("a number")
    if key == "workers" and not (isinstance(value, int) and 1 <= value <= MAX_WORKERS):
        raise bad(f"an integer in 1..{MAX_WORKERS}")
    if key == "seed" and not (isinstance(value, int) and 0 <= value <= MAX_SEED):
        raise bad(f"an integer in 0..{MAX_SEED}")
    if key == "time_limit" and not (math.isfinite(value) and 0 < value <= MAX_TIME_LIMIT):
        raise bad(f"a positive number of seconds up to {MAX_TIME_LIMIT:.0f}")
    if key == "relative_gap" and not (math.isfinite(value) and 0 <= value <= 1):
        raise bad("a fraction in 0..1")
    if key in ("work_per_second", "backstop") and not (math.isfinite(value) and 0 < value <= MAX_TIME_LIMIT):
        raise bad("a positive number")


if TYPE_CHECKING:  # ortools takes a third of a second to import: only a solve imports it (CLI start-up)
    from ortools.sat.python import cp_model


def lazy_module(name: str) -> ModuleType:
    """The module ``name``, executed on its first attribute access rather than now.

    Why: ortools' CP-SAT module pulls in pandas, 0.65 s of imports that every command paid before it could even
    reject a bad argument; the model builders bind ``cp_model`` with this at import time and load it when they
    first build a model."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:  # pragma: no cover - ortools is a required dependency
        raise ImportError(f"no module named {name!r}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


class Status(enum.StrEnum):
    """How a solve ended. ``INFEASIBLE`` is only ever used for a proof, never for a time-out."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"  # a solution with a (possibly zero) gap to the proved bound
    INFEASIBLE = "infeasible"  # proved: no solution exists
    UNKNOWN = "unknown"  # ran out of time with no solution and no proof

    @classmethod
    def from_cpsat(cls, code: Any) -> Status:
        from ortools.sat.python import cp_model

        return {
            cp_model.OPTIMAL: cls.OPTIMAL,
            cp_model.FEASIBLE: cls.FEASIBLE,
            cp_model.INFEASIBLE: cls.INFEASIBLE,
        }.get(code, cls.UNKNOWN)


@dataclass(frozen=True)
class SolverParams:
    time_limit: float = 30.0
    workers: int = 2
    seed: int = 0
    relative_gap: float = 0.0
    log: bool = False
    deterministic: bool = True
    # selection: deterministic work units (CP-SAT's deterministic seconds) granted per second of the time limit;
    # sized so the work normally ends before the wall-clock backstop (a backstop that fires breaks determinism)
    work_per_second: float = 0.4
    # wall-clock seconds after which one solve stops whatever its deterministic budget (None: 2 x limit + 5 s)
    backstop: float | None = None

    @classmethod
    def from_toml(cls, path: str | Path | None = None) -> SolverParams:
        """The selection stage's parameters of a run configuration file (:meth:`RunConfig.load`); ``None`` loads
        the bundled defaults."""
        return RunConfig.load(path).selection

    def check(self, where: str = "solver parameters") -> None:
        for f in fields(self):
            check_param(f.name, getattr(self, f.name), where, f.name)

    def with_overrides(self, **overrides: Any) -> SolverParams:
        """Apply the CLI flags that were given (``None`` means "not given")."""
        given = {k: v for k, v in overrides.items() if v is not None}
        for key, value in given.items():
            check_param(key, value, "command line", "--" + key.replace("_", "-"))
        return replace(self, **given)

    def apply(self, solver: cp_model.CpSolver) -> None:
        p = solver.parameters
        p.max_time_in_seconds = float(self.time_limit)
        if self.deterministic:
            # Same input, seed and workers -> same answer: interleaved workers, stopped by deterministic time
            # (CP-SAT's machine-independent work unit, about a second here); the wall limit is only a backstop.
            p.interleave_search = True
            p.max_deterministic_time = float(self.time_limit)
            p.max_time_in_seconds = 2.0 * float(self.time_limit) + 5.0 if self.backstop is None \
                else max(0.01, float(self.backstop))
        elif self.backstop is not None:
            p.max_time_in_seconds = max(0.01, min(float(self.time_limit), float(self.backstop)))
        p.num_workers = int(self.workers)
        p.random_seed = int(self.seed)
        p.relative_gap_limit = float(self.relative_gap)
        p.log_search_progress = bool(self.log)
        p.log_to_stdout = False
        # CP-SAT's own SIGINT handler would stop the search and hide the signal; placer.interrupt handles it
        p.catch_sigint_signal = False
        if self.log:
            solver.log_callback = lambda line: print(line, file=sys.stderr)


STAGES = ("selection", "placement", "ordering")


@dataclass(frozen=True)
class RunConfig:
    """The run configuration: the CP-SAT parameters of every stage, from one sectioned TOML file.

    Keys at the top of the file apply to every stage (a flat file of solver parameters is a valid run
    configuration); a ``[selection]``, ``[placement]`` or ``[ordering]`` table overrides them for its stage. Every
    command reads it (``--params FILE``, default ``placer/params/default.toml``) and applies its own flags on top.

    Parameters
    ----------
    selection
        ``placer solve`` and ``placer compare`` (the time limit is the whole command's, loading included).
    placement
        ``placer place`` (the exact engines' time limit).
    ordering
        ``placer schedule`` (CP-SAT's time limit per phase in cpsat mode).
    """

    selection: SolverParams = field(default_factory=SolverParams)
    placement: SolverParams = field(default_factory=SolverParams)
    ordering: SolverParams = field(default_factory=SolverParams)

    @classmethod
    def load(cls, path: str | Path | None = None) -> RunConfig:
        """Read a run configuration file; ``None`` reads the bundled ``placer/params/default.toml``.

        Raises
        ------
        InputError
            The file is unreadable, not TOML, or has an unknown key or a value out of range (the message names
            the file, the key and the value).
        """
        from placer.fileio import parse_toml, read_text

        if path is None:
            text = resources.files("placer.params").joinpath("default.toml").read_text(encoding="utf-8")
            where = "placer/params/default.toml"
        else:
            where = str(path)
            text = read_text(path)
        data = parse_toml(text, where)
        shared = {k: v for k, v in data.items() if not (k in STAGES and isinstance(v, dict))}
        _check_table(shared, where, "")
        stages = {}
        for stage in STAGES:
            own = data.get(stage, {})
            _check_table(own, where, f"{stage}.")
            stages[stage] = SolverParams(**{**shared, **own})
        return cls(**stages)


def _check_table(data: dict[str, Any], where: str, prefix: str) -> None:
    known = {f.name for f in fields(SolverParams)}
    for key in data:
        if key not in known:
            sections = f"; sections: {', '.join(STAGES)}" if not prefix else ""
            raise InputError(f"unknown solver parameter (known: {', '.join(sorted(known))}{sections})", path=where,
                             where=prefix + key)
        if key == "backstop":
            raise InputError("is set by the solver, not by a params file", path=where, where=prefix + key)
    for key, value in data.items():
        check_param(key, value, where, prefix + key)


@dataclass(frozen=True)
class SolveResult:
    """The outcome of one CP-SAT solve, as every stage reports it."""

    status: Status
    objective: float | None  # None when no solution is known
    bound: float | None  # best proved bound (minimisation: a lower bound)
    runtime: float  # wall seconds
    solver: str = "cp-sat"
    work: float = 0.0  # CP-SAT deterministic seconds spent
    backstop: bool = False  # deterministic mode stopped by the wall clock, not by its work budget: not reproducible

    @property
    def gap(self) -> float | None:
        """Relative gap (objective − bound) / |objective|; 0 when optimal, None without both numbers."""
        if self.objective is None or self.bound is None:
            return None
        if self.status is Status.OPTIMAL:
            return 0.0
        denom = max(abs(self.objective), 1e-9)
        return max(0.0, (self.objective - self.bound) / denom)

    def describe(self) -> str:
        if self.status is Status.OPTIMAL:
            return f"optimal, objective {_num(self.objective)} ({self.runtime:.2f} s)"
        if self.status is Status.FEASIBLE:
            gap = self.gap
            gap_s = f"{gap:.2%}" if gap is not None else "?"
            return (
                f"feasible, objective {_num(self.objective)}, bound {_num(self.bound)}, gap {gap_s} "
                f"({self.runtime:.2f} s)"
            )
        if self.status is Status.INFEASIBLE:
            return f"infeasible (proved, {self.runtime:.2f} s)"
        return f"unknown: no solution and no proof within {self.runtime:.2f} s"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "objective": self.objective,
            "bound": self.bound,
            "gap": self.gap,
            "runtime_s": round(self.runtime, 4),
            "work": round(self.work, 4),
            "backstop": self.backstop,
            "solver": self.solver,
        }


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.3f}"


def _progress_callback(progress: SolverCallback, start: float) -> cp_model.CpSolverSolutionCallback:
    from ortools.sat.python import cp_model

    class _ProgressCallback(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            progress(time.perf_counter() - start, self.objective_value, self.best_objective_bound)

    return _ProgressCallback()


def clear_hints(model: cp_model.CpModel) -> None:
    """``model.clear_hints()`` (ortools leaves that method unannotated)."""
    cast(Callable[[], None], model.clear_hints)()


def run(
    model: cp_model.CpModel,
    params: SolverParams,
    *,
    progress: SolverCallback | None = None,
    has_objective: bool = True,
    tuning: dict[str, Any] | None = None,
) -> tuple[cp_model.CpSolver, SolveResult]:
    """Solve ``model`` with ``params``; return the solver (to read values) and the uniform result.

    ``tuning`` sets model-specific CP-SAT parameters a stage knows it needs (e.g. less presolve probing)."""
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    params.apply(solver)
    for key, value in (tuning or {}).items():
        if isinstance(value, list | tuple):  # a repeated field, empty in a new solver's parameters
            getattr(solver.parameters, key).extend(value)
        else:
            setattr(solver.parameters, key, value)
    start = time.perf_counter()
    callback = None
    if progress is not None:
        callback = _progress_callback(progress, start)
        if has_objective:
            solver.best_bound_callback = lambda bound: progress(time.perf_counter() - start, None, bound)
    code = interrupt.solve(solver, lambda: solver.solve(model, callback))
    runtime = time.perf_counter() - start
    status = Status.from_cpsat(code)
    objective = bound = None
    if status in (Status.OPTIMAL, Status.FEASIBLE) and has_objective:
        objective = solver.objective_value
        bound = solver.best_objective_bound
    elif status in (Status.OPTIMAL, Status.FEASIBLE):
        objective = bound = 0.0
    work = float(solver.deterministic_time)
    p = solver.parameters
    backstop = bool(params.deterministic and status not in (Status.OPTIMAL, Status.INFEASIBLE)
                    and work < 0.98 * p.max_deterministic_time and runtime >= 0.95 * p.max_time_in_seconds)
    return solver, SolveResult(status, objective, bound, runtime, work=work, backstop=backstop)


@dataclass
class Cutoff:
    """A wall-clock point (``time.perf_counter()``) at which a construction returns what it has built so far;
    ``fired`` says it did (its result then depends on the machine's speed: reported like a backstop)."""

    at: float = math.inf
    fired: bool = False

    def reached(self) -> bool:
        if not self.fired and time.perf_counter() >= self.at:
            self.fired = True
        return self.fired


class Deadline:
    """One wall-clock limit for a whole command, started before anything is loaded."""

    def __init__(self, seconds: float, start: float | None = None) -> None:
        self.seconds = float(seconds)
        self.start = time.perf_counter() if start is None else start
        self.marks: list[tuple[str, float]] = []  # (what, wall seconds) in the order they happened

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def remaining(self) -> float:
        return self.seconds - self.elapsed()

    def mark(self, what: str, since: float) -> float:
        """Record that ``what`` took the wall time since ``since`` (a perf_counter value); return now."""
        now = time.perf_counter()
        self.marks.append((what, now - since))
        return now

    def spent(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for what, secs in self.marks:
            out[what] = out.get(what, 0.0) + secs
        return out
