"""The stack's Lambda handlers, embedded in the template as their source (``Code.ZipFile``).

Each module is one self-contained handler (standard library and the runtime's boto3 only, under the
4,096 characters CloudFormation takes inline): :mod:`.enrich_records` is the Firehose delivery stream's
transformation, :mod:`.publish_events` the test publisher that writes sample events into the stream.
"""

from __future__ import annotations

from importlib.resources import files

__all__ = ["handler_source"]


def handler_source(module: str) -> str:
    """The source text of handler ``module`` (``enrich_records``, ``publish_events``), as the template embeds it."""
    return (files(__name__) / f"{module}.py").read_text(encoding="utf-8")
