"""voice_client.sagemaker_client: the runtime's URL, botocore's credentials for smithy, the CA
bundle, and the loop handler that drops awscrt's completed-stream writes (the signed request on
port 8443: test_sagemaker_stream.py)."""

from __future__ import annotations

import asyncio

import pytest

from voice_client.sagemaker_client import (
    BIDI_PORT,
    bidi_endpoint_uri,
    ca_bundle_of,
    ignore_completed_stream_writes,
)


def test_the_bidirectional_runtime_is_on_port_8443_of_the_regions_runtime_host():
    assert BIDI_PORT == 8443
    assert (
        bidi_endpoint_uri("eu-west-1") == "https://runtime.sagemaker.eu-west-1.amazonaws.com:8443"
    )


def test_botocore_credentials_resolver_refreshes_and_reports_missing_credentials():
    from smithy_core.exceptions import SmithyIdentityError

    from voice_client.sagemaker_client import BotocoreCredentialsResolver

    class Refreshable:
        def __init__(self):
            self.calls = 0

        def refresh_needed(self):
            return True

        def get_frozen_credentials(self):
            from botocore.credentials import ReadOnlyCredentials

            self.calls += 1
            return ReadOnlyCredentials(f"AKID{self.calls}", "secret", None)

    credentials = Refreshable()

    class Session:
        def get_credentials(self):
            return credentials

    resolver = BotocoreCredentialsResolver(Session())
    first = asyncio.run(resolver.get_identity(properties={}))
    second = asyncio.run(resolver.get_identity(properties={}))
    assert (first.access_key_id, second.access_key_id) == ("AKID1", "AKID2")

    class Empty:
        def get_credentials(self):
            return None

    with pytest.raises(SmithyIdentityError, match="none found in the environment, profiles, SSO"):
        asyncio.run(BotocoreCredentialsResolver(Empty()).get_identity(properties={}))


def test_the_ca_bundle_is_botocores_setting_of_the_session():
    class Botocore:
        def get_config_variable(self, name):
            return {"ca_bundle": "/etc/proxy-ca.pem"}.get(name)

    class Boto3Session:  # boto3.Session wraps botocore's
        _session = Botocore()

    assert ca_bundle_of(Botocore()) == ca_bundle_of(Boto3Session()) == "/etc/proxy-ca.pem"


def test_only_awscrts_completed_stream_write_is_dropped_and_once():
    seen = []
    loop = asyncio.new_event_loop()
    try:
        loop.set_exception_handler(lambda loop, context: seen.append(context["message"]))
        ignore_completed_stream_writes(loop)
        handler = loop.get_exception_handler()
        ignore_completed_stream_writes(loop)  # a second call keeps the first handler
        assert loop.get_exception_handler() is handler
        completed = RuntimeError("AWS_ERROR_HTTP_STREAM_HAS_COMPLETED: the stream completed")
        loop.call_exception_handler({"message": "dropped", "exception": completed})
        other = RuntimeError("AWS_IO_SOCKET_CLOSED")
        loop.call_exception_handler({"message": "kept", "exception": other})
        loop.call_exception_handler({"message": "no exception"})
    finally:
        loop.close()
    assert seen == ["kept", "no exception"]


def test_without_a_previous_handler_other_errors_reach_asyncios_default(caplog):
    loop = asyncio.new_event_loop()
    try:
        ignore_completed_stream_writes(loop)
        with caplog.at_level("ERROR", logger="asyncio"):
            loop.call_exception_handler({"message": "reported", "exception": ValueError("x")})
    finally:
        loop.close()
    assert [record.getMessage() for record in caplog.records] == ["reported"]


def test_a_credentials_lookup_that_hangs_is_a_credentials_error():
    from voice_client.realtime import RealtimeError
    from voice_client.sagemaker_client import resolve_credentials

    class Hanging:
        async def get_identity(self, *, properties=None):
            await asyncio.sleep(3600)

    with pytest.raises(RealtimeError) as raised:
        asyncio.run(resolve_credentials(Hanging(), timeout_s=0.01))
    assert raised.value.code == "credentials"
    assert str(raised.value) == (
        "resolving AWS credentials took more than 0 s; check the profile's credential source "
        "(SSO, role, instance metadata)"
    )
