"""``voicectl connect-replay CALL.wav``: play a stereo recording as a live Amazon Connect call
through the whole transcription path, offline, and print both speakers' transcripts as they arrive.

The replay itself: :mod:`voice_devtools.connect_replay`, from the dev tools, imported when the
command runs (without them the command says how to install them:
:mod:`voicectl.commands.dev_tools`). The target options are ``voicectl transcribe``'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from voice_client.transcribe import validate_speed
from voicectl.commands.dev_tools import dev_tools_installed, dev_tools_required
from voicectl.commands.transcribe import add_target_arguments, validate_target_arguments

EXIT_FAILED = 1
"""Exit code when the call ended in a failure (usage errors exit 2)."""

DESCRIPTION = (
    "What runs, all on 127.0.0.1: a Kinesis Video Streams stand-in (the recording's left channel "
    "as AUDIO_FROM_CUSTOMER, the right as AUDIO_TO_CUSTOMER, in real Matroska fragments released "
    "at --speed x real time), moto (SQS, EventBridge, DynamoDB), the start function invoked with "
    "the event Connect sends, and the consumer, which reads the call with "
    "GetDataEndpoint/GetMedia and streams each track to the endpoint given as for voicectl "
    "transcribe: --endpoint (a SageMaker endpoint, or make local's front door with "
    "--endpoint-url) or --url (a container's bridge, the ECS target's bearer-token URL)."
)
"""What ``--help`` says (:mod:`voice_devtools.connect_replay`'s docstring, in the user's words: no
reStructuredText)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``connect-replay`` subcommand."""
    parser = subparsers.add_parser(
        "connect-replay",
        help="play a stereo recording as a live Amazon Connect call and print both speakers' "
        "transcripts",
        description=DESCRIPTION,
    )
    # Without the dev tools nothing is required: the command's one line is how to install them.
    installed = dev_tools_installed()
    parser.add_argument(
        "file",
        nargs=None if installed else "?",
        metavar="CALL.wav",
        help="a stereo recording: left = the customer, right = the agent",
    )
    add_target_arguments(parser, required=installed)
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="release the call's fragments at this multiple of real time; 0: all at once "
        "(default: 1.0, a live call)",
    )
    parser.add_argument(
        "--quiet-s",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="reopen GetMedia after this long without a new fragment on an open stream (a stall; "
        "the call itself ends when its stream ends; default: 5)",
    )
    parser.set_defaults(func=run)


def print_segment(segment: Any, out: TextIO) -> None:
    """One final transcript segment (``connect_consumer.sink.Segment``) on ``out``: its time span,
    the speaker and the text."""
    who = "customer" if segment.speaker == "AUDIO_FROM_CUSTOMER" else "agent"
    print(
        f"[{segment.start_s:7.1f}-{segment.end_s:7.1f} s] {who:8}: {segment.text}",
        file=out,
        flush=True,
    )


def run(args: argparse.Namespace) -> int:
    """Entry point of ``voicectl connect-replay``: 0 when the call ended well, 1 when it failed."""
    with dev_tools_required():
        from voice_devtools import connect_replay

    target = validate_target_arguments(args)
    if args.speed:
        validate_speed(args.speed)

    connect_replay.check_quiet_s(args.quiet_s)
    customer, agent = connect_replay.load_call(args.file)
    out = sys.stdout  # the consumer runs with stdout redirected to os.devnull
    outcome = connect_replay.replay_call(
        customer,
        agent,
        target,
        speed=args.speed,
        quiet_s=args.quiet_s,
        on_started=lambda answer: print(f"start function: {json.dumps(answer)}", file=sys.stderr),
        on_segment=lambda segment: print_segment(segment, out),
    )
    print(f"call {outcome.contact_id} ended: {outcome.reason}", file=sys.stderr)
    return EXIT_FAILED if outcome.failed else 0
