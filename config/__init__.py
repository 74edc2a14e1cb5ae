"""Settings of the app: parsed once from CDK context into typed, frozen values (see
:mod:`config.settings`)."""
