"""`placer report` on the SigLIP So400m batch-2 program: generation time (wall and CPU) and page size.

    python benchmarks/bench_report.py [--dir out]
    python benchmarks/bench_report.py --dir out/report --png docs/img     # also the README's pictures

Makes whatever is missing in DIR first (capture, the production rule's and CP-SAT's plans at 80 KiB, compare over
64/72/80/96 KiB: several minutes), then times the report alone, as a command, three times, and prints the median.
The machine's load average is printed with it: the figure is only comparable on an idle machine. With --png DIR,
the report's PNG figures are written to DIR as report-<figure>.png (the README shows docs/img's): made from the
code of the run, so the pictures cannot drift from it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path


def placer(*args: str | Path, stdout: Path | None = None) -> None:
    with open(stdout, "wb") if stdout else open(os.devnull, "wb") as out:
        subprocess.run([sys.executable, "-m", "placer.cli", *map(str, args)], check=False, stdout=out)


def prepare(d: Path) -> tuple[Path, Path, Path, Path]:
    d.mkdir(parents=True, exist_ok=True)
    cap, greedy, plan, cmp = d / "siglip-b2.json.gz", d / "greedy.json", d / "plan.json", d / "cmp.json"
    if not cap.exists():
        placer("generate", "siglip-so400m", "--batch", "2", "--layers", "1", "-o", cap)
    if not greedy.exists():
        placer("solve", cap, "--mode", "greedy", "--budget", "80KiB", "-o", greedy, "-q")
    if not plan.exists():
        placer("solve", cap, "--budget", "80KiB", "-o", plan, "-q")
    if not cmp.exists():
        placer("compare", cap, "--budget", "64KiB,72KiB,80KiB,96KiB", "--json", "-q", stdout=cmp)
    return cap, greedy, plan, cmp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", type=Path, default=Path("out"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--png", type=Path, default=None, help="also write the figures as report-<figure>.png here")
    args = ap.parse_args()
    cap, greedy, plan, cmp = prepare(args.dir)
    if args.png is not None:
        pngs = args.dir / "png"
        placer("report", cap, greedy, plan, "--compare", cmp, "-o", args.dir / "report.html", "--png", pngs, "-q")
        args.png.mkdir(parents=True, exist_ok=True)
        for f in sorted(pngs.glob("*.png")):
            (args.png / f"report-{f.name}").write_bytes(f.read_bytes())
            print(f"wrote {args.png / ('report-' + f.name)}")
    html = args.dir / "report.html"
    walls, cpus = [], []
    for _ in range(args.runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        placer("report", cap, greedy, plan, "--compare", cmp, "-o", html, "-q")
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    size = html.stat().st_size
    print(f"placer report, SigLIP b2 (whole program, two plans, compare over 4 budgets): median of {args.runs}: "
          f"wall {statistics.median(walls):.1f} s, CPU {statistics.median(cpus):.1f} s; page {size / 2**20:.2f} MiB "
          f"(limits: 15 s, 20 MB); load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
