"""The layers of the house (CONTRIBUTING.md, "Layout"), held over every module with ast: imports
point down only.

    contracts  <  constructs_lib  <  config  <  stacks  <  app.py
    contracts  <  bridge              (services/: the bridge image ships the contracts beside it)
    contracts  <  model_staging       (services/: the staging build's source carries the contracts)
    handlers                          (services/: the Lambda functions' code, the standard library
                                       and the runtime's boto3 only)
    contracts  <  voice_client        (the client library)
    contracts, voice_client  <  connect_consumer  (services/: the Connect consumer's image)
    contracts, voice_client, bridge  <  agent     (services/: the voice agent's bot, on the client
                                                   library's framework services and the bridge's
                                                   task protection, which its image copies)
    contracts, voice_client, connect_consumer, bridge, agent  <  voice_devtools
                                      (devtools/: the local runtime and the stand-ins, over what
                                       they stand in for)
    contracts, constructs_lib  <  tools   (the rule book reads the constructs' CDK-free facts)
    contracts, voice_client  <  voicectl          (the commands; voicectl/operations/ also:
                                                   settings, the constructs' facts, the
                                                   staging build's command;
                                                   voicectl/commands/ also voice_devtools,
                                                   imported inside the command)

contracts imports nothing of the project and no third-party package (the standard library only), so
every other part, the bridge's image and the staging build included, can carry it. voicectl holds
the commands only (the parser, ``voicectl/commands/`` and ``voicectl/operations/``), and the client
library no command-line code (no argparse). No module imports another that imports it back (at
module level; a package's own ``__init__`` aside, which Python runs first anyway)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

#: Each part of the project: its files, and the parts below it that it may import (its own
#: modules aside).
PARTS: dict[str, tuple[str, frozenset[str]]] = {
    "contracts": ("contracts", frozenset()),
    "constructs_lib": ("constructs_lib", frozenset({"contracts"})),
    "config": ("config", frozenset({"contracts", "constructs_lib"})),
    "stacks": ("stacks", frozenset({"contracts", "constructs_lib", "config"})),
    "app": ("app.py", frozenset({"contracts", "constructs_lib", "config", "stacks"})),
    "bridge": ("services/bridge", frozenset({"contracts"})),
    "model_staging": ("services/model_staging", frozenset({"contracts"})),
    "handlers": ("services/handlers", frozenset()),
    "voice_client": ("voice_client", frozenset({"contracts"})),
    "voicectl": ("voicectl", frozenset({"contracts", "voice_client"})),
    "connect_consumer": ("services/connect_consumer", frozenset({"contracts", "voice_client"})),
    "agent": ("services/agent", frozenset({"contracts", "voice_client", "bridge"})),
    "voice_devtools": (
        "devtools/voice_devtools",
        frozenset({"contracts", "voice_client", "connect_consumer", "bridge", "agent"}),
    ),
    # The gates over the synthesized templates (the cfn-lint rules) and the scripts the Makefile
    # runs: the rule book reads the instance catalogue and the constructs' props.
    "tools": ("tools", frozenset({"contracts", "constructs_lib"})),
    # Scripts that run the bridge and the clients on loopback and print figures.
    "bench": (
        "bench",
        frozenset({"contracts", "bridge", "voice_client", "connect_consumer", "voice_devtools"}),
    ),
}
#: Folders allowed more than their part, and why.
EXCEPTIONS: dict[str, tuple[frozenset[str], str]] = {
    "voicectl/operations/": (
        frozenset({"config", "constructs_lib", "model_staging"}),
        "preflight, cost and verify read the app's settings; capacity and "
        "verify the constructs' CDK-free facts; stage-model runs the staging "
        "build's own code",
    ),
    "voicectl/commands/": (
        frozenset({"voice_devtools"}),
        "local-runtime and connect-replay run the dev tools, imported inside the command "
        "(test_voicectl_imports_the_dev_tools_inside_its_commands_only)",
    ),
}
#: Where each part's import root is, when not the repository's root (the services' packages,
#: ``bridge``, ``connect_consumer`` and ``agent``, from services/; the dev tools' from devtools/).
IMPORT_ROOTS = {
    "bridge": "services",
    "connect_consumer": "services",
    "agent": "services",
    "model_staging": "services",
    "handlers": "services",
    "voice_devtools": "devtools",
}
IMPORT_NAMES = {"app": "app"}


def part_files(part: str) -> list[Path]:
    where = ROOT / PARTS[part][0]
    if where.suffix == ".py":
        return [where]
    return sorted(p for p in where.rglob("*.py") if "__pycache__" not in p.parts)


def import_name(part: str) -> str:
    return IMPORT_NAMES.get(part, part)


def imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every absolute import statement of ``path``, in functions too (a lazy import is one)."""
    return [
        node
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.level == 0)
    ]


def imported_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return [node.module or ""]


def test_contracts_import_the_standard_library_only_and_nothing_of_the_project():
    allowed = set(sys.stdlib_module_names) | {"__future__", "contracts"}  # and its own modules
    found = {}
    for path in part_files("contracts"):
        roots = {name.split(".")[0] for node in imports(path) for name in imported_names(node)}
        if roots - allowed:
            found[str(path.relative_to(ROOT))] = sorted(roots - allowed)
    assert found == {}
    assert [path.name for path in part_files("contracts")] == [
        "__init__.py",
        "agent_env.py",
        "agent_metrics.py",
        "bridge_env.py",
        "model.py",
        "realtime.py",
        "sonic.py",
        "weights.py",
    ]


