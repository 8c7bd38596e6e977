"""The stubs are complete enough for `mypy --strict` on a typed program."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_mypy_strict_on_a_typed_example() -> None:
    pytest.importorskip("mypy")
    example = Path(__file__).resolve().parent / "typed_example.py"
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(example)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout


@pytest.mark.slow
def test_mypy_strict_on_the_package_itself() -> None:
    """The Python modules type-check against the stubs of the compiled core,
    so a method missing from _core.pyi shows up here."""
    pytest.importorskip("mypy")
    package = Path(__file__).resolve().parent.parent / "python" / "bloomline"
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(package)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout
