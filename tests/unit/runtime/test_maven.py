"""Resolving the stack's packages: checksums, Spark's own jars left out, the manifest read offline, clear refusals.

A stand-in ``mvn`` on ``PATH`` answers as Maven's ``dependency:list`` does (a listing of
``group:artifact:type:version:scope:path`` lines, jars and their ``.sha1`` in the local repository),
so these run with no network; tests/integration/test_jar_build.py resolves from Maven Central itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from icestream.errors import JarError
from icestream.runtime import maven
from icestream.stack import Package, SparkLine, Tool

RUNTIME = Package("org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.1", "Iceberg tables")
KAFKA = Package("org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.7", "Spark's Kafka source")
LINE = SparkLine("3.5", "3.5.8", "2.12", "1.10.1", (RUNTIME, KAFKA))
SPARK_OWN = ("scala-library-2.12.18.jar", "slf4j-api-2.0.7.jar", "spark-core_2.12-3.5.8.jar")

# The stand-in: reads the pom's artifactId and answers from FAKE_MAVEN (artifact -> jars, or a refusal).
FAKE_MVN = """#!{python}
import json, os, pathlib, re, sys
plan = json.loads(os.environ["FAKE_MAVEN"])
pathlib.Path(os.environ["FAKE_MAVEN_CALLS"]).open("a").write("call\\n")
pom = pathlib.Path("pom.xml").read_text()
artifact = re.findall(r"<artifactId>([^<]+)</artifactId>", pom)[-1]
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("-D") and "=" in a)
answer = plan[artifact]
if isinstance(answer, str):
    print(answer)
    sys.exit(1)
repository = pathlib.Path(args["maven.repo.local"])
lines = ["", "The following files have been resolved:"]
for coordinate, body, published in answer:
    group, name, version = coordinate.split(":")
    jar = repository / group.replace(".", "/") / name / version / f"{{name}}-{{version}}.jar"
    jar.parent.mkdir(parents=True, exist_ok=True)
    jar.write_bytes(body.encode())
    if published is not None:
        jar.with_name(jar.name + ".sha1").write_text(published + "  " + jar.name + "\\n")
    lines.append(f"   {{group}}:{{name}}:jar:{{version}}:compile:{{jar}}")
