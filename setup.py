"""Package list and the optional compiled extensions (everything else is in pyproject.toml).

The bundled model descriptions have one copy, ``models/*.toml`` at the top of the repository; they are installed as
the package ``placer.models`` (a package-dir mapping), so an installed placer -- editable or not -- finds them with
``importlib.resources`` and a checkout's ``models/`` is the same files.

The extensions are ``optional``: where no C++ compiler is available the install still succeeds and placer falls
back to pure Python with the same answers, only slower -- ``placer.placement._canonical`` to the Python canonical
search, ``placer.capture._scan`` (the capture scanner, Python C API only) to the numpy reader of
``placer.capture.fastjson``, ``placer.ordering._materialize`` (the reference timing loop, Python C API only) to
the Python loop of ``placer.ordering.reference``, ``placer.ordering._balance`` (the B1024 balancing heap, Python C
API only) to the Python heap of ``placer.ordering.greedy``.
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
        ),
        Extension(
            "placer.capture._scan",
            sources=["placer/capture/_scan.cpp"],
            language="c++",
            extra_compile_args=["-O3", "-std=c++17"],  # -O3 inlines the parser's steps: a quarter less CPU than -O2
            optional=True,
        ),
        Extension(
            "placer.ordering._materialize",
            sources=["placer/ordering/_materialize.cpp"],
            language="c++",
            extra_compile_args=["-O2", "-std=c++17"],
            optional=True,
        ),
        Extension(
            "placer.ordering._balance",
            sources=["placer/ordering/_balance.cpp"],
            language="c++",
            extra_compile_args=["-O2", "-std=c++17"],
            optional=True,
        ),
    ],
)
