#!/usr/bin/env python3
"""CDK entry point: parse the settings once, then compose the stacks and check them with cdk-nag."""

from __future__ import annotations

import gc
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

#: The oldest Python the app runs on (pyproject.toml requires-python; .python-version).
MIN_PYTHON = (3, 12)
#: What to do when ``python3`` (cdk.json's "app") is not the project's environment.
USE_THE_VENV = (
    "run `make synth` (or `make deploy`), or activate the project's environment first "
    "(`. .venv/bin/activate`, made by `make deps`) and run `npx cdk` again"
)
if sys.version_info < MIN_PYTHON:
    sys.exit(
        f"app.py: needs Python {'.'.join(map(str, MIN_PYTHON))}+, but {sys.executable} is "
        f"{sys.version.split()[0]}: {USE_THE_VENV}"
    )
try:
    from aws_cdk import App, Validations

    from config.settings import Settings, SettingsError, load_settings
except ModuleNotFoundError as missing:
    sys.exit(f"app.py: {sys.executable} cannot import {missing.name}: {USE_THE_VENV}")

if TYPE_CHECKING:
    from stacks import VoiceApp


def create_app(
    context: Mapping[str, Any] | None = None, outdir: str | None = None
) -> tuple[App, Settings, VoiceApp]:
    """Build the app: settings from context (cdk.json and ``-c`` via the CDK CLI, or ``context``),
    the enabled stacks, and the cdk-nag AwsSolutions checks, plus HIPAA Security and NIST 800-53 rev
    5 with network.mode=vpc (validation plugins: unacknowledged findings fail the synth).

    Raises:
        SettingsError: when a setting is invalid (before any construct is built).
    """
    app = App(context=dict(context) if context is not None else None, outdir=outdir)
    settings = load_settings(app.node.get_all_context())
    # The stacks and cdk-nag load once the settings are accepted: a refused setting is reported in
    # about half the time (app.py took 1.9 s of CPU to print it with them imported first, 0.9 s
    # without).
    from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks

    from stacks import build_app

    voice_app = build_app(app, settings)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    if settings.network.private:
        # A private deployment is held to the compliance packs too (README, "Private deployment").
        Validations.of(app).add_plugins(HIPAASecurityChecks(app), NIST80053R5Checks(app))
    return app, settings, voice_app


def main() -> None:
    try:
        app, _, _ = create_app()
    except SettingsError as error:
        # One clear message and a non-zero exit, instead of a jsii stack trace.
        print(error, file=sys.stderr)
        sys.exit(1)
    app.synth()
    # The process ends here. Left to the interpreter's exit, its full collections over the construct
    # tree and the jsii objects took 0.5-0.8 s of a 7 s run under cdk.json's context; frozen, the
    # operating system reclaims them.
    gc.freeze()


if __name__ == "__main__":
    main()
