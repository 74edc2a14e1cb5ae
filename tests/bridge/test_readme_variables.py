"""services/bridge/README.md's table of variables against the contract (contracts/bridge_env.py):
a variable the bridge reads has its row, and a row names a variable the bridge reads."""

from __future__ import annotations

import re
from pathlib import Path

from contracts.bridge_env import OFFLINE_ENVIRONMENT, VLLM_ENV_PREFIX, BridgeEnvironment

README = Path(__file__).resolve().parents[2] / "services" / "bridge" / "README.md"
#: Read by the entrypoint only (its test hook), not a field of the contract.
ENTRYPOINT_ONLY = {"VLLM_COMMAND"}


def table_variables() -> dict[str, str]:
    """``{variable: its row's default}`` from the table under "Settings (environment variables)"."""
    section = README.read_text().split("## Settings (environment variables)", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    found: dict[str, str] = {}
    for row in rows:
        names, default = row.split(" | ")[0], row.split(" | ")[1]
        for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", names):
            found[name] = default
    return found


def contract_variables() -> set[str]:
    """Every variable of BridgeEnvironment but vLLM's flags (the README's paragraph on
    ``SM_VLLM_<NAME>`` covers them)."""
    variables = set(OFFLINE_ENVIRONMENT)
    for name in BridgeEnvironment.__dataclass_fields__:
        if name != "offline":
            variables.add(BridgeEnvironment.variable(name))
    return {name for name in variables if not name.startswith(VLLM_ENV_PREFIX)}


def test_every_variable_the_bridge_reads_has_a_row_and_every_row_is_one():
    rows, variables = set(table_variables()), contract_variables() | ENTRYPOINT_ONLY
    assert not variables - rows, (
        f"variables of contracts/bridge_env.py with no row in {README.name}'s table: "
        f"{sorted(variables - rows)}"
    )
    assert not rows - variables, f"rows for no variable of the contract: {sorted(rows - variables)}"


def test_the_rows_defaults_are_the_contracts():
    """Where the contract's default is a plain value, the row shows it."""
    defaults = BridgeEnvironment.from_env({})
    shown = table_variables()
    for name in BridgeEnvironment.__dataclass_fields__:
        if name == "offline":
            continue
        variable = BridgeEnvironment.variable(name)
        value = getattr(defaults, name)
        if variable.startswith(VLLM_ENV_PREFIX) or value is None or variable == "MAX_STREAMS":
            continue
        assert variable in shown, f"{variable} has no row in {README.name}'s table"
        text = f"{value:g}" if isinstance(value, float) else str(value)
        assert f"`{text}`" in shown[variable], (variable, text, shown[variable])
