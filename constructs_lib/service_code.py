"""Where the code the constructs deploy lives: the Lambda handlers (:data:`HANDLERS_PACKAGE`) and
the model staging build (:data:`MODEL_STAGING_PACKAGE`), packages of ``services/`` that the wheel
carries beside the library (pyproject.toml, ``[tool.setuptools.packages.find]``).

Found with the import system (:func:`importlib.util.find_spec`, which locates a top-level package
without running it), so the same lookup works in a checkout (``services/`` on the path: pytest's
``pythonpath``, or the editable install ``make deps`` makes) and from an installed wheel
(site-packages), never by a path relative to the repository.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

#: The Lambda handlers: one folder of code per function, shipped as package data (a folder is not a
#: package: an ``__init__.py`` in it would become part of its asset and change its hash).
HANDLERS_PACKAGE = "handlers"
#: The model staging build: the CodeBuild source, shipped as one asset as it is.
MODEL_STAGING_PACKAGE = "model_staging"


def package_dir(name: str) -> Path:
    """The folder of the top-level package ``name``, found without importing it."""
    spec = importlib.util.find_spec(name)
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        raise ModuleNotFoundError(
            f"package {name!r} (code the constructs deploy, from services/) is not on the import "
            "path: install the library's wheel, or in a checkout run make deps (pip install -e ., "
            "which puts services/ packages on the path)",
            name=name,
        )
    return Path(next(iter(locations))).resolve()


def handler_dir(name: str) -> Path:
    """The code folder of the Lambda function ``name`` (``cleanup``, ``connect_start``,
    ``model_staging_waiter``)."""
    return package_dir(HANDLERS_PACKAGE) / name
