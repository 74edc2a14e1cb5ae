"""voicectl: the project's command line (docs/architecture.md, "Layers").

Commands only: :mod:`voicectl.cli` (one argparse parser; each subcommand module registers itself),
:mod:`voicectl.commands` (``transcribe``, ``speak``, ``mic``, ``talk``, ``local-runtime``,
``connect-replay``) and :mod:`voicectl.operations` (``preflight``, ``stage-model``, ``verify``,
``cost``, ``capacity``). The code the commands run lives below: the client library
:mod:`voice_client` and, in a clone, the dev tools :mod:`voice_devtools`, which the dev-tool
commands import when they run.
"""
