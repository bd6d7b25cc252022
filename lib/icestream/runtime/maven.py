"""Resolve the stack's JVM packages from Maven Central into the project's cache, checksums checked.

Spark users name jars by ``group:artifact:version`` and let Maven (or ``--packages``) fetch them with
what they pull in. :func:`resolve` does the same with Maven itself, once per package of the line
(``stack.toml``), into a Maven repository under the cache folder, then copies the jars a session
needs into ``<cache>/spark-<line>/`` and writes a manifest there. Later runs read the manifest and
start no Maven at all, so sessions start offline. A tool of the stack (the local Kafka broker) is
resolved the same way into ``<cache>/<tool>-<version>/`` (:func:`resolve_tool`).

Two rules shape the copied set:

- every jar is compared with the SHA-1 that Maven Central publishes beside it (Maven runs with
  ``--strict-checksums`` too, so a corrupt download already fails there);
- a jar whose artifact Spark itself ships (``pyspark/jars``: Hadoop's client, Scala, slf4j, lz4,
  snappy) is left out: Spark's own class loader would win anyway, and two versions of one library
  on a class path is a trap.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from icestream.errors import JarError
from icestream.stack import Package, SparkLine, Tool

MANIFEST = "manifest.json"
MAVEN_REPOSITORY = "maven"  # the Maven repository folder inside the cache folder
MANIFEST_FORMAT = 1  # bumped when the rules above change, so old manifests are resolved anew
# Maven's words for an artifact it could not get: "Could not find artifact g:a:jar:v", "Missing: 1) g:a:jar:v".
REFUSED = re.compile(r"([\w.\-]+):([\w.\-]+):(?:jar|pom)(?::[\w.\-]+)?:([\w.\-]+)")


@dataclass(frozen=True)
class ResolvedJar:
    """A jar in the line's folder and the package it came with."""

    coordinate: str  # group:artifact:version of this jar
    package: str  # the stack's package that pulled it in
    path: Path
    sha1: str


def line_folder(cache: Path, line: SparkLine) -> Path:
    """Where a line's jars and manifest live."""
    return cache / f"spark-{line.name}"


def tool_folder(cache: Path, tool: Tool) -> Path:
    """Where a tool's jars and manifest live (``kafka-4.1.1``)."""
    return cache / f"{tool.name}-{tool.version}"


def manifest_key(packages: tuple[Package, ...], spark_jars: tuple[str, ...]) -> str:
    """What a manifest is valid for: the packages asked for, Spark's own jars, and the rules' format."""
    asked = sorted(package.coordinate + "".join(f" -{name}" for name in package.exclude) for package in packages)
    facts = [str(MANIFEST_FORMAT), *asked, *sorted(spark_jars)]
    return hashlib.sha256("\n".join(facts).encode()).hexdigest()[:20]


def _sha1(path: Path) -> str:
    digest = hashlib.sha1()  # noqa: S324 - Maven Central's published checksum, not a security boundary
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def published_sha1(jar: Path) -> str | None:
    """The SHA-1 Maven Central published for a jar, as Maven stored it beside the jar (``.sha1``)."""
    checksum = jar.with_name(jar.name + ".sha1")
    if not checksum.is_file():
        return None
    words = checksum.read_text().split()
    return words[0].lower() if words else None


def verify(jar: Path) -> str:
    """Check a downloaded jar against its published SHA-1.

    Returns:
        The SHA-1.

    Raises:
        JarError: If no checksum was published beside it, or the jar does not match it.
    """
    expected, actual = published_sha1(jar), _sha1(jar)
    if expected is None:
        raise JarError(
            f"{jar.name} came without a published SHA-1 ({jar}.sha1): delete {jar.parent} and resolve again."
        )
    if expected != actual:
        raise JarError(
            f"{jar.name} does not match the SHA-1 Maven Central publishes ({actual} against {expected}): "
            f"delete {jar.parent} and run `make setup` again."
        )
    return actual


def spark_owned(file_name: str, spark_jars: tuple[str, ...]) -> bool:
    """Whether Spark's own jars already hold this jar's artifact (in any version)."""
    artifact = re.sub(r"-\d[\w.\-]*\.jar$", "", file_name)
    return any(re.fullmatch(rf"{re.escape(artifact)}-\d[\w.\-]*\.jar", own) for own in spark_jars)


def pom(package: Package) -> str:
    """A one-dependency Maven project that resolves ``package`` with what it needs at run time."""
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>icestream.resolve</groupId><artifactId>one-package</artifactId><version>0</version>\n"
        "  <packaging>pom</packaging>\n"
        "  <dependencies><dependency>\n"
        f"    <groupId>{escape(package.group)}</groupId><artifactId>{escape(package.artifact)}</artifactId>"
        f"<version>{escape(package.version)}</version>\n"
        f"{_exclusions(package)}"
        "  </dependency></dependencies>\n"
        "</project>\n"
    )


def _exclusions(package: Package) -> str:
    if not package.exclude:
        return ""
    entries = "".join(
        f"      <exclusion><groupId>{escape(name.split(':')[0])}</groupId>"
        f"<artifactId>{escape(name.split(':')[1])}</artifactId></exclusion>\n"
        for name in package.exclude
    )
    return f"    <exclusions>\n{entries}    </exclusions>\n"


