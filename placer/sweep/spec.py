"""The sweep file (TOML): workloads × budgets × modes × objectives × seeds, validated into frozen dataclasses.

```toml
budgets = ["64KiB", "80KiB"]          # exchange-table budget per tile
modes = ["greedy", "cpsat"]           # greedy: the production rule; cpsat: placer's search
objectives = ["cycles,table"]         # CP-SAT lexicographic orders (the rest of the default order follows)
seeds = [0, 1]                        # CP-SAT random seeds
machine = "ipu21"                     # bundled name or a machine TOML (relative to this file)

[solver]                              # the run configuration of every CP-SAT job
time_limit = 30.0
workers = 1                           # CP-SAT workers per job = CPUs each Ray task reserves

[[workloads]]
name = "siglip-b2"
model = "siglip-so400m"               # generated: model name or .toml path, with batch, layers, seed
batch = 2
layers = 1

[[workloads]]
name = "demo"
capture = "../examples/relay-demo.json"   # or read: a capture path, relative to this file
budgets = [512, 700]                      # a workload may list its own budgets instead of the sweep's
```

A greedy job has no search, so seeds and objectives do not multiply it: one greedy job per (workload, budget).
Every malformed value is an :class:`InputError` naming the file, the field and the value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placer.errors import InputError
from placer.fileio import parse_toml, read_text
from placer.modes import SelectionMode
from placer.units import MAX_COUNT, format_size, size_option

MODES = (SelectionMode.GREEDY, SelectionMode.CPSAT)  # the production rule, then placer's search
# A sweep larger than this is refused unless the user confirms it (`placer sweep --yes`): a typo in a seed range
# should not queue days of work. HARD_MAX_JOBS is never exceeded: each job is a row held in memory and a folder.
MAX_JOBS = 1_000
HARD_MAX_JOBS = 100_000
# The selection objectives, kept here so reading a sweep file does not import the solver stack (start-up time);
# tests/sweep checks it equals placer.selection.select.OBJECTIVES.
OBJECTIVES = ("cycles", "table", "scratch", "relays")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_TOP = {"budgets", "modes", "objectives", "seeds", "machine", "fragments", "local_pack", "solver", "workloads"}
_SOLVER = {"time_limit", "workers", "relative_gap", "deterministic"}
_WORKLOAD = {"name", "model", "batch", "layers", "seed", "capture", "budgets"}


@dataclass(frozen=True)
class Workload:
    """One program of the sweep: generated from a model description, or read from a capture file."""

    name: str
    model: str | None = None  # a bundled model name or an absolute .toml path
    batch: int = 2
    layers: int = 1
    seed: int = 0
    capture: str | None = None  # an absolute capture path
    budgets: tuple[int, ...] | None = None  # this workload's own budgets (None: the sweep's)

    def describe(self) -> str:
        if self.capture is not None:
            return self.capture
        return f"{self.model} batch {self.batch}, {self.layers} layer(s), seed {self.seed}"

    def to_json(self) -> dict[str, Any]:
        if self.capture is not None:
            return {"name": self.name, "capture": self.capture}
        # budgets are left out: they choose jobs, they do not change the program a job solves
        return {"name": self.name, "model": self.model, "batch": self.batch, "layers": self.layers,
                "seed": self.seed}


@dataclass(frozen=True)
class JobConfig:
    """What every job of the sweep shares: machine, fragment limit, CP-SAT settings other than the seed."""

    machine: str = "ipu21"  # bundled name or an absolute path
    fragments: int | None = None  # None: the machine's limit
    local_pack: bool = True
    time_limit: float = 30.0
    workers: int = 1
    relative_gap: float = 0.0
    deterministic: bool = True

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Job:
    """One solve: a workload at a budget in a mode (CP-SAT jobs also carry an objective order and a seed)."""

    workload: str
    budget: int
    mode: SelectionMode
    objective: tuple[str, ...] | None = None  # None for greedy
    seed: int | None = None  # None for greedy

    @property
    def id(self) -> str:
        """A file-name-safe key, unique within a sweep and stable across runs (it names the job's result files)."""
        base = f"{self.workload}__{self.budget}B__{self.mode}"
        if self.mode == SelectionMode.GREEDY:
            return base
        assert self.objective is not None
        return f"{base}__{'-'.join(self.objective)}__seed{self.seed}"

    def describe(self) -> str:
        extra = "" if self.mode == SelectionMode.GREEDY else f" {','.join(self.objective or ())} seed {self.seed}"
        return f"{self.workload} {format_size(self.budget)} {self.mode}{extra}"

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.workload, "budget": self.budget, "mode": self.mode,
                "objective": list(self.objective) if self.objective is not None else None, "seed": self.seed}


