"""The required grants (tools/cfn_rules/required_grants.py): each rule holds on a template
that grants what AWS documents and fails, naming what is missing, on the same template with the
grant taken out. That every synthesized variant holds them is tested in
tests/app/test_aws_rules.py."""

from __future__ import annotations

import copy

import pytest

from tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

# isort: split

import required_grants as rg

ROLE_ARN = {"Fn::GetAtt": ["Role", "Arn"]}
KEY_REF = {"Fn::GetAtt": ["Key", "Arn"]}
ROOT = {"AWS": "arn:aws:iam::123456789012:root"}
INSTANCE = "arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555"


def template(**resources) -> dict:
    return {
        "Resources": {
            lid: r if "Type" in r else {"Type": r["T"], "Properties": r["P"]}
            for lid, r in resources.items()
        }
    }


def res(kind: str, **props) -> dict:
    return {"T": kind, "P": props}


def allow(*actions, resource="*", **extra) -> dict:
    return {"Effect": "Allow", "Action": list(actions), "Resource": resource, **extra}


def role_with(*statements) -> dict:
    return {
        "Role": res("AWS::IAM::Role", AssumeRolePolicyDocument={}),
        "Policy": res(
            "AWS::IAM::Policy",
            Roles=[{"Ref": "Role"}],
            PolicyDocument={"Statement": list(statements)},
        ),
    }


def key_with(*statements) -> dict:
    return {"Key": res("AWS::KMS::Key", KeyPolicy={"Statement": list(statements)})}


def found(rule, tpl) -> list[str]:
    return [message for _, message in rule().findings(tpl)]


def without(tpl: dict, lid: str, action: str) -> dict:
    """``tpl`` with ``action`` taken out of every statement of ``lid``'s policy document or key
    policy."""
    broken = copy.deepcopy(tpl)
    props = broken["Resources"][lid]["Properties"]
    for s in (props.get("PolicyDocument") or props.get("KeyPolicy"))["Statement"]:
        s["Action"] = [a for a in s["Action"] if a != action]
    return broken


# ---------------------------------------------------------------------------------------- SageMaker
def vpc_model(**model) -> dict:
    return template(
        **role_with(
            allow(*rg.SAGEMAKER_VPC_ACTIONS),
            allow("cloudwatch:PutMetricData", *rg.LOG_WRITE_ACTIONS),
            allow(*rg.ECR_PULL_ACTIONS),
        ),
        Model=res(
            "AWS::SageMaker::Model",
            ExecutionRoleArn=ROLE_ARN,
            VpcConfig={"Subnets": ["subnet-1"]},
            PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/r:1"},
            **model,
        ),
    )


@pytest.mark.parametrize(
    "action",
    [
        "ec2:CreateNetworkInterface",
        "ec2:DeleteNetworkInterfacePermission",
        "ec2:DescribeVpcEndpoints",
    ],
)
def test_a_model_in_a_vpc_needs_every_network_interface_action(action):
    assert found(rg.SageMakerModelInVpcRole, vpc_model()) == []
    assert found(rg.SageMakerModelInVpcRole, without(vpc_model(), "Policy", action)) == [
        f"Model has VpcConfig but its role Role does not allow {action}"
    ]


def test_a_model_outside_a_vpc_needs_no_network_interface_action():
    tpl = without(vpc_model(), "Policy", "ec2:CreateNetworkInterface")
    del tpl["Resources"]["Model"]["Properties"]["VpcConfig"]
    assert found(rg.SageMakerModelInVpcRole, tpl) == []


def test_a_wildcard_grant_counts_and_a_deny_does_not():
    tpl = template(
        **role_with(allow("ec2:*")),
        Model=res("AWS::SageMaker::Model", ExecutionRoleArn=ROLE_ARN, VpcConfig={"Subnets": ["s"]}),
    )
    assert found(rg.SageMakerModelInVpcRole, tpl) == []
    tpl["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"][0]["Effect"] = "Deny"
    assert len(found(rg.SageMakerModelInVpcRole, tpl)) == 1


@pytest.mark.parametrize(
    "action", ["ecr:BatchGetImage", "logs:PutLogEvents", "cloudwatch:PutMetricData"]
)
def test_a_model_role_pulls_its_image_writes_logs_and_metrics(action):
    assert found(rg.SageMakerModelRoleBasics, vpc_model()) == []
    assert found(rg.SageMakerModelRoleBasics, without(vpc_model(), "Policy", action)) == [
        f"the role Role of Model does not allow {action}"
    ]


