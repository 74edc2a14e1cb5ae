"""The bearer token a bridge on ECS requires, and what to say when the bridge refuses it."""

from __future__ import annotations

from dataclasses import dataclass, field

HTTP_UNAUTHORIZED = 401
"""The bridge's answer to an upgrade without the right bearer token (services/bridge/auth.py)."""


@dataclass(frozen=True)
class BearerToken:
    """The bearer token a bridge on ECS requires (``Authorization: Bearer <value>``) and where it
    came from.

    ``source`` names it for people (``Secrets Manager secret ARN``, ``environment variable NAME``);
    ``value`` is never printed (not in ``repr`` either).
    """

    value: str = field(repr=False)
    source: str


def unauthorized_message(url: str, token: BearerToken | None) -> str:
    """One line for an HTTP 401 from the bridge at ``url``: which token was refused, or that none
    was sent."""
    if token is None:
        return (
            f"the bridge at {url} requires a bearer token (HTTP 401): pass --token-secret with "
            "the ARN of the stack's token secret (output TokenSecretArn)"
        )
    return (
        f"the bridge at {url} refused the bearer token from {token.source} (HTTP 401): check "
        "that it is the service's token secret (stack output TokenSecretArn) and that tasks "
        "started after its last rotation"
    )
