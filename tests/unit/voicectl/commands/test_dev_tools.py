"""voicectl.commands.dev_tools: without the dev tools, ``local-runtime`` and ``connect-replay`` exit
2 with one line saying how to install them; their parsers (and ``voicectl --help``) need none of
the dev tools."""

from __future__ import annotations

import sys

import pytest

from voicectl import cli
from voicectl.cli import UsageError
from voicectl.commands.dev_tools import INSTALL_HINT, dev_tools_required


@pytest.fixture
def no_dev_tools(monkeypatch):
    """As where only the project is installed: every import of :mod:`voice_devtools` fails."""
    for name in [name for name in sys.modules if name.split(".")[0] == "voice_devtools"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "voice_devtools", None)


@pytest.mark.parametrize(
    "argv",
    [
        ["local-runtime", "--endpoint", "voxtral-realtime=ws://127.0.0.1:8080"],
        ["connect-replay", "call.wav", "--url", "ws://127.0.0.1:8080/x"],
        # bare: the hint comes first, not a required option's error
        ["local-runtime"],
        ["connect-replay"],
    ],
)
def test_a_dev_tool_command_without_the_dev_tools_exits_2_saying_how_to_install_them(
    no_dev_tools, capsys, argv
):
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"voicectl {argv[0]}: this command needs the dev tools (voice_devtools), which are not "
        "installed: install them from a clone of the repository (`pip install -e devtools`, or "
        "`make deps`)\n"
    )


def test_with_the_dev_tools_their_arguments_are_required(capsys):
    for command in ("local-runtime", "connect-replay"):
        with pytest.raises(SystemExit) as exited:
            cli.main([command])
        assert exited.value.code == 2
        assert "the following arguments are required" in capsys.readouterr().err


def test_their_help_needs_no_dev_tools(no_dev_tools, capsys):
    for command in ("local-runtime", "connect-replay"):
        with pytest.raises(SystemExit) as exited:
            cli.main([command, "--help"])
        assert exited.value.code == 0
        assert f"usage: voicectl {command}" in capsys.readouterr().out


def test_only_a_missing_dev_tools_module_is_turned_into_the_hint():
    for missing in ("voice_devtools", "voice_devtools.local.runtime"):
        with pytest.raises(UsageError) as refused, dev_tools_required():
            raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)
        assert str(refused.value) == INSTALL_HINT
    with pytest.raises(ModuleNotFoundError) as other, dev_tools_required():
        raise ModuleNotFoundError("No module named 'hypercorn'", name="hypercorn")
    assert other.value.name == "hypercorn"
    with dev_tools_required():
        pass  # nothing missing: nothing raised
