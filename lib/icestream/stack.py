"""The pinned stack per Spark line (pyspark, Iceberg, every JVM package by coordinates), and the tools beside it.

The facts live in ``stack.toml`` beside this module, the one place a coordinate is written;
:mod:`icestream.runtime.maven` resolves them, :mod:`icestream.runtime.jars` hands them to sessions
and ``icestream ship`` prints them as a ``--packages`` line.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.resources
import tomllib
from dataclasses import dataclass
from typing import Any

from icestream.errors import ConfigError

# Read as a package resource: on a cluster's executors the package is a zip (--py-files), no folder.
STACK_FILE = importlib.resources.files("icestream").joinpath("stack.toml")
PACKAGE_WHEN = ("always", "glue")


@dataclass(frozen=True)
class Package:
    """One JVM dependency: its Maven coordinates, what needs it, and which sessions load it."""

    coordinate: str  # group:artifact:version
    purpose: str
    when: str = "always"
    # group:artifact of what it pulls in but must not (Maven Central lacks that version): resolved
    # without it, and handed to Spark's own resolution as spark.jars.excludes (--exclude-packages).
    exclude: tuple[str, ...] = ()

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


@dataclass(frozen=True)
class Tool:
    """A program icestream starts beside Spark (the local Kafka broker): JVM packages no session loads."""

    name: str  # "kafka"
    packages: tuple[Package, ...]  # the tool itself first, then what its pom leaves out

    @property
    def version(self) -> str:
        """The tool's own version (its first package's), which names its folder in the cache."""
        return self.packages[0].version


def _package(entry: dict[str, Any], where: str) -> Package:
    coordinate = entry.get("coordinate", "")
    if len(coordinate.split(":")) != 3 or not all(coordinate.split(":")):
        raise ConfigError(f"{STACK_FILE.name}: {where} names {coordinate!r}, not group:artifact:version.")
    when = entry.get("when", "always")
    if when not in PACKAGE_WHEN:
        raise ConfigError(
            f"{STACK_FILE.name}: {coordinate} has when={when!r}; choose one of {', '.join(PACKAGE_WHEN)}."
        )
    exclude = tuple(entry.get("exclude", ()))
    for name in exclude:
        if len(name.split(":")) != 2 or not all(name.split(":")):
            raise ConfigError(f"{STACK_FILE.name}: {coordinate} excludes {name!r}, not group:artifact.")
    return Package(coordinate, entry.get("for", ""), when, exclude)


@functools.cache
def _document() -> dict[str, Any]:
    return tomllib.loads(STACK_FILE.read_text())


@functools.cache
def lines() -> dict[str, SparkLine]:
    """Every Spark line ``stack.toml`` pins, by name."""
    document = _document()
    return {
        name: SparkLine(
            name,
            table["pyspark"],
            table["scala"],
            table["iceberg"],
            tuple(_package(entry, f"line {name}") for entry in table["packages"]),
        )
        for name, table in document["lines"].items()
    }


@functools.cache
def tools() -> dict[str, Tool]:
    """Every tool ``stack.toml`` pins (``[tools.NAME]``), by name."""
    return {
        name: Tool(name, tuple(_package(entry, f"tool {name}") for entry in table["packages"]))
        for name, table in _document().get("tools", {}).items()
    }


def tool(name: str) -> Tool:
    """The pinned tool ``name``.

    Raises:
        ConfigError: If the stack pins no such tool.
    """
    known = tools()
    if name not in known:
        raise ConfigError(f"{STACK_FILE.name} pins no tool {name!r} (it has {', '.join(sorted(known)) or 'none'}).")
    return known[name]


def default_line_name() -> str:
    """The line of the installed pyspark (its major.minor), else ``stack.toml``'s default."""
    try:
        version = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return str(_document()["default"])
    return ".".join(version.split(".")[:2])


def pinned_iceberg() -> str:
    """Iceberg's release for the installed pyspark's line (the default line's when that line is not pinned)."""
    known = lines()
    fallback = known[str(_document()["default"])]
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


def line_constraints(constraints: str, name: str) -> str:
    """``constraints.txt`` with the pyspark pin of line ``name`` in place of the default line's.

    Raises:
        ConfigError: If the stack pins no such line.
    """
    line = spark_line(name)
    kept = [entry for entry in constraints.splitlines() if not entry.startswith("pyspark==")]
    return "\n".join([*kept, f"pyspark=={line.pyspark}"]) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m icestream.stack constraints LINE < constraints.txt``: what `make` installs for another line.

    It runs before anything is installed (the standard library only), with ``lib`` on ``PYTHONPATH``.
    """
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "constraints":
        print("usage: python -m icestream.stack constraints LINE < constraints.txt", file=sys.stderr)
        return 2
    try:
        sys.stdout.write(line_constraints(sys.stdin.read(), args[1]))
    except ConfigError as error:
        print(f"error: ICESTREAM_SPARK_LINE: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
