"""voicectl: the project's command line (docs/architecture.md, "The layers").

Commands only: :mod:`voicectl.cli` (one argparse parser; each subcommand module registers itself)
and :mod:`voicectl.operations` (``preflight``, ``stage-model``, ``verify``, ``cost``,
``capacity``). The code the commands run lives below: the client library :mod:`voice_client`
(``transcribe``, ``speak``, ``mic``, ``talk``) and, in a clone, the dev tools
:mod:`voice_devtools` (``local-runtime``, ``connect-replay``).
"""
