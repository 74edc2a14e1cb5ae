"""The consumer service's entry point: ``python -m connect_consumer`` (the image's), also installed
as the ``voice-connect-consumer`` script.

Without options it checks the environment, then runs :func:`connect_consumer.service.main` (which
``python -m connect_consumer.service`` runs without the check). ``--check`` is a dry start: it
checks the environment, loads the code of the target the environment names and builds its client,
and exits without a call to AWS. A missing or malformed variable exits with 2 and one line naming
it and what is allowed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping

#: The variables the service reads and what each holds (``--help``; docs/connect.md lists them).
ENVIRONMENT: dict[str, str] = {
    "CALLS_QUEUE_URL": "the SQS queue of calls to transcribe (required)",
    "BUS_NAME": "the EventBridge bus the transcripts go to (required)",
    "TABLE_NAME": "the DynamoDB table of calls, segments and checkpoints (required)",
    "MAX_CALLS": "calls one task transcribes at once (default 50)",
    "ENDPOINT_NAME": "target: the SageMaker endpoint (bidirectional streaming)",
    "ENDPOINT_URL": "target: the ECS target's wss:// URL, with TOKEN_SECRET_ARN",
    "TOKEN_SECRET_ARN": "the Secrets Manager secret of the ECS target's bearer token",
    "METRIC_DIMENSIONS": "a JSON object of the deployment's metric dimensions (the task sets it)",
    "AWS_DEFAULT_REGION": "the Region of the queue, bus, table, streams and endpoint (ECS sets it)",
}
REQUIRED = ("CALLS_QUEUE_URL", "BUS_NAME", "TABLE_NAME")
DEFAULT_MAX_CALLS = "50"
"""What the service takes without ``MAX_CALLS``."""
EXIT_USAGE = 2
"""Exit code of a missing or malformed variable (argparse's, for a usage error)."""


class EnvError(ValueError):
    """The environment names no usable configuration; the message names the variable."""


def target_of(env: Mapping[str, str]) -> tuple[str, str]:
    """``("sagemaker", endpoint name)`` or ``("ecs", url)``, after checking every variable.

    An empty variable counts as unset (the construct sets the other target's variables empty).

    Raises:
        EnvError: a required variable is unset, ``MAX_CALLS`` is not a whole number of at least 1,
            no target or both are set, or ``ENDPOINT_URL`` is not ws(s):// or lacks its secret.
    """
    missing = [name for name in REQUIRED if not env.get(name)]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise EnvError(
            f"{', '.join(missing)} {verb} not set; the service needs {', '.join(REQUIRED)}"
        )
    max_calls = env.get("MAX_CALLS", DEFAULT_MAX_CALLS)
    if not (max_calls.isascii() and max_calls.isdigit() and int(max_calls) >= 1):
        raise EnvError(f"MAX_CALLS={max_calls!r} is not a whole number of calls of at least 1")
    _check_dimensions(env.get("METRIC_DIMENSIONS") or "{}")
    name, url = env.get("ENDPOINT_NAME"), env.get("ENDPOINT_URL")
    targets = "ENDPOINT_NAME (SageMaker) or ENDPOINT_URL with TOKEN_SECRET_ARN (the ECS target)"
    if name and url:
        raise EnvError(f"both ENDPOINT_NAME and ENDPOINT_URL are set; set {targets}, not both")
    if name:
        return "sagemaker", name
    if not url:
        raise EnvError(f"no target: set {targets}")
    if not url.startswith(("wss://", "ws://")):
        raise EnvError(f"ENDPOINT_URL={url[:200]!r} is not a WebSocket URL (wss://HOST/PATH)")
    if not env.get("TOKEN_SECRET_ARN"):
        raise EnvError("ENDPOINT_URL is set without TOKEN_SECRET_ARN, its bearer token's secret")
    return "ecs", url


def _check_dimensions(text: str) -> None:
    """``METRIC_DIMENSIONS`` must be a JSON object of strings: every metric line carries it."""
    try:
        dimensions = json.loads(text)
    except ValueError:
        dimensions = None
    if not (
        isinstance(dimensions, dict)
        and all(isinstance(value, str) for value in dimensions.values())
    ):
        raise EnvError(
            f"METRIC_DIMENSIONS={text[:200]!r} is not a JSON object of strings "
            '(e.g. {"Deployment": "RealtimeVoice"})'
        )


async def _build_client(kind: str, region: str) -> None:
    """Load the code the target's connections run and build its client (no network call)."""
    if kind == "sagemaker":
        # The stream transport, and describe_error: the SDK's error types, which a failed stream
        # loads.
        from voice_client.sagemaker_client import create_client
        from voice_client.sagemaker_errors import describe_error  # noqa: F401
        from voice_client.sagemaker_stream import SageMakerStreamTransport  # noqa: F401

        client = await create_client(region, credentials_resolver=None)
        await client.close()
    else:
        # What WebSocketTransport.connect imports when it connects.
        import websockets.asyncio.client
        import websockets.exceptions  # noqa: F401


def check(env: Mapping[str, str]) -> str:
    """The dry start: returns the line ``--check`` prints.

    Raises:
        EnvError: see :func:`target_of`, or no AWS Region is configured.
    """
    kind, where = target_of(env)
    import boto3

    from connect_consumer import service  # noqa: F401 (everything the service imports)

    region = boto3.Session().region_name
    if not region:
        # boto3 reads AWS_DEFAULT_REGION, not AWS_REGION; ECS sets both in every task (Amazon ECS
        # developer guide, "Amazon ECS environment variables").
        raise EnvError("no AWS Region: set AWS_DEFAULT_REGION (ECS sets it in every task)")
    asyncio.run(_build_client(kind, region))
    target = f"SageMaker endpoint {where!r}" if kind == "sagemaker" else f"ECS target {where!r}"
    calls = env.get("MAX_CALLS", DEFAULT_MAX_CALLS)
    return f"ready: {target} in {region}; calls from {env['CALLS_QUEUE_URL']}, {calls} at once"


def parser() -> argparse.ArgumentParser:
    """The options (``--check``) and the help, which lists :data:`ENVIRONMENT`."""
    variables = "\n".join(f"  {name:<20}{text}" for name, text in ENVIRONMENT.items())
    arguments = argparse.ArgumentParser(
        prog="python -m connect_consumer",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The Amazon Connect transcription consumer: calls from the SQS queue, each\n"
        "call's audio from Kinesis Video Streams to the Voxtral endpoint, transcripts to\n"
        "EventBridge and DynamoDB.",
        epilog=f"environment:\n{variables}",
    )
    arguments.add_argument(
        "--check",
        action="store_true",
        help="check the environment and build the target's client, then exit (no AWS call)",
    )
    return arguments


def main(argv: list[str] | None = None) -> int:
    """Run the service (or ``--check``) and return the exit code."""
    options = parser().parse_args(argv)
    try:
        if options.check:
            print(f"connect_consumer: {check(os.environ)}")
            return 0
        target_of(os.environ)
    except EnvError as error:
        print(f"connect_consumer: {error}", file=sys.stderr)
        return EXIT_USAGE
    from connect_consumer.service import main as serve

    return serve()


if __name__ == "__main__":
    raise SystemExit(main())