@pytest.mark.parametrize("part", sorted(PARTS))
def test_nothing_imports_upward(part):
    ours = {import_name(name): name for name in PARTS}
    offenders = []
    for path in part_files(part):
        relative = str(path.relative_to(ROOT))
        allowed = set(PARTS[part][1])
        for folder, (more, _) in EXCEPTIONS.items():
            if relative.startswith(folder):
                allowed |= more
        for node in imports(path):
            for name in imported_names(node):
                target = ours.get(name.split(".")[0])
                if target is not None and target != part and target not in allowed:
                    offenders.append(f"{relative}:{node.lineno} imports {name} ({target})")
    assert offenders == []


def test_every_exception_is_needed():
    """An exception no module uses any more is dropped."""
    ours = {import_name(name): name for name in PARTS}
    for folder, (more, _) in EXCEPTIONS.items():
        used = {
            ours.get(name.split(".")[0])
            for path in sorted((ROOT / folder).rglob("*.py"))
            for node in imports(path)
            for name in imported_names(node)
        }
        assert more <= used, folder


def module_graph() -> dict[str, set[str]]:
    """``{module: the project's modules it imports at module level}``, a package's own ancestors
    left out."""
    modules: dict[str, Path] = {}
    for part in PARTS:
        for path in part_files(part):
            base = ROOT / IMPORT_ROOTS.get(part, ".")
            relative = path.relative_to(base).with_suffix("")
            name = ".".join(relative.parts).removesuffix(".__init__")
            modules[name] = path
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in _module_level_imports(ast.parse(path.read_text()).body):
            base = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
            if isinstance(node, ast.ImportFrom) and node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            else:
                found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
        graph[name] = {
            module
            for module in found
            if module in modules and module != name and not name.startswith(module + ".")
        }
    return graph


def _module_level_imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """Imports run when the module loads: at its top level, and in its ``if``/``try`` blocks, not
    under ``TYPE_CHECKING``."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            found += _module_level_imports(node.body) + _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            found += _module_level_imports(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                found += _module_level_imports(handler.body)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each
    sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    graph = module_graph()
    assert {
        "contracts.bridge_env",
        "bridge.server",
        "voice_client.realtime.protocol",
        "app",
    } <= set(graph)
    assert "contracts.realtime" in graph["bridge.protocol"]  # the graph sees the imports it must
    assert cycles(graph) == []


def test_the_client_library_holds_no_command_line_code():
    """voice_client is what a program calls: no argparse, no subcommand (``register``); the
    commands over it are voicectl's."""
    found = []
    for path in part_files("voice_client"):
        tree = ast.parse(path.read_text(), str(path))
        if "argparse" in {name.split(".")[0] for n in imports(path) for name in imported_names(n)}:
            found.append(f"{path.relative_to(ROOT)} imports argparse")
        found += [
            f"{path.relative_to(ROOT)} defines register()"
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == "register"
        ]
    assert found == []
    command = ROOT / "voicectl/commands/transcribe.py"  # the check sees a command's argparse
    assert "argparse" in {name for node in imports(command) for name in imported_names(node)}


#: voicectl's modules that hold code: the parser and the two folders of commands.
VOICECTL_CODE = ("voicectl/cli.py", "voicectl/commands/", "voicectl/operations/")


def holds_code(path: Path) -> bool:
    """False for a module of a docstring, imports and calls of what it imports (``__main__``'s
    ``sys.exit(main())``)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, (ast.Constant, ast.Call)):
            continue
        return True
    return False


def test_voicectl_holds_the_commands_only():
    """Outside the parser (cli.py), voicectl/commands/ and voicectl/operations/, voicectl's modules
    hold no code; every subcommand the parser lists is one of those folders' modules."""
    from voicectl import cli

    outside = [
        str(path.relative_to(ROOT))
        for path in part_files("voicectl")
        if not str(path.relative_to(ROOT)).startswith(VOICECTL_CODE)
    ]
    assert sorted(outside) == ["voicectl/__init__.py", "voicectl/__main__.py"]
    assert [module for module in outside if holds_code(ROOT / module)] == []
    assert holds_code(ROOT / "voicectl/cli.py")  # the check tells code from a re-export
    assert [
        module
        for module in cli.SUBCOMMAND_MODULES
        if not module.startswith(("voicectl.commands.", "voicectl.operations."))
    ] == []


def test_voicectl_imports_the_dev_tools_inside_its_commands_only():
    """The dev tools are installed in a clone only: voicectl imports them inside a command's
    function (or for type checking), never when its module loads, so the parser and every other
    command work without them."""
    loaded = []
    for path in part_files("voicectl"):
        for node in _module_level_imports(ast.parse(path.read_text()).body):
            for name in imported_names(node):
                if name.split(".")[0] == "voice_devtools":
                    loaded.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert loaded == []
    inside = {
        str(path.relative_to(ROOT))
        for path in part_files("voicectl")
        for node in imports(path)
        for name in imported_names(node)
        if name.split(".")[0] == "voice_devtools"
    }
    assert inside == {"voicectl/commands/local_runtime.py", "voicectl/commands/connect_replay.py"}
