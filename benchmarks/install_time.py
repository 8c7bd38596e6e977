"""Time a user's install of bloomline: from the wheel against from source.

    python benchmarks/install_time.py dist/bloomline-X.tar.gz wheelhouse/bloomline-X-....whl

Each install goes into a fresh virtual environment with an upgraded pip,
as `pip install FILE`; the time is the wall time of that command alone.
pip's cache is left as it is (warm after the first run), so NumPy, which
both installs need, comes from it both times: the difference is the build.
From source, pip makes its build environment (scikit-build-core,
pybind11) and compiles the C++ core; from the wheel it unpacks files.
Prints one line per install and writes benchmarks/install_time.json.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed_install(target: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip"]
        subprocess.run([*pip, "install", "-q", "--upgrade", "pip"], check=True)
        start = time.perf_counter()
        subprocess.run([*pip, "install", "-q", target], check=True)
        seconds = time.perf_counter() - start
        # It works: the installed package imports and adds a key.
        subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import bloomline; assert bloomline.BloomFilter(10).add('x')"], check=True)
        return seconds


def main() -> None:
    sdist, wheel = sys.argv[1], sys.argv[2]
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "wheel": Path(wheel).name,
        "wheel_bytes": Path(wheel).stat().st_size,
        "from_wheel_s": round(timed_install(wheel), 1),
        "from_source_s": round(timed_install(sdist), 1),
    }
    for key in ("from_wheel_s", "from_source_s"):
        print(f"{key}: {results[key]}")
    (Path(__file__).resolve().parent / "install_time.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
