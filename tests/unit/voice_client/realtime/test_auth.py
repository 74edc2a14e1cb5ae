"""voice_client/realtime/auth.py: the bearer token a bridge on ECS requires, never shown, and
what a refusal (HTTP 401) tells the user to do."""

from __future__ import annotations

from voice_client.realtime.auth import HTTP_UNAUTHORIZED, BearerToken, unauthorized_message

URL = "wss://voice.example.com/invocations-bidirectional-stream"


def test_the_token_value_is_never_in_its_repr():
    token = BearerToken("s3cr3t-value", source="environment variable VOICE_TOKEN")
    assert "s3cr3t-value" not in repr(token) and "VOICE_TOKEN" in repr(token)
    assert HTTP_UNAUTHORIZED == 401


def test_a_refusal_says_which_token_was_refused_or_that_none_was_sent():
    assert unauthorized_message(URL, None) == (
        f"the bridge at {URL} requires a bearer token (HTTP 401): pass --token-secret with the "
        "ARN of the stack's token secret (output TokenSecretArn)"
    )
    refused = unauthorized_message(
        URL, BearerToken("s3cr3t-value", source="Secrets Manager secret arn:x")
    )
    assert refused.startswith(
        f"the bridge at {URL} refused the bearer token from Secrets Manager secret arn:x (HTTP 401)"
    )
    assert "s3cr3t-value" not in refused and "after its last rotation" in refused
