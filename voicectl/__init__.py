"""voicectl: the project's command-line tool, in three families by who uses it.

- :mod:`voicectl.clients`: what callers of the deployed endpoints run (``transcribe``, ``speak``,
  ``mic``) and the code they import (the realtime transcription, audio, the SageMaker stream
  transport, Sonic's request and events).
- :mod:`voicectl.operations`: what the people who deploy and run the stacks use (``preflight``,
  ``stage-model``, ``verify``, ``cost``, ``capacity``, and the price lookups behind the last two).
- :mod:`voicectl.local`: the local stand-ins for the parts that run in AWS (``local-runtime``,
  ``make local``).

Shared by all three: :mod:`voicectl.cli` (one argparse parser; each subcommand module registers
itself), :mod:`voicectl.errors` and :mod:`voicectl.aws` (the AWS session and one-line AWS failures).

The import paths documented before the split (``voicectl.audio``, ``voicectl.realtime``,
``voicectl.sagemaker_stream``, ``voicectl.sonic``, ``voicectl.speak``, ``voicectl.pricing``) keep
working: :data:`MOVED_MODULES` maps each to the module it names now, and importing the old path
returns that module itself (loaded on first use, not here).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types

MOVED_MODULES: dict[str, str] = {
    "voicectl.audio": "voicectl.clients.audio",
    "voicectl.realtime": "voicectl.clients.realtime",
    "voicectl.sagemaker_stream": "voicectl.clients.sagemaker_stream",
    "voicectl.sonic": "voicectl.clients.sonic",
    "voicectl.speak": "voicectl.clients.speak",
    "voicectl.pricing": "voicectl.operations.pricing",
}
"""Public module paths of README.md and voicectl/README.md from before the split -> where the module
is now."""


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old path of :data:`MOVED_MODULES` to the module at its new path (one module
    object, two names)."""

    def find_spec(
        self, fullname: str, path: object = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(MOVED_MODULES[spec.name])
        spec.loader_state = (
            module.__spec__
        )  # the import system sets the old path's spec on the module next
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = module.__spec__.loader_state  # it keeps the spec of where it lives


# First on the path: an old path must resolve to the new module even where another finder (an
# editable install of an older checkout, say) still knows a file under the old name. It answers for
# the names of MOVED_MODULES only.
if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModuleFinder())
