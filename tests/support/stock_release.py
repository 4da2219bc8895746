"""The released jars of an Apache RocketMQ version from Maven Central, resolved once per version into a cache
directory, and the java command line that runs one of their main classes as its own process."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from rmq_spark_testing.embedded import JDK, MAVEN, EmbeddedClusterError, jvm_flags, require_tool

STOCK_POM = Path(__file__).resolve().parents[2] / "jvm-shim" / "stock" / "pom.xml"
CACHE = Path(os.environ.get("RMQ_SPARK_STOCK_CACHE", Path.home() / ".cache" / "rmq-spark" / "rocketmq"))
# What RocketMQ's store and remoting reach into on JDK 17 (the shim's jar carries the first three in its manifest);
# 4.x unmaps files through jdk.internal.ref.Cleaner (a broker restarted after a crash fails its store's load without).
JDK17_ACCESS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
)
_COMPLETE = ".complete"


def release_jars(version: str, *, proxy: bool = False) -> Path:
    """The directory of every runtime jar of RocketMQ ``version`` (name server, broker, admin tools and the Java
    client; with ``proxy`` also RocketMQ 5's proxy), copied from Maven Central by ``jvm-shim/stock/pom.xml`` on
    first use; EmbeddedClusterError with Maven's last lines when the version does not resolve."""
    name = f"{version}-proxy" if proxy else version
    target = CACHE / name
    if (target / _COMPLETE).is_file():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as lock:  # another test process may be resolving it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / _COMPLETE).is_file():
            return target
        staging = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=CACHE))
        proc = subprocess.run(
            [
                require_tool("mvn", MAVEN),
                "-q",
                "-B",
                "-f",
                str(STOCK_POM),
                f"-Drocketmq.version={version}",
                *(["-Drocketmq.proxy"] if proxy else []),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}",
                "-DincludeScope=runtime",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wanted = f"rocketmq-{'proxy' if proxy else 'broker'}-{version}.jar"
        if proc.returncode != 0 or not any(staging.glob(wanted)):
            shutil.rmtree(staging, ignore_errors=True)
            tail = "\n".join(proc.stdout.splitlines()[-30:])
            raise EmbeddedClusterError(
                f"the jars of RocketMQ {version}{' with its proxy' if proxy else ''} could not "
                f"be resolved from Maven Central (exit {proc.returncode}); is {version} a "
                f"released version{' of 5.x (4.x has no proxy)' if proxy else ''}?\n{tail}"
            )
        (staging / _COMPLETE).touch()
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return target


def java(
    classpath: str, main_class: str, *args: str, heap: str, home: Path, rocketmq_home: Path | None = None
) -> list[str]:
    """The command that runs ``main_class`` from ``classpath`` with the flags RocketMQ needs on JDK 17, ``home`` as
    its ``user.home`` (where RocketMQ writes its logs) and ``rocketmq_home`` as ROCKETMQ_HOME."""
    return [
        require_tool("java", JDK),
        f"-Xmx{heap}",
        *jvm_flags(),
        *JDK17_ACCESS,
        f"-Duser.home={home}",
        *([f"-Drocketmq.home.dir={rocketmq_home}"] if rocketmq_home else []),
        "-cp",
        classpath,
        main_class,
        *args,
    ]


def java_command(
    version: str, main_class: str, *args: str, heap: str, home: Path, rocketmq_home: Path, proxy: bool = False
) -> list[str]:
    """The command that runs ``main_class`` of RocketMQ ``version``'s released jars (with ``proxy``, the set that
    has the proxy; see ``java``)."""
    return java(
        f"{release_jars(version, proxy=proxy)}/*", main_class, *args, heap=heap, home=home, rocketmq_home=rocketmq_home
    )
