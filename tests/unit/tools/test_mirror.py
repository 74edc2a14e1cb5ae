"""Tests mirror the tree (CONTRIBUTING.md, "Tests"): every module of ``contracts/``, ``config/``,
``constructs_lib/``, ``voicectl/``, the services' packages the wheel carries (the Connect consumer,
the Lambda handlers, the model staging build) and the project's tooling ``tools/`` has its own test
file at the same path under ``tests/unit/`` (``tools/<path>/`` under ``tests/unit/tools/<path>/``),
unless
it is a pure re-export (a package's ``__init__`` or a ``__main__`` that only imports and calls) or
on the short exemption list below, each entry with the reason and the tests that cover it instead.
A new module without either fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

#: The folders mirrored under ``tests/unit/``: the packages, and the project's tooling ``tools/``
#: (the rule book and the scripts the Makefile runs).
PACKAGES = (
    "contracts",
    "config",
    "constructs_lib",
    "voicectl",
    "voice_client",
    "services/connect_consumer",
    "services/handlers",
    "services/model_staging",
    "devtools/voice_devtools",
    "tools",
)

#: Folders whose modules' tests sit one level up: the staging build's package (``stage_model/``) is
#: its build folder's only package, so ``tests/unit/services/model_staging/test_<module>.py``
#: mirror it.
COLLAPSED = {
    "devtools/voice_devtools": "devtools",
    "services/model_staging/stage_model": "services/model_staging",
}

#: Modules without a mirror file of their own: {path or folder/: why, and which tests cover it}.
#: Keep it short; CONTRIBUTING.md lists the same entries.
EXEMPT = {
    "devtools/voice_devtools/local/": "make local's runtime and its stand-ins are servers; "
    "tests/e2e/local runs them (fake vLLM, SigV4, the front door, tiny Voxtral, Sonic) on loopback",
}


def modules() -> list[str]:
    return sorted(
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "__pycache__" not in path.parts
    )


def mirror(module: str) -> str:
    """The test file of ``module`` (a path relative to the root):
    ``tests/unit/<folder>/test_<name>.py``, where ``<name>`` drops leading and trailing underscores
    (a package's ``__init__.py`` is ``test_init.py``, a private ``_gate.py`` is ``test_gate.py``, as
    the bridge's ``__main__.py`` is ``test_main.py``), a Lambda handler's ``<function>/index.py`` is
    its folder's ``test_<function>.py``."""
    path = Path(module)
    folder, name = str(path.parent), path.stem
    if name == "index":
        folder, name = str(path.parent.parent), path.parent.name
    folder = COLLAPSED.get(folder, folder)
    return f"tests/unit/{folder}/test_{name.strip('_')}.py"


def is_re_export(module: str) -> bool:
    """True when the module holds nothing to test: a docstring, imports, ``__all__`` and calls of
    what it imports (``main()``, ``if __name__ == "__main__": ...``)."""
    for node in ast.parse((ROOT / module).read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, (ast.Constant, ast.Call)):
            continue
        if isinstance(node, ast.Raise) or (
            isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
        ):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and ast.unparse(node).startswith(
            "__all__"
        ):
            continue
        return False
    return True


def exemption(module: str) -> str | None:
    return next(
        (key for key in EXEMPT if module == key or (key.endswith("/") and module.startswith(key))),
        None,
    )


def test_the_mirror_path_of_a_module():
    assert mirror("contracts/bridge_env.py") == "tests/unit/contracts/test_bridge_env.py"
    assert mirror("config/settings.py") == "tests/unit/config/test_settings.py"
    assert (
        mirror("voice_client/realtime/auth.py") == "tests/unit/voice_client/realtime/test_auth.py"
    )
    assert (
        mirror("constructs_lib/facts/__init__.py") == "tests/unit/constructs_lib/facts/test_init.py"
    )
    assert (
        mirror("services/handlers/connect_start/index.py")
        == "tests/unit/services/handlers/test_connect_start.py"
    )
    assert (
        mirror("services/handlers/cleanup/cfn_response.py")
        == "tests/unit/services/handlers/cleanup/test_cfn_response.py"
    )
    assert (
        mirror("services/model_staging/stage_model/hub.py")
        == "tests/unit/services/model_staging/test_hub.py"
    )
    assert mirror("tools/template_diff.py") == "tests/unit/tools/test_template_diff.py"
    assert mirror("tools/cfn_rules/aws_rules.py") == "tests/unit/tools/cfn_rules/test_aws_rules.py"
    assert mirror("tools/cfn_rules/_gate.py") == "tests/unit/tools/cfn_rules/test_gate.py"


def test_the_tooling_is_in_the_mirror_and_the_tests_are_not():
    """tools/' modules are checked like the packages' (tests/ is not: the tests themselves)."""
    assert {
        "tools/template_diff.py",
        "tools/staging_requirements.py",
        "tools/cfn_rules/_gate.py",
        "tools/cfn_rules/aws_rules.py",
    } <= set(modules())
    assert [module for module in modules() if module.startswith("tests/")] == []


def test_no_two_modules_share_a_mirror_file():
    """Dropping the underscores could give ``x.py`` and ``_x.py`` one test file: none do."""
    files = [mirror(module) for module in modules() if not is_re_export(module)]
    assert sorted({f for f in files if files.count(f) > 1}) == []


def test_a_re_export_is_told_from_a_module_with_code(tmp_path, monkeypatch):
    assert is_re_export("constructs_lib/network/__init__.py")
    assert is_re_export("voicectl/__main__.py")
    assert not is_re_export("constructs_lib/validation.py")
    assert not is_re_export(
        "voice_client/realtime/auth.py"
    )  # one constant, one class, one function


def has_tests(test_file: Path) -> bool:
    """True when ``test_file`` defines a test function (module level or in a ``Test*`` class): an
    empty file or one of helpers only is no mirror."""
    tree = ast.parse(test_file.read_text())
    nodes = [
        *tree.body,
        *(
            n
            for c in tree.body
            if isinstance(c, ast.ClassDef) and c.name.startswith("Test")
            for n in c.body
        ),
    ]
    return any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")
        for n in nodes
    )