def refused_message(package: Package, output: str) -> str:
    """One line for a package Maven did not resolve, naming the coordinate and what needs it."""
    refused = sorted({":".join(match) for match in REFUSED.findall(output)} - {"icestream.resolve:one-package:0"})
    which = f" (Maven could not get {', '.join(refused)})" if refused and refused != [package.coordinate] else ""
    last = next((line.strip() for line in reversed(output.splitlines()) if "[ERROR]" in line and line.strip()), "")
    reason = f": {last.removeprefix('[ERROR]').strip()[:300]}" if last and not which else ""
    return (
        f"Maven Central did not serve {package.coordinate}{which}, which icestream needs for {package.purpose}"
        f"{reason}. Check that this machine reaches Maven Central (`mvn dependency:get -Dartifact="
        f"{package.coordinate}`), or pin a served version in lib/icestream/stack.toml (docs/stack.md lists them)."
    )


def _maven_list(package: Package, repository: Path) -> list[tuple[str, Path]]:
    """Resolve one package with Maven: ``(group:artifact:version, jar in the repository)`` for it and its needs."""
    maven = shutil.which("mvn")
    if maven is None:
        raise JarError(
            "Maven (`mvn`) is not installed: it fetches the Iceberg and Kafka jars from Maven Central once. "
            "Install it (`sudo apt-get install maven`; `make setup` does), or point ICESTREAM_ICEBERG_JARS at the jars."
        )
    with tempfile.TemporaryDirectory(prefix="icestream-maven-") as scratch:
        (Path(scratch) / "pom.xml").write_text(pom(package))
        listing = Path(scratch) / "resolved.txt"
        command = [
            maven,
            "--batch-mode",
            "--quiet",
            "--strict-checksums",
            f"-Dmaven.repo.local={repository}",
            "dependency:list",
            "-DincludeScope=runtime",  # no test jars (Spark's Kafka connector names a test-jar Central lacks)
            "-DoutputAbsoluteArtifactFilename=true",
            f"-DoutputFile={listing}",
        ]
        done = subprocess.run(command, cwd=scratch, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not listing.is_file():
            raise JarError(refused_message(package, done.stdout + done.stderr))
        resolved = []
        for line in listing.read_text().splitlines():
            parts = line.strip().split(":")
            # group:artifact:type[:classifier]:version:scope:/absolute/path
            if len(parts) >= 6 and parts[2] == "jar" and parts[-1].startswith("/"):
                group, artifact, version = parts[0], parts[1], parts[-3]
                resolved.append((f"{group}:{artifact}:{version}", Path(parts[-1])))
        return resolved


def read_manifest(folder: Path, key: str) -> list[ResolvedJar] | None:
    """The jars a valid manifest lists, or None when it is missing, stale or a listed jar is gone."""
    try:
        document = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if document.get("key") != key:
        return None
    jars = [
        ResolvedJar(entry["coordinate"], entry["package"], folder / entry["file"], entry["sha1"])
        for entry in document.get("jars", [])
    ]
    if not all(
        jar.path.is_file() and jar.path.stat().st_size == entry["size"]
        for jar, entry in zip(jars, document["jars"], strict=True)
    ):
        return None
    return jars


def resolve_tool(tool: Tool, cache: Path) -> list[ResolvedJar]:
    """A tool's jars in its folder (:func:`tool_folder`): from its manifest, else resolved as a line's are.

    Nothing is left out for Spark: a tool runs in a JVM of its own, with these jars alone.

    Raises:
        JarError: If Maven is missing, refuses a coordinate, or a checksum does not match.
    """
    return _resolve_into(tool_folder(cache, tool), {"tool": tool.name}, tool.packages, cache, ())


def resolve(
    line: SparkLine, packages: tuple[Package, ...], cache: Path, spark_jars: tuple[str, ...]
) -> list[ResolvedJar]:
    """The jars of ``packages`` in the line's folder: from its manifest, else resolved from Maven Central.

    Args:
        line: The Spark line (names the folder).
        packages: The packages to resolve (usually all of the line's, so one manifest serves every session).
        cache: The jar cache folder (``jar_cache_dir``).
        spark_jars: File names of Spark's own jars (``pyspark/jars``), left out of the copied set.

    Returns:
        Every jar copied, with the package that pulled it in.

    Raises:
        JarError: If Maven is missing, refuses a coordinate, or a checksum does not match.
    """
    return _resolve_into(line_folder(cache, line), {"line": line.name}, packages, cache, spark_jars)


def _resolve_into(
    folder: Path, label: dict[str, str], packages: tuple[Package, ...], cache: Path, spark_jars: tuple[str, ...]
) -> list[ResolvedJar]:
    """:func:`resolve` into ``folder``, its manifest saying what it is for (``label``)."""
    key = manifest_key(packages, spark_jars)
    known = read_manifest(folder, key)
    if known is not None:
        return known
    folder.mkdir(parents=True, exist_ok=True)
    repository = cache / MAVEN_REPOSITORY
    jars: dict[str, ResolvedJar] = {}
    for package in packages:
        for coordinate, source in _maven_list(package, repository):
            if source.name in jars or spark_owned(source.name, spark_jars):
                continue
            sha1 = verify(source)
            target = folder / source.name
            # Copy, then rename into place, so a crash never leaves a half-written jar under a real name.
            partial = target.with_name(f".{target.name}.{os.getpid()}")
            shutil.copyfile(source, partial)
            os.replace(partial, target)
            jars[source.name] = ResolvedJar(coordinate, package.coordinate, target, sha1)
    entries = [
        {
            "coordinate": jar.coordinate,
            "package": jar.package,
            "file": jar.path.name,
            "sha1": jar.sha1,
            "size": jar.path.stat().st_size,
        }
        for jar in jars.values()
    ]
    scratch = folder / f".{MANIFEST}.{os.getpid()}"
    scratch.write_text(json.dumps({"key": key, **label, "jars": entries}, indent=1) + "\n")
    scratch.replace(folder / MANIFEST)
    return list(jars.values())
