"""The agent's LLM: Amazon Bedrock's ConverseStream through boto3 (:class:`BedrockConverseLLM`),
or an OpenAI-compatible server (:func:`make_llm`).

Pipecat's own ``AWSBedrockLLMService`` needs aiobotocore, which the agent's lock does not carry;
boto3's client takes the standard credential chain (the ECS task role in AWS) and
``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` (the local stand-in), so this service runs boto3's blocking
stream in a thread and hands its text deltas to the pipeline. An interruption cancels the task
waiting on it; the stream is then closed, which ends the HTTP response (Bedrock stops
generating) and the thread.

Bedrock's Converse rules (Bedrock API Reference, Converse, ``messages``): the conversation starts
with a user message and roles alternate; system text goes in ``system``. :func:`bedrock_messages`
makes Pipecat's context fit them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from pipecat.frames.frames import (
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import LLMSettings

MAX_TOKENS = 512
"""Longest answer, tokens (a spoken answer of a few sentences is far below)."""

READ_TIMEOUT_S = 60.0
"""Seconds Bedrock's stream may stay silent before the call fails."""

CALL_STARTED = "(The call has started.)"
"""The user turn put before an assistant message that opens the conversation (the greeting):
Converse requires the first message to be the user's."""


def bedrock_messages(messages: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Pipecat's context messages (OpenAI-style ``role`` and ``content``) as Converse's
    ``messages`` and ``system``: system text gathered, consecutive turns of one role merged, a
    user turn first."""
    system: list[dict[str, str]] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role, text = message.get("role"), _text_of(message.get("content"))
        if not text:
            continue
        if role in ("system", "developer"):
            system.append({"text": text})
        elif role in ("user", "assistant"):
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"][0]["text"] += "\n" + text
            else:
                turns.append({"role": role, "content": [{"text": text}]})
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": [{"text": CALL_STARTED}]})
    return turns, system


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return " ".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type", "text") == "text"
        ).strip()
    return ""


def bedrock_client(region: str | None, endpoint_url: str | None) -> Any:
    """A ``bedrock-runtime`` client on the standard credential chain."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "bedrock-runtime",
        region_name=region,
        endpoint_url=endpoint_url,
        config=Config(read_timeout=READ_TIMEOUT_S, retries={"max_attempts": 3, "mode": "standard"}),
    )


class BedrockConverseLLM(LLMService):
    """A Pipecat LLM service on Bedrock's ConverseStream (text only, no tools).

    Args:
        model_id: the Bedrock model or inference profile ID.
        client: a boto3 ``bedrock-runtime`` client (:func:`bedrock_client`).
    """

    def __init__(self, *, model_id: str, client: Any, **kwargs: Any) -> None:
        super().__init__(
            settings=LLMSettings(
                model=model_id,
                system_instruction=None,
                temperature=None,
                max_tokens=MAX_TOKENS,
                top_p=None,
                top_k=None,
                frequency_penalty=None,
                presence_penalty=None,
                seed=None,
                filter_incomplete_user_turns=None,
                user_turn_completion_config=None,
            ),
            **kwargs,
        )
        self._model_id = model_id
        self._client = client
        self.calls = 0
        """ConverseStream calls made."""

    def can_generate_metrics(self) -> bool:
        return True

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if not isinstance(frame, LLMContextFrame):
            await self.push_frame(frame, direction)
            return
        await self.push_frame(LLMFullResponseStartFrame())
        await self.start_processing_metrics()
        try:
            await self._converse(frame.context)
        except Exception as error:  # botocore's ClientError, EventStreamError, connection errors
            await self.push_error(
                error_msg=f"Bedrock ConverseStream ({self._model_id}): {error}", exception=error
            )
        finally:
            await self.stop_processing_metrics()
            await self.push_frame(LLMFullResponseEndFrame())

    async def _converse(self, context: LLMContext) -> None:
        messages, system = bedrock_messages(list(context.get_messages()))
        if not messages:
            return
        request: dict[str, Any] = {
            "modelId": self._model_id,
            "messages": messages,
            "inferenceConfig": {"maxTokens": MAX_TOKENS},
        }
        if system:
            request["system"] = system
        loop = asyncio.get_running_loop()
        texts: asyncio.Queue[str | BaseException | None] = asyncio.Queue()
        stream_box: list[Any] = []
        stop = threading.Event()

        def put(item: str | BaseException | None) -> None:
            loop.call_soon_threadsafe(texts.put_nowait, item)

        def call() -> None:
            try:
                response = self._client.converse_stream(**request)
                stream_box.append(response["stream"])
                for event in response["stream"]:
                    if stop.is_set():
                        break
                    text = event.get("contentBlockDelta", {}).get("delta", {}).get("text")
                    if text:
                        put(text)
                put(None)
            except BaseException as error:  # handed to the event loop
                put(None if stop.is_set() else error)

        self.calls += 1
        await self.start_ttfb_metrics()
        worker = asyncio.ensure_future(asyncio.to_thread(call))
        first = True
        try:
            while (item := await texts.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                if first:
                    first = False
                    await self.stop_ttfb_metrics()
                await self.push_frame(LLMTextFrame(item))
        finally:
            stop.set()
            for stream in stream_box:
                # An interruption: end the HTTP response now, from a thread (closing blocks while
                # the reading thread holds the connection; the event loop must not wait on it).
                threading.Thread(target=_close_quietly, args=(stream,), daemon=True).start()
            await self.stop_ttfb_metrics()
            worker.add_done_callback(lambda task: task.cancelled() or task.exception())


def _close_quietly(stream: Any) -> None:
    with contextlib.suppress(Exception):
        stream.close()


def make_llm(
    *, model_id: str | None, url: str | None, region: str | None, bedrock_url: str | None
) -> LLMService:
    """Bedrock (``model_id``) or, with ``url``, an OpenAI-compatible server (``model_id`` is the
    model name sent, ``default`` when unset; the key from ``OPENAI_API_KEY``, else none)."""
    if url is not None:
        import os

        from pipecat.services.openai.llm import OpenAILLMService

        return OpenAILLMService(
            api_key=os.environ.get("OPENAI_API_KEY") or "none",
            base_url=url,
            settings=OpenAILLMService.Settings(model=model_id or "default"),
        )
    assert model_id is not None
    return BedrockConverseLLM(model_id=model_id, client=bedrock_client(region, bedrock_url))
