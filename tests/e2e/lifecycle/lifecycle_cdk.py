"""Run the project's pinned CDK CLI against moto's server, and clean up after it; synthesize the
assemblies it deploys.

The CLI is ``node_modules/.bin/cdk``, the binary ``npx --no-install cdk`` resolves to (without npx's
own start-up, about a second per command).

How this CDK CLI version (aws-cdk 2.1148, AWS SDK for JavaScript v3) takes a custom endpoint, read
in ``node_modules/aws-cdk/lib/index.js``: every SDK client honours ``AWS_ENDPOINT_URL`` (and
per-service ``AWS_ENDPOINT_URL_<SERVICE>``); the CLI forces S3 path-style addressing when the S3
endpoint is a loopback host (``forceS3PathStyle``), and builds the ``TemplateURL`` it hands to
CloudFormation from the S3 endpoint (or ``AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION``) as
``<origin>/<bucket>/<key>``. Setting ``AWS_ENDPOINT_URL`` to ``http://localhost:<port>`` is
therefore enough for bootstrap, asset publishing, deploy and destroy.

Each command runs in its own process group with a timeout; the group is killed when the command
times out, and :func:`run_cdk` checks afterwards that no process of the group is left (the CLI
starts ``python3 app.py``, which starts a jsii Node.js runtime).

Synthesis: ``cdk synth`` starts Node.js, then ``python3 app.py``, which imports the app and starts a
jsii runtime before it builds anything (15-20 s on two cores, most of a lifecycle's time when every
step synthesized through the CLI). What a lifecycle tests is deploy, update and destroy with the
CLI, so the assemblies it deploys are synthesized in the test's process by
:func:`synthesize_assembly` (3-4 s once the process's jsii runtime is warm), with the context and
environment the CLI gives ``app.py``; the SageMaker lifecycle keeps one synthesis through the CLI
(its update, ``cdk deploy -c ...``, the documented way to change a setting), and ``make synth`` runs
through the CLI in tests/app/test_readme.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from tests.e2e.lifecycle.lifecycle_moto import ACCOUNT, FAKE_CREDENTIALS, REGION

ROOT = Path(__file__).resolve().parents[3]
#: The pinned CLI (package-lock.json), as ``npx --no-install cdk`` finds it.
CDK_CLI = ROOT / "node_modules" / ".bin" / "cdk"
log = logging.getLogger("lifecycle")

#: The context the CDK CLI adds to the app's own on every synthesis (``contextFromSettings`` in
#: ``node_modules/aws-cdk/lib/index.js``, with cdk.json's ``versionReporting: false``): path and
#: asset metadata on, version reporting off, bundling for every stack. Its
#: ``@aws-cdk/core:failSynthOnValidationErrors: false`` is left out: the CLI then fails on the
#: validation report itself; here the synthesis fails (the same findings).
CLI_CONTEXT: dict[str, Any] = {
    "aws:cdk:enable-path-metadata": True,
    "aws:cdk:enable-asset-metadata": True,
    "aws:cdk:disable-version-reporting": True,
    "aws:cdk:bundling-stacks": ["**"],
}

#: Upper bound for one CDK CLI command here (synthesis takes 8-15 s on two cores; a deploy a few
#: seconds).
COMMAND_TIMEOUT_S = 120
#: Time a finished command's process group gets to wind down before leftovers count as leaked.
WIND_DOWN_S = 5.0


class CdkCommandError(AssertionError):
    """A CDK CLI command exited non-zero or timed out; the message holds the command and its
    output's tail."""


@dataclass(frozen=True)
class CdkResult:
    """One finished command: its arguments, exit code, output, and wall time in seconds."""

    args: list[str]
    returncode: int
    output: str
    seconds: float


