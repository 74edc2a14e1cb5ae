"""The README works as written from a fresh clone (after ``make deps``).

Convention for its shell blocks (```` ```sh ```` or ```` ```bash ````):

- A block preceded by the line ``<!-- readme-shell: offline -->`` needs no AWS account, credentials or Docker: this
  test runs each of its command lines from the repository root, as written, and expects exit code 0. Lines of
  :data:`NOT_RUN` are left out, with the reason given there.
- Every other shell block needs AWS (or a running ``make local``) and is only syntax-checked with ``bash -n``, after
  replacing ``<placeholders>`` (``<bucket>``, ``<40-character commit>``) with a word, since a reader types them.

Also checked: lines of at most 120 characters, a table of contents that lists every section and links that resolve,
every ``make <target>`` the README names exists in the Makefile and in ``make help``, and every ``voicectl``
subcommand's ``--help`` has a description.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
READMES = [README, ROOT / "voicectl" / "README.md", ROOT / "container" / "README.md"]
MAX_LINE = 120

#: Command lines of offline blocks that the test does not run, and why.
NOT_RUN = {
    "make test": "the test suite itself (this test is part of it)",
    "make local": "runs until Ctrl-C; tests/local/test_local_make_local.py runs it and the commands it prints",
}

OFFLINE_MARK = "<!-- readme-shell: offline -->"


def shell_blocks(text: str) -> list[tuple[int, bool, str]]:
    """``(line number, offline, body)`` of every ```sh / ```bash block in ``text``."""
    blocks = []
    for match in re.finditer(r"^```(?:sh|bash)\n(.*?)^```$", text, flags=re.S | re.M):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        blocks.append((text[:match.start()].count("\n") + 1, before.strip() == OFFLINE_MARK, match.group(1)))
    return blocks


def command_lines(body: str) -> list[str]:
    """The commands of a block: comments stripped, backslash continuations joined."""
    joined = re.sub(r"\\\n\s*", " ", body)
    commands = []
    for line in joined.splitlines():
        command = re.split(r"\s+#", line, maxsplit=1)[0].strip()
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


def readme_text() -> str:
    return README.read_text()


def test_every_line_is_at_most_120_characters():
    long = [(number, len(line)) for number, line in enumerate(readme_text().splitlines(), 1) if len(line) > MAX_LINE]
    assert long == [], f"README lines over {MAX_LINE} characters (line, length): {long}"


def _anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation other than '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def headings(text: str) -> list[tuple[int, str, str]]:
    """``(level, title, anchor)`` of the headings outside code blocks, anchors made unique as GitHub does."""
    found, seen = [], {}
    prose = re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)
    for match in re.finditer(r"^(#{1,6}) (.+)$", prose, flags=re.M):
        anchor = _anchor(match.group(2))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.append((len(match.group(1)), match.group(2), f"{anchor}-{count}" if count else anchor))
    return found


def test_the_table_of_contents_lists_every_section_in_order_and_every_link_resolves():
    text = readme_text()
    toc = text.split("## Contents\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\s*- \[(.+)\]\(#([^)]+)\)$", toc, flags=re.M)
    sections = [(title, anchor) for level, title, anchor in headings(text) if level in (2, 3) and title != "Contents"]
    assert listed == sections
    anchors = {anchor for _, _, anchor in headings(text)}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links - anchors == set(), "links to sections that do not exist"


def test_the_deploy_path_is_one_numbered_list_of_steps_and_the_runbook_is_gone():
    text = readme_text()
    deploy = text.split("## Deploy for real\n", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^### (\d+)\. ", deploy, flags=re.M)
    assert steps == [str(n) for n in range(1, len(steps) + 1)] and len(steps) >= 10
    for needed in ("aws secretsmanager create-secret", "make bootstrap", "make deploy", "voxtral.image_uri",
                   "voxtral.hf_token_secret_arn", "voicectl transcribe", "voicectl speak", "make destroy",
                   "voicectl cost", "prodview-", "Idle endpoints bill every hour"):
        assert needed in deploy, needed
    assert "Runbook" not in text and "## Deploying to AWS" not in text and "to fill in" not in text
    order = [title for level, title, _ in headings(text) if level == 2]
    assert [order.index(t) for t in ("Quick start", "Deploy for real", "Settings", "Operations", "Reference")] == \
        sorted(order.index(t) for t in ("Quick start", "Deploy for real", "Settings", "Operations", "Reference"))


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shell_block_is_valid_bash(readme):
    blocks = shell_blocks(readme.read_text())
    assert blocks or readme != README, "the README has no shell block"
    for line, _, body in blocks:
        typed = re.sub(r"<[^<>\n]+>", "PLACEHOLDER", body)
        done = subprocess.run(["bash", "-n"], input=typed, capture_output=True, text=True)
        assert done.returncode == 0, f"{readme.name} line {line}: {done.stderr}"


def offline_commands() -> list[tuple[int, str]]:
    commands = []
    for line, offline, body in shell_blocks(readme_text()):
        if offline:
            commands += [(line, command) for command in command_lines(body) if command not in NOT_RUN]
    return commands


def test_the_offline_blocks_are_marked_and_not_empty():
    commands = [command for _, command in offline_commands()]
    assert {"make synth", "make help", ".venv/bin/voicectl --help", ".venv/bin/voicectl capacity"} <= set(commands)
    skipped = [command for line, offline, body in shell_blocks(readme_text()) if offline
               for command in command_lines(body) if command in NOT_RUN]
    assert sorted(skipped) == sorted(NOT_RUN)  # a reason for each, and each still in the README


@pytest.mark.parametrize("line,command", offline_commands(), ids=lambda value: str(value))
def test_offline_commands_run_as_written(line, command):
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"README line {line}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def test_the_capacity_report_in_the_readme_is_what_the_command_prints():
    text = readme_text()
    shown = text.split(".venv/bin/voicectl capacity ", 1)[1].split("```\n\n```\n", 1)[1].split("```", 1)[0]
    printed = subprocess.run([str(ROOT / ".venv" / "bin" / "voicectl"), "capacity"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout
    assert shown == printed


def test_the_capacity_comparison_in_the_readme_is_what_the_command_prints():
    """The README's table of instance types (issue 28) is the command's output for the defaults, offline: the dated
    price table's figures, and the line saying they are."""
    text = readme_text()
    shown = text.split(".venv/bin/voicectl capacity --compare ", 1)[1].split("```\n\n```\n", 1)[1].split("```", 1)[0]
    printed = subprocess.run([str(ROOT / ".venv" / "bin" / "voicectl"), "capacity", "--compare"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    assert shown == printed
    assert "the price table shipped with voicectl (voicectl/price_table.py), us-east-1, recorded" in shown
    # The prose quotes the table: the default's and the production pick's cost per live stream-hour.
    assert "sagemaker ml.g6.xlarge    L4            4 (1-8)          compute" in shown
    assert "(USD 0.10 against 0.25 in the table)" in text
    rows = {line.split()[1]: line.split() for line in shown.splitlines() if line.startswith("sagemaker ")}
    assert (rows["ml.g6e.xlarge"][-2], rows["ml.g6.xlarge"][-2]) == ("0.1011", "0.2515")


def make_help() -> str:
    return subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout


def test_every_make_target_the_readmes_name_is_in_make_help_and_the_makefile():
    named = set()
    for readme in READMES:
        # in inline code (`make synth`) or at the start of a line of a code block
        named |= set(re.findall(r"(?:`|^)make ([a-z][a-z-]*)\b", readme.read_text(), flags=re.M))
    listed = set(re.findall(r"^  ([a-z-]+) ", make_help(), flags=re.M))
    defined = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
    assert {"deps", "mic-deps", "synth", "test", "local", "deploy", "destroy", "verify"} <= named
    assert named - listed == set(), "named in a README but missing from `make help`"
    assert named - defined == set(), "named in a README but not a Makefile target"
    assert listed <= defined


def test_every_voicectl_subcommand_has_a_description():
    from voicectl import cli

    parser = cli.build_parser()

    def walk(parser: argparse.ArgumentParser, path: str):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {choice.dest: choice.help for choice in action._choices_actions}
                for name, sub in action.choices.items():
                    yield f"{path} {name}", sub, helps.get(name)
                    yield from walk(sub, f"{path} {name}")

    found = list(walk(parser, "voicectl"))
    assert {"voicectl transcribe", "voicectl speak", "voicectl preflight", "voicectl verify", "voicectl cost"} <= \
        {name for name, _, _ in found}
    missing = [name for name, sub, help_line in found if not (sub.description or "").strip() or not help_line]
    assert missing == [], "subcommands without a description (--help) or a one-line help (the list)"


def test_the_instance_pool_examples_load_over_the_defaults():
    """A reader pastes `-c voxtral.instance_pools=...` alone: the first pool must be the default instance type
    (the settings refuse pools that do not start with it)."""
    import json

    from config.settings import load_settings

    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    examples = re.findall(r"`-c ((?:voxtral|sonic)\.instance_pools)=([^` ]+)`", README.read_text())
    assert examples
    for key, value in examples:
        load_settings({**context, key: value})  # raises SettingsError naming the problem
