"""voicectl: the project's command-line tool.

Clients that stream audio to the deployed endpoints (``transcribe``, ``speak``, ``mic``) and operations helpers
(``preflight``, ``stage-model``, ``verify``). Each subcommand lives in its own module and registers itself in
:mod:`voicectl.cli`.
"""