def test_every_module_has_its_mirror_test_file_or_a_reasoned_exemption():
    missing = [
        f"{module}: no {mirror(module)}"
        for module in modules()
        if not (ROOT / mirror(module)).is_file()
        and not is_re_export(module)
        and not exemption(module)
    ]
    assert missing == []
    empty = [
        mirror(module)
        for module in modules()
        if (ROOT / mirror(module)).is_file() and not has_tests(ROOT / mirror(module))
    ]
    assert empty == [], "mirror files without a test function"


def test_a_mirror_file_without_a_test_function_is_told(tmp_path):
    (tmp_path / "test_empty.py").write_text(
        '"""Tests of nothing yet."""\n\nimport pytest\n\n\ndef helper():\n    pass\n'
    )
    (tmp_path / "test_class.py").write_text(
        "class TestThing:\n    def test_it(self):\n        assert 1\n"
    )
    assert not has_tests(tmp_path / "test_empty.py")
    assert has_tests(tmp_path / "test_class.py")
    assert has_tests(ROOT / "tests/unit/tools/test_mirror.py")


#: The bridge's modules and their test files (tests/bridge, CONTRIBUTING.md): ``test_<module>.py``;
#: the package's ``__init__`` holds only its docstring.
BRIDGE = ROOT / "services" / "bridge"
BRIDGE_EXEMPT: dict[str, str] = {}  # {module: why, and which tests cover it}: none today


def bridge_mirror(name: str) -> Path:
    return ROOT / "tests" / "bridge" / f"test_{name.strip('_')}.py"


def test_every_bridge_module_has_its_test_file_or_a_reasoned_exemption():
    names = sorted(path.stem for path in BRIDGE.glob("*.py") if path.stem != "__init__")
    assert [
        name for name in names if not bridge_mirror(name).is_file() and name not in BRIDGE_EXEMPT
    ] == []
    assert [
        name for name in BRIDGE_EXEMPT if bridge_mirror(name).is_file() or name not in names
    ] == []
    assert is_re_export("services/bridge/__init__.py")


def test_every_exemption_is_needed_and_listed_in_contributing():
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    for key, reason in EXEMPT.items():
        covered = [module for module in modules() if exemption(module) == key]
        assert covered, f"{key} is exempt but no such module exists"
        assert [module for module in covered if not (ROOT / mirror(module)).is_file()], (
            f"{key} is exempt but every module it names has a mirror file now: drop the exemption"
        )
        assert f"`{key}`" in contributing, f"CONTRIBUTING.md does not list the exemption of {key}"
        assert re.search(r"tests/(app|e2e)/", reason), (
            f"{key}: the reason names no tests that cover it"
        )
