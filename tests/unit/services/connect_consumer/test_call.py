"""connect_consumer.call: a call message as the start function sends it, and what it refuses,
naming the field."""

from __future__ import annotations

import pytest

from connect_consumer.call import MAX_FIELD_CHARS, CallRequest, Checkpoint

MESSAGE = {
    "contactId": "c-1",
    "streamArn": "arn:aws:kinesisvideo:us-east-1:123456789012:stream/connect-live/1",
    "startFragmentNumber": "91343852333181432392682062607743920146264001",
}


def test_a_message_gives_the_call_and_the_instance_is_optional():
    assert CallRequest.from_message(MESSAGE) == CallRequest(
        "c-1", MESSAGE["streamArn"], MESSAGE["startFragmentNumber"], ""
    )
    instance = "arn:aws:connect:us-east-1:123456789012:instance/1"
    assert CallRequest.from_message({**MESSAGE, "instanceArn": instance}).instance_arn == instance


@pytest.mark.parametrize(
    "body, message",
    [
        (["c-1"], "a call message is a JSON object, got list"),
        (
            {"contactId": "c-1", "startFragmentNumber": ""},
            r"a call message needs streamArn, startFragmentNumber; got keys "
            r"\['contactId', 'startFragmentNumber'\]",
        ),
        (
            {**MESSAGE, "contactId": 7},
            f"a call message's contactId must be strings of at most {MAX_FIELD_CHARS} characters",
        ),
        (
            {**MESSAGE, "streamArn": "a" * (MAX_FIELD_CHARS + 1), "instanceArn": None},
            "a call message's streamArn, instanceArn must be strings",
        ),
    ],
)
def test_a_message_that_is_not_a_call_is_refused_naming_what_is_wrong(body, message):
    with pytest.raises(ValueError, match=message):
        CallRequest.from_message(body)


def test_a_field_of_the_longest_length_is_taken():
    longest = "f" * MAX_FIELD_CHARS
    assert CallRequest.from_message({**MESSAGE, "streamArn": longest}).stream_arn == longest


def test_a_new_checkpoint_has_finished_nothing_and_owns_its_maps():
    first, second = Checkpoint(), Checkpoint()
    first.done_s["AUDIO_FROM_CUSTOMER"] = 1.0
    assert (second.fragment, second.fragment_end_s, second.done_s) == (None, {}, {})
