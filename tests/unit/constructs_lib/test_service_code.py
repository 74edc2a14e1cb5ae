"""constructs_lib/service_code.py: the code the constructs deploy is found by the import system, in
the checkout (services/ on pytest's path) and in a site-packages folder laid out as the wheel
installs it, and a missing package is named with what to do."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from constructs_lib.service_code import handler_dir, package_dir
from tests.conftest import ROOT


def test_in_the_checkout_the_packages_are_the_services_folders():
    assert package_dir("handlers") == ROOT / "services" / "handlers"
    assert package_dir("model_staging") == ROOT / "services" / "model_staging"
    assert handler_dir("cleanup") == ROOT / "services" / "handlers" / "cleanup"
    assert (handler_dir("connect_start") / "index.py").is_file()


def test_an_installed_layout_is_found_without_the_repository(tmp_path):
    """The wheel puts constructs_lib, handlers and model_staging side by side in site-packages."""
    site = tmp_path / "site-packages"
    for folder in ("constructs_lib", "services/handlers", "services/model_staging"):
        shutil.copytree(ROOT / folder, site / folder.split("/")[-1])
    code = (
        "from constructs_lib.service_code import handler_dir, package_dir\n"
        "print(handler_dir('model_staging_waiter'))\n"
        "print(package_dir('model_staging'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.splitlines() == [
        str(site / "handlers" / "model_staging_waiter"),
        str(site / "model_staging"),
    ]


def test_a_missing_package_says_what_to_install():
    with pytest.raises(ModuleNotFoundError) as error:
        package_dir("no_such_services_package")
    assert str(error.value).startswith(
        "package 'no_such_services_package' (code the constructs deploy, from services/) is not on "
        "the import path: install the library's wheel, or in a checkout run make deps"
    )
    assert error.value.name == "no_such_services_package"