@dataclass(frozen=True)
class SweepSpec:
    path: str
    workloads: tuple[Workload, ...]
    budgets: tuple[int, ...]
    modes: tuple[SelectionMode, ...]
    objectives: tuple[tuple[str, ...], ...]
    seeds: tuple[int, ...]
    config: JobConfig

    def job_count(self) -> int:
        """How many jobs :meth:`jobs` would list, counted without listing them (a file of a few lines can ask for
        billions)."""
        per_budget = ((SelectionMode.GREEDY in self.modes)
                      + (SelectionMode.CPSAT in self.modes) * len(self.objectives) * len(self.seeds))
        return sum(len(w.budgets or self.budgets) for w in self.workloads) * per_budget

    def jobs(self) -> list[Job]:
        """Every job, in the sweep's fixed order: workload, budget, mode, objective, seed (as the file lists them)."""
        out = []
        for w in self.workloads:
            for b in w.budgets or self.budgets:
                for m in self.modes:
                    if m == SelectionMode.GREEDY:
                        out.append(Job(w.name, b, m))
                        continue
                    out += [Job(w.name, b, m, o, s) for o in self.objectives for s in self.seeds]
        return out

    def workload(self, name: str) -> Workload:
        return next(w for w in self.workloads if w.name == name)


def check_job_count(spec: SweepSpec, *, confirmed: bool = False) -> int:
    """The sweep's job count, or :class:`InputError` when it passes :data:`MAX_JOBS` unconfirmed or
    :data:`HARD_MAX_JOBS` at all."""
    count = spec.job_count()
    if count > HARD_MAX_JOBS:
        raise InputError(f"{count:,} jobs is more than placer runs in one sweep ({HARD_MAX_JOBS:,}); split the "
                         "sweep file", path=spec.path, where="jobs")
    if count > MAX_JOBS and not confirmed:
        raise InputError(f"{count:,} jobs is more than {MAX_JOBS:,}; pass --yes to run them all", path=spec.path,
                         where="jobs")
    return count


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep file; relative paths inside it are taken from the file's folder."""
    p = Path(path)
    text = read_text(p)
    data = parse_toml(text, str(p))
    return spec_from_dict(data, str(p), p.resolve().parent)


def spec_from_dict(data: dict[str, Any], where: str, base: Path) -> SweepSpec:
    _known(data, _TOP, where, "")
    workloads_raw = data.get("workloads")
    every_own = isinstance(workloads_raw, list) and bool(workloads_raw) and all(
        isinstance(w, dict) and "budgets" in w for w in workloads_raw)
    budgets = _budgets(data, where, "budgets", required=not every_own)
    modes = tuple(SelectionMode(_choice(v, MODES, where, f"modes[{i}]")) for i, v in enumerate(
        _list(data, "modes", where, default=list(MODES))))
    objectives = tuple(_objective(v, where, f"objectives[{i}]") for i, v in enumerate(
        _list(data, "objectives", where, default=[",".join(OBJECTIVES)])))
    seeds = tuple(_param("seed", v, where, f"seeds[{i}]") for i, v in enumerate(_list(data, "seeds", where,
                                                                                         default=[0])))
    for key, values in (("modes", modes), ("objectives", objectives), ("seeds", seeds)):
        _unique(values, where, key)
    config = _config(data, where, base)
    raw = workloads_raw
    if not isinstance(raw, list) or not raw or not all(isinstance(w, dict) for w in raw):
        raise InputError(f"must be one or more [[workloads]] tables, got {raw!r}", path=where, where="workloads")
    workloads = tuple(_workload(w, where, f"workloads[{i}]", base) for i, w in enumerate(raw))
    _unique(tuple(w.name for w in workloads), where, "workloads.name")
    return SweepSpec(where, workloads, budgets, modes, objectives, seeds, config)


def _budgets(data: dict[str, Any], where: str, at: str, *, required: bool) -> tuple[int, ...]:
    if not required and "budgets" not in data:
        return ()
    key = at.rsplit(".", 1)[-1]
    values = tuple(_budget(v, where, f"{at}[{i}]") for i, v in enumerate(_list(data, key, where, at=at)))
    _unique(values, where, at)
    return values


