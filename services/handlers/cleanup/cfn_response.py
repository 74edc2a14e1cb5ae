"""Answer a CloudFormation custom resource request at its pre-signed ``ResponseURL`` (CloudFormation
user guide, "Custom resource response objects"). The handlers of this directory run without the CDK
Provider framework: one function and one role each, answering CloudFormation themselves. Standard
library only."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

#: CloudFormation shows at most this many characters of a reason.
MAX_REASON = 1000


def respond(
    event: dict[str, Any], context: Any, status: str, reason: str, data: dict[str, Any]
) -> None:
    """PUT ``status`` (SUCCESS or FAILED), ``reason`` and ``data`` (values shown as strings) for
    ``event``."""
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:MAX_REASON],
            "PhysicalResourceId": event.get("PhysicalResourceId")
            or f"{event['LogicalResourceId']}-cleanup",
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": {key: str(value) for key, value in data.items()},
        }
    ).encode()
    request = urllib.request.Request(
        event["ResponseURL"],
        data=body,
        method="PUT",
        headers={"Content-Type": "", "Content-Length": str(len(body))},
    )
    with urllib.request.urlopen(request, timeout=30):
        pass
