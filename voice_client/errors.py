"""The error the client library and every ``voicectl`` subcommand raise for bad input, and the words
every client uses for missing AWS credentials, in a module of their own so that :mod:`voicectl.cli`
(which prints them), :mod:`voice_client.aws`, :mod:`voice_client.speak` and
:mod:`voice_client.sagemaker_stream` (which raise them) import them without importing each other."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user: the message names what was wrong and what is allowed. Exit code
    2."""


NO_CREDENTIALS_HINT = "run `aws configure` or `aws sso login`, or pass --profile"
"""What to do when no AWS credentials can be loaded (``transcribe``, ``mic`` and ``speak`` say the
same)."""


def no_credentials_message(detail: object) -> str:
    """The one message for missing or unusable AWS credentials: ``no usable AWS credentials:
    <detail>; <hint>``.

    ``detail`` is what the credential chain reported (botocore's ``NoCredentialsError``, an SSO
    token error, ...).
    """
    return f"no usable AWS credentials: {detail}; {NO_CREDENTIALS_HINT}"