def test_rollback_alarms_need_describe_alarms_on_the_models_role():
    tpl = vpc_model()
    tpl["Resources"]["Config"] = {
        "Type": "AWS::SageMaker::EndpointConfig",
        "Properties": {
            "ProductionVariants": [{"ModelName": {"Fn::GetAtt": ["Model", "ModelName"]}}]
        },
    }
    tpl["Resources"]["Endpoint"] = {
        "Type": "AWS::SageMaker::Endpoint",
        "Properties": {
            "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
            "DeploymentConfig": {"AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "a"}]}},
        },
    }
    assert found(rg.SageMakerRollbackAlarmsRole, tpl) == [
        "Endpoint rolls back on alarms but Role (role of Model) may not describe them"
    ]
    tpl["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"].append(
        allow("cloudwatch:DescribeAlarms", resource="arn:aws:cloudwatch:us-east-1:1:alarm:a")
    )
    assert found(rg.SageMakerRollbackAlarmsRole, tpl) == []


def test_a_volume_key_delegates_to_the_account():
    tpl = template(
        **key_with(allow("kms:*", Principal=ROOT)),
        Config=res("AWS::SageMaker::EndpointConfig", KmsKeyId=KEY_REF, ProductionVariants=[]),
    )
    assert found(rg.SageMakerVolumeKeyPolicy, tpl) == []
    assert found(rg.SageMakerVolumeKeyPolicy, without(tpl, "Key", "kms:*")) == [
        "the policy of key Key does not let the account's IAM roles use it"
    ]


# ---------------------------------------------------------------------------------------------- ECS
def task(**props) -> dict:
    return template(
        **role_with(
            allow(*rg.ECR_PULL_ACTIONS),
            allow(*rg.LOG_WRITE_ACTIONS),
            allow("secretsmanager:GetSecretValue", resource={"Ref": "Secret"}),
        ),
        Secret=res("AWS::SecretsManager::Secret", GenerateSecretString={}),
        Task=res(
            "AWS::ECS::TaskDefinition",
            RequiresCompatibilities=["FARGATE"],
            ExecutionRoleArn=ROLE_ARN,
            ContainerDefinitions=[
                {
                    "Image": "1.dkr.ecr.us-east-1.amazonaws.com/r:1",
                    "LogConfiguration": {"LogDriver": "awslogs"},
                    "Secrets": [{"Name": "T", "ValueFrom": {"Ref": "Secret"}}],
                }
            ],
            **props,
        ),
    )


@pytest.mark.parametrize(
    "action", ["ecr:GetAuthorizationToken", "logs:CreateLogStream", "secretsmanager:GetSecretValue"]
)
def test_a_task_execution_role_pulls_logs_and_reads_its_secrets(action):
    assert found(rg.EcsTaskExecutionRole, task()) == []
    assert found(rg.EcsTaskExecutionRole, without(task(), "Policy", action)) == [
        f"the execution role Role of Task does not allow {action}"
    ]


def test_a_fargate_task_that_pulls_from_ecr_has_an_execution_role():
    tpl = task()
    del tpl["Resources"]["Task"]["Properties"]["ExecutionRoleArn"]
    assert found(rg.EcsTaskExecutionRole, tpl) == [
        "Task pulls from ECR, logs with awslogs or reads secrets: it needs one"
    ]


def test_the_managed_task_execution_policy_counts():
    tpl = task()
    tpl["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"] = [
        allow("secretsmanager:GetSecretValue", resource={"Ref": "Secret"})
    ]
    assert len(found(rg.EcsTaskExecutionRole, tpl)) == 1
    tpl["Resources"]["Role"]["Properties"]["ManagedPolicyArns"] = [
        "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
    ]
    assert found(rg.EcsTaskExecutionRole, tpl) == []


# ------------------------------------------------------------------------------------------- Lambda
def test_a_function_in_a_vpc_manages_its_network_interfaces():
    tpl = template(
        **role_with(allow(*rg.LAMBDA_VPC_ACTIONS)),
        Function=res("AWS::Lambda::Function", Role=ROLE_ARN, VpcConfig={"SubnetIds": ["s"]}),
    )
    assert found(rg.LambdaInVpcRole, tpl) == []
    assert found(rg.LambdaInVpcRole, without(tpl, "Policy", "ec2:DeleteNetworkInterface")) == [
        "Function runs in a VPC but its role Role does not allow ec2:DeleteNetworkInterface"
    ]


# -------------------------------------------------------------------------------------- EventBridge
EVENTS = {"Service": "events.amazonaws.com"}
SOURCE = {"ArnLike": {"aws:SourceArn": "arn:aws:events:us-east-1:123456789012:event-bus/*"}}


DLQ_KEY_REF = {"Fn::GetAtt": ["DlqKey", "Arn"]}


def bus(describe_condition=None) -> dict:
    """An encrypted bus whose DLQ is under a key of its own (the bus's key would refuse it the same
    errors)."""
    describe = allow("kms:DescribeKey", Principal=EVENTS)
    if describe_condition:
        describe["Condition"] = describe_condition
    return template(
        **key_with(
            allow("kms:*", Principal=ROOT),
            describe,
            allow("kms:GenerateDataKey", "kms:Decrypt", Principal=EVENTS, Condition=SOURCE),
        ),
        DlqKey=res(
            "AWS::KMS::Key",
            KeyPolicy={
                "Statement": [
                    allow("kms:*", Principal=ROOT),
                    allow("kms:GenerateDataKey", "kms:Decrypt", Principal=EVENTS),
                ]
            },
        ),
        Bus=res(
            "AWS::Events::EventBus",
            Name="b",
            KmsKeyIdentifier=KEY_REF,
            DeadLetterConfig={"Arn": {"Fn::GetAtt": ["Dlq", "Arn"]}},
        ),
        Dlq=res("AWS::SQS::Queue", KmsMasterKeyId=DLQ_KEY_REF),
        DlqPolicy=res(
            "AWS::SQS::QueuePolicy",
            Queues=[{"Ref": "Dlq"}],
            PolicyDocument={
                "Statement": [
                    allow(
                        "sqs:SendMessage", Principal=EVENTS, resource={"Fn::GetAtt": ["Dlq", "Arn"]}
                    )
                ]
            },
        ),
    )


@pytest.mark.parametrize("action", ["kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt"])
def test_an_encrypted_bus_key_lets_eventbridge_describe_encrypt_and_decrypt(action):
    assert found(rg.EventBusKeyPolicy, bus()) == []
    assert found(rg.EventBusKeyPolicy, without(bus(), "Key", action)) == [
        f"key Key does not allow events.amazonaws.com {action}"
    ]


def test_describe_key_is_not_conditioned_on_the_bus():
    assert found(rg.EventBusKeyPolicy, bus(describe_condition=SOURCE)) == [
        "key Key allows events.amazonaws.com kms:DescribeKey only under aws:SourceArn"
    ]


def test_an_encrypted_bus_has_a_standard_dead_letter_queue_eventbridge_may_use():
    assert found(rg.EncryptedEventBusDeadLetters, bus()) == []
    no_dlq = bus()
    del no_dlq["Resources"]["Bus"]["Properties"]["DeadLetterConfig"]
    assert found(rg.EncryptedEventBusDeadLetters, no_dlq) == [
        "Bus is encrypted with a customer managed key and has no dead-letter queue"
    ]
    fifo = bus()
    fifo["Resources"]["Dlq"]["Properties"]["FifoQueue"] = True
    assert found(rg.EncryptedEventBusDeadLetters, fifo) == [
        "Dlq is a FIFO queue; EventBridge DLQs are standard queues"
    ]
    assert found(
        rg.EncryptedEventBusDeadLetters, without(bus(), "DlqPolicy", "sqs:SendMessage")
    ) == ["the policy of Dlq does not let events.amazonaws.com send to it"]
    no_generate = without(bus(), "DlqKey", "kms:GenerateDataKey")
    assert found(rg.EncryptedEventBusDeadLetters, no_generate) == [
        "Dlq's key DlqKey does not allow events.amazonaws.com kms:GenerateDataKey"
    ]


def test_a_bus_dead_letter_queue_is_not_under_the_bus_key_nor_an_aws_managed_key():
    """The bus's DLQ takes events on 'the specified customer managed key being disabled or
    missing': under the same key it would be refused too. An AWS managed key's policy cannot let
    EventBridge use it. SQS-managed encryption (no key) holds."""
    same = bus()
    same["Resources"]["Dlq"]["Properties"]["KmsMasterKeyId"] = KEY_REF
    assert found(rg.EncryptedEventBusDeadLetters, same) == [
        "Dlq is under the bus's own key Key: the key disabled or missing, the errors it is for, "
        "would refuse its messages too"
    ]
    managed = bus()
    managed["Resources"]["Dlq"]["Properties"]["KmsMasterKeyId"] = "alias/aws/sqs"
    assert found(rg.EncryptedEventBusDeadLetters, managed) == [
        "Dlq is under the AWS managed key alias/aws/sqs, whose policy cannot let "
        "events.amazonaws.com use it"
    ]
    sse_sqs = bus()
    sse_sqs["Resources"]["Dlq"]["Properties"] = {"SqsManagedSseEnabled": True}
    assert found(rg.EncryptedEventBusDeadLetters, sse_sqs) == []


# ------------------------------------------------------------------------------------------- SQS
# and DynamoDB
def queue_users() -> dict:
    arn = {"Fn::GetAtt": ["Queue", "Arn"]}
    return template(
        **role_with(
            allow("sqs:SendMessage", resource=arn),
            allow("sqs:ReceiveMessage", resource=arn),
            allow("kms:GenerateDataKey", "kms:Decrypt", resource=KEY_REF),
        ),
        Queue=res("AWS::SQS::Queue", KmsMasterKeyId=KEY_REF),
    )


@pytest.mark.parametrize("action", ["kms:GenerateDataKey", "kms:Decrypt"])
def test_a_role_using_an_encrypted_queue_may_use_its_key(action):
    assert found(rg.SqsKeyForProducersAndConsumers, queue_users()) == []
    assert found(rg.SqsKeyForProducersAndConsumers, without(queue_users(), "Policy", action)) == [
        f"Role uses queue Queue but may not {action} with its key"
    ]


def test_a_grant_on_another_key_does_not_count():
    tpl = queue_users()
    tpl["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"][2]["Resource"] = (
        "arn:aws:kms:x:1:key/o"
    )
    assert found(rg.SqsKeyForProducersAndConsumers, tpl) == [
        "Role uses queue Queue but may not kms:Decrypt, kms:GenerateDataKey with its key"
    ]


def test_a_table_key_lets_dynamodb_create_grants():
    tpl = template(
        **key_with(allow("kms:*", Principal=ROOT)),
        Table=res("AWS::DynamoDB::Table", SSESpecification={"KMSMasterKeyId": KEY_REF}),
    )
    assert found(rg.DynamoDbTableKey, tpl) == []
    assert found(rg.DynamoDbTableKey, without(tpl, "Key", "kms:*")) == [
        "the policy of key Key lets no principal use it for DynamoDB"
    ]


# ------------------------------------------------------------------------------------------ Connect
def connect(**extra) -> dict:
    return template(
        **key_with(allow("kms:*", Principal=ROOT)),
        **role_with(
            allow(
                "kinesisvideo:GetMedia", resource="arn:aws:kinesisvideo:us-east-1:1:stream/voice*/*"
            ),
            allow("kms:Decrypt", resource=KEY_REF),
        ),
        Storage=res(
            "AWS::Connect::InstanceStorageConfig",
            KinesisVideoStreamConfig={
                "Prefix": "voice",
                "EncryptionConfig": {"EncryptionType": "KMS", "KeyId": KEY_REF},
            },
        ),
        Function=res("AWS::Lambda::Function", Role="r"),
        Invoke=res(
            "AWS::Lambda::Permission",
            FunctionName={"Fn::GetAtt": ["Function", "Arn"]},
            Principal="connect.amazonaws.com",
            SourceArn=INSTANCE,
            SourceAccount="123456789012",
        ),
        Association=res(
            "AWS::Connect::IntegrationAssociation",
            InstanceId=INSTANCE,
            IntegrationType="LAMBDA_FUNCTION",
            IntegrationArn={"Fn::GetAtt": ["Function", "Arn"]},
        ),
        Flow={
            "Type": "AWS::Connect::ContactFlow",
            "DependsOn": ["Association"],
            "Properties": {
                "Content": {"Fn::Sub": ["{...}", {"F": {"Fn::GetAtt": ["Function", "Arn"]}}]}
            },
        },
        **extra,
    )


def test_stream_readers_may_decrypt_with_the_stream_key():
    assert found(rg.KinesisVideoStreamKeyForConsumers, connect()) == []
    assert found(
        rg.KinesisVideoStreamKeyForConsumers, without(connect(), "Policy", "kms:Decrypt")
    ) == ["Role reads Connect's streams (voice) but may not kms:Decrypt with their key"]
    assert found(rg.KinesisVideoStreamKeyForConsumers, without(connect(), "Key", "kms:*")) == [
        "the policy of stream key Key does not delegate to IAM"
    ]


def test_a_stream_reader_on_every_resource_may_decrypt_too():
    """A GetMedia grant on "*" reads Connect's streams as well as one on their ARNs."""
    broad = without(connect(), "Policy", "kms:Decrypt")
    broad["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"][0]["Resource"] = "*"
    assert found(rg.KinesisVideoStreamKeyForConsumers, broad) == [
        "Role reads Connect's streams (voice) but may not kms:Decrypt with their key"
    ]


def test_a_flow_naming_the_function_in_its_fn_sub_text_waits_for_the_association():
    """``${Function.Arn}`` in the Fn::Sub text names the function as a GetAtt would."""
    early = connect()
    del early["Resources"]["Flow"]["DependsOn"]
    early["Resources"]["Flow"]["Properties"]["Content"] = {"Fn::Sub": '{"Arn": "${Function.Arn}"}'}
    assert found(rg.ConnectFunctionAssociation, early) == [
        "Flow invokes Function but is not created after its association Association"
    ]


def test_an_associated_function_lets_connect_invoke_it_and_flows_wait_for_the_association():
    assert found(rg.ConnectFunctionAssociation, connect()) == []
    other = connect()
    other["Resources"]["Invoke"]["Properties"]["SourceAccount"] = "210987654321"
    assert found(rg.ConnectFunctionAssociation, other) == [
        f"Function's permission for {INSTANCE} names another SourceAccount than the instance's "
        "123456789012"
    ]
    none = connect()
    del none["Resources"]["Invoke"]
    assert found(rg.ConnectFunctionAssociation, none) == [
        f"no permission lets connect.amazonaws.com invoke Function for {INSTANCE}"
    ]
    early = connect()
    del early["Resources"]["Flow"]["DependsOn"]
    assert found(rg.ConnectFunctionAssociation, early) == [
        "Flow invokes Function but is not created after its association Association"
    ]


def test_every_rule_has_a_source_and_an_id_of_its_own():
    ids = [rule.id for rule in rg.RULES]
    assert len(ids) == len(set(ids)) and all(i.startswith("E90") for i in ids)
    assert all(rule.source_url.startswith("https://docs.aws.amazon.com/") for rule in rg.RULES)


# ---------------------------------------------------------------------------------------- Fargate's
# routes out
def fargate_in_private_subnets(*services: str, nat=False) -> dict:
    tpl = task()
    resources = tpl["Resources"]
    resources["Vpc"] = {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}
    resources["Subnet"] = {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}}}
    resources["Table"] = {"Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": {"Ref": "Vpc"}}}
    resources["Assoc"] = {
        "Type": "AWS::EC2::SubnetRouteTableAssociation",
        "Properties": {"SubnetId": {"Ref": "Subnet"}, "RouteTableId": {"Ref": "Table"}},
    }
    if nat:
        resources["Nat"] = {
            "Type": "AWS::EC2::Route",
            "Properties": {
                "RouteTableId": {"Ref": "Table"},
                "NatGatewayId": "nat-1",
                "DestinationCidrBlock": "0.0.0.0/0",
            },
        }
    for i, service in enumerate(services):
        resources[f"E{i}"] = {
            "Type": "AWS::EC2::VPCEndpoint",
            "Properties": {
                "VpcId": {"Ref": "Vpc"},
                "ServiceName": {
                    "Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, f".{service}"]]
                },
            },
        }
    resources["Service"] = {
        "Type": "AWS::ECS::Service",
        "Properties": {
            "TaskDefinition": {"Ref": "Task"},
            "LaunchType": "FARGATE",
            "NetworkConfiguration": {
                "AwsvpcConfiguration": {
                    "AssignPublicIp": "DISABLED",
                    "Subnets": [{"Ref": "Subnet"}],
                }
            },
        },
    }
    return tpl


def test_fargate_in_private_subnets_reaches_ecr_s3_and_logs_through_endpoints_or_a_nat():
    assert (
        found(
            rg.FargatePrivateSubnetRoutes,
            fargate_in_private_subnets("ecr.api", "ecr.dkr", "s3", "logs"),
        )
        == []
    )
    assert found(rg.FargatePrivateSubnetRoutes, fargate_in_private_subnets("ecr.api", "s3")) == [
        "Service runs on Fargate in private subnets with no NAT route, and their VPC has no "
        "ecr.dkr, logs endpoint"
    ]
    assert found(rg.FargatePrivateSubnetRoutes, fargate_in_private_subnets(nat=True)) == []
