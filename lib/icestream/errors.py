"""The project's own exception types: the one place they are defined.

Every error a user can cause (a bad parameter, a service that is down, a missing Java or jar)
is raised as one of these, with a message that says what to do. The CLI and the notebooks show
the message alone, so a Java or botocore stack trace is never the first thing a user sees.
"""

from __future__ import annotations

from pathlib import Path


class IcestreamError(Exception):
    """Base class: the message is written for the user and ends with what to do."""


class ConfigError(IcestreamError, ValueError):
    """A setting has an invalid value; the message names the setting."""


class ParameterError(ConfigError):
    """A notebook parameter that the notebook's ``parameters`` cell does not declare; the message names the nearest."""


class JavaError(IcestreamError):
    """Java is missing or has an unsupported version."""


class JarError(IcestreamError):
    """The Iceberg runtime jars are missing, broken or cannot be built."""


class SparkStartError(IcestreamError):
    """The Spark session could not start."""


class ShipError(IcestreamError):
    """What executors need (the packed environment or the package zip) could not be built."""


class TableOwnershipError(ConfigError):
    """A demo's table name is taken by a table the demo did not make; the message says how to choose other names."""


class ExecutorImportError(ConfigError):
    """Spark executors cannot import icestream or a dependency; the message names the ship setting."""


class ServiceUnavailableError(IcestreamError):
    """A service (the Kinesis emulator, LocalStack or AWS) cannot be reached."""


class EmulatorError(IcestreamError):
    """The local Kinesis emulator could not be started or stopped."""


class KafkaBrokerError(IcestreamError):
    """The local Kafka broker could not be started or stopped; the message names its log file or folder."""


class KafkaConnectError(IcestreamError):
    """The Kafka Connect worker (Iceberg's sink) did not start or its connector failed; the message names its log."""


class StorageListingError(IcestreamError):
    """A table's folder could not be listed (e.g. no Hadoop FileSystem for its scheme); the message says why."""


class DuckDBError(IcestreamError):
    """DuckDB or its Iceberg extension could not be used; the message says what to do."""


class IngestError(IcestreamError):
    """The ingest query stopped because of an error; the message says which and what to do."""


class ShardReadError(IcestreamError):
    """A shard could not be read after the allowed retries (raised inside a read task)."""


class InjectedFaultError(IngestError):
    """A test's fault hook raised at a phase of a batch: a simulated crash, retried as a transient one."""


class NotebookFailedError(IcestreamError):
    """A notebook raised an error; the message names the notebook and the cell."""

    def __init__(self, notebook: str, cell_index: int, ename: str, evalue: str, output: Path) -> None:
        self.notebook = notebook
        self.cell_index = cell_index
        super().__init__(
            f"{notebook} failed in cell {cell_index}: {ename}: {evalue}\n"
            f"The executed copy with the full traceback is {output}"
        )