pathlib.Path(args["outputFile"]).write_text("\\n".join(lines) + "\\n")
"""


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()  # noqa: S324 - the checksum Maven publishes


def good(coordinate: str) -> list[str]:
    body = f"jar of {coordinate}"
    return [coordinate, body, sha1(body)]


@pytest.fixture
def fake_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Put the stand-in ``mvn`` on PATH; the returned dict is its plan (edit it before resolving)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "mvn"
    script.write_text(FAKE_MVN.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MAVEN_CALLS", str(tmp_path / "calls"))
    plan: dict[str, object] = {
        RUNTIME.artifact: [good(RUNTIME.coordinate)],
        KAFKA.artifact: [
            good(KAFKA.coordinate),
            good("org.apache.kafka:kafka-clients:3.4.1"),
            good("org.scala-lang:scala-library:2.12.18"),  # Spark ships it: left out
            good("org.slf4j:slf4j-api:1.7.36"),  # Spark ships another version: left out
        ],
    }
    monkeypatch.setenv("FAKE_MAVEN", "{}")  # set for real by resolve(); monkeypatch restores it
    return plan


def resolve(fake: dict[str, object], cache: Path) -> list[maven.ResolvedJar]:
    os.environ["FAKE_MAVEN"] = json.dumps(fake)
    return maven.resolve(LINE, LINE.packages, cache, SPARK_OWN)


def calls(tmp_path: Path) -> int:
    path = tmp_path / "calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_each_package_and_what_it_pulls_in_is_copied_except_what_spark_ships(
    tmp_path: Path, fake_maven: dict[str, object]
) -> None:
    jars = resolve(fake_maven, tmp_path / "cache")
    assert [(jar.coordinate, jar.package) for jar in jars] == [
        (RUNTIME.coordinate, RUNTIME.coordinate),
        (KAFKA.coordinate, KAFKA.coordinate),
        ("org.apache.kafka:kafka-clients:3.4.1", KAFKA.coordinate),
    ]
    folder = tmp_path / "cache" / "spark-3.5"
    assert sorted(path.name for path in folder.glob("*.jar")) == [
        "iceberg-spark-runtime-3.5_2.12-1.10.1.jar",
        "kafka-clients-3.4.1.jar",
        "spark-sql-kafka-0-10_2.12-3.5.7.jar",
    ]
    assert all(jar.sha1 == sha1(jar.path.read_text()) for jar in jars)


def test_a_second_resolve_reads_the_manifest_and_starts_no_maven(
    tmp_path: Path, fake_maven: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = resolve(fake_maven, tmp_path / "cache")
    assert calls(tmp_path) == 2  # one Maven run per package
    monkeypatch.setenv("PATH", "/nonexistent")  # offline, and no Maven at all
    assert maven.resolve(LINE, LINE.packages, tmp_path / "cache", SPARK_OWN) == first
    assert calls(tmp_path) == 2


def test_a_changed_pin_or_a_removed_jar_resolves_again(tmp_path: Path, fake_maven: dict[str, object]) -> None:
    cache = tmp_path / "cache"
    jars = resolve(fake_maven, cache)
    jars[-1].path.unlink()
    resolve(fake_maven, cache)
    assert calls(tmp_path) == 4
    other = SparkLine("3.5", "3.5.8", "2.12", "1.10.1", (RUNTIME,))
    key = maven.manifest_key(other.packages, SPARK_OWN)
    assert maven.read_manifest(maven.line_folder(cache, other), key) is None  # a manifest is for its pins only


def test_a_jar_that_does_not_match_its_published_checksum_is_refused(
    tmp_path: Path, fake_maven: dict[str, object]
) -> None:
    fake_maven[RUNTIME.artifact] = [[RUNTIME.coordinate, "a truncated download", sha1("the real jar")]]
    with pytest.raises(JarError, match=r"iceberg-spark-runtime-3\.5_2\.12-1\.10\.1\.jar does not match the SHA-1"):
        resolve(fake_maven, tmp_path / "cache")
    assert not (tmp_path / "cache" / "spark-3.5" / maven.MANIFEST).exists()


def test_a_jar_without_a_published_checksum_is_refused(tmp_path: Path, fake_maven: dict[str, object]) -> None:
    fake_maven[RUNTIME.artifact] = [[RUNTIME.coordinate, "no checksum beside it", None]]
    with pytest.raises(JarError, match="without a published SHA-1"):
        resolve(fake_maven, tmp_path / "cache")


def test_a_refused_coordinate_is_one_line_naming_it_and_what_needs_it(
    tmp_path: Path, fake_maven: dict[str, object]
) -> None:
    # Maven 3.8's words when Central has no such artifact (seen 2026-12-01 for spark-sql-kafka-0-10_2.12:3.5.8).
    fake_maven[KAFKA.artifact] = (
        "[ERROR] Failed to execute goal on project one-package: Could not resolve dependencies for project "
        "icestream.resolve:one-package:pom:0: Could not find artifact "
        "org.apache.spark:spark-sql-kafka-0-10_2.12:jar:3.5.7 in central (https://repo.maven.apache.org/maven2)"
    )
    with pytest.raises(JarError) as error:
        resolve(fake_maven, tmp_path / "cache")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(
        f"Maven Central did not serve {KAFKA.coordinate}, which icestream needs for {KAFKA.purpose}"
    )
    assert "stack.toml" in message


def test_a_refused_dependency_names_the_package_that_pulls_it_in(tmp_path: Path, fake_maven: dict[str, object]) -> None:
    fake_maven[KAFKA.artifact] = (
        "[ERROR] Failed to execute goal on project one-package: Could not resolve dependencies: Missing:\n"
        "[ERROR] 1) org.apache.kafka:kafka-clients:jar:3.4.1"
    )
    with pytest.raises(
        JarError,
        match=rf"did not serve {KAFKA.coordinate} \(Maven could not get org\.apache\.kafka:kafka-clients:3\.4\.1\)",
    ):
        resolve(fake_maven, tmp_path / "cache")


def test_no_maven_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JarError, match=r"apt-get install maven"):
        maven.resolve(LINE, LINE.packages, tmp_path / "cache", SPARK_OWN)


@pytest.mark.parametrize(
    ("jar", "owned"),
    [
        ("scala-library-2.13.16.jar", True),  # another version of Spark's own
        ("slf4j-api-1.7.36.jar", True),
        ("spark-core_2.12-3.5.7.jar", True),
        ("spark-sql-kafka-0-10_2.12-3.5.7.jar", False),
        ("scala-library-extras-1.0.jar", False),  # a longer name is another artifact
        ("kafka-clients-3.4.1.jar", False),
    ],
)
def test_spark_owned_compares_artifacts_not_versions(jar: str, owned: bool) -> None:
    assert maven.spark_owned(jar, SPARK_OWN) is owned


def test_the_pom_escapes_what_it_is_given() -> None:
    text = maven.pom(Package("g<x>:a&b:1", "x"))
    assert "<groupId>g&lt;x&gt;</groupId>" in text
    assert "<artifactId>a&amp;b</artifactId>" in text


def test_a_tool_resolves_into_its_own_folder_with_nothing_left_out_for_spark(
    tmp_path: Path, fake_maven: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = Package("org.apache.kafka:kafka_2.13:4.1.1", "the local Kafka broker")
    binding = Package("org.apache.logging.log4j:log4j-slf4j-impl:2.24.3", "its log lines")
    kafka = Tool("kafka", (broker, binding))
    fake_maven[broker.artifact] = [good(broker.coordinate), good("org.slf4j:slf4j-api:1.7.36")]
    fake_maven[binding.artifact] = [good(binding.coordinate), good("org.slf4j:slf4j-api:1.7.36")]
    os.environ["FAKE_MAVEN"] = json.dumps(fake_maven)
    jars = maven.resolve_tool(kafka, tmp_path / "cache")
    assert [jar.path.name for jar in jars] == [
        "kafka_2.13-4.1.1.jar",
        "slf4j-api-1.7.36.jar",  # Spark ships slf4j, but the broker's JVM has no Spark: kept, and once
        "log4j-slf4j-impl-2.24.3.jar",
    ]
    assert {jar.path.parent for jar in jars} == {tmp_path / "cache" / "kafka-4.1.1"}
    manifest = json.loads((tmp_path / "cache" / "kafka-4.1.1" / maven.MANIFEST).read_text())
    assert manifest["tool"] == "kafka"
    monkeypatch.setenv("PATH", "/nonexistent")  # later starts are offline
    assert maven.resolve_tool(kafka, tmp_path / "cache") == jars


def test_a_package_resolves_without_what_it_excludes_and_its_manifest_knows_it() -> None:
    import xml.etree.ElementTree as ET

    excluding = Package("org.example:connector:1.0", "x", exclude=("org.example:helper", "org.other:extra"))
    namespace = {"m": "http://maven.apache.org/POM/4.0.0"}
    document = ET.fromstring(maven.pom(excluding))  # noqa: S314 - the text this test's own code wrote
    found = [
        (entry.findtext("m:groupId", namespaces=namespace), entry.findtext("m:artifactId", namespaces=namespace))
        for entry in document.iterfind(".//m:exclusion", namespace)
    ]
    assert found == [("org.example", "helper"), ("org.other", "extra")]
    assert "exclusion" not in maven.pom(Package("org.example:connector:1.0", "x"))
    plain = maven.manifest_key((Package("org.example:connector:1.0", "x"),), ())
    assert maven.manifest_key((excluding,), ()) != plain  # a changed exclusion resolves again


def test_the_stack_refuses_an_exclusion_that_is_no_group_and_artifact(monkeypatch) -> None:
    from icestream import stack
    from icestream.errors import ConfigError

    with pytest.raises(ConfigError, match="excludes 'helper', not group:artifact"):
        stack._package({"coordinate": "org.example:connector:1.0", "exclude": ["helper"]}, "line x")
