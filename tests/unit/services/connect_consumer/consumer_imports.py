"""Print, as JSON, what the Connect consumer's process imports. The image tests run it as a script
in the project's environment, or in one made from requirements-connect.lock alone (so: the standard
library only, here).

Three passes, each adding to ``sys.modules``:

1. the process: ``python -m connect_consumer --check`` for each target (SageMaker, the ECS target's
   WebSocket), the service's clients built as :func:`connect_consumer.service.main` builds them,
   and one connection per target to a closed loopback port, which runs the connect and error paths
   (fake credentials: no AWS call);
2. every import statement of every module of ours loaded so far, in functions too (the lazy ones a
   run may not reach: a DynamoDB query, an SDK error type), followed through our own modules;
3. the distributions that own the modules loaded (``importlib.metadata.packages_distributions``).

Output: ``{"modules": [our files, relative to the root], "distributions": [...], "failed": [...]}``.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib
import importlib.metadata
import io
import json
import os
import re
import sys
from pathlib import Path

#: Our top-level packages (imported from the root, not installed).
OURS = ("voicectl", "voice_client", "connect_consumer", "config", "constructs_lib", "contracts")
#: A port nothing listens on (the discard service's; loopback only): refused at once.
CLOSED_PORT = 9
BASE_ENV = {
    "CALLS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/calls",
    "BUS_NAME": "transcripts",
    "TABLE_NAME": "calls",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "fake-secret-for-the-trace",
    "AWS_EC2_METADATA_DISABLED": "true",
}
TARGETS = {
    "sagemaker": {
        "ENDPOINT_NAME": "voxtral-realtime",
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2": f"https://127.0.0.1:{CLOSED_PORT}",
    },
    "ecs": {
        "ENDPOINT_URL": f"ws://127.0.0.1:{CLOSED_PORT}/invocations-bidirectional-stream",
        "TOKEN_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:token",
    },
}


class _Secrets:
    """Secrets Manager answering the bearer token (the ECS target's opener reads it at start)."""

    def get_secret_value(self, SecretId: str) -> dict:
        return {"SecretString": "t" * 32}


class _Session:
    """A boto3 session whose Secrets Manager is :class:`_Secrets`."""

    def __init__(self, session) -> None:
        self._session = session
        self.region_name = session.region_name

    def client(self, name: str, **kwargs):
        return _Secrets() if name == "secretsmanager" else self._session.client(name, **kwargs)


async def _run_target(target: str) -> None:
    import boto3

    from connect_consumer import service
    from connect_consumer.__main__ import main
    from connect_consumer.kvs import KvsMedia
    from connect_consumer.sink import AwsSink

    for name in {key for values in TARGETS.values() for key in values}:
        os.environ.pop(name, None)
    os.environ.update(TARGETS[target])
    with contextlib.redirect_stdout(io.StringIO()):
        assert await asyncio.to_thread(main, ["--check"]) == 0
    session = boto3.Session()
    session.client("sqs")
    AwsSink(session, bus_name=os.environ["BUS_NAME"], table_name=os.environ["TABLE_NAME"])
    KvsMedia(session).executor.shutdown()
    async with service.opener_from_env(_Session(session)) as opener:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(opener(), 10)


def _imports(path: Path, package: str) -> set[str]:
    """Absolute names of every module ``path`` imports anywhere (not under ``TYPE_CHECKING``);
    ``from x import y`` gives ``x`` and ``x.y``, a submodule or a name (the caller tells)."""
    tree = ast.parse(path.read_text())
    skipped = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _follow_imports(failed: list[str]) -> None:
    """Import every module our loaded modules name, following ours until nothing new loads."""
    seen: set[str] = set()
    while True:
        ours = [
            name
            for name, module in list(sys.modules.items())
            if name.split(".")[0] in OURS and getattr(module, "__file__", None) and name not in seen
        ]
        if not ours:
            return
        for name in ours:
            seen.add(name)
            path = sys.modules[name].__file__
            package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
            for imported in sorted(_imports(Path(path), package) - {"__future__"}):
                if imported in sys.modules:
                    continue
                try:
                    importlib.import_module(imported)
                except ModuleNotFoundError as error:
                    # ``from package import name`` where name is not a module is no import.
                    parent = imported.rpartition(".")[0]
                    if not (parent in sys.modules and error.name == imported):
                        failed.append(f"{imported} (from {name}): {error}")


def trace(root: Path) -> dict[str, list[str]]:
    os.environ.update(BASE_ENV)
    for target in TARGETS:
        asyncio.run(_run_target(target))
    failed: list[str] = []
    _follow_imports(failed)
    owners = importlib.metadata.packages_distributions()
    modules, distributions = set(), set()
    for name, module in list(sys.modules.items()):
        top = name.split(".")[0]
        if top not in OURS:
            distributions.update(
                re.sub(r"[-_.]+", "-", owner).lower() for owner in owners.get(top, [])
            )
        elif getattr(module, "__file__", None):
            modules.add(str(Path(module.__file__).resolve().relative_to(root)))
    distributions.discard("sagemaker-realtime-voice")  # this project, installed (editable) too
    return {"modules": sorted(modules), "distributions": sorted(distributions), "failed": failed}


if __name__ == "__main__":
    # The root (or the image's /app), not this script's folder, and services/ as the image's
    # PYTHONPATH: this checkout's consumer, not an installed (editable) one of another checkout.
    sys.path[:1] = [str(Path.cwd()), str(Path.cwd() / "services")]
    print(json.dumps(trace(Path.cwd().resolve()), indent=1))
