"""Shared fixtures: each variant of the app (tests/app/variants.py) is synthesized once per test
session, for all of pytest-xdist's workers together (synthesis takes seconds)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.app.variants import CONNECT, CONNECT_INSTANCE, CONNECT_QUEUE, CONNECT_VPC  # noqa: F401 (tests import them from here)

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20,22")


def _share_botocore_data_loader() -> None:
    """One botocore data loader per data path for every session the tests make, in place of one per
    session.

    botocore gives each ``Session`` a loader of its own (``botocore.session.create_loader``), which
    parses the service models, endpoints.json and partitions again from their JSON: the moto tests
    make a session per client or per test, so about 0.3 s of CPU per test went to parsing the same
    files. A loader only reads files shipped with botocore (cached per instance, never written
    back), so sharing one changes no client: one session already shares it between all of its
    clients."""
    import botocore.loaders
    import botocore.session

    botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)


_share_botocore_data_loader()


def cdk_json_context() -> dict[str, Any]:
    """The ``context`` of cdk.json: what ``cdk synth`` uses when no ``-c`` is given."""
    return json.loads((ROOT / "cdk.json").read_text())["context"]


@dataclass
class Synthesized:
    """One synthesized app, as its files: the overrides it was synthesized with, its output
    directory (the cloud assembly: templates, manifest, validation report) and its templates by
    stack name. No live construct tree: a variant may have been synthesized by another pytest-xdist
    worker."""

    overrides: dict[str, Any]
    outdir: Path
    templates: dict[str, dict]

    def template(self, suffix: str) -> dict:
        """The template of the stack whose name ends with ``-<suffix>`` (Artifacts, Voxtral,
        Sonic)."""
        (name,) = [n for n in self.templates if n.endswith(f"-{suffix}")]
        return self.templates[name]

    @functools.cached_property
    def settings(self) -> Any:
        """The settings the app was built from, derived again from its context (what create_app does
        first)."""
        from config.settings import load_settings

        return load_settings({**cdk_json_context(), **self.overrides})

    def warnings(self, suffix: str) -> list[str]:
        """The text of each warning (``aws:cdk:warning``) on the stack whose name ends with
        ``-<suffix>``, as the cloud assembly records them (what
        ``Annotations.from_stack(...).find_warning`` reads)."""
        manifest = json.loads((self.outdir / "manifest.json").read_text())
        (artifact,) = [
            a
            for artifact_id, a in manifest["artifacts"].items()
            if a["type"] == "aws:cloudformation:stack" and artifact_id.endswith(f"-{suffix}")
        ]
        metadata = artifact.get("metadata", {})
        if "additionalMetadataFile" in artifact:
            metadata = json.loads((self.outdir / artifact["additionalMetadataFile"]).read_text())
        return [
            entry["data"]
            for entries in metadata.values()
            for entry in entries
            if entry["type"] == "aws:cdk:warning"
        ]


def synthesize(outdir: Path, overrides: dict[str, Any] | None = None) -> Synthesized:
    """Synthesize the app with cdk.json's context plus ``overrides`` into ``outdir``, and hold every
    template to AWS's rules (tools/cfn_rules: the rule book, botocore's API models, the
    Service Authorization Reference). Every variant any test synthesizes is checked this way, with
    no synthesis of its own. Tests take apps from the registry (tests/app/variants.py) through the
    fixture ``app_variant``, not from here.

    Raises:
        AssertionError: a template breaks a rule; the message lists each finding with its source.
    """
    from app import create_app
    from tools.cfn_rules._gate import template_findings

    context = {**cdk_json_context(), **(overrides or {})}
    app, _, voice_app = create_app(context, outdir=str(outdir))
    app.synth()
    files = {stack.stack_name: f"{stack.artifact_id}.template.json" for stack in voice_app.stacks}
    templates = {name: json.loads((outdir / file).read_text()) for name, file in files.items()}
    findings = template_findings(templates)
    if findings:
        raise AssertionError(
            f"the app synthesized with {overrides or {}} breaks AWS's rules:\n"
            + "\n".join(findings)
        )
    (outdir / STACKS_FILE).write_text(json.dumps(files))
    return Synthesized(dict(overrides or {}), outdir, templates)


#: Written into a variant's output directory once it is synthesized and checked: ``{stack name:
#: template file}``.
STACKS_FILE = "variant-stacks.json"
#: Written instead when a variant fails to synthesize or breaks a rule: the message every worker
#: then raises.
FAILED_FILE = "variant-failed.txt"


def _load(outdir: Path, overrides: dict[str, Any]) -> Synthesized:
    files = json.loads((outdir / STACKS_FILE).read_text())
    return Synthesized(
        dict(overrides),
        outdir,
        {name: json.loads((outdir / file).read_text()) for name, file in files.items()},
    )


def _synthesize_once(root: Path, name: str) -> Synthesized:
    """The variant ``name`` from ``root``: synthesized (and checked) by the first process to ask for
    it, under a file lock, and read from its files by every other (pytest-xdist's "Making
    session-scoped fixtures execute only once")."""
    from filelock import FileLock

    from tests.app.variants import VARIANTS

    overrides = VARIANTS[name].overrides
    outdir = root / name
    with FileLock(str(root / f"{name}.lock")):
        if (outdir / FAILED_FILE).exists():
            raise AssertionError((outdir / FAILED_FILE).read_text())
        if (outdir / STACKS_FILE).exists():
            return _load(outdir, overrides)
        outdir.mkdir(parents=True, exist_ok=True)
        try:
            return synthesize(outdir, overrides)
        except BaseException as error:
            (outdir / FAILED_FILE).write_text(
                f"variant {name!r} ({overrides}): {type(error).__name__}: {error}"
            )
            raise


@pytest.fixture(scope="session")
def app_variant(tmp_path_factory):
    """``app_variant(name)``: the app of the registry's variant ``name`` (tests/app/variants.py),
    synthesized once per session for every pytest-xdist worker together (the first to ask
    synthesizes it; the others read its files)."""
    # Under xdist each worker's base temp is a folder of the session's: their parent is shared by
    # the session only.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = tmp_path_factory.getbasetemp().parent if worker else tmp_path_factory.getbasetemp()
    root = root / "variants"
    root.mkdir(exist_ok=True)
    cache: dict[str, Synthesized] = {}

    def get(name: str) -> Synthesized:
        if name not in cache:
            cache[name] = _synthesize_once(root, name)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def synthesized(app_variant) -> Synthesized:
    """The app with the settings of cdk.json (variant ``default``)."""
    return app_variant("default")


@pytest.fixture(scope="session")
def synthesized_vpc(app_variant) -> Synthesized:
    """network.mode=vpc with everything else as in cdk.json: a new VPC and a key the app makes
    (variant ``vpc``)."""
    return app_variant("vpc")


@pytest.fixture(scope="session")
def synthesized_connect(app_variant) -> Synthesized:
    """connect.enabled with the storage config, the example flow and a key the app makes, public
    mode (variant ``connect``)."""
    return app_variant("connect")


@pytest.fixture(scope="session")
def synthesized_connect_vpc(app_variant) -> Synthesized:
    """As synthesized_connect, in network.mode=vpc with an existing VPC (variant
    ``connect_vpc``)."""
    return app_variant("connect_vpc")


@pytest.fixture(scope="session")
def ecs_app(app_variant) -> Synthesized:
    """Voxtral on ECS with the ECS defaults (variant ``ecs``)."""
    return app_variant("ecs")


@pytest.fixture(scope="session")
def ecs_variant(app_variant) -> Synthesized:
    """Voxtral on ECS with every ECS option set (variant ``ecs_options``)."""
    return app_variant("ecs_options")


@pytest.fixture(scope="session")
def ops_variant(app_variant) -> Synthesized:
    """Other operations settings (variant ``ops``: tests/app/variants.py's OPS)."""
    return app_variant("ops")


@pytest.fixture(scope="session")
def pools_variant(app_variant) -> Synthesized:
    """``ops`` with instance pools on both endpoints (variant ``ops_pools``)."""
    return app_variant("ops_pools")


class _CfnLint:
    """cfn-lint in this process, with the settings ``cfn-lint`` run from the project root reads:
    .cfnlintrc.yaml (the ignored rules, the project's rules appended from tools/cfn_rules).
    Its rules and resource schemas load once per process instead of once per command (a subprocess
    took 2 s to start and load them, per call)."""

    def __init__(self) -> None:
        from cfnlint.config import ConfigMixIn
        from cfnlint.runner.cli import Runner

        with contextlib.chdir(
            ROOT
        ):  # .cfnlintrc.yaml and its append_rules path are read from the current directory
            self.runner = Runner(ConfigMixIn(["--format", "json"]))
        #: Findings by the SHA-256 of a template's bytes: one template reached by several tests or
        #: variants is linted once (cfn-lint reads nothing but the file and the settings).
        self.by_content: dict[str, list[dict]] = {}

    def findings(self, path: Path) -> list[dict]:
        from cfnlint.config import ConfigMixIn
        from cfnlint.formatters import JsonFormatter
        from cfnlint.runner.template import run_template_by_file_paths

        content = path.read_bytes()
        key = hashlib.sha256(content).hexdigest()
        if key not in self.by_content:
            with contextlib.chdir(ROOT):
                config = ConfigMixIn(["--format", "json", str(path)])
                matches = sorted(
                    run_template_by_file_paths(config, self.runner.rules),
                    key=lambda m: (m.filename, m.linenumber, m.rule.id),
                )
            self.by_content[key] = json.loads(
                JsonFormatter().print_matches(matches, self.runner.rules, config=config) or "[]"
            )
        return [{**finding, "Filename": str(path)} for finding in self.by_content[key]]


@functools.cache
def _cfn_lint() -> _CfnLint:
    return _CfnLint()


def cfn_lint(*paths: Path | str) -> list[dict]:
    """What ``cfn-lint --format json PATH...`` run from the project root prints, as a list: each
    finding as cfn-lint's JSON formatter writes it (``Rule``, ``Level``, ``Message``, ``Location``,
    ``Filename``); empty when the templates are clean. Run in this process; a template with the same
    bytes as one already linted is not linted again."""
    return [finding for path in paths for finding in _cfn_lint().findings(Path(path))]


#: Folders whose tests run end to end (processes, servers, a browser, moto): they carry the marker
#: ``e2e``.
E2E = ROOT / "tests" / "e2e"


#: The cyclic collector's generation-0 threshold in a test process: allocations of tracked objects,
#: less their deallocations, between two young collections (``gc.set_threshold``; Python's default
#: is 700).
GC_THRESHOLD_0 = 10_000


def pytest_collection_finish(session) -> None:
    """Collect once, freeze what collection left, and run the cyclic collector less often (``gc``
    documentation: ``freeze``, ``set_threshold``), as the bridge does after its start-up
    (services/bridge/__main__.py).

    A test process holds a large heap that lives as long as it does: the test modules, aws_cdk's
    generated classes, moto's backends, cfn-lint's schemas. With Python's defaults, every full
    collection traversed all of it: measured with a gc callback in the three workers of make
    test-fast on two cores, 16 s of CPU in the collector (14 s in full collections), 9 s with this.
    No test depends on when garbage is collected: the ones that count objects or descriptors collect
    explicitly or wait for their counts."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD_0, *gc.get_threshold()[1:])


def pytest_unconfigure(config) -> None:
    """Collect once, then freeze the heap once the run is over, so that the interpreter's exit does
    not traverse it.

    At exit CPython runs full collections while it tears down the modules (``Py_FinalizeEx``); over
    a test process's heap that took 1.7-1.8 s of CPU per process (sampled with py-spy:
    ``gc_collect_main`` with no Python frame above it), and pytest-xdist waits for every worker to
    exit before it reports. One collection first (about 0.4 s) frees the tests' garbage cycles:
    frozen with them, soxr's extension (nanobind) reported its objects as leaked on stderr at exit.
    What is frozen is left to the operating system: nothing the tests wrote depends on it (files are
    closed, temporary folders removed by then, and the atexit handlers, such as jsii's kernel
    shutdown, still run). Measured from unconfigure to exit: 0.5 s, 0.16 s without the collection,
    about 1.9 s without either."""
    import gc

    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(items) -> None:
    """Mark every test under tests/e2e with ``e2e`` (make test-fast leaves them out: -m 'not
    e2e')."""
    for item in items:
        if E2E in Path(item.path).parents:
            item.add_marker(pytest.mark.e2e)
