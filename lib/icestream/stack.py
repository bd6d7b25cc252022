"""The pinned stack per Spark line: pyspark's release, Iceberg's, and every JVM package by coordinates.

The facts live in ``stack.toml`` beside this module, the one place a coordinate is written;
:mod:`icestream.runtime.maven` resolves them, :mod:`icestream.runtime.jars` hands them to sessions
and ``icestream ship`` prints them as a ``--packages`` line.
"""

from __future__ import annotations

import functools
import importlib.metadata
import tomllib
from dataclasses import dataclass
from pathlib import Path

from icestream.errors import ConfigError

STACK_FILE = Path(__file__).with_name("stack.toml")
PACKAGE_WHEN = ("always", "glue")


@dataclass(frozen=True)
class Package:
    """One JVM dependency: its Maven coordinates, what needs it, and which sessions load it."""

    coordinate: str  # group:artifact:version
    purpose: str
    when: str = "always"

    @property
    def group(self) -> str:
        """The Maven group id."""
        return self.coordinate.split(":")[0]

    @property
    def artifact(self) -> str:
        """The Maven artifact id."""
        return self.coordinate.split(":")[1]

    @property
    def version(self) -> str:
        """The pinned version."""
        return self.coordinate.split(":")[2]


@dataclass(frozen=True)
class SparkLine:
    """A Spark minor line and what goes with it."""

    name: str  # "3.5", "4.1"
    pyspark: str  # the pyspark release make installs
    scala: str  # the Scala binary version of its jars
    iceberg: str  # the Iceberg release of its runtime
    packages: tuple[Package, ...]

    def loaded(self, catalog_type: str) -> tuple[Package, ...]:
        """The packages a session with this catalog loads (``when`` is "always", or names the catalog)."""
        return tuple(package for package in self.packages if package.when in ("always", catalog_type))

    @property
    def runtime(self) -> Package:
        """The Iceberg Spark runtime package."""
        return next(package for package in self.packages if package.artifact.startswith("iceberg-spark-runtime-"))


def _package(entry: dict[str, str], line: str) -> Package:
    coordinate = entry.get("coordinate", "")
    if len(coordinate.split(":")) != 3 or not all(coordinate.split(":")):
        raise ConfigError(f"{STACK_FILE.name}: line {line} names {coordinate!r}, not group:artifact:version.")
    when = entry.get("when", "always")
    if when not in PACKAGE_WHEN:
        raise ConfigError(
            f"{STACK_FILE.name}: {coordinate} has when={when!r}; choose one of {', '.join(PACKAGE_WHEN)}."
        )
    return Package(coordinate, entry.get("for", ""), when)


@functools.cache
def lines() -> dict[str, SparkLine]:
    """Every Spark line ``stack.toml`` pins, by name."""
    document = tomllib.loads(STACK_FILE.read_text())
    return {
        name: SparkLine(
            name,
            table["pyspark"],
            table["scala"],
            table["iceberg"],
            tuple(_package(entry, name) for entry in table["packages"]),
        )
        for name, table in document["lines"].items()
    }


def default_line_name() -> str:
    """The line of the installed pyspark (its major.minor), else ``stack.toml``'s default."""
    try:
        version = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return str(tomllib.loads(STACK_FILE.read_text())["default"])
    return ".".join(version.split(".")[:2])


def pinned_iceberg() -> str:
    """Iceberg's release for the installed pyspark's line (the default line's when that line is not pinned)."""
    known = lines()
    fallback = known[str(tomllib.loads(STACK_FILE.read_text())["default"])]
    return known.get(default_line_name(), fallback).iceberg


def spark_line(name: str | None = None) -> SparkLine:
    """The pinned line ``name``, or the installed pyspark's.

    Raises:
        ConfigError: If the stack pins no such line.
    """
    name = name or default_line_name()
    known = lines()
    if name not in known:
        raise ConfigError(
            f"icestream pins no Spark {name} line (it has {', '.join(sorted(known))}): install the pyspark of one "
            f"of them (`make setup` does), or add the line to {STACK_FILE}."
        )
    return known[name]
