"""Package list and the optional compiled canonical search (everything else is in pyproject.toml).

The bundled model descriptions have one copy, ``models/*.toml`` at the top of the repository; they are installed as
the package ``placer.models`` (a package-dir mapping), so an installed placer -- editable or not -- finds them with
``importlib.resources`` and a checkout's ``models/`` is the same files.

The extension ``placer.placement._canonical`` is ``optional``: where no C++ compiler is available the install still
succeeds and placer falls back to the pure-Python canonical search (same answers, slower).
"""

from setuptools import Extension, find_packages, setup

setup(
    packages=[*find_packages(include=["placer", "placer.*"]), "placer.models"],
    package_dir={"placer.models": "models"},
    ext_modules=[
        Extension(
            "placer.placement._canonical",
            sources=["placer/placement/_canonical.cpp"],
            language="c++",
            extra_compile_args=["-O2", "-std=c++17"],
            optional=True,
        )
    ],
)
