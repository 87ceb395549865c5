from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture
def golden():
    """Read a golden text from tests/golden/data."""

    def read(name: str) -> str:
        return (DATA / name).read_text()

    return read
