"""The logical ids of the resources a deployment must keep: data (buckets, repository, log groups,
key), fixed names (endpoints, alarms, dashboard, scaling registrations and policies), what callers
hold by ARN (topic, caller policies) and what the Models point at (execution roles). CloudFormation
replaces a resource whose logical id changes (CDK Developer Guide, "Identifiers"), which loses data
or fails on a name that already exists; a refactoring must keep these
(``tools/template_diff.py`` lists every difference between two syntheses). New resources may
be added."""

from __future__ import annotations

import pytest

ENDPOINT_ALARMS = [
    "CPUUtilization3C524BCC",
    "DiskUtilization873E2E5A",
    "EndpointHealthC6A4D23B",
    "GPUMemoryUtilizationA440DED3",
    "GPUUtilizationF58BEC85",
    "Invocation4XXErrorsD67233CF",
    "Invocation5XXErrors1D24CE96",
    "MemoryUtilizationBFB30E99",
    "ModelLatencyP90C4B87906",
    "OverheadLatencyP90EC10033B",
]
COMMON = [
    *(f"Alarms{name}" for name in ENDPOINT_ALARMS),
    "AutoscalingPolicy2C3C8DBC",
    "AutoscalingTarget3C959F55",
    "ExecutionRoleCDF74862",
]
#: As first deployed (recorded from the app before the construct library took its present shape).
DEPLOYED = {
    "Operations": ["AlarmTopicC2164170", "AlarmTopicKeyBA1A4AA7", "Dashboard7A714131"],
    "Artifacts": [
        "BridgeImageRepository8361908F",
        "ModelBucketAccessLogs94B93479",
        "ModelBucketEBB1ADF4",
    ],
    "Voxtral": [
        *COMMON,
        "AlarmsActiveStreamsNearCap5FA6BBCA",
        "AlarmsInvocation5XXErrorRate8127FA1C",
        "AlarmsStreamsRejected0AAAC409",
        "AlarmsTimeToFirstDeltaP90FA54DC1A",
        "AlarmsUpstreamErrors73BD761C",
        "VoxtralEndpoint96DE05A0",
        "VoxtralEndpointConfig3816A1DB",
        "VoxtralInvokePolicy885DCB6E",
        "VoxtralLogGroup79932BA1",
        "VoxtralModelAF8EEC05",
        "ModelStagingF56099D9",
        "ModelStagingBuild177859D4",
        "ModelStagingBuildLogsD9591230",
        "ModelStagingProviderLogsC232FA5F",
        "ModelStagingWaiterLogs896C9532",
    ],
    "Sonic": [
        *COMMON,
        "SonicEndpoint6A75F72C",
        "SonicEndpointConfigF9920281",
        "SonicInvokePolicy81342E67",
        "SonicLogGroupA0C757A8",
        "SonicModel425EFF83",
    ],
}


@pytest.mark.parametrize("stack", sorted(DEPLOYED))
def test_deployed_logical_ids_stay(synthesized, stack):
    assert sorted(set(DEPLOYED[stack]) - set(synthesized.template(stack)["Resources"])) == []
