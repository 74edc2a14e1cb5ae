"""The README and the pages it leads to (``docs/*.md``, ``CONTRIBUTING.md``) work as written from a
fresh clone (after ``make deps``).

Convention for their shell blocks (```` ```sh ```` or ```` ```bash ````):

- A block preceded by the line ``<!-- readme-shell: offline -->`` needs no AWS account, credentials
  or Docker: this test runs each of its command lines from the repository root, as written, and
  expects exit code 0. Lines of :data:`NOT_RUN` are left out, with the reason given there.
- Every other shell block needs AWS (or a running ``make local``) and is only syntax-checked with
  ``bash -n``, after replacing ``<placeholders>`` (``<bucket>``, ``<40-character commit>``) with a
  word, since a reader types them.

Also checked, on every page: lines of at most 120 characters, links that resolve (files, and
headings of the page or of the page linked to), every repository path a page names exists, every
``make <target>`` a page names exists in the Makefile and in ``make help``, every Python block
compiles and is run by the test named in :data:`PYTHON_RUNNERS`; and every ``voicectl`` subcommand's
``--help`` has a description. The README is a front page: under :data:`FRONT_PAGE_LINES` lines, with
a table that leads to every page.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: The README and the pages it leads to: every check below covers each of them.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "CONTRIBUTING.md"]
#: The READMEs of the packages, whose shell blocks and make targets are checked too.
READMES = [
    *PAGES,
    ROOT / "voicectl" / "README.md",
    ROOT / "services" / "README.md",
    ROOT / "services" / "bridge" / "README.md",
]
#: The construct library's READMEs (its index and one per family, with the props tables): their
#: links, the paths they name and their line lengths are checked like the pages'.
LIBRARY_READMES = sorted((ROOT / "constructs_lib").glob("**/README.md"))
MAX_LINE = 120
#: The README stays a front page: what it is, the picture, the quick start, the deploy path, where
#: to go next.
FRONT_PAGE_LINES = 400

#: Page -> heading of the section whose Python blocks a test runs, and that test.
PYTHON_RUNNERS = {
    "docs/clients.md": (
        "Call the endpoints from your own code",
        "tests/e2e/local/test_local_readme_examples.py",
    ),
    "docs/frameworks.md": ("Example bots", "tests/e2e/local/test_local_frameworks_docs.py"),
    "docs/constructs.md": (
        "Use the constructs in your own CDK app",
        "tests/e2e/constructs/test_constructs_docs_example.py",
    ),
}

#: Command lines of offline blocks that the test does not run, and why.
NOT_RUN = {
    "make test": "the test suite itself (this test is part of it)",
    "make local": "runs until Ctrl-C; tests/e2e/local/test_local_make_local.py runs it and the "
    "commands it prints",
}

OFFLINE_MARK = "<!-- readme-shell: offline -->"


def shell_blocks(text: str) -> list[tuple[int, bool, str]]:
    """``(line number, offline, body)`` of every ```sh / ```bash block in ``text``."""
    blocks = []
    for match in re.finditer(r"^```(?:sh|bash)\n(.*?)^```$", text, flags=re.S | re.M):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        blocks.append(
            (text[: match.start()].count("\n") + 1, before.strip() == OFFLINE_MARK, match.group(1))
        )
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


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def page_text(name: str) -> str:
    return (ROOT / name).read_text()


@pytest.mark.parametrize("page", [*PAGES, *LIBRARY_READMES], ids=page_id)
def test_every_line_is_at_most_120_characters(page):
    long = [
        (number, len(line))
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if len(line) > MAX_LINE
    ]
    assert long == [], f"{page_id(page)} lines over {MAX_LINE} characters (line, length): {long}"


def _anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation other than '-' and '_' dropped, spaces to
    '-'."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def headings(text: str) -> list[tuple[int, str, str]]:
    """``(level, title, anchor)`` of the headings outside code blocks, anchors made unique as GitHub
    does."""
    found, seen = [], {}
    prose = re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)
    for match in re.finditer(r"^(#{1,6}) (.+)$", prose, flags=re.M):
        anchor = _anchor(match.group(2))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.append(
            (len(match.group(1)), match.group(2), f"{anchor}-{count}" if count else anchor)
        )
    return found


def links(text: str) -> list[str]:
    """The targets of the Markdown links of ``text`` (outside code blocks)."""
    prose = re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)
    return re.findall(r"\]\(([^()\s]+)\)", prose)


@pytest.mark.parametrize("page", [*READMES, *LIBRARY_READMES], ids=page_id)
def test_every_link_resolves_to_a_file_and_a_heading(page):
    broken = []
    for target in links(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:: not fetched here
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if (
            not file.exists()
            or not file.is_relative_to(ROOT)
            or (anchor and anchor not in {a for _, _, a in headings(file.read_text())})
        ):
            broken.append(target)
    assert broken == [], f"{page_id(page)}: links to files or sections that do not exist"


#: Where a repository path named in a page begins (``constructs_lib/facts/capacity.py``,
#: ``tests/e2e/local/``).
TOP_LEVEL = (
    "app.py",
    "cdk.json",
    "config/",
    "stacks/",
    "constructs_lib/",
    "contracts/",
    "services/",
    "voicectl/",
    "tests/",
    "bench/",
    "docs/",
    ".ci/",
)


@pytest.mark.parametrize("page", [*PAGES, *LIBRARY_READMES], ids=page_id)
def test_every_repository_path_a_page_names_exists(page):
    """A file moved or renamed leaves the pages that name it wrong: this names them."""
    named = {
        path
        for path in re.findall(r"`([^`\s<>*]+)`", page.read_text())
        if path.startswith(TOP_LEVEL) and ("/" in path or path.endswith(".py"))
    }
    assert {
        path for path in named if not (ROOT / path.split(":")[0]).exists()
    } == set()  # path:name


@pytest.mark.parametrize("page", PAGES[1:], ids=page_id)
def test_each_page_has_one_title_and_a_contents_list_if_it_has_one(page):
    text = page.read_text()
    found = headings(text)
    assert found[0][0] == 1 and [level for level, _, _ in found].count(1) == 1, "one # title, first"
    if "\n## Contents\n" in text:
        toc = text.split("## Contents\n", 1)[1].split("\n## ", 1)[0]
        listed = re.findall(r"^\s*- \[(.+)\]\(#([^)]+)\)$", toc, flags=re.M)
        assert listed == [(t, a) for level, t, a in found if level in (2, 3) and t != "Contents"]


def test_the_readme_is_a_front_page_that_leads_to_every_page():
    text = readme_text()
    assert len(text.splitlines()) < FRONT_PAGE_LINES
    assert [title for level, title, _ in headings(text) if level == 2] == [
        "Quick start",
        "Deploy",
        "Where to go next",
    ]
    table = text.split("## Where to go next\n", 1)[1]
    listed = re.findall(r"^\| \[[^]]+\]\(([^)#]+)\) \| .+ \|$", table, flags=re.M)
    assert sorted(listed) == sorted({page_id(page) for page in READMES[1:]})


def test_the_deploy_path_is_one_numbered_list_of_steps_and_the_runbook_is_gone():
    deploy = page_text("docs/deploy.md")
    steps = re.findall(r"^## (\d+)\. ", deploy, flags=re.M)
    assert steps == [str(n) for n in range(1, len(steps) + 1)] and len(steps) >= 10
    for needed in (
        "aws secretsmanager create-secret",
        "make bootstrap",
        "make deploy",
        "voxtral.image_uri",
        "voxtral.hf_token_secret_arn",
        "voicectl transcribe",
        "voicectl speak",
        "make destroy",
        "voicectl cost",
        "prodview-",
        "Idle endpoints bill every hour",
    ):
        assert needed in deploy, needed
    # The front page gives the same path in short, each step a link to its section.
    readme_deploy = readme_text().split("## Deploy\n", 1)[1].split("\n## ", 1)[0]
    assert (
        "Idle endpoints bill every hour" in readme_deploy
        and "make local-lifecycle" in readme_deploy
    )
    steps_linked = re.findall(r"\(docs/deploy\.md#(\d+)-", readme_deploy)
    assert steps_linked == [str(n) for n in range(1, len(steps) + 1)]
    for page in PAGES:
        text = page.read_text()
        assert (
            "Runbook" not in text and "## Deploying to AWS" not in text and "to fill in" not in text
        ), page.name


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_python_block_compiles_and_is_run_by_a_test(page):
    text = page.read_text()
    blocks = re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)
    for block in blocks:
        compile(block, page_id(page), "exec")
    if page_id(page) not in PYTHON_RUNNERS:
        assert blocks == [], f"{page_id(page)} has Python blocks that no test runs (PYTHON_RUNNERS)"
        return
    heading, runner = PYTHON_RUNNERS[page_id(page)]
    assert f"# {heading}\n" in text and heading in (ROOT / runner).read_text()
    section = text.split(f"# {heading}\n", 1)[1].split("\n## ", 1)[0]
    assert blocks and all(block in section for block in blocks), (
        "a Python block outside the section the test runs"
    )


@pytest.mark.parametrize("readme", READMES, ids=page_id)
def test_every_shell_block_is_valid_bash(readme):
    blocks = shell_blocks(readme.read_text())
    assert blocks or readme != README, "the README has no shell block"
    for line, _, body in blocks:
        typed = re.sub(r"<[^<>\n]+>", "PLACEHOLDER", body)
        done = subprocess.run(["bash", "-n"], input=typed, capture_output=True, text=True)
        assert done.returncode == 0, f"{readme.name} line {line}: {done.stderr}"


def offline_commands() -> list[tuple[str, str]]:
    """``("page:line", command)`` of every offline block of every page."""
    commands = []
    for page in PAGES:
        for line, offline, body in shell_blocks(page.read_text()):
            if offline:
                commands += [
                    (f"{page_id(page)}:{line}", command)
                    for command in command_lines(body)
                    if command not in NOT_RUN
                ]
    return commands


def test_the_offline_blocks_are_marked_and_not_empty():
    commands = [command for _, command in offline_commands()]
    assert {
        "make synth",
        "make help",
        ".venv/bin/voicectl --help",
        ".venv/bin/voicectl capacity",
    } <= set(commands)
    skipped = [
        command
        for page in PAGES
        for line, offline, body in shell_blocks(page.read_text())
        if offline
        for command in command_lines(body)
        if command in NOT_RUN
    ]
    assert sorted(skipped) == sorted(NOT_RUN)  # a reason for each, and each still in a page


#: Offline commands that run the CDK CLI end to end (node, a Python of their own, a whole synth:
#: about 11 s of CPU): the e2e tier runs them (make test), make test-fast leaves them out.
END_TO_END_COMMANDS = {"make synth"}


@pytest.mark.parametrize(
    "line,command",
    [
        pytest.param(
            line, command, marks=[pytest.mark.e2e] if command in END_TO_END_COMMANDS else []
        )
        for line, command in offline_commands()
    ],
    ids=lambda value: str(value),
)
def test_offline_commands_run_as_written(line, command):
    done = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, f"{line}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def test_the_capacity_report_in_the_docs_is_what_the_command_prints():
    text = page_text("docs/capacity-and-cost.md")
    shown = (
        text.split(".venv/bin/voicectl capacity ", 1)[1]
        .split("```\n\n```\n", 1)[1]
        .split("```", 1)[0]
    )
    printed = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "voicectl"), "capacity"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == printed


def test_the_capacity_comparison_in_the_docs_is_what_the_command_prints():
    """The docs' table of instance types is the command's output for the defaults, offline: the
    dated price table's figures, and the line saying they are."""
    text = page_text("docs/capacity-and-cost.md")
    shown = (
        text.split(".venv/bin/voicectl capacity --compare ", 1)[1]
        .split("```\n\n```\n", 1)[1]
        .split("```", 1)[0]
    )
    printed = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "voicectl"), "capacity", "--compare"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == printed
    assert (
        "the price table shipped with voicectl (voicectl/operations/price_table.py), us-east-1, "
        "recorded\n"
    ) in shown
    # The prose quotes the table: the default's and the production pick's cost per live stream-hour.
    assert "sagemaker ml.g6.xlarge    L4            4 (1-8)          compute" in shown
    assert "(USD 0.10 against 0.25 in the table)" in text
    rows = {
        line.split()[1]: line.split()
        for line in shown.splitlines()
        if line.startswith("sagemaker ")
    }
    assert (rows["ml.g6e.xlarge"][-2], rows["ml.g6.xlarge"][-2]) == ("0.1011", "0.2515")


