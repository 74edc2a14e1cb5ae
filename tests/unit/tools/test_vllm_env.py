"""What `make vllm-deps` checks before it builds .venv-vllm (tools/vllm_env.py), and how the
Makefile uses it: `make local VLLM=real` builds the environment first, and the Makefile names no
path of one machine."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tools import vllm_env

ROOT = Path(__file__).resolve().parents[3]
WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


def fake_python(
    path: Path, version: str, executable: str | None = None, fails: bool = False
) -> str:
    """An executable answering vllm_env's probe as a Python ``version`` at ``executable`` would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if fails:
        body = "echo 'ModuleNotFoundError: No module named ensurepip' >&2; exit 1"
    else:
        major, minor = version.split(".")[:2]
        body = f"echo {major} {minor}; echo {executable or path}"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_the_first_python_3_11_that_works_is_taken_and_a_shim_gives_its_target(tmp_path):
    broken = fake_python(tmp_path / "a" / "python3.11", "3.11", fails=True)  # no venv module
    newer = fake_python(tmp_path / "b" / "python3.11", "3.12")  # a shim falling through to 3.12
    shim = fake_python(tmp_path / "c" / "python3.11", "3.11", executable="/usr/bin/python3.11")
    found, refused = vllm_env.find_python(None, [broken, newer, broken, shim])
    assert found == "/usr/bin/python3.11"
    assert refused == [
        f"{broken} fails: ModuleNotFoundError: No module named ensurepip",
        f"{newer} is Python 3.12",
    ]


def test_an_explicit_python_is_the_only_one_tried_and_its_refusal_says_what_to_do(tmp_path):
    wrong = fake_python(tmp_path / "python3.12", "3.12")
    good = fake_python(tmp_path / "python3.11", "3.11")
    found, refused = vllm_env.find_python(wrong, [good])
    assert (found, refused) == (None, [f"{wrong} is Python 3.12"])
    message = vllm_env.missing_python_message(wrong, refused)
    assert message.startswith(
        f"VLLM_PYTHON={wrong} cannot build .venv-vllm:\n  {wrong} is Python 3.12\n"
    )
    assert "`uv python install 3.11`" in message
    assert "make vllm-deps VLLM_PYTHON=/path/to/python3.11" in message


def test_python_3_11_is_looked_for_on_path_then_in_pyenv_newest_first(
    tmp_path, monkeypatch, capsys
):
    root = tmp_path / "pyenv"
    for version in ("3.11.2", "3.11.10", "3.12.1"):
        fake_python(root / "versions" / version / "bin" / "python", version)
    newest, older = (str(root / "versions" / v / "bin" / "python") for v in ("3.11.10", "3.11.2"))
    assert list(vllm_env.pyenv_versions(root)) == [newest, older]
    on_path = fake_python(tmp_path / "bin" / "python3.11", "3.11")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("PYENV_ROOT", str(root))
    monkeypatch.setattr(vllm_env, "uv_command", lambda: None)
    assert vllm_env.main(["python"]) == 0
    assert capsys.readouterr().out == f"{on_path}\n"
    (tmp_path / "bin" / "python3.11").unlink()
    assert vllm_env.main(["python"]) == 0
    assert capsys.readouterr().out == f"{newest}\n"


def test_no_python_3_11_anywhere_names_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.setattr(vllm_env, "uv_command", lambda: None)
    assert vllm_env.main(["python"]) == vllm_env.EXIT_MISSING
    err = capsys.readouterr().err
    assert err.startswith("make vllm-deps: no Python 3.11 found for vLLM's CPU build")
    assert "(no python3.11 on PATH, no pyenv or uv 3.11)" in err and "python3.11-venv" in err


def test_a_folder_without_the_pinned_torch_wheel_is_refused_with_where_to_get_it(tmp_path, capsys):
    assert vllm_env.torch_pin() == "2.13.0+cpu"  # requirements-vllm.lock's pin
    empty = tmp_path / "empty"
    empty.mkdir()
    assert vllm_env.main(["wheels", str(empty)]) == vllm_env.EXIT_MISSING
    err = capsys.readouterr().err
    assert f"TORCH_WHEELS ({empty}) holds no {WHEEL}" in err
    assert (
        f"download {WHEEL} from {vllm_env.TORCH_CPU_PAGE} into a folder and run make vllm-deps "
        "TORCH_WHEELS=/that/folder"
    ) in err
    held = tmp_path / "wheels"
    held.mkdir()
    (held / WHEEL).write_bytes(b"")
    assert vllm_env.main(["wheels", str(empty), f"file://{held}"]) == 0
    assert vllm_env.main(["wheels", vllm_env.TORCH_CPU_PAGE]) == 0  # a page is left to pip
    assert vllm_env.main(["wheels"]) == vllm_env.EXIT_MISSING
    assert "TORCH_WHEELS (empty)" in capsys.readouterr().err


def dry_run(*arguments: str, env: dict[str, str]) -> str:
    """What ``make -n`` would run, one line per command (continuations joined)."""
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return re.sub(r"\\\n\s*", " ", done.stdout)


@pytest.fixture
def make_env() -> dict[str, str]:
    """The environment without the variables the Makefile's vLLM settings read, nor those an
    outer make (``make test``) passes down, which make a nested make print its directory."""
    names = (
        "PIP_FIND_LINKS",
        "VLLM_PYTHON",
        "TORCH_WHEELS",
        "PYTHON",
        "MAKEFLAGS",
        "MFLAGS",
        "MAKELEVEL",
    )
    return {name: value for name, value in os.environ.items() if name not in names}


def test_make_local_with_the_real_vllm_builds_its_environment_first(tmp_path, make_env):
    venv = tmp_path / ".venv-vllm"
    real = dry_run("local", "VLLM=real", f"VLLM_VENV={venv}", env=make_env)
    steps = [
        line
        for line in real.splitlines()
        if "vllm_env.py" in line
        or "requirements-vllm.lock" in line
        or "voice_devtools.local" in line
    ]
    assert steps[0] == f"python3 tools/vllm_env.py wheels {vllm_env.TORCH_CPU_PAGE}"
    assert "vllm_env.py python" in steps[1] and f"-m venv {venv}" in steps[1]
    assert f"--find-links={vllm_env.TORCH_CPU_PAGE} -r requirements-vllm.lock" in steps[2]
    assert steps[-1].split()[-4:] == ["-m", "voice_devtools.local", "--vllm", "real"]
    fake = dry_run("local", f"VLLM_VENV={venv}", env=make_env)
    assert "vllm_env.py" not in fake and "-m voice_devtools.local --vllm fake" in fake


def test_the_torch_wheels_default_to_pips_own_find_links(tmp_path, make_env):
    venv = f"VLLM_VENV={tmp_path / '.venv-vllm'}"
    text = dry_run("vllm-deps", venv, env={**make_env, "PIP_FIND_LINKS": "/srv/wheels"})
    assert "vllm_env.py wheels /srv/wheels" in text
    assert "--find-links=/srv/wheels -r requirements-vllm.lock" in text
    text = dry_run(
        "vllm-deps", venv, "TORCH_WHEELS=/a /b", "VLLM_PYTHON=/x/python3.11", env=make_env
    )
    assert "--find-links=/a --find-links=/b" in text and "vllm_env.py python /x/python3.11" in text


def test_the_makefile_names_no_path_of_one_machine():
    makefile = (ROOT / "Makefile").read_text()
    assert re.findall(r"(?<![\w.$(])/(?:root|opt|home|usr/local)/\S*", makefile) == []
