"""voice_client.realtime.actions: what the machine hands back is plain, immutable data; a
generation's text is compared by its text alone."""

from __future__ import annotations

import dataclasses

import pytest

from voice_client.realtime.actions import (
    Action,
    CloseStream,
    Failed,
    Finished,
    OpenStream,
    Replaying,
    SendEvent,
    ShowDelta,
    ShowGenerationText,
)
from voice_client.realtime.protocol import RealtimeError


def test_a_generations_text_is_equal_whatever_audio_span_it_carries():
    assert ShowGenerationText("hello", 0.0, 1.0) == ShowGenerationText("hello", 5.0, 9.0)
    assert ShowGenerationText("hello") != ShowGenerationText("hello there")
    text = ShowGenerationText("hello", 1.5, 2.5)
    assert (text.start_s, text.end_s) == (1.5, 2.5)


def test_a_send_carries_its_audio_seconds_for_pacing_and_none_by_default():
    assert SendEvent(1, "{}").audio_s == 0.0
    assert SendEvent(2, "{}", 0.128) == SendEvent(2, "{}", 0.128)
    assert SendEvent(2, "{}", 0.128) != SendEvent(3, "{}", 0.128)


def test_actions_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        OpenStream(1).stream = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ShowDelta("a").text = "b"  # type: ignore[misc]


def test_the_action_union_names_every_action():
    error = RealtimeError("no", code="timeout")
    actions = [
        OpenStream(1),
        SendEvent(1, "{}"),
        CloseStream(1),
        ShowDelta("a"),
        ShowGenerationText("a"),
        Replaying("why"),
        Failed(error),
        Finished(),
    ]
    assert all(isinstance(action, Action) for action in actions)
    assert set(Action.__args__) == {type(action) for action in actions}
    assert Failed(error).error is error
