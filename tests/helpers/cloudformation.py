"""Reading the CloudFormation template as CloudFormation would, for the given stack values."""

from __future__ import annotations

import re


def resolve(node: object, values: dict[str, str]) -> object:
    """The template fragment with every ``Fn::Sub`` replaced by its text for these stack values."""
    if isinstance(node, dict):
        if set(node) == {"Fn::Sub"}:
            return re.sub(r"\$\{([\w:.]+)\}", lambda match: values[match.group(1)], node["Fn::Sub"])
        return {key: resolve(value, values) for key, value in node.items()}
    if isinstance(node, list):
        return [resolve(value, values) for value in node]
    return node
