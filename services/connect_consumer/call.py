"""One Amazon Connect call as the consumer knows it: the message that starts it
(:class:`CallRequest`, from the start function), how far its transcription got
(:class:`Checkpoint`, stored with each final), what it needs from the sink (:class:`Store`), and
the ways its transcription stops early (:class:`CallFailed`, :class:`EndpointBusy`,
:class:`EndpointUnavailable`), which :class:`~connect_consumer.consumer.Consumer` turns into the
call's outcome.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from connect_consumer.sink import Segment

MAX_FIELD_CHARS = 2048
"""Characters of a call message's field at most (the stream ARN, 1-1024 characters in the Kinesis
Video Streams API reference, is the longest): a field goes into reasons, events and items."""


class CallFailed(Exception):
    """The call cannot be transcribed (a bad fragment, an endpoint error): reported for this call
    only."""


class EndpointBusy(Exception):
    """Every stream of the endpoint is in use: the call waits and resumes from its checkpoint."""


class EndpointUnavailable(Exception):
    """SageMaker answered a stream with a ModelError (the container did not accept the WebSocket
    within its 250 ms, or failed): the call waits and resumes from its checkpoint, up to
    :data:`~connect_consumer.consumer.MODEL_ERROR_RETRIES` times, then fails."""


@dataclass(frozen=True)
class CallRequest:
    """What the start function passes on (from the contact data Connect sends)."""

    contact_id: str
    stream_arn: str
    start_fragment: str
    instance_arn: str = ""

    @classmethod
    def from_message(cls, body: Any) -> CallRequest:
        """Raises ValueError naming what is missing, not a string, or longer than
        :data:`MAX_FIELD_CHARS`."""
        if not isinstance(body, dict):
            raise ValueError(f"a call message is a JSON object, got {type(body).__name__}")
        names = ("contactId", "streamArn", "startFragmentNumber")
        missing = [name for name in names if not body.get(name)]
        if missing:
            raise ValueError(
                f"a call message needs {', '.join(missing)}; got keys {sorted(body)[:20]}"
            )
        bad = [
            name
            for name in (*names, "instanceArn")
            if name in body
            and (not isinstance(body[name], str) or len(body[name]) > MAX_FIELD_CHARS)
        ]
        if bad:
            raise ValueError(
                f"a call message's {', '.join(bad)} must be strings of at most {MAX_FIELD_CHARS} "
                "characters"
            )
        return cls(
            body["contactId"],
            body["streamArn"],
            body["startFragmentNumber"],
            body.get("instanceArn", ""),
        )


@dataclass
class Checkpoint:
    """The last fragment both tracks finished, and how far each track's finals reach (seconds of
    call audio)."""

    fragment: str | None = None  # None: nothing finished yet (start from Connect's start fragment)
    fragment_end_s: dict[str, float] = field(
        default_factory=dict
    )  # each track's offset at that fragment's end
    done_s: dict[str, float] = field(default_factory=dict)  # each track's finals cover [0, done_s)


class Store:
    """What the consumer needs from the sink (see :class:`connect_consumer.sink.AwsSink`)."""

    publish: Callable[[str, dict[str, Any]], Awaitable[None]]
    commit_final: Callable[[Segment, dict[str, Any]], Awaitable[None]]
    set_call: Callable[..., Awaitable[None]]
    load_checkpoint: Callable[[str], Awaitable[dict[str, Any] | None]]