def _config(data: dict[str, Any], where: str, base: Path) -> JobConfig:
    solver = data.get("solver", {})
    if not isinstance(solver, dict):
        raise InputError(f"must be a table, got {solver!r}", path=where, where="solver")
    _known(solver, _SOLVER, where, "solver.")
    machine = data.get("machine", "ipu21")
    if not isinstance(machine, str) or not machine:
        raise InputError(f"must be a machine name or a TOML path, got {machine!r}", path=where, where="machine")
    if machine.endswith(".toml") or "/" in machine:
        machine = _existing(machine, base, where, "machine")
    fragments = data.get("fragments")
    local_pack = data.get("local_pack", True)
    if not isinstance(local_pack, bool):
        raise InputError(f"must be true or false, got {local_pack!r}", path=where, where="local_pack")
    deterministic = solver.get("deterministic", True)
    if not isinstance(deterministic, bool):
        raise InputError(f"must be true or false, got {deterministic!r}", path=where, where="solver.deterministic")
    return JobConfig(
        machine=machine,
        fragments=None if fragments is None else _int(fragments, where, "fragments", lo=1),
        local_pack=local_pack,
        time_limit=float(_param("time_limit", solver.get("time_limit", 30.0), where, "solver.time_limit")),
        workers=int(_param("workers", solver.get("workers", 1), where, "solver.workers")),
        relative_gap=float(_param("relative_gap", solver.get("relative_gap", 0.0), where, "solver.relative_gap")),
        deterministic=deterministic,
    )


def _workload(raw: dict[str, Any], where: str, at: str, base: Path) -> Workload:
    _known(raw, _WORKLOAD, where, f"{at}.")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(f"must be a name of letters, digits, '.', '_' or '-', got {name!r}", path=where,
                         where=f"{at}.name")
    own = _budgets(raw, where, f"{at}.budgets", required=False) or None
    has_model, has_capture = "model" in raw, "capture" in raw
    if has_model == has_capture:
        raise InputError("give exactly one of model (generate) or capture (read)", path=where, where=at)
    if has_capture:
        extra = sorted(set(raw) & {"batch", "layers", "seed"})
        if extra:
            raise InputError(f"{', '.join(extra)} apply to generated workloads only", path=where, where=at)
        capture = raw["capture"]
        if not isinstance(capture, str) or not capture:
            raise InputError(f"must be a capture path, got {capture!r}", path=where, where=f"{at}.capture")
        return Workload(name, capture=_existing(capture, base, where, f"{at}.capture"), budgets=own)
    model = raw["model"]
    if not isinstance(model, str) or not model:
        raise InputError(f"must be a model name or .toml path, got {model!r}", path=where, where=f"{at}.model")
    if model.endswith(".toml") or "/" in model:
        model = _existing(model, base, where, f"{at}.model")
    return Workload(name, model=model, batch=_int(raw.get("batch", 2), where, f"{at}.batch", lo=1),
                    layers=_int(raw.get("layers", 1), where, f"{at}.layers", lo=1),
                    seed=_int(raw.get("seed", 0), where, f"{at}.seed", lo=0), budgets=own)


def _known(table: dict[str, Any], known: set[str], where: str, prefix: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise InputError(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})", path=where,
                         where=f"{prefix}{unknown[0]}")


def _list(data: dict[str, Any], key: str, where: str, default: list[Any] | None = None,
          at: str | None = None) -> list[Any]:
    if key not in data and default is not None:
        return default
    value = data.get(key)
    if not isinstance(value, list) or not value:
        raise InputError(f"must be a non-empty list, got {value!r}", path=where, where=at or key)
    return value


def _unique(values: tuple[Any, ...], where: str, key: str) -> None:
    seen = set()
    for v in values:
        if v in seen:
            raise InputError(f"listed twice: {v!r}", path=where, where=key)
        seen.add(v)


def _budget(value: Any, where: str, at: str) -> int:
    # the same check and limits as the CLI's --budget, so a sweep cannot start jobs that `placer solve` refuses
    return size_option(value, at, path=where)


def _choice(value: Any, choices: tuple[str, ...], where: str, at: str) -> str:
    if value not in choices:
        raise InputError(f"must be one of {', '.join(choices)}, got {value!r}", path=where, where=at)
    return str(value)


def _objective(value: Any, where: str, at: str) -> tuple[str, ...]:
    names = tuple(s.strip() for s in value.split(",") if s.strip()) if isinstance(value, str) else ()
    if not names or any(n not in OBJECTIVES for n in names) or len(set(names)) != len(names):
        raise InputError(f"must be a comma-separated order of {', '.join(OBJECTIVES)}, got {value!r}",
                         path=where, where=at)
    return names + tuple(n for n in OBJECTIVES if n not in names)


def _int(value: Any, where: str, at: str, *, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= MAX_COUNT:
        raise InputError(f"must be an integer in {lo}..{MAX_COUNT:,}, got {value!r}", path=where, where=at)
    return value


def _param(key: str, value: Any, where: str, at: str) -> Any:
    """A solver setting, checked by the same rule as ``--params`` and the CLI flags (NaN, infinity, overflow)."""
    from placer.solver import check_param

    check_param(key, value, where, at)
    return value


def _existing(value: str, base: Path, where: str, at: str) -> str:
    p = Path(value).expanduser()
    p = p if p.is_absolute() else base / p
    if not p.is_file():
        raise InputError(f"no such file: {value!r} (looked at {p})", path=where, where=at)
    return str(p.resolve())
