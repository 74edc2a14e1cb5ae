"""What the production wheel holds (pyproject.toml, ``[tool.setuptools.packages.find]``): the
construct library, the settings, the commands, the client library, the Connect consumer and the
contracts, and not the dev tools (devtools/, a distribution of its own) or the tests.

setuptools' ``find`` is emulated with its documented rules (a package is a folder with an
``__init__.py`` under one of ``where``, kept when its dotted name matches an ``include`` pattern,
fnmatch style), so the check needs no build and no network."""

from __future__ import annotations

import fnmatch
import tomllib

from tests.conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DEVTOOLS = tomllib.loads((ROOT / "devtools" / "pyproject.toml").read_text())


def found_packages(root, where: list[str], include: list[str]) -> set[str]:
    """Top-level packages setuptools' find would take from ``where`` with ``include``."""
    packages = set()
    for folder in where:
        for init in (root / folder).glob("*/__init__.py"):
            name = init.parent.name
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in include):
                packages.add(name)
    return packages


def test_the_production_wheel_holds_the_product_and_not_the_dev_tools():
    find = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    assert found_packages(ROOT, find["where"], find["include"]) == {
        "config",
        "connect_consumer",
        "constructs_lib",
        "contracts",
        "voice_client",
        "voicectl",
    }


def test_the_dev_tools_are_a_distribution_of_their_own_over_the_product():
    find = DEVTOOLS["tool"]["setuptools"]["packages"]["find"]
    assert found_packages(ROOT / "devtools", find.get("where", ["."]), find["include"]) == {
        "voice_devtools"
    }
    assert DEVTOOLS["project"]["name"] == "sagemaker-realtime-voice-devtools"
    assert "sagemaker-realtime-voice" in DEVTOOLS["project"]["dependencies"]


def test_the_console_scripts_name_modules_of_the_wheel():
    scripts = PYPROJECT["project"]["scripts"]
    assert scripts == {
        "voicectl": "voicectl.cli:main",
        "voice-connect-consumer": "connect_consumer.__main__:main",
    }
