"""A Kafka JVM this project starts beside Spark (the broker, the Connect worker): its files, ownership, stop.

Each records its process in a state file under the run folder (``processes.write_state``), writes its
log beside it and keeps its configuration in a folder of its own there. A recorded pid is this
module's only while the process found under it still has the main class and properties file it was
started with, so a reused pid is never signalled.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from icestream.config import Settings
from icestream.errors import IcestreamError, JavaError
from icestream.runtime import processes
from icestream.runtime.spark import java_version

MINIMUM_JAVA = 17  # Kafka 4's broker, clients and Connect need Java 17
STOP_TIMEOUT_SECONDS = 30.0  # SIGTERM is a controlled shutdown; SIGKILL after this


class RecordedJvm(Protocol):
    """What a state file records of any of these JVMs (a dataclass with at least these fields)."""

    @property
    def pid(self) -> int: ...

    @property
    def properties(self) -> str:  # the properties file it runs with (also a mark of its command line)
        ...


State = TypeVar("State", bound=RecordedJvm)


def kafka_java(who: str, error: type[IcestreamError]) -> str:
    """The Java that runs a Kafka JVM (JAVA_HOME's, else PATH's), checked to be 17 or newer.

    Raises:
        IcestreamError: ``error``, its message starting with ``who``, when there is no such Java.
    """
    try:
        major, java = java_version()
    except JavaError as problem:
        raise error(f"{who} needs Java {MINIMUM_JAVA}: {problem}") from None
    if major < MINIMUM_JAVA:
        raise error(
            f"{java} is Java {major}; Kafka 4 needs Java {MINIMUM_JAVA}: install openjdk-17-jre-headless "
            "and set JAVA_HOME to it."
        )
    return java


class KafkaJvm(Generic[State]):
    """The files and the process of one Kafka JVM whose state lives in ``run_dir``.

    Args:
        run_dir: The run folder (``settings.path("run_dir")``).
        jar_cache: The jar cache folder (``settings.path("jar_cache_dir")``).
    """

    STATE_FILE: ClassVar[str]  # under run_dir
    LOG_FILE: ClassVar[str]
    FOLDER: ClassVar[str]  # under run_dir: its properties, its log4j2 configuration, its data
    MAIN_CLASS: ClassVar[str]
    WHO: ClassVar[str]  # how its errors name it: "The Kafka broker"
    ERROR: ClassVar[type[IcestreamError]]
    STATE: ClassVar[type[Any]]  # the state file's dataclass

    def __init__(self, run_dir: Path, jar_cache: Path) -> None:
        self.run_dir = Path(run_dir)
        self.jar_cache = Path(jar_cache)
        self.state_file = self.run_dir / self.STATE_FILE
        self.log = self.run_dir / self.LOG_FILE
        self.folder = self.run_dir / self.FOLDER

    @classmethod
    def from_settings(cls, settings: Settings) -> Self:
        """The JVM of these settings' run folder and jar cache."""
        return cls(settings.path("run_dir"), settings.path("jar_cache_dir"))

    def _read_state(self) -> State | None:
        found: State | None = processes.read_state_as(self.state_file, self.STATE)
        return found

    def _owns(self, state: State) -> bool:
        """True when ``state.pid`` is still the very JVM this module started."""
        return processes.is_ours(asdict(state), (self.MAIN_CLASS, state.properties))  # type: ignore[call-overload]

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> bool:
        """Stop the JVM this module started, if any (SIGTERM, then SIGKILL after ``timeout``); its folder is kept.

        Returns:
            True if a process was stopped.
        """
        state = self._read_state()
        if state is None:
            return False
        return processes.stop_recorded(self.state_file, state.pid if self._owns(state) else None, timeout)

    def _java(self) -> str:
        return kafka_java(self.WHO, self.ERROR)
