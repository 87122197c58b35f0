"""Shared generated captures (module-scoped work is the slow part: about a second each)."""

from __future__ import annotations

import pytest

from placer.capture.model import Capture
from placer.cost.model import ProgramCost, program_cost
from placer.machine import Machine, load_machine
from placer.workloads.generate import generate


@pytest.fixture(scope="session")
def machine() -> Machine:
    return load_machine()


@pytest.fixture(scope="session")
def siglip2(machine: Machine) -> Capture:
    return generate("siglip-so400m", batch=2, machine=machine)


@pytest.fixture(scope="session")
def siglip2_cost(siglip2: Capture, machine: Machine) -> ProgramCost:
    return program_cost(siglip2, machine)


@pytest.fixture(scope="session")
def pe2(machine: Machine) -> Capture:
    return generate("pe-core-l14", batch=2, machine=machine)
