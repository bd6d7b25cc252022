"""A faster ``file:`` file system for a local master: permissions set without a child process.

Pip's pyspark ships Hadoop without its native library, so Hadoop's local file system runs the
``chmod`` program for every file and folder it creates: each Iceberg commit creates several (data
files, manifests, the manifest list, metadata, and a ``.crc`` beside each), and every ``chmod`` is
a process spawned by a JVM of several GiB. Measured on the ingest (100,000 records, 3 batches,
``bench/bench_pipeline.py``): about a fifth of its CPU.

``icestream.hadoop.NioLocalFileSystem`` (Java source in ``icestream/java``) is Hadoop's own
``LocalFileSystem`` with one method replaced: ``setPermission`` through ``java.nio``. There is no
JDK here (Debian's JRE only), so the two small classes are compiled with Janino, the Java compiler
Spark itself bundles for its generated code, in a short-lived JVM, once per source version; the jar
is cached beside the Iceberg jars (``jar_cache_dir``).

It is used only where this process starts the JVM of a local master (``local[*]``): there the jar
can go on the driver's class path before Hadoop loads, and executors are that same JVM. A cluster's
executors would not find the class, and a JVM started by ``spark-submit`` has its class path fixed,
so both keep Hadoop's default. ``ICESTREAM_FAST_LOCAL_FS=false`` turns it off; a failed build only
logs why and keeps the default (it changes speed, never results).
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import tempfile
import zipfile
from pathlib import Path

from icestream.config import Settings
from icestream.runtime.jars import pyspark_jar_folder

LOG = logging.getLogger(__name__)

FILE_SYSTEM_CLASS = "icestream.hadoop.NioLocalFileSystem"
SOURCE_FOLDER = Path(__file__).resolve().parent / "java"
# The classes the jar must hold (the .class entries of the sources above).
CLASS_ENTRIES = ("icestream/hadoop/NioLocalFileSystem.class", "icestream/hadoop/NioRawLocalFileSystem.class")


def sources() -> list[Path]:
    """The Java sources, in a stable order."""
    return sorted(SOURCE_FOLDER.rglob("*.java"))


def jar_name() -> str:
    """The cached jar's name: it changes with the sources and with pyspark's jars (Hadoop, Janino)."""
    digest = hashlib.sha256()
    for path in sources():
        digest.update(path.relative_to(SOURCE_FOLDER).as_posix().encode() + b"\0" + path.read_bytes())
    for jar in sorted(Path(name).name for name in glob.glob(str(pyspark_jar_folder() / "*.jar"))):
        digest.update(jar.encode() + b"\0")
    return f"icestream-localfs-{digest.hexdigest()[:12]}.jar"


def build_jar(target: Path) -> Path:
    """Compile the sources with Spark's Janino in a short-lived JVM and write the jar to ``target``.

    Raises:
        RuntimeError: If a jar Janino needs is missing or the classes do not compile.
    """
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

    jars = pyspark_jar_folder()
    needed = {name: glob.glob(str(jars / f"{name}-*.jar")) for name in ("py4j", "janino", "commons-compiler")}
    missing = [name for name, found in needed.items() if not found]
    if missing:
        raise RuntimeError(f"pyspark's jars folder {jars} lacks {', '.join(missing)}")
    port = launch_gateway(
        jarpath=needed["py4j"][0],
        classpath=os.pathsep.join((needed["janino"][0], needed["commons-compiler"][0])),
        die_on_exit=True,
    )
    gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=False))
    try:
        jvm = gateway.jvm

        def files(paths: list[Path]) -> object:
            array = gateway.new_array(jvm.java.io.File, len(paths))
            for index, path in enumerate(paths):
                array[index] = jvm.java.io.File(str(path))
            return array

        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
            classes = Path(scratch) / "classes"
            classes.mkdir()
            compiler = jvm.org.codehaus.janino.Compiler()
            compiler.setDestinationDirectory(jvm.java.io.File(str(classes)), False)
            # Janino resolves every type a superclass's methods mention: all of Spark's jars.
            compiler.setClassPath(files(sorted(Path(name) for name in glob.glob(str(jars / "*.jar")))))
            try:
                compiler.compile(files(sources()))
            except Exception as error:  # noqa: BLE001 - py4j wraps the compiler's exceptions
                raise RuntimeError(f"Janino could not compile {SOURCE_FOLDER}: {str(error).splitlines()[0]}") from None
            built = Path(scratch) / "localfs.jar"
            with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in sorted(classes.rglob("*.class")):
                    archive.write(path, path.relative_to(classes).as_posix())
            with zipfile.ZipFile(built) as archive:
                absent = [entry for entry in CLASS_ENTRIES if entry not in archive.namelist()]
            if absent:
                raise RuntimeError(f"the compiled jar lacks {', '.join(absent)}")
            os.replace(built, target)  # atomic: processes building at once never see half a jar
    finally:
        gateway.shutdown()
    return target


def local_fs_jar(settings: Settings) -> Path | None:
    """The cached jar, built first if needed; None (and a log line) when it cannot be built."""
    target = settings.path("jar_cache_dir") / jar_name()
    if target.is_file():
        return target
    try:
        return build_jar(target)
    except Exception as error:  # noqa: BLE001 - any failure only means Hadoop's default file system
        LOG.warning("Hadoop's default local file system stays in use (slower commits): %s", error)
        return None


def local_fs_conf(settings: Settings) -> dict[str, str]:
    """Spark settings that put the faster ``file:`` file system in place, or none (see the module docstring)."""
    if not settings.fast_local_fs or not settings.local_master:
        return {}
    jar = local_fs_jar(settings)
    if jar is None:
        return {}
    return {"spark.driver.extraClassPath": str(jar), "spark.hadoop.fs.file.impl": FILE_SYSTEM_CLASS}