def make_help() -> str:
    return subprocess.run(
        ["make", "--no-print-directory", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_every_make_target_the_pages_name_is_in_make_help_and_the_makefile():
    named = set()
    for readme in READMES:
        # in inline code (`make synth`) or at the start of a line of a code block
        named |= set(re.findall(r"(?:`|^)make ([a-z][a-z-]*)\b", readme.read_text(), flags=re.M))
    listed = set(re.findall(r"^  ([a-z-]+) ", make_help(), flags=re.M))
    defined = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
    assert {"deps", "mic-deps", "synth", "test", "local", "deploy", "destroy", "verify"} <= named
    assert named - listed == set(), "named in a page but missing from `make help`"
    assert named - defined == set(), "named in a page but not a Makefile target"
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
    assert {
        "voicectl transcribe",
        "voicectl speak",
        "voicectl preflight",
        "voicectl verify",
        "voicectl cost",
    } <= {name for name, _, _ in found}
    missing = [
        name
        for name, sub, help_line in found
        if not (sub.description or "").strip() or not help_line
    ]
    assert missing == [], "subcommands without a description (--help) or a one-line help (the list)"


def test_the_instance_pool_examples_load_over_the_defaults():
    """A reader pastes `-c voxtral.instance_pools=...` alone: the first pool must be the default
    instance type (the settings refuse pools that do not start with it)."""
    import json

    from config.settings import load_settings

    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    examples = [
        example
        for page in PAGES
        for example in re.findall(
            r"`-c ((?:voxtral|sonic)\.instance_pools)=([^` ]+)`", page.read_text()
        )
    ]
    assert examples
    for key, value in examples:
        load_settings({**context, key: value})  # raises SettingsError naming the problem
