"""services/handlers/cleanup/cfn_response.py: the answer a cleanup handler PUTs at
CloudFormation's response URL (a one-request server on loopback), in the shape of a custom resource
response object."""

from __future__ import annotations

from tests.unit.services.handlers.cleanup.handler_kit import handler_module, response_url

EVENT = {
    "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/S/1",
    "RequestId": "r-1",
    "LogicalResourceId": "ReleaseProtection",
}


def test_the_answer_carries_the_request_ids_the_status_and_data_as_strings():
    cfn_response = handler_module("cfn_response")
    with response_url() as (url, bodies):
        cfn_response.respond(
            {**EVENT, "ResponseURL": url}, None, "SUCCESS", "released 3", {"Released": 3}
        )
    assert bodies == [
        {
            "Status": "SUCCESS",
            "Reason": "released 3",
            "PhysicalResourceId": "ReleaseProtection-cleanup",
            "StackId": EVENT["StackId"],
            "RequestId": "r-1",
            "LogicalResourceId": "ReleaseProtection",
            "Data": {"Released": "3"},
        }
    ]


def test_the_physical_id_is_kept_and_a_long_reason_is_cut_to_what_cloudformation_shows():
    cfn_response = handler_module("cfn_response")
    with response_url() as (url, bodies):
        cfn_response.respond(
            {**EVENT, "ResponseURL": url, "PhysicalResourceId": "kept-id"},
            None,
            "FAILED",
            "x" * 5000,
            {},
        )
    (body,) = bodies
    assert body["PhysicalResourceId"] == "kept-id" and body["Status"] == "FAILED"
    assert body["Reason"] == "x" * cfn_response.MAX_REASON and cfn_response.MAX_REASON == 1000
