"""What the production wheel holds (pyproject.toml, ``[tool.setuptools.packages.find]``): the
construct library, the settings, the commands, the client library, the Connect consumer, the code
the constructs deploy (the Lambda handlers, the model staging build) and the contracts, and not the
dev tools (devtools/, a distribution of its own) or the tests.

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
        "handlers",
        "model_staging",
        "voice_client",
        "voicectl",
    }


def package_data(package: str) -> list[str]:
    """The files of ``services/<package>`` outside its subpackages that the wheel's package-data
    globs take (fnmatch style, relative to the package), bytecode aside."""
    root = ROOT / "services" / package
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"][package]
    return sorted(
        name
        for path in root.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and not (path.parent != root and (path.parent / "__init__.py").is_file())
        and any(fnmatch.fnmatchcase(name := path.relative_to(root).as_posix(), p) for p in patterns)
    )


def test_the_wheel_carries_every_file_of_the_lambda_functions_and_the_staging_build():
    """The functions' folders are package data of ``handlers`` (not packages: an ``__init__.py``
    would change their assets' hashes); the staging build's ``stage_model`` is a package and its
    pinned requirements are package data of ``model_staging``."""
    assert package_data("handlers") == [
        "cleanup/cfn_response.py",
        "cleanup/instance_protection.py",
        "cleanup/network_interfaces.py",
        "connect_start/example_flow.json",
        "connect_start/index.py",
        "model_staging_waiter/index.py",
    ]
    handlers = ROOT / "services" / "handlers"
    assert sorted(
        p.relative_to(handlers).as_posix()
        for p in handlers.glob("*/*")
        if p.is_file() and p.suffix != ".pyc"
    ) == package_data("handlers")
    assert package_data("model_staging") == ["requirements.txt"]


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