def cdk_environment(endpoint_url: str) -> dict[str, str]:
    """The environment of every CDK CLI command: moto's endpoint, fake credentials, no profile or
    config files.

    Everything ``AWS_*`` of the caller is dropped first, so real credentials can never reach a
    command.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(FAKE_CREDENTIALS)
    env.update(
        {
            "AWS_ENDPOINT_URL": endpoint_url,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
            # cdk.json's app command is `python3 app.py`: the project's virtual environment first.
            "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20,22",
            # The AWS SDK for JavaScript warns about Node 20 on every command; it says nothing about
            # this test.
            "NODE_NO_WARNINGS": "1",
            "CI": "true",
        }
    )
    return env


def run_cdk(
    args: list[str], endpoint_url: str, log_path: Path, timeout_s: float = COMMAND_TIMEOUT_S
) -> CdkResult:
    """Run ``cdk <args>`` (:data:`CDK_CLI`) in the project directory against ``endpoint_url``.

    The output (stdout and stderr together) is appended to ``log_path``.

    Raises:
        CdkCommandError: non-zero exit or timeout (the process group is killed), with the last 60
            lines of output.
        AssertionError: a process of the command's group is still alive ``WIND_DOWN_S`` after it
            exited.
    """
    command = [str(CDK_CLI), *args]
    log.info("$ %s", " ".join(command))
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=cdk_environment(endpoint_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        output, _ = process.communicate()
        raise CdkCommandError(
            f"`{' '.join(command)}` timed out after {timeout_s} s:\n{_tail(output)}"
        ) from None
    except BaseException:
        # Ctrl-C or pytest-timeout while the CLI runs: its group would go on retrying against a
        # stopped moto.
        _kill_group(process.pid)
        raise
    seconds = time.monotonic() - started
    with log_path.open("a") as sink:
        sink.write(
            f"$ {' '.join(command)}   (exit {process.returncode}, {seconds:.1f} s)\n{output}\n"
        )
    _assert_group_gone(process.pid)
    log.info("  exit %d in %.1f s", process.returncode, seconds)
    if process.returncode != 0:
        raise CdkCommandError(
            f"`{' '.join(command)}` exited {process.returncode}:\n{_tail(output)}"
        )
    return CdkResult(command, process.returncode, output, seconds)


def _tail(output: str, lines: int = 60) -> str:
    return "\n".join(output.splitlines()[-lines:])


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process exists that we may not signal: still alive
        return True
    return True


def _kill_group(pgid: int) -> None:
    with_signal = [signal.SIGTERM, signal.SIGKILL]
    for sig in with_signal:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + WIND_DOWN_S
        while time.monotonic() < deadline and _group_alive(pgid):
            time.sleep(0.1)


def _assert_group_gone(pgid: int) -> None:
    """Fail (after killing them) when processes of the command's group outlive it by more than
    WIND_DOWN_S."""
    deadline = time.monotonic() + WIND_DOWN_S
    while _group_alive(pgid):
        if time.monotonic() > deadline:
            _kill_group(pgid)
            raise AssertionError(
                f"processes of the CDK CLI's group {pgid} were still running {WIND_DOWN_S} s after "
                "it exited (killed now)"
            )
        time.sleep(0.1)


def bootstrap_target() -> str:
    """``aws://<account>/<region>`` of moto's default account."""
    return f"aws://{ACCOUNT}/{REGION}"


#: ``CDK_DEFAULT_ACCOUNT`` and ``CDK_DEFAULT_REGION`` as the CLI sets them for ``app.py`` (moto's
#: account: the CLI asks STS for the caller's); set around an in-process synthesis with
#: ``unittest.mock.patch.dict``, which restores the environment afterwards.
CLI_ENVIRONMENT = {"CDK_DEFAULT_ACCOUNT": ACCOUNT, "CDK_DEFAULT_REGION": REGION}


