"""Package list only (everything else is in pyproject.toml).

The bundled model descriptions have one copy, ``models/*.toml`` at the top of the repository; they are installed as
the package ``placer.models`` (a package-dir mapping), so an installed placer -- editable or not -- finds them with
``importlib.resources`` and a checkout's ``models/`` is the same files.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["placer", "placer.*"]), "placer.models"],
    package_dir={"placer.models": "models"},
)
