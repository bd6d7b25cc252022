"""Reading the CloudFormation template as CloudFormation would, for the given stack values."""

from __future__ import annotations

import re
from collections import ChainMap
from collections.abc import Mapping


def resolve(node: object, values: Mapping[str, object], conditions: dict[str, bool] | None = None) -> object:
    """The template fragment with its intrinsic functions replaced by their values for this stack.

    Handles ``Fn::Sub`` (both forms), ``Ref`` and ``Fn::GetAtt`` (looked up in ``values`` as ``Name``
    and ``Name.Attribute``) and ``Fn::If`` (by ``conditions``); a ``Ref`` to ``AWS::NoValue`` drops
    the key or list item.
    """
    conditions = conditions or {}
    if isinstance(node, dict):
        if set(node) == {"Fn::Sub"}:
            text, variables = (node["Fn::Sub"], {}) if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"]
            # A ChainMap, not a merged dict: a mapping of values that answers unknown names keeps doing so.
            local = ChainMap(
                {name: str(resolve(value, values, conditions)) for name, value in variables.items()}, values
            )
            return re.sub(r"\$\{([\w:.]+)\}", lambda match: str(local[match.group(1)]), text)
        if set(node) == {"Ref"}:
            return values[node["Ref"]]
        if set(node) == {"Fn::GetAtt"}:
            return values[".".join(node["Fn::GetAtt"])]
        if set(node) == {"Fn::If"}:
            name, when_true, when_false = node["Fn::If"]
            return resolve(when_true if conditions[name] else when_false, values, conditions)
        resolved = {key: resolve(value, values, conditions) for key, value in node.items()}
        return {key: value for key, value in resolved.items() if value is not NO_VALUE}
    if isinstance(node, list):
        return [item for item in (resolve(value, values, conditions) for value in node) if item is not NO_VALUE]
    return node


NO_VALUE = object()  # what ``{"Ref": "AWS::NoValue"}`` resolves to: put it in ``values["AWS::NoValue"]``


def delivery_stream_request(properties: dict) -> dict:
    """An ``AWS::KinesisFirehose::DeliveryStream``'s resolved properties as Firehose's ``CreateDeliveryStream``.

    The CloudFormation schema and the API differ in two names of the Iceberg destination: the
    catalog's ``CatalogArn`` is the API's ``CatalogARN``, and ``s3BackupMode`` is ``S3BackupMode``.
    """
    request = {key: value for key, value in properties.items() if key != "IcebergDestinationConfiguration"}
    if "IcebergDestinationConfiguration" in properties:
        iceberg = dict(properties["IcebergDestinationConfiguration"])
        iceberg["CatalogConfiguration"] = {
            ("CatalogARN" if key == "CatalogArn" else key): value
            for key, value in iceberg["CatalogConfiguration"].items()
        }
        if "s3BackupMode" in iceberg:
            iceberg["S3BackupMode"] = iceberg.pop("s3BackupMode")
        request["IcebergDestinationConfiguration"] = iceberg
    return request
