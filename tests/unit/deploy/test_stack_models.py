"""Every resource of the stack, read as the API calls CloudFormation makes for it, is a valid request.

CloudFormation's resource providers turn a resource's properties into service calls (a queue into
``CreateQueue`` with attributes, a rule into ``PutRule`` and ``PutTargets``, a role into ``CreateRole``
and one ``PutRolePolicy`` per inline policy ...). Each mapping below is that translation, written
from the resource type's documentation; the request it gives is checked against botocore's model of
the service: names, types, required members, lengths and enum values. A property a mapping does not
know fails the test, so a property added to the template is checked the day it is added.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import botocore.session
import pytest
from botocore.model import Shape
from botocore.validate import validate_parameters

from icestream.deploy import cloudformation
from tests.helpers.cloudformation import NO_VALUE, delivery_stream_request, resolve

Call = tuple[str, str, dict[str, Any]]  # service, operation, request
MODELS = botocore.session.get_session()


class StackValues(dict):
    """A stack's values: pseudo parameters, the parameters' defaults, and a stand-in for any other."""

    def __missing__(self, name: str) -> str:
        if name.endswith(".Arn"):
            return f"arn:aws:iam::123456789012:role/{name.split('.')[0]}"
        return f"{name.replace('.', '-').lower()}-value"


def stack_values(template: dict[str, Any]) -> StackValues:
    values = StackValues({"AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws",
                          "AWS::StackName": "icestream", "AWS::NoValue": NO_VALUE})  # fmt: skip
    for name, parameter in template["Parameters"].items():
        default = parameter.get("Default", "")
        if parameter["Type"].startswith("List<") or parameter["Type"] == "CommaDelimitedList":
            values[name] = [f"{name.lower()}-1", f"{name.lower()}-2"]
        elif parameter["Type"] == "Number":
            values[name] = int(default or 1)
        else:
            values[name] = default or f"{name.lower()}-value"
    return values


def known(properties: dict[str, Any], *names: str) -> None:
    unknown = set(properties) - set(names)
    assert not unknown, f"no API mapping for {sorted(unknown)}: add it to this test's mapping"


def camel(node: Any) -> Any:
    """CloudFormation's PascalCase keys as the lowerCamel members of the newer APIs (EMR Serverless)."""
    if isinstance(node, dict):
        return {key[:1].lower() + key[1:]: camel(value) for key, value in node.items()}
    if isinstance(node, list):
        return [camel(item) for item in node]
    return node


def queue(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "KmsMasterKeyId", "MessageRetentionPeriod")
    yield "sqs", "CreateQueue", {"QueueName": "q", "Attributes": {key: str(value) for key, value in p.items()}}


def topic(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "KmsMasterKeyId")
    yield "sns", "CreateTopic", {"Name": "t", "Attributes": {key: str(value) for key, value in p.items()}}


def topic_policy(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "Topics", "PolicyDocument")
    for arn in p["Topics"]:
        request = {"TopicArn": arn, "AttributeName": "Policy", "AttributeValue": json.dumps(p["PolicyDocument"])}
        yield "sns", "SetTopicAttributes", request


def subscription(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "TopicArn", "Protocol", "Endpoint")
    yield "sns", "Subscribe", dict(p)


def rule(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "Description", "EventPattern", "ScheduleExpression", "State", "Targets")
    request = {"Name": "r", **{key: value for key, value in p.items() if key != "Targets"}}
    if "EventPattern" in request:
        request["EventPattern"] = json.dumps(request["EventPattern"])
    yield "events", "PutRule", request
    yield "events", "PutTargets", {"Rule": "r", "Targets": p["Targets"]}


def alarm(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "AlarmActions", "AlarmDescription", "ComparisonOperator", "Dimensions", "EvaluationPeriods",
          "MetricName", "Namespace", "OKActions", "Period", "Statistic", "Threshold", "TreatMissingData")  # fmt: skip
    numbers = {"Threshold": float, "Period": int, "EvaluationPeriods": int}
    request = {key: numbers[key](value) if key in numbers else value for key, value in p.items()}
    yield "cloudwatch", "PutMetricAlarm", {"AlarmName": "a", **request}


