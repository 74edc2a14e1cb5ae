#!/usr/bin/env python3
"""CDK entry point: parse the settings once, then compose the stacks and check them with cdk-nag."""

import sys

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from config.settings import SettingsError, load_settings
from stacks import build_app


def main() -> None:
    app = App()
    try:
        settings = load_settings(app.node.get_all_context())
    except SettingsError as error:
        # One clear message and a non-zero exit, instead of a jsii stack trace.
        print(error, file=sys.stderr)
        sys.exit(1)
    build_app(app, settings)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()


if __name__ == "__main__":
    main()
