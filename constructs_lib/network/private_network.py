"""PrivateNetwork: where SageMaker endpoints run privately, a VPC without internet access, the VPC
endpoints hosting and callers need, and the security groups between them. Props:
:class:`constructs_lib.network.props.PrivateNetworkProps`.

What goes where (SageMaker developer guide, "Give SageMaker AI Hosted Endpoints Access to Resources
in Your Amazon VPC", https://docs.aws.amazon.com/sagemaker/latest/dg/host-vpc.html, and "Connect to
SageMaker AI Within your VPC",
https://docs.aws.amazon.com/sagemaker/latest/dg/interface-vpc-endpoint.html):

* S3 gateway endpoint: the model data (``S3Prefix`` ModelDataSource) and ECR's image layers, which
  ECR serves from S3 (Amazon ECR user guide, "Amazon ECR interface VPC endpoints": the S3 gateway
  endpoint is required for image pulls). Gateway endpoints cost nothing.
* ECR ``ecr.api`` and ``ecr.dkr`` interface endpoints: the image pull of the Model's container
  (registry authentication and the Docker registry API).
* SageMaker runtime interface endpoint (``sagemaker.runtime``): the callers, on 443 (InvokeEndpoint,
  response streaming) and 8443 (bidirectional streaming over HTTP/2; that port is reported by third
  parties, not AWS
  documentation: unconfirmed).
* No CloudWatch Logs or CloudWatch monitoring endpoint for SageMaker: a hosted container's stdout
  and stderr, and with them the bridge's embedded-metric-format lines, are shipped to CloudWatch
  Logs by SageMaker, not through the Model's network interfaces; with network isolation (which both
  Models have) the container cannot call any AWS API, so it has no use for one. The host-vpc page
  lists no such endpoint for hosting.
* ECS (``ecs_endpoints``, the self-managed GPU target): its instances and tasks run in the same
  subnets and call AWS themselves, so they get the endpoints of
  :data:`~constructs_lib.network.props.ECS_INTERFACE_ENDPOINTS` (ECS, ECS agent and telemetry,
  CloudWatch Logs and monitoring, Secrets Manager, EC2), open on 443 to the VPC's CIDR block, and
  the ECR endpoints let the VPC's CIDR block in too (the instances pull the image; their security
  groups are made in a later stack, which this one must not depend on).
* Amazon Connect transcription (``connect_endpoints``): its consumers run as Fargate tasks in the
  same subnets, so they get :data:`~constructs_lib.network.props.CONNECT_INTERFACE_ENDPOINTS` (SQS,
  EventBridge, CloudWatch Logs; one endpoint per service, shared with the ECS table) open on 443 to
  the VPC's CIDR block, the DynamoDB gateway endpoint on the subnets' route tables, and the VPC's
  CIDR block on the ECR and SageMaker runtime endpoints. The Kinesis Video Streams endpoint is the
  Connect construct's (``connect.kvs_vpc_endpoint``).

Security groups: the Models' network interfaces accept nothing inbound (SageMaker's runtime reaches
the container through the platform, not the interface) and send only HTTPS to the S3 prefix list and
to the interface endpoints; the interface endpoints accept HTTPS from the Models, the runtime
endpoint 443 and 8443 from the caller CIDRs.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import (
    Acknowledgment,
    CustomResource,
    Duration,
    RemovalPolicy,
    Stack,
    Token,
    Validations,
    aws_ec2 as ec2,
    aws_iam as iam,
    aws_kms as kms,
    aws_logs as logs,
)
from constructs import Construct

from constructs_lib.cleanup import cleanup_function
from constructs_lib.nag import (
    CUSTOM_RESOURCE_HANDLER_SKIPS,
    acknowledge_compliance,
    nag_render,
    skip_checkov,
    stack_singletons,
)
from constructs_lib.network.props import (
    AGENT_INTERFACE_ENDPOINTS,
    CONNECT_GATEWAY_ENDPOINTS,
    CONNECT_INTERFACE_ENDPOINTS,
    ECS_INTERFACE_ENDPOINTS,
    RUNTIME_PORTS,
    PrivateNetworkProps,
)
from constructs_lib.sagemaker_endpoint.props import LOG_RETENTION, check_log_retention_days
from constructs_lib.validation import Problems

HTTPS = 443


class PrivateNetwork(Construct):
    """A VPC for SageMaker endpoints with no route to the internet, plus VPC endpoints and security
    groups.

    New VPC (no ``existing_vpc``): private isolated subnets in ``max_azs`` Availability Zones (no
    internet gateway, no NAT gateway), DNS support and hostnames on (interface endpoints' private
    DNS needs both), flow logs of all traffic to an encrypted log group.

    Attributes:
        vpc: the VPC (``ec2.IVpc``).
        subnets: the private subnets (``ec2.ISubnet``), for the Models and for ECS instances, tasks
            and load balancers.
        subnet_ids: the private subnets for the Models' ``VpcConfig``.
        model_security_group_ids: the security groups for the Models' ``VpcConfig``.
        runtime_endpoint: the SageMaker runtime interface endpoint, or None (``create_endpoints``
            off).
        endpoints: ``{name: endpoint}`` of every VPC endpoint made here (``S3``, ``EcrApi``,
            ``EcrDocker``, ``SageMakerRuntime``, with ``ecs_endpoints`` the keys of
            ``ECS_INTERFACE_ENDPOINTS``, with ``connect_endpoints`` those of
            ``CONNECT_INTERFACE_ENDPOINTS`` and ``CONNECT_GATEWAY_ENDPOINTS``).

    Raises:
        constructs_lib.validation.PropsError: listing every invalid prop.
    """

    def __init__(
        self, scope: Construct, construct_id: str, props: PrivateNetworkProps | None = None
    ) -> None:
        props = props or PrivateNetworkProps()
        region = Stack.of(scope).region
        problems = Problems()
        props.problems(problems, None if Token.is_unresolved(region) else region)
        check_log_retention_days(problems, "flow_log_retention_days", props.flow_log_retention_days)
        problems.raise_if_any(f"PrivateNetwork {construct_id}")
        super().__init__(scope, construct_id)
        key = kms.Key.from_key_arn(self, "LogKey", props.kms_key_arn) if props.kms_key_arn else None

        existing = props.existing_vpc
        if existing is None:
            self.vpc: ec2.IVpc = self._new_vpc(props, key)
            subnets = self.vpc.isolated_subnets
        else:
            # Described, not looked up: synth needs no AWS credentials (Vpc.from_vpc_attributes).
            self.vpc = ec2.Vpc.from_vpc_attributes(
                self,
                "Vpc",
                vpc_id=existing.vpc_id,
                availability_zones=list(existing.availability_zones),
                vpc_cidr_block=existing.cidr,
            )
            subnets = [
                ec2.Subnet.from_subnet_attributes(
                    self,
                    f"Subnet{index}",
                    subnet_id=subnet_id,
                    availability_zone=zone,
                    route_table_id=existing.route_table_ids[index]
                    if existing.route_table_ids
                    else None,
                )
                for index, (subnet_id, zone) in enumerate(
                    zip(existing.subnet_ids, existing.availability_zones, strict=True)
                )
            ]
        self.subnets: list[ec2.ISubnet] = list(subnets)
        self.subnet_ids: list[str] = [subnet.subnet_id for subnet in subnets]
        selection = ec2.SubnetSelection(subnets=subnets)

        if props.security_group_ids:
            model_groups = [
                ec2.SecurityGroup.from_security_group_id(
                    self, f"ModelGroup{index}", group_id, mutable=False
                )
                for index, group_id in enumerate(props.security_group_ids)
            ]
        else:
            model_group = ec2.SecurityGroup(
                self,
                "ModelSecurityGroup",
                vpc=self.vpc,
                allow_all_outbound=False,
                description="SageMaker Models network interfaces - no inbound - HTTPS out to S3 "
                "and the VPC endpoints",
            )
            model_groups = [model_group]
            self._await_network_interfaces(model_group, subnets, key)
        self.model_security_group_ids: list[str] = [
            group.security_group_id for group in model_groups
        ]

        self.endpoints: dict[str, ec2.IVpcEndpoint] = {}
        self.runtime_endpoint: ec2.InterfaceVpcEndpoint | None = None
        if not props.create_endpoints:
            return
        s3 = self.vpc.add_gateway_endpoint(
            "S3", service=ec2.GatewayVpcEndpointAwsService.S3, subnets=[selection]
        )
        self.endpoints["S3"] = s3

        registry_group = ec2.SecurityGroup(
            self,
            "RegistryEndpointsSecurityGroup",
            vpc=self.vpc,
            allow_all_outbound=False,
            description="ECR interface endpoints - HTTPS in from the SageMaker Models only",
        )
        for name, service in (
            ("EcrApi", ec2.InterfaceVpcEndpointAwsService.ECR),
            ("EcrDocker", ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER),
        ):
            self.endpoints[name] = self.vpc.add_interface_endpoint(
                name,
                service=service,
                subnets=selection,
                security_groups=[registry_group],
                private_dns_enabled=True,
                open=False,
            )
        for group in model_groups:
            registry_group.add_ingress_rule(
                ec2.Peer.security_group_id(group.security_group_id),
                ec2.Port.tcp(HTTPS),
                "HTTPS from the SageMaker Models (image pull)",
            )
        if not props.security_group_ids:
            # S3's managed prefix list id is not known offline (only a lookup or a custom resource
            # reads it), so this names any address on 443: the subnets' only routes are the VPC
            # itself and the S3 gateway endpoint, so nothing but S3 and the VPC's own addresses (the
            # ECR endpoints) is reachable this way.
            model_group.add_egress_rule(
                ec2.Peer.any_ipv4(),
                ec2.Port.tcp(HTTPS),
                "HTTPS to S3 (gateway endpoint) and the ECR interface endpoints",
            )

        runtime_group = ec2.SecurityGroup(
            self,
            "RuntimeEndpointSecurityGroup",
            vpc=self.vpc,
            allow_all_outbound=False,
            description="SageMaker runtime interface endpoint - 443 and 8443 (bidirectional "
            "streaming) from callers",
        )
        for cidr in props.caller_cidrs or [props.cidr]:
            for port in RUNTIME_PORTS:
                # 8443: bidirectional streaming callers (reported by third parties, not AWS
                # documentation: unconfirmed).
                runtime_group.add_ingress_rule(
                    ec2.Peer.ipv4(cidr),
                    ec2.Port.tcp(port),
                    f"Callers of the SageMaker runtime on {port} from {cidr}",
                )
        self.runtime_endpoint = self.vpc.add_interface_endpoint(
            "SageMakerRuntime",
            service=ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_RUNTIME,
            subnets=selection,
            security_groups=[runtime_group],
            private_dns_enabled=True,
            open=False,
        )
        self.endpoints["SageMakerRuntime"] = self.runtime_endpoint
        if props.ecs_endpoints:
            self._ecs_endpoints(props, selection, registry_group)
        if props.connect_endpoints:
            self._connect_endpoints(props, selection, registry_group, runtime_group)
        if props.agent_endpoints:
            self._agent_endpoints(props, selection, registry_group, runtime_group)

    def _agent_endpoints(
        self,
        props: PrivateNetworkProps,
        selection: ec2.SubnetSelection,
        registry_group: ec2.SecurityGroup,
        runtime_group: ec2.SecurityGroup,
    ) -> None:
        """The endpoints the voice agent's tasks call (``AGENT_INTERFACE_ENDPOINTS``, one security
        group open on 443 to the VPC's CIDR block), and the VPC's CIDR block on the ECR endpoints
        (the image pull) and the SageMaker runtime endpoint (Voxtral's bidirectional stream on 8443,
        Sonic's response stream on 443). By CIDR: the tasks' group belongs to the Agent stack,
        which comes after this one. An endpoint another table made already is reused."""
        cidr = ec2.Peer.ipv4(props.cidr)
        if not props.ecs_endpoints and not props.connect_endpoints:
            registry_group.add_ingress_rule(
                cidr, ec2.Port.tcp(HTTPS), "HTTPS from the VPC (voice agent tasks pull their image)"
            )
        if (
            props.caller_cidrs
            and props.cidr not in props.caller_cidrs
            and not props.connect_endpoints
        ):
            for port in RUNTIME_PORTS:
                runtime_group.add_ingress_rule(
                    cidr,
                    ec2.Port.tcp(port),
                    f"The voice agent in the VPC calls the SageMaker runtime on {port}",
                )
        missing = {
            name: entry
            for name, entry in AGENT_INTERFACE_ENDPOINTS.items()
            if name not in self.endpoints
        }
        if not missing:
            return
        group = ec2.SecurityGroup(
            self,
            "AgentEndpointsSecurityGroup",
            vpc=self.vpc,
            allow_all_outbound=False,
            description="Bedrock runtime, CloudWatch Logs and ECS interface endpoints - HTTPS in "
            "from the VPC",
        )
        group.add_ingress_rule(
            cidr, ec2.Port.tcp(HTTPS), "HTTPS from the voice agent tasks in the VPC"
        )
        for name, (service, _caller) in missing.items():
            self.endpoints[name] = self.vpc.add_interface_endpoint(
                name,
                service=ec2.InterfaceVpcEndpointAwsService(service),
                subnets=selection,
                security_groups=[group],
                private_dns_enabled=True,
                open=False,
            )

    def _connect_endpoints(
        self,
        props: PrivateNetworkProps,
        selection: ec2.SubnetSelection,
        registry_group: ec2.SecurityGroup,
        runtime_group: ec2.SecurityGroup,
    ) -> None:
        """The endpoints the Connect transcription consumers call (``CONNECT_INTERFACE_ENDPOINTS``,
        in one security group open on 443 to the VPC's CIDR block; ``CONNECT_GATEWAY_ENDPOINTS`` on
        the subnets' route tables), and the VPC's CIDR block on the ECR endpoints (the image pull)
        and the runtime endpoint. By CIDR, as the ECS endpoints: the consumers' security group
        belongs to the Connect stack, which comes after this one. An endpoint the ECS table made
        already is reused (a second one with private DNS for a service is refused)."""
        cidr = ec2.Peer.ipv4(props.cidr)
        if not props.ecs_endpoints:  # the ECS endpoints opened the registry to the VPC already
            registry_group.add_ingress_rule(
                cidr,
                ec2.Port.tcp(HTTPS),
                "HTTPS from the VPC (Connect consumer tasks pull their image)",
            )
        if props.caller_cidrs and props.cidr not in props.caller_cidrs:
            for port in RUNTIME_PORTS:
                runtime_group.add_ingress_rule(
                    cidr,
                    ec2.Port.tcp(port),
                    f"The Connect consumers in the VPC call the SageMaker runtime on {port}",
                )
        for name, (service, _caller) in CONNECT_GATEWAY_ENDPOINTS.items():
            self.endpoints[name] = self.vpc.add_gateway_endpoint(
                name, service=ec2.GatewayVpcEndpointAwsService(service), subnets=[selection]
            )
        missing = {
            name: entry
            for name, entry in CONNECT_INTERFACE_ENDPOINTS.items()
            if name not in self.endpoints
        }
        if not missing:
            return
        group = ec2.SecurityGroup(
            self,
            "ConnectEndpointsSecurityGroup",
            vpc=self.vpc,
            allow_all_outbound=False,
            description="SQS, EventBridge and CloudWatch Logs interface endpoints - HTTPS in "
            "from the VPC",
        )
        group.add_ingress_rule(
            cidr, ec2.Port.tcp(HTTPS), "HTTPS from the Connect consumer tasks in the VPC"
        )
        for name, (service, _caller) in missing.items():
            self.endpoints[name] = self.vpc.add_interface_endpoint(
                name,
                service=ec2.InterfaceVpcEndpointAwsService(service),
                subnets=selection,
                security_groups=[group],
                private_dns_enabled=True,
                open=False,
            )

    def _ecs_endpoints(
        self,
        props: PrivateNetworkProps,
        selection: ec2.SubnetSelection,
        registry_group: ec2.SecurityGroup,
    ) -> None:
        """The interface endpoints ECS instances and tasks call (``ECS_INTERFACE_ENDPOINTS``), in
        one security group open on 443 to the VPC's CIDR block, and the same opening on the ECR
        endpoints' group. By CIDR, not by security group: the instances' and tasks' groups belong to
        the ECS stacks, which come after this one."""
        cidr = ec2.Peer.ipv4(props.cidr)
        registry_group.add_ingress_rule(
            cidr, ec2.Port.tcp(HTTPS), "HTTPS from the VPC (ECS instances pull images)"
        )
        group = ec2.SecurityGroup(
            self,
            "EcsEndpointsSecurityGroup",
            vpc=self.vpc,
            allow_all_outbound=False,
            description="ECS, CloudWatch, Secrets Manager and EC2 interface endpoints - HTTPS in "
            "from the VPC",
        )
        group.add_ingress_rule(
            cidr, ec2.Port.tcp(HTTPS), "HTTPS from ECS instances and tasks in the VPC"
        )
        for name, (service, _caller) in ECS_INTERFACE_ENDPOINTS.items():
            self.endpoints[name] = self.vpc.add_interface_endpoint(
                name,
                service=ec2.InterfaceVpcEndpointAwsService(service),
                subnets=selection,
                security_groups=[group],
                private_dns_enabled=True,
                open=False,
            )

    def _await_network_interfaces(
        self, group: ec2.SecurityGroup, subnets: Sequence[ec2.ISubnet], key: kms.IKey | None
    ) -> CustomResource:
        """``Custom::AwaitNetworkInterfaces``
        (``services/handlers/cleanup/network_interfaces.py``): on delete, wait until SageMaker
        has released the Models' network interfaces in ``group``, which it does some time after the
        endpoints are gone (not documented: unconfirmed), so that the group and the subnets can be
        deleted (aws-cloudformation/cloudformation-coverage-roadmap#1327 reports the
        DependencyViolation otherwise).

        Order: the resource refers to the group and the subnets, so CloudFormation deletes it before
        them; the endpoint stacks import from this stack, so ``cdk destroy`` deletes them (and the
        endpoints) first.
        """
        stack = Stack.of(self)
        interfaces = stack.format_arn(
            service="ec2", resource="network-interface", resource_name="*"
        )
        function, role = cleanup_function(
            self,
            "AwaitInterfaces",
            handler="network_interfaces.handler",
            timeout=Duration.minutes(15),
            key=key,
            description="Custom::AwaitNetworkInterfaces: waits on delete for SageMaker to "
            "release the Models' network interfaces",
            statements=[
                # DescribeNetworkInterfaces supports no resource-level permission (Service
                # Authorization Reference).
                iam.PolicyStatement(actions=["ec2:DescribeNetworkInterfaces"], resources=["*"]),
                # Only interfaces of this VPC: ec2:Vpc is a condition key of DeleteNetworkInterface
                # on the network-interface resource type (Service Authorization Reference).
                iam.PolicyStatement(
                    actions=["ec2:DeleteNetworkInterface"],
                    resources=[interfaces],
                    conditions={
                        "ArnEquals": {
                            "ec2:Vpc": stack.format_arn(
                                service="ec2", resource="vpc", resource_name=self.vpc.vpc_id
                            )
                        }
                    },
                ),
            ],
        )
        resource = CustomResource(
            self,
            "AwaitInterfacesOnDelete",
            service_token=function.function_arn,
            resource_type="Custom::AwaitNetworkInterfaces",
            properties={
                "SecurityGroupIds": [group.security_group_id],
                "SubnetIds": [subnet.subnet_id for subnet in subnets],
            },
        )  # the subnets: for the order only
        resource.node.add_dependency(role)  # its statements must still exist when the Delete runs
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="ec2:DescribeNetworkInterfaces supports no resource-level permission; it "
                "reads the interfaces of the Models' security group.",
            ),
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_render(stack, interfaces)}]",
                reason="Interface ids are SageMaker's; ec2:DeleteNetworkInterface is limited to "
                "this VPC by the ec2:Vpc condition and to detached interfaces no service manages "
                "by the handler.",
            ),
        )
        return resource

    def _new_vpc(self, props: PrivateNetworkProps, key: kms.IKey | None) -> ec2.Vpc:
        flow_logs = logs.LogGroup(
            self,
            "FlowLogs",
            retention=getattr(logs.RetentionDays, LOG_RETENTION[props.flow_log_retention_days]),
            encryption_key=key,
            removal_policy=RemovalPolicy.DESTROY,
        )
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(props.vpc_cidr),
            max_azs=props.max_azs,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="Private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=20
                )
            ],
            enable_dns_hostnames=True,
            enable_dns_support=True,
            # A new VPC's default security group allows all traffic between its members: CDK empties
            # it.
            restrict_default_security_group=True,
            flow_logs={
                "All": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
                    traffic_type=ec2.FlowLogTrafficType.ALL,
                )
            },
        )
        acknowledge_compliance(
            self,
            {
                "IAMNoInlinePolicy": "The flow log role's policy (CDK's) writes to the one flow "
                "log group; an inline policy belongs to that one role and goes with it.",
            },
        )
        # CDK's custom resource that empties the default security group runs on the Lambda runtime
        # CDK chooses.
        Validations.of(self).acknowledge(
            Acknowledgment(
                id="AwsSolutions-L1",
                reason="The Lambda function that removes the default security group's rules is "
                "CDK's own (restrictDefaultSecurityGroup); its runtime is CDK's choice.",
            )
        )
        for provider in stack_singletons(self, "Custom::VpcRestrictDefaultSG"):
            skip_checkov(provider, "AWS::Lambda::Function", CUSTOM_RESOURCE_HANDLER_SKIPS)
        return vpc
