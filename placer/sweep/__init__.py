"""Sweeps: many relay-selection jobs from one TOML file, run as Ray tasks (or serially), one combined table.

`placer.sweep.spec` reads the file, `placer.sweep.jobs` runs one job, `placer.sweep.results` writes its files and the
table, `placer.sweep.runner` drives a sweep, `placer.sweep.cluster` starts or joins Ray and fans work out over it
(also used by `placer schedule --ray` and `placer place --ray`). Ray is an optional extra and is imported lazily.
"""
