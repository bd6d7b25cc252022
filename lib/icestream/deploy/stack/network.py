"""The jobs' network: a security group, a Kinesis interface endpoint, an S3 gateway endpoint, the application.

EMR Serverless without a network configuration reaches S3, Glue, CloudWatch Logs, KMS and STS, but
not Kinesis; in the private subnets given, Kinesis is reached through an interface endpoint
(``com.amazonaws.<region>.kinesis-streams``, private DNS on, so the SDK's default endpoint resolves
to it) and S3 through a gateway endpoint on the subnets' route tables. Glue, KMS, STS and CloudWatch
Logs need a NAT gateway or endpoints of their own in those subnets (docs/aws.md, "Network").
"""

from __future__ import annotations

from typing import Any

SUBNETS = {"Ref": "PrivateSubnetIds"}


def network() -> dict[str, Any]:
    """The security group, the endpoints and the EMR Serverless application, by logical id."""
    return {
        "JobSecurityGroup": {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": "icestream jobs: outbound HTTPS only",
                "VpcId": {"Ref": "VpcId"},
                "SecurityGroupEgress": [
                    {
                        "IpProtocol": "tcp",
                        "FromPort": 443,
                        "ToPort": 443,
                        "CidrIp": "0.0.0.0/0",
                        "Description": "AWS APIs (endpoints, or a NAT gateway)",
                    }
                ],
            },
        },
        "EndpointSecurityGroup": {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": "icestream: the Kinesis endpoint accepts HTTPS from the jobs",
                "VpcId": {"Ref": "VpcId"},
                "SecurityGroupIngress": [
                    {
                        "IpProtocol": "tcp",
                        "FromPort": 443,
                        "ToPort": 443,
                        "SourceSecurityGroupId": {"Ref": "JobSecurityGroup"},
                        "Description": "the jobs",
                    }
                ],
            },
        },
        "KinesisEndpoint": {
            "Type": "AWS::EC2::VPCEndpoint",
            "Properties": {
                "VpcEndpointType": "Interface",
                "ServiceName": {"Fn::Sub": "com.amazonaws.${AWS::Region}.kinesis-streams"},
                "VpcId": {"Ref": "VpcId"},
                "SubnetIds": SUBNETS,
                "SecurityGroupIds": [{"Ref": "EndpointSecurityGroup"}],
                "PrivateDnsEnabled": True,
            },
        },
        "S3Endpoint": {
            "Type": "AWS::EC2::VPCEndpoint",
            "Condition": "HasGatewayEndpoint",
            "Properties": {
                "VpcEndpointType": "Gateway",
                "ServiceName": {"Fn::Sub": "com.amazonaws.${AWS::Region}.s3"},
                "VpcId": {"Ref": "VpcId"},
                "RouteTableIds": {"Ref": "PrivateRouteTableIds"},
            },
        },
        "Application": {
            "Type": "AWS::EMRServerless::Application",
            "Condition": "CreateApplication",
            "Properties": {
                "Name": {"Fn::Sub": "icestream-${AWS::StackName}"},
                "Type": "SPARK",
                "ReleaseLabel": {"Ref": "ReleaseLabel"},
                "NetworkConfiguration": {
                    "SubnetIds": SUBNETS,
                    "SecurityGroupIds": [{"Ref": "JobSecurityGroup"}],
                },
                "AutoStopConfiguration": {"Enabled": True, "IdleTimeoutMinutes": 15},
            },
        },
    }
