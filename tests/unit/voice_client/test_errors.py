"""voice_client.errors: the messages both clients share."""

from __future__ import annotations

import asyncio

import pytest

from voice_client.realtime import RealtimeError


def test_speak_and_transcribe_word_missing_credentials_the_same_way():
    """One message serves both clients (voice_client.errors.no_credentials_message): what is wrong,
    then what to run."""
    import botocore.exceptions
    from smithy_core.exceptions import SmithyIdentityError

    from voice_client import speak
    from voice_client.sagemaker_client import resolve_credentials
    from voice_client.sonic import SonicRequest

    class NoCredentials:
        async def get_identity(self, *, properties=None):
            raise SmithyIdentityError("Unable to locate credentials")

    class Client:
        def invoke_endpoint_with_response_stream(self, **kwargs):
            raise botocore.exceptions.NoCredentialsError()

    with pytest.raises(RealtimeError) as transcribe_error:
        asyncio.run(resolve_credentials(NoCredentials()))
    with pytest.raises(speak.SpeakError) as speak_error:
        speak.synthesize(Client(), "sonic-tts", SonicRequest(transcript="hi", voice_id="v"))
    expected = (
        "no usable AWS credentials: Unable to locate credentials; run `aws configure` or `aws "
        "sso login`, or pass --profile"
    )
    assert str(transcribe_error.value) == str(speak_error.value) == expected
    assert transcribe_error.value.code == "credentials"
