"""What each check of ``voicectl preflight`` (:mod:`voicectl.operations.preflight`) finds: its
:class:`Status` and :class:`Finding`, and the finding of a check that could not be made."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import botocore.exceptions

from voice_client.aws import error_code, is_access_denied


class Status(Enum):
    """A check's outcome: STOP stops the action; WARN and UNCHECKED are printed and let it go
    ahead."""

    OK = "OK"
    WARN = "WARN"
    UNCHECKED = "UNCHECKED"
    STOP = "STOP"


@dataclass(frozen=True)
class Finding:
    """One check's outcome, ``check`` naming what was checked and ``message`` what was found and
    what to do."""

    status: Status
    check: str
    message: str

    def line(self) -> str:
        return f"  {self.status.value:<9} {self.check}: {self.message}"


def describe_error(error: Exception) -> str:
    """A ClientError or BotoCoreError as ``Code: message`` (or its text)."""
    if isinstance(error, botocore.exceptions.ClientError):
        return f"{error_code(error)}: {error.response.get('Error', {}).get('Message', '')}".rstrip(
            ": "
        )
    return str(error)


def unchecked(check: str, action: str, error: Exception, advice: str = "") -> Finding:
    """What could not be checked: the missing permission ``action`` (on AccessDenied) or the
    error."""
    reason = f"missing permission {action}" if is_access_denied(error) else f"{action} failed"
    return Finding(
        Status.UNCHECKED,
        check,
        f"could not check ({reason}: {describe_error(error)})" + (f"; {advice}" if advice else ""),
    )
