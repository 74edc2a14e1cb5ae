"""``voicectl mic``: a local web page that transcribes the microphone live through the transcription
path.

    voicectl mic --endpoint NAME [--region R] [--profile P] [--port 7860] [--share]
    voicectl mic --url ws://HOST:PORT/invocations-bidirectional-stream

The page and its server: :mod:`voice_client.mic` (:func:`voice_client.mic.serve`); this module
serves it until Ctrl-C, its lines on the terminal prefixed ``voicectl mic:``.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from voice_client.mic import DEFAULT_PORT, MicSettings, serve
from voice_client.realtime import RealtimeError
from voicectl.commands.transcribe import (
    EXIT_FAILED,
    LIMITS_HELP,
    add_target_arguments,
    target_from_args,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``mic`` subcommand."""
    parser = subparsers.add_parser(
        "mic",
        help="transcribe your microphone live in a local web page",
        description=(
            "Serve a local web page (127.0.0.1) that streams your microphone "
            "through the Voxtral endpoint and shows the transcript as it grows. "
            "Needs the optional Gradio dependency: `make mic-deps` in the repository, or "
            "pip install '.[mic]' where the project is installed with pip. "
            + LIMITS_HELP.replace(
                "the run ends with exit code 1 and one line on stderr",
                "the recording ends with one error on the page",
            )
        ),
    )
    add_target_arguments(parser)
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"local port (default: {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--sonic-endpoint",
        metavar="NAME",
        help="the Sonic endpoint the page's Speak panel calls (InvokeEndpointWithResponseStream; "
        "runtime URL from AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME as for `voicectl speak`)",
    )
    parser.add_argument(
        "--voice",
        metavar="ID",
        help="Cartesia voice ID for the Speak panel (with --sonic-endpoint)",
    )
    parser.add_argument(
        "--share",
        action="store_true",
        help="also create a public gradio.live link (exposes your AWS credentials' access to "
        "anyone with the link; off by default)",
    )
    parser.set_defaults(func=run)


def log(message: str) -> None:
    """Print one line for the terminal that runs the page (stderr, flushed)."""
    print(f"voicectl mic: {message}", file=sys.stderr, flush=True)


def page_settings(args: argparse.Namespace) -> MicSettings:
    """The page's settings from the command line."""
    return MicSettings(
        target=target_from_args(args),
        port=args.port,
        share=bool(args.share),
        model=args.model,
        session_limit_s=args.session_limit,
        sonic_endpoint=args.sonic_endpoint,
        voice=args.voice,
    )


def run(args: argparse.Namespace, gradio_module: Any = None) -> int:
    """Entry point of ``voicectl mic``: serve the page until Ctrl-C; exit 1 when the target cannot
    be opened."""
    try:
        with serve(page_settings(args), log=log, gradio_module=gradio_module) as url:
            # from the line on: a Ctrl-C while it is being written stops the page as one afterwards
            # does
            try:
                log(f"open {url} (Ctrl-C to stop)")
                threading.Event().wait()
            except KeyboardInterrupt:
                log("stopping")
    except RealtimeError as error:
        log(str(error))
        return EXIT_FAILED
    return 0
