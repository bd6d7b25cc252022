"""The project's own exception types.

Every error a user can cause (a bad parameter, a service that is down, a missing Java or jar)
is raised as one of these, with a message that says what to do. The CLI and the notebooks show
the message alone, so a Java or botocore stack trace is never the first thing a user sees.
"""

from __future__ import annotations


class IcestreamError(Exception):
    """Base class: the message is written for the user and ends with what to do."""


class ConfigError(IcestreamError, ValueError):
    """A setting has an invalid value; the message names the setting."""


class JavaError(IcestreamError):
    """Java is missing or has an unsupported version."""


class JarError(IcestreamError):
    """The Iceberg runtime jars are missing, broken or cannot be built."""


class SparkStartError(IcestreamError):
    """The Spark session could not start."""


class ServiceUnavailableError(IcestreamError):
    """A service (the Kinesis emulator, LocalStack or AWS) cannot be reached."""


class EmulatorError(IcestreamError):
    """The local Kinesis emulator could not be started or stopped."""