def cli_lookups(endpoint_url: str) -> dict[str, Any]:
    """The context values the CLI's context providers look up for this app at ``endpoint_url``,
    keyed as the CLI keys them (and writes them to cdk.context.json): the Availability Zones of
    moto's account and Region, which the Foundation stack's VPC reads (network.mode=vpc). The CLI's
    provider lists DescribeAvailabilityZones' zones in the ``available`` state
    (``AZContextProviderPlugin`` in ``node_modules/aws-cdk/lib/index.js``)."""
    import boto3

    ec2 = boto3.client(
        "ec2",
        endpoint_url=endpoint_url,
        region_name=REGION,
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    zones = [
        z["ZoneName"]
        for z in ec2.describe_availability_zones()["AvailabilityZones"]
        if z["State"] == "available"
    ]
    return {f"availability-zones:account={ACCOUNT}:region={REGION}": zones}


def synthesize_assembly(outdir: Path, overrides: dict[str, Any], endpoint_url: str) -> Path:
    """Synthesize the app with cdk.json's context plus ``overrides`` (what ``cdk synth -c
    KEY=VALUE`` is given) into the cloud assembly ``outdir``, in this process, as the CLI would
    against ``endpoint_url``: with :data:`CLI_CONTEXT`, the CLI's environment and the values its
    context providers look up (:func:`cli_lookups`). The templates are held to AWS's rules like
    every app the tests synthesize (``tests.conftest.synthesize``). Returns ``outdir``, for ``cdk
    ... --app outdir``.

    Raises:
        AssertionError: the app asked for a context value :func:`cli_lookups` does not provide (the
            CLI would have looked it up; here the assembly would hold the lookup's dummy value).
    """
    from tests.conftest import synthesize

    outdir.mkdir(parents=True, exist_ok=True)
    with mock.patch.dict(os.environ, CLI_ENVIRONMENT):
        synthesize(outdir, {**CLI_CONTEXT, **cli_lookups(endpoint_url), **overrides})
    missing = json.loads((outdir / "manifest.json").read_text()).get("missing", [])
    assert not missing, (
        f"the app looks up context that lifecycle_cdk.cli_lookups does not provide: {missing}"
    )
    return outdir


@dataclass
class Phases:
    """Wall time of each phase of one lifecycle, in seconds, logged by :meth:`report` (figures, not
    assertions)."""

    name: str
    seconds: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.monotonic() - start

    def report(self) -> None:
        total = time.monotonic() - self.started
        log.info(
            "%s figures (s): %s, total %.1f",
            self.name,
            ", ".join(f"{k} {v:.1f}" for k, v in self.seconds.items()),
            total,
        )


#: The image manifest :func:`publish_image_assets` puts under an asset's tag: Docker's image
#: manifest, version 2, schema 2 (a config blob and no layer; digests of empty content).
IMAGE_MANIFEST = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
    "config": {
        "mediaType": "application/vnd.docker.container.image.v1+json",
        "size": 0,
        "digest": "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    },
    "layers": [],
}


def publish_image_assets(aws: Any, assembly: Path) -> dict[str, str]:
    """Put an image under the tag of every Docker image asset of ``assembly`` in its bootstrap
    repository, as a previous ``cdk deploy`` would have published it; {stack name: image URI}.

    Why: there is no Docker engine here, and the CLI builds and pushes an image asset only when
    DescribeImages finds no image under its tag in the destination repository (cdk-assets'
    ``ContainerImageAssetHandler``, ``destinationAlreadyExists``, in
    ``node_modules/aws-cdk/lib/index.js``); with the tag there it goes on to deploy. The image
    itself is not built here: the tests of its Dockerfile and build context are its check.
    """
    images: dict[str, str] = {}
    manifest = json.loads((assembly / "manifest.json").read_text())
    for artifact_id, artifact in manifest["artifacts"].items():
        if artifact["type"] != "cdk:asset-manifest":
            continue
        assets = json.loads((assembly / artifact["properties"]["file"]).read_text())
        for image in assets.get("dockerImages", {}).values():
            for destination in image["destinations"].values():
                repository, tag = destination["repositoryName"], destination["imageTag"]
                found = aws.ecr.list_images(repositoryName=repository)["imageIds"]
                if not any(i.get("imageTag") == tag for i in found):
                    aws.ecr.put_image(
                        repositoryName=repository,
                        imageTag=tag,
                        imageManifest=json.dumps(IMAGE_MANIFEST),
                    )
                (described,) = aws.ecr.describe_repositories(repositoryNames=[repository])[
                    "repositories"
                ]
                images[artifact_id.removesuffix(".assets")] = f"{described['repositoryUri']}:{tag}"
    return images
