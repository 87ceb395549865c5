"""The bundled sample fusions, and how a name on the command line finds a script."""

from __future__ import annotations

import sys
from pathlib import Path

from fuser_core import FuserError

# In a clone (or an editable install) the samples sit beside the package; a regular
# install puts them under the environment's share/ directory.
_SAMPLE_DIRS = (
    Path(__file__).resolve().parent.parent / "sample_fusions",
    Path(sys.prefix) / "share" / "fuser-workbench" / "sample_fusions",
)
SAMPLES_DIR = next((d for d in _SAMPLE_DIRS if d.is_dir()), _SAMPLE_DIRS[0])


def resolve_script(name: str) -> Path:
    """A path as given, or a bundled sample by name (with or without `.py`)."""
    path = Path(name)
    if path.exists():
        return path
    candidate = SAMPLES_DIR / (name if name.endswith(".py") else f"{name}.py")
    if candidate.exists():
        return candidate
    raise FuserError(f"no such file or bundled sample: {name} (try `fuser-wb samples`)")


def sample_paths() -> list[Path]:
    return sorted(SAMPLES_DIR.glob("*.py"))