def permissions(entries: list[dict[str, Any]], peer: str) -> list[dict[str, Any]]:
    """CloudFormation's flat ingress/egress entries as EC2's IpPermissions."""
    result = []
    for entry in entries:
        known(entry, "IpProtocol", "FromPort", "ToPort", "CidrIp", peer, "Description")
        permission = {key: entry[key] for key in ("IpProtocol", "FromPort", "ToPort") if key in entry}
        if "CidrIp" in entry:
            permission["IpRanges"] = [{"CidrIp": entry["CidrIp"], "Description": entry.get("Description", "")}]
        if peer in entry:
            permission["UserIdGroupPairs"] = [{"GroupId": entry[peer], "Description": entry.get("Description", "")}]
        result.append(permission)
    return result


def security_group(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "GroupDescription", "VpcId", "SecurityGroupEgress", "SecurityGroupIngress")
    yield "ec2", "CreateSecurityGroup", {"GroupName": "g", "Description": p["GroupDescription"], "VpcId": p["VpcId"]}
    if "SecurityGroupIngress" in p:
        ingress = permissions(p["SecurityGroupIngress"], "SourceSecurityGroupId")
        yield "ec2", "AuthorizeSecurityGroupIngress", {"GroupId": "sg-1", "IpPermissions": ingress}
    if "SecurityGroupEgress" in p:
        egress = permissions(p["SecurityGroupEgress"], "DestinationSecurityGroupId")
        yield "ec2", "AuthorizeSecurityGroupEgress", {"GroupId": "sg-1", "IpPermissions": egress}


def endpoint(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "VpcId", "ServiceName", "VpcEndpointType", "SubnetIds", "SecurityGroupIds", "PrivateDnsEnabled",
          "RouteTableIds")  # fmt: skip
    yield "ec2", "CreateVpcEndpoint", dict(p)


def state_machine(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "StateMachineName", "StateMachineType", "RoleArn", "DefinitionString")
    json.loads(p["DefinitionString"])  # a definition that is not JSON fails at deploy time
    request = {"name": p["StateMachineName"], "type": p["StateMachineType"], "roleArn": p["RoleArn"],
               "definition": p["DefinitionString"]}  # fmt: skip
    yield "stepfunctions", "CreateStateMachine", request


def role(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "AssumeRolePolicyDocument", "Description", "Policies")
    yield "iam", "CreateRole", {"RoleName": "r", "Description": p.get("Description", ""),
                                "AssumeRolePolicyDocument": json.dumps(p["AssumeRolePolicyDocument"])}  # fmt: skip
    for policy in p.get("Policies", []):
        known(policy, "PolicyName", "PolicyDocument")
        request = {
            "RoleName": "r",
            "PolicyName": policy["PolicyName"],
            "PolicyDocument": json.dumps(policy["PolicyDocument"]),
        }
        yield "iam", "PutRolePolicy", request


def managed_policy(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "Description", "PolicyDocument")
    request = {
        "PolicyName": "p",
        "Description": p.get("Description", ""),
        "PolicyDocument": json.dumps(p["PolicyDocument"]),
    }
    yield "iam", "CreatePolicy", request


def key(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "Description", "EnableKeyRotation", "KeyPolicy")
    yield "kms", "CreateKey", {"Description": p["Description"], "Policy": json.dumps(p["KeyPolicy"])}
    if p.get("EnableKeyRotation"):
        yield "kms", "EnableKeyRotation", {"KeyId": "k"}


def alias(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "AliasName", "TargetKeyId")
    yield "kms", "CreateAlias", dict(p)


def stream(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "Name", "ShardCount", "RetentionPeriodHours", "StreamModeDetails", "StreamEncryption")
    yield "kinesis", "CreateStream", {"StreamName": p["Name"], "ShardCount": p["ShardCount"],
                                      "StreamModeDetails": p["StreamModeDetails"]}  # fmt: skip
    yield (
        "kinesis",
        "IncreaseStreamRetentionPeriod",
        {"StreamName": p["Name"], "RetentionPeriodHours": p["RetentionPeriodHours"]},
    )
    yield "kinesis", "StartStreamEncryption", {"StreamName": p["Name"], **p["StreamEncryption"]}


