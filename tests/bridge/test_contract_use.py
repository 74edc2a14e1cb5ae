"""Every field of the bridge's contract (contracts/bridge_env.py) is read by the bridge: a setting
that reaches both templates while the bridge ignores it fails here."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from contracts.bridge_env import VLLM_ENV_PREFIX, BridgeEnvironment

ROOT = Path(__file__).resolve().parents[2]


def names_read() -> set[str]:
    """Attribute names and string constants in the bridge's modules, and the attributes the
    contract's own properties read (``self.session_limit_fraction``)."""
    read: set[str] = set()
    for path in (ROOT / "services" / "bridge").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                read.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                read.add(node.value)
    contract = ast.parse((ROOT / "contracts" / "bridge_env.py").read_text())
    for node in ast.walk(contract):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            read.add(node.attr)
    return read


def test_every_setting_of_the_contract_is_read_by_the_bridge():
    fields = dataclasses.fields(BridgeEnvironment)
    # Read by others than the bridge's code: vLLM's flags (the entrypoint passes every SM_VLLM_*
    # variable on as a flag) and the offline switch (its variables are the libraries').
    passed_on = {
        item.name
        for item in fields
        if item.name == "offline"
        or BridgeEnvironment.variable(item.name).startswith(VLLM_ENV_PREFIX)
    }
    unread = {item.name for item in fields} - passed_on - names_read()
    assert not unread, f"fields no code of services/bridge/ reads: {sorted(unread)}"
