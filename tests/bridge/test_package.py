"""The bridge uses websockets through its documented Sans-I/O API only: no subclass of a websockets
class, no name that starts with an underscore on anything but the bridge's own objects, and imports
from the documented modules. (websockets documents these under "Sans-I/O" and "Data structures":
https://websockets.readthedocs.io/en/stable/ reference/sansio/server.html, .../client.html,
.../datastructures.html, .../exceptions.html.)"""

from __future__ import annotations

import ast
from pathlib import Path

BRIDGE = Path(__file__).resolve().parents[2] / "services" / "bridge"
#: websockets modules the bridge may import from, and what.
ALLOWED_IMPORTS = {
    "websockets.server": {"ServerProtocol"},
    "websockets.client": {"ClientProtocol"},
    "websockets.protocol": {"State"},
    "websockets.frames": {"CloseCode", "Frame", "Opcode"},
    "websockets.http11": {"Request", "Response"},
    "websockets.datastructures": {"Headers"},
    "websockets.uri": {"WebSocketURI", "parse_uri"},
    "websockets.exceptions": {"InvalidHandshake"},
}


def modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(BRIDGE.glob("*.py"))]


def test_only_documented_websockets_names_are_imported():
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(alias.name.startswith("websockets") for alias in node.names), (
                    path.name,
                    ast.dump(node),
                )
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("websockets"):
                names = {alias.name for alias in node.names}
                assert names <= ALLOWED_IMPORTS.get(node.module, set()), (
                    path.name,
                    node.module,
                    names,
                )


def test_no_class_extends_a_websockets_class():
    websockets_names = set().union(*ALLOWED_IMPORTS.values())
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {base.id for base in node.bases if isinstance(base, ast.Name)}
                assert not bases & websockets_names, (path.name, node.name, bases)


def test_no_private_name_is_used_on_anything_but_the_bridges_own_objects():
    for path, tree in modules():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                owner = node.value
                assert isinstance(owner, ast.Name) and owner.id in {"self", "cls"}, (
                    f"{path.name}:{node.lineno}: .{node.attr} on {ast.unparse(owner)}"
                )
