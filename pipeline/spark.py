"""The SparkSession the pipeline runs on, and reading an export directory into it."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
import tempfile

import pyarrow as pa

from .export_files import ExportDirError, export_files, input_format, is_url
from .schema import ARROW_SCHEMA

# Spark logs at INFO/WARN through log4j2 unless told otherwise: errors only.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# PySpark counts as a shell: Spark would reset the root level to this logger's.
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


def _log4j2_file() -> str:
    digest = hashlib.sha256(_LOG4J2.encode()).hexdigest()[:12]
    path = os.path.join(
        tempfile.gettempdir(), f"metaquorum-log4j2-{os.getuid()}-{digest}.properties"
    )
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(_LOG4J2)
        os.replace(tmp, path)
    return path


# Defaults measured on a 2-core machine (docs/pipeline.md, Performance); each
# is overridden by a --conf of the same key (or --shuffle-partitions).
LOCAL_DRIVER_MEMORY = "2g"
SHUFFLE_PARTITIONS_PER_CORE = 2  # on local[N]: 2N (Spark's default, 200, is for clusters)
# On local[N], a log of fewer records than this is audited by a JVM that
# compiles with C1 only: a cold 1M audit spent about 30 of its 90 CPU seconds
# in C2, the optimizing compiler, which a job that short does not win back;
# at 10M C2's code is worth it (197 CPU seconds against 321 with C1 alone).
C1_ONLY_BELOW = 2_000_000
C1_ONLY = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"


def local_cores(master: str) -> int | None:
    """N of ``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` (None: not local)."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if m is None:
        return None
    if m[1] is None:
        return 1
    return (os.cpu_count() or 1) if m[1] == "*" else max(int(m[1]), 1)


def session_defaults(master: str, records: int | None = None) -> dict[str, str]:
    """The settings a session gets unless told otherwise. On ``local[N]``:
    2N shuffle partitions (each shuffle of the log is a few MB per million
    records: Spark's 200 made an audit of 1M records 9,300 tasks, most of them
    empty) and a 2 GB driver heap (the executors' too, in local mode); and
    when the log is known to hold fewer than C1_ONLY_BELOW ``records``, a
    driver JVM that JIT-compiles with C1 only (``spark.driver.extraJavaOptions``).
    Everywhere: adaptive execution, which coalesces small shuffle partitions
    and picks broadcast joins from the sizes it sees (on a cluster it makes
    Spark's 200 partitions as few as the data needs)."""
    defaults = {
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
    }
    cores = local_cores(master)
    if cores is not None:
        defaults["spark.driver.memory"] = LOCAL_DRIVER_MEMORY
        defaults["spark.sql.shuffle.partitions"] = str(SHUFFLE_PARTITIONS_PER_CORE * cores)
        if records is not None and records < C1_ONLY_BELOW:
            defaults["spark.driver.extraJavaOptions"] = C1_ONLY
    return defaults


def build_session(
    master: str = "local[*]",
    app_name: str = "metaquorum-audit",
    records: int | None = None,
    **conf: str,
):
    """A session on ``master`` (``local[*]``, ``spark://host:7077``, ``yarn``, ...),
    with Spark's own logging turned down to errors and no web UI; ``conf``
    overrides ``session_defaults`` (``records``: how many the log holds, when known)."""
    from pyspark.sql import SparkSession

    # py4j logs every call at INFO when the root logger lets it.
    logging.getLogger("py4j").setLevel(logging.ERROR)
    # Python workers run the interpreter running this (with pyarrow and friends).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master.startswith("local"):
        # The machine's hostname may resolve to an address Spark warns about.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    defaults = session_defaults(master, records)
    # The log4j2 file always; a --conf of extraJavaOptions replaces the whole.
    java = f"-Dlog4j2.configurationFile={_log4j2_file()}"
    defaults["spark.driver.extraJavaOptions"] = " ".join(
        (java, defaults.get("spark.driver.extraJavaOptions", ""))
    ).strip()
    for key in _submitted_keys():  # spark-submit's --conf wins over a default too
        defaults.pop(key, None)
    for key, value in {**defaults, **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _submitted_keys() -> set[str]:
    """The settings spark-submit was given, when it runs this process."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return set()
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return {key for key, _ in SparkConf().getAll()}


def submitted_master() -> str | None:
    """The master spark-submit was given, when it runs this process (its JVM is
    up already, so reading its conf starts nothing)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, whose conf has it
    return SparkConf().get("spark.master", None)


def _spark_type(t: pa.DataType):
    from pyspark.sql import types as T

    if pa.types.is_int8(t):
        return T.ByteType()
    if pa.types.is_int16(t):
        return T.ShortType()
    if pa.types.is_int32(t):
        return T.IntegerType()
    if pa.types.is_int64(t):
        return T.LongType()
    if pa.types.is_boolean(t):
        return T.BooleanType()
    if pa.types.is_float64(t):
        return T.DoubleType()
    if pa.types.is_string(t):
        return T.StringType()
    if pa.types.is_binary(t):  # SCRAM salts and keys (empty); JSONL holds base64
        return T.BinaryType()
    if pa.types.is_list(t):
        return T.ArrayType(_spark_type(t.value_type))
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, _spark_type(f.type)) for f in t])
    raise AssertionError(t)


def spark_schema():
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, _spark_type(f.type)) for f in ARROW_SCHEMA])


# The Hadoop module of a scheme's FileSystem that pyspark's jars lack (the
# version of pyspark's own Hadoop client, 3.5.0).
FILESYSTEM_MODULES = {"s3a": "org.apache.hadoop:hadoop-aws:3.5.0"}


def _hadoop_path(spark, url: str):
    path = spark._jvm.org.apache.hadoop.fs.Path(url)
    try:
        return path, path.getFileSystem(spark._jsc.hadoopConfiguration())
    except Exception as e:  # py4j's error: a Java exception's class and message
        # No FileSystem for the scheme at all, or (s3a, named in Hadoop's own
        # defaults) its class is not on the classpath.
        if not re.search(
            r"UnsupportedFileSystemException|ClassNotFoundException: Class \S+FileSystem", str(e)
        ):
            raise
        scheme = url.partition("://")[0]
        module = FILESYSTEM_MODULES.get(scheme.lower())
        add = (
            f"add its module: --conf spark.jars.packages={module} (fetched from Maven Central "
            "at start, or --conf spark.jars=/path/to/its.jar with its dependencies)"
            if module
            else "add the jar of a Hadoop FileSystem for it with --conf spark.jars=..."
        )
        raise ExportDirError(
            f"this Spark has no file system for {scheme}:// ({url}): {add}; "
            "docs/pipeline.md, On a Spark cluster"
        ) from None


def listing(spark, directory: str) -> list[str] | None:
    """The names in ``directory`` when it is a URL (None: a local path)."""
    if not is_url(directory):
        return None
    path, fs = _hadoop_path(spark, directory)
    if not fs.exists(path) or not fs.getFileStatus(path).isDirectory():
        raise ExportDirError(f"{directory} is not a directory (run `metaquorum export` first)")
    return [status.getPath().getName() for status in fs.listStatus(path)]


def write_text(spark, path: str, text: str) -> None:
    """A small file of the outputs (summary.json), wherever ``path`` is."""
    if not is_url(path):
        with open(path, "w") as f:
            f.write(text)
        return
    hpath, fs = _hadoop_path(spark, path)
    stream = fs.create(hpath, True)
    try:
        stream.write(text.encode())
    finally:
        stream.close()


def read_export(spark, directory: str):
    """The exported records of ``directory`` as one DataFrame (Parquet or JSONL)."""
    names = listing(spark, directory)
    fmt = input_format(directory, names)
    paths = [f.path for f in export_files(directory, names)]
    if fmt == "parquet":
        return spark.read.schema(spark_schema()).parquet(*paths)
    return spark.read.schema(spark_schema()).json(*paths)