def bucket(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "BucketEncryption", "PublicAccessBlockConfiguration", "OwnershipControls", "LifecycleConfiguration")
    yield "s3", "CreateBucket", {"Bucket": "b"}
    rules = [  # CloudFormation's ServerSideEncryptionByDefault is the API's ApplyServerSideEncryptionByDefault
        {("ApplyServerSideEncryptionByDefault" if name == "ServerSideEncryptionByDefault" else name): value
         for name, value in entry.items()}
        for entry in p["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    ]  # fmt: skip
    yield "s3", "PutBucketEncryption", {"Bucket": "b", "ServerSideEncryptionConfiguration": {"Rules": rules}}
    yield (
        "s3",
        "PutPublicAccessBlock",
        {"Bucket": "b", "PublicAccessBlockConfiguration": p["PublicAccessBlockConfiguration"]},
    )
    yield "s3", "PutBucketOwnershipControls", {"Bucket": "b", "OwnershipControls": p["OwnershipControls"]}
    lifecycle = []
    for entry in p["LifecycleConfiguration"]["Rules"]:  # CloudFormation's rule: a prefix, not a filter
        known(entry, "Id", "Status", "Prefix", "AbortIncompleteMultipartUpload", "ExpirationInDays")
        converted = {"ID": entry["Id"], "Status": entry["Status"], "Filter": {"Prefix": entry.get("Prefix", "")}}
        if "AbortIncompleteMultipartUpload" in entry:
            converted["AbortIncompleteMultipartUpload"] = entry["AbortIncompleteMultipartUpload"]
        if "ExpirationInDays" in entry:
            converted["Expiration"] = {"Days": entry["ExpirationInDays"]}
        lifecycle.append(converted)
    yield "s3", "PutBucketLifecycleConfiguration", {"Bucket": "b", "LifecycleConfiguration": {"Rules": lifecycle}}


def bucket_policy(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "Bucket", "PolicyDocument")
    yield "s3", "PutBucketPolicy", {"Bucket": p["Bucket"], "Policy": json.dumps(p["PolicyDocument"])}


def database(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "CatalogId", "DatabaseInput")
    yield "glue", "CreateDatabase", dict(p)


def application(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "Name", "Type", "ReleaseLabel", "NetworkConfiguration", "AutoStopConfiguration")
    yield "emr-serverless", "CreateApplication", {**camel(p), "clientToken": "t"}


def schedule(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "Description", "FlexibleTimeWindow", "Name", "ScheduleExpression", "ScheduleExpressionTimezone",
          "State", "Target")  # fmt: skip
    yield "scheduler", "CreateSchedule", dict(p)


def workgroup(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "Description", "Name", "State", "WorkGroupConfiguration")
    # The API calls the configuration Configuration; State is UpdateWorkGroup's.
    request = {
        ("Configuration" if key == "WorkGroupConfiguration" else key): value
        for key, value in p.items()
        if key != "State"
    }
    yield "athena", "CreateWorkGroup", request


def named_query(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "Database", "Description", "Name", "QueryString", "WorkGroup")
    yield "athena", "CreateNamedQuery", dict(p)


def function(p: dict[str, Any]) -> Iterator[Call]:
    known(
        p, "FunctionName", "Description", "Runtime", "Handler", "Role", "Timeout", "MemorySize", "Code", "Environment"
    )
    known(p["Code"], "ZipFile")  # CloudFormation zips the inline source as index.py (4,096 characters at most)
    assert len(p["Code"]["ZipFile"]) <= 4096, "inline Lambda source is limited to 4,096 characters"
    compile(p["Code"]["ZipFile"], "index.py", "exec")  # a handler that is not Python fails at its first call
    request = {key: value for key, value in p.items() if key != "Code"}
    yield "lambda", "CreateFunction", {**request, "Code": {"ZipFile": p["Code"]["ZipFile"].encode()}}


def delivery_stream(p: dict[str, Any]) -> Iterator[Call]:
    known(p, "DeliveryStreamName", "DeliveryStreamType", "KinesisStreamSourceConfiguration",
          "IcebergDestinationConfiguration")  # fmt: skip
    yield "firehose", "CreateDeliveryStream", delivery_stream_request(p)


MAPPINGS: dict[str, Callable[[dict[str, Any]], Iterator[Call]]] = {
    "AWS::SQS::Queue": queue,
    "AWS::SNS::Topic": topic,
    "AWS::SNS::TopicPolicy": topic_policy,
    "AWS::SNS::Subscription": subscription,
    "AWS::Events::Rule": rule,
    "AWS::CloudWatch::Alarm": alarm,
    "AWS::EC2::SecurityGroup": security_group,
    "AWS::EC2::VPCEndpoint": endpoint,
    "AWS::StepFunctions::StateMachine": state_machine,
    "AWS::IAM::Role": role,
    "AWS::IAM::ManagedPolicy": managed_policy,
    "AWS::KMS::Key": key,
    "AWS::KMS::Alias": alias,
    "AWS::Kinesis::Stream": stream,
    "AWS::S3::Bucket": bucket,
    "AWS::S3::BucketPolicy": bucket_policy,
    "AWS::Glue::Database": database,
    "AWS::EMRServerless::Application": application,
    "AWS::Scheduler::Schedule": schedule,
    "AWS::Athena::WorkGroup": workgroup,
    "AWS::Athena::NamedQuery": named_query,
    "AWS::Lambda::Function": function,
    "AWS::KinesisFirehose::DeliveryStream": delivery_stream,
}


def enum_problems(value: Any, shape: Shape, where: str) -> list[str]:
    """Values outside an enum the model declares (botocore's validator checks types, not enums)."""
    if shape.type_name == "structure" and isinstance(value, dict):
        return [problem for name, item in value.items() if name in shape.members
                for problem in enum_problems(item, shape.members[name], f"{where}.{name}")]  # fmt: skip
    if shape.type_name == "list" and isinstance(value, list):
        return [
            problem
            for index, item in enumerate(value)
            for problem in enum_problems(item, shape.member, f"{where}[{index}]")
        ]
    if shape.type_name == "map" and isinstance(value, dict):
        keys = [f"{where}: key {name!r}" for name in value if shape.key.enum and name not in shape.key.enum]
        return keys + [
            problem for name, item in value.items() for problem in enum_problems(item, shape.value, f"{where}.{name}")
        ]
    if shape.type_name == "string" and shape.enum and value not in shape.enum:
        return [f"{where}: {value!r} is not one of {shape.enum}"]
    return []


def check(service: str, operation: str, request: dict[str, Any]) -> None:
    shape = MODELS.get_service_model(service).operation_model(operation).input_shape
    validate_parameters(request, shape)
    assert enum_problems(request, shape, f"{service}:{operation}") == []


TEMPLATE = cloudformation.template()
VALUES = stack_values(TEMPLATE)
CONDITIONS = {name: True for name in TEMPLATE.get("Conditions", {})}


def test_every_resource_type_has_a_mapping() -> None:
    assert {resource["Type"] for resource in TEMPLATE["Resources"].values()} - set(MAPPINGS) == set()


@pytest.mark.parametrize("logical_id", sorted(TEMPLATE["Resources"]))
def test_the_resource_is_valid_requests_to_its_service(logical_id: str) -> None:
    resource = TEMPLATE["Resources"][logical_id]
    properties = resolve(resource.get("Properties", {}), VALUES, CONDITIONS)
    calls = list(MAPPINGS[resource["Type"]](properties))
    assert calls
    for service, operation, request in calls:
        check(service, operation, request)


def test_a_wrong_value_is_caught() -> None:
    """The check is not a formality: a misspelt enum, a wrong type and a missing member all fail."""
    from botocore.exceptions import ParamValidationError

    alarm_request = {"AlarmName": "a", "EvaluationPeriods": 1, "ComparisonOperator": "GreaterThan"}
    with pytest.raises(AssertionError, match="GreaterThan"):
        check("cloudwatch", "PutMetricAlarm", alarm_request)
    with pytest.raises(ParamValidationError):
        check("sqs", "CreateQueue", {"QueueName": 5})
    with pytest.raises(ParamValidationError):
        check("ec2", "CreateVpcEndpoint", {"ServiceName": "com.amazonaws.eu-west-1.s3"})  # no VpcId
    with pytest.raises(AssertionError, match="no API mapping"):
        list(queue({"KmsMasterKeyId": "k", "FifoQueue": True}))
