"""Builds the optional compiled canonical search; everything else is in pyproject.toml.

``optional=True``: where no C++ compiler is available the install still succeeds and placer falls back to the
pure-Python search (same answers, slower)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "placer.placement._canonical",
            sources=["placer/placement/_canonical.cpp"],
            language="c++",
            extra_compile_args=["-O2", "-std=c++17"],
            optional=True,
        )
    ]
)
