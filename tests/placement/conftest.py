from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parents[1] / "fixtures" / "placement"
DATA = Path(__file__).parents[2] / ".." / "shared" / "data"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def data() -> Path:
    if not DATA.is_dir():
        pytest.skip("../shared/data is absent")
    return DATA
