"""moto's server in this process, on a loopback port, with the harness's fixes for moto's gaps.

Why in-process (``moto.server.ThreadedMotoServer``) and not ``moto_server`` as a child process: the
gaps below are fixed by patching moto's Python classes, which only works in the process that serves
the requests, and there is no process to leave behind. Every patch is undone when the server stops,
so tests that use ``mock_aws`` later in the same pytest run see moto as shipped.

The CDK CLI must be given ``http://localhost:<port>``, not ``http://127.0.0.1:<port>``: moto parses
a ``TemplateURL`` only when its host is ``localhost`` (``moto/cloudformation/utils.py``), and the
CLI builds the template URL from the S3 endpoint. The server listens on 127.0.0.1 only;
``localhost`` resolves to it (Node tries IPv6 and IPv4).

moto's gaps, and what the harness does about each (nothing here changes the product); the fixes
are in lifecycle_moto_patches.py, one function per patched service or concern, and the stand-ins in
lifecycle_moto_stand_ins.py:

- SageMaker instance types: moto's ``CreateEndpointConfig`` validation stops at older families (no
  ml.g6, ml.g6e, ml.g7e). The harness adds every type of ``constructs_lib/facts/instance_types.py``
  to the accepted list.
- ``AWS::SageMaker::Endpoint``: moto ignores ``EndpointName`` and generates a name; CloudFormation
  uses it. The harness makes moto read ``EndpointName`` (``cloudformation_name_type``), so the
  stable name can be checked.
- ``AWS::ECR::Repository`` without ``RepositoryName``: moto generates a mixed-case name that its own
  ECR rejects; CloudFormation generates a lower-case one. The harness lower-cases the generated
  name.
- Updates: moto updates a resource only when its own template JSON changed, so when it replaces an
  EndpointConfig the Endpoint still names the deleted one. The harness also updates the readers of a
  replaced resource, as CloudFormation does (:data:`REPLACED_ON_UPDATE`).
- Generated names: moto does not shorten them to the service's limit (a Step Functions state machine
  name over 80 characters); the harness shortens them like CloudFormation, per
  :data:`GENERATED_NAME_LIMITS`.
- ``AWS::ECR::Repository`` properties: moto passes ``ImageScanningConfiguration`` and
  ``EncryptionConfiguration`` in CloudFormation's spelling to its ECR model, which reads the API's
  (so scan on push is lost), and ignores ``LifecyclePolicy``. The harness converts the spelling and
  puts the lifecycle policy.
- Deleted stacks: DescribeStacks of a deleted stack (the CLI polls it by id during destroy)
  evaluates its outputs, and moto's lazy resource map re-creates every deleted resource they refer
  to. The harness empties a deleted stack's outputs.
- ``AWS::IAM::ManagedPolicy``: moto cannot delete it, so a deleted stack leaves its managed
  policies. The harness gives the type a delete.
- ``AWS::KMS::Key`` with ``Tags`` (the CDK tags everything): moto passes CloudFormation's tag
  spelling to KMS, fails, and the key is then "undefined" for ``Fn::GetAtt``; it keeps ``KeyPolicy``
  as an object where its API expects JSON text; and it cannot delete a key. The harness converts the
  tags and the policy and schedules the key's deletion on stack deletion, as CloudFormation does.
- ``AWS::S3::Bucket`` properties: moto applies only ``BucketEncryption`` (without
  ``BucketKeyEnabled``) and ``Tags``. The harness applies ``PublicAccessBlockConfiguration``,
  ``VersioningConfiguration`` and ``BucketKeyEnabled`` (network.mode=vpc's SSE-KMS model bucket);
  ownership controls, access logging and lifecycle rules stay unapplied and are asserted at template
  level (``lifecycle_resources``: ``moto_drops``).
- Change sets (the CDK CLI deploys only through change sets): moto registers exports, and resolves
  ``Fn::ImportValue``, only for ``CreateStack``, and computes a change-set stack's outputs from its
  empty first template. The harness gives change-set stacks the account's exports and re-reads
  outputs and exports after each executed change set. moto also keeps executed change sets and finds
  change sets by name in any stack (the CDK CLI names every stack's change set
  ``cdk-deploy-change-set``); the harness removes a stack's change sets once one is executed, as
  CloudFormation does, and makes deleting a change set that does not exist a no-op (moto answers
  HTTP 500, which the CLI retries for a minute), and answers DescribeChangeSet of a missing change
  set with ChangeSetNotFoundException (which the CLI waits for) instead of moto's ValidationError.
- ``UsePreviousValue`` of an SSM-typed parameter (the CLI sends it for ``BootstrapVersion`` on every
  update): moto substitutes the resolved value and then fails looking it up as a parameter name. The
  harness keeps a value that names no SSM parameter as it is.
- Lambda-backed custom resources: moto would invoke the function in Docker (there is none) and, for
  change sets, marks the resource complete anyway without data. The harness does not invoke
  anything: it marks the resource complete with the data of a stand-in from
  :data:`CUSTOM_RESOURCE_STAND_INS` (the documented response of the real handler), or no data for
  types that return none. What the handler does is tested with the handler's own tests.
- ``AWS::CodeBuild::Project`` (the model staging build): moto's CloudFormation has no such type, so
  a template reading its ``Arn`` fails. The harness supplies :class:`CodeBuildProjectStandIn`,
  backed by moto's CodeBuild.
- ``AWS::CloudWatch::Alarm``: moto's CloudFormation creates none, so a template reading an alarm's
  ``Arn`` (the execution role's DescribeAlarms grant on the rollback alarms) fails. The harness
  supplies :class:`AlarmStandIn`, which only answers ``Ref`` and ``Arn``; alarms are still checked
  at template level.
- ``AWS::SecretsManager::Secret`` (the ECS target's bearer token): moto's CloudFormation has none,
  so a grant on it is an empty statement moto's IAM rejects. The harness supplies
  :class:`SecretStandIn`, backed by moto's Secrets Manager.
- ``AWS::ElasticLoadBalancingV2::TargetGroup``: moto's model answers no ``Fn::GetAtt`` (the ECS
  target's alarms read ``TargetGroupFullName``), and describing the stack fails; nor can it delete
  one. The harness gives it the attributes CloudFormation documents, and a delete.
- ``AWS::ECS::TaskDefinition`` updates: moto registers the new revision with CloudFormation's key
  spelling (``Image``, not ``image``), so the new revision has no image. The harness registers it as
  on create, and treats a task definition as replaced on update (:data:`REPLACED_ON_UPDATE`), so the
  service follows it.
- VPC parts (the Foundation stack's network in network.mode=vpc, the ECS target's own VPC): moto's
  CloudFormation cannot delete a NAT gateway, an Elastic IP, a VPC endpoint, a flow log, a route
  table or its subnet association, an internet gateway or its attachment, so the VPC "has
  dependencies" on stack deletion. The harness gives each a delete through moto's EC2 API (one
  table, ``network_deletes``), as CloudFormation does; likewise the ECS cluster, service and task
  definition, which it leaves ACTIVE (ECS's deletes leave them INACTIVE).
- Not created at all by moto's CloudFormation (it warns "No Moto CloudFormation support for ..."):
  bucket and topic policies, CloudWatch dashboards, Application Auto Scaling. The harness records
  each warning in :attr:`MotoServer.unsupported_types`; the test checks those resources at template
  level instead.
- ``AWS::EC2::VPC``: moto's CloudFormation ignores ``EnableDnsSupport`` and ``EnableDnsHostnames``
  (network.mode=vpc); asserted at template level (``lifecycle_resources``: ``moto_drops``).
- ``EnableNetworkIsolation`` on ``AWS::SageMaker::Model``: moto drops it (its Model always reports
  False). Asserted at template level by the test.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import requests

from tests.e2e.lifecycle.lifecycle_moto_patches import moto_patches

log = logging.getLogger("lifecycle")

#: moto's default account (``moto.core.DEFAULT_ACCOUNT_ID``): every fake access key maps to it.
ACCOUNT = "123456789012"
REGION = "us-east-1"
#: Obviously fake credentials; moto accepts any.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIAFAKEFORMOTOONLY00",
    "AWS_SECRET_ACCESS_KEY": "fake-secret-for-moto-only",
}


def free_loopback_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class MotoServer:
    """A running moto server. ``url`` is ``http://localhost:<port>``.

    Attributes:
        unsupported_types: CloudFormation resource types moto skipped (logged "No Moto
            CloudFormation support").
        custom_resources: ``(resource type, logical id)`` of every custom resource the harness
            completed.
        errors: tracebacks of exceptions moto raised while creating or executing a change set (the
            CDK CLI sees only "XML parse error" or a bare message for those).
    """

    url: str
    port: int
    unsupported_types: set[str] = field(default_factory=set)
    custom_resources: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def reset(self) -> None:
        """Drop every resource of every account (moto's ``/moto-api/reset``)."""
        requests.post(f"{self.url}/moto-api/reset", timeout=30).raise_for_status()


class _UnsupportedTypeRecorder(logging.Handler):
    """Collects the resource types of moto's "No Moto CloudFormation support for %s" warnings."""

    def __init__(self, sink: set[str]):
        super().__init__(level=logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == "No Moto CloudFormation support for %s" and record.args:
            self.sink.add(str(record.args[0]))


@contextlib.contextmanager
def moto_server() -> Iterator[MotoServer]:
    """Start moto's server on a free loopback port with the harness patches; stop it and undo them
    on exit.

    The backends start empty (reset on entry and on exit: the server shares moto's in-memory state
    with any ``mock_aws`` test in the same process).
    """
    started = time.monotonic()
    from moto.server import ThreadedMotoServer

    port = free_loopback_port()
    server = MotoServer(url=f"http://localhost:{port}", port=port)
    recorder = _UnsupportedTypeRecorder(server.unsupported_types)
    cfn_logger = logging.getLogger("moto")  # moto.cloudformation.parsing logs through it
    werkzeug_logger = logging.getLogger("werkzeug")
    werkzeug_level = werkzeug_logger.level
    stopping = started
    with contextlib.ExitStack() as stack:
        # Figures, not assertions (callbacks run last to first: this one when everything else is
        # undone).
        stack.callback(
            lambda: log.info(
                "moto's server on port %d: stopped in %.1f s", port, time.monotonic() - stopping
            )
        )
        for patch in moto_patches(server):
            stack.enter_context(patch)
        cfn_logger.addHandler(recorder)
        stack.callback(cfn_logger.removeHandler, recorder)
        # One access-log line per request would drown the CDK CLI's output in the test report.
        werkzeug_logger.setLevel(logging.ERROR)
        stack.callback(werkzeug_logger.setLevel, werkzeug_level)
        threaded = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        threaded.start()
        stack.callback(threaded.stop)
        server.reset()
        stack.callback(server.reset)
        log.info("moto's server on port %d: started in %.1f s", port, time.monotonic() - started)
        try:
            yield server
        finally:
            stopping = time.monotonic()


def port_is_closed(port: int) -> bool:
    """True when nothing accepts TCP connections on 127.0.0.1:``port`` (the server really
    stopped)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) != 0
