"""The pipeline's commands: ``export``, ``audit`` and ``synth-log`` (docs/pipeline.md).

Exit codes: 0 done (audit: every invariant held), 1 the audit found
violations, 2 bad input, the ``pipeline`` extra not installed, a Spark
cluster that cannot run the audit, or a Spark job that failed (the message
says which and what to do).

Their parsers need nothing beyond the core install; what each command imports
to run comes from the ``pipeline`` extra, and is looked for before anything
starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

# Each command and the packages of the ``pipeline`` extra it imports (both
# export formats are written through an Arrow table; the audit's report draws
# with matplotlib).
PIPELINE_COMMANDS = {
    "export": ("pyarrow",),
    "audit": ("pyspark", "pyarrow", "matplotlib"),
    "synth-log": ("pyarrow",),
}


OUT_HELP = (
    "output directory, or its URL on storage every Spark worker reads: file:///mnt/shared/log, "
    "s3a://bucket/log (endpoint: AWS_ENDPOINT_URL), hdfs://namenode:8020/log"
)


def add_pipeline_commands(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "export",
        help="export the metadata log as Parquet or JSONL files for the pipeline",
        description="Writes the log (a live node's GET /v1/log, or a voter's data dir: snapshot "
        "+ journal) as files partitioned by offset range, one flat schema (docs/pipeline.md). "
        "Re-running appends what is new. Sensitive config values are written as (redacted) "
        "unless --include-sensitive.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--url", help="a voter's HTTP URL")
    src.add_argument("--data-dir", help="a voter's data dir (read offline, never modified)")
    p.add_argument("--out", required=True, help=OUT_HELP)
    p.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    p.add_argument(
        "--from", dest="from_offset", type=int, help="first offset (default: where --out ends)"
    )
    p.add_argument(
        "--token",
        default=os.environ.get("METAQUORUM_TOKEN"),
        help="bearer token [env METAQUORUM_TOKEN]",
    )
    from .connection_flags import add_tls_flags

    add_tls_flags(p)
    p.add_argument("--records-per-file", type=int, default=1_000_000,
                   help="records in each Parquet file (default 1,000,000; each in row groups "
                   "of 131,072 rows, the unit Spark splits a file into tasks by)")  # fmt: skip
    p.add_argument(
        "--uncommitted",
        action="store_true",
        help="--data-dir: also export journal entries after the stored commit index",
    )
    p.add_argument(
        "--include-sensitive",
        action="store_true",
        help="write the values of sensitive configs (PASSWORDs such as ssl.keystore.password, "
        "and configs of unknown type) instead of (redacted); from --url it needs an admin "
        "token or certificate (any other role is refused and nothing is exported); from "
        "--data-dir it takes what the dir holds",
    )

    p = commands.add_parser(
        "audit",
        help="audit an exported log with PySpark: invariants, timelines, an HTML report",
        description="Rebuilds every broker's and partition's state in offset order and reports "
        "each violated invariant with its offset. Exit code 1 if any.",
        epilog="Spark settings it uses unless told otherwise (--conf KEY=VALUE overrides each; "
        "so does spark-submit's --conf): on local[N], spark.sql.shuffle.partitions=2N (Spark's "
        "own 200 is for clusters: on a 1M-record log most of its tasks were empty) and "
        "spark.driver.memory=2g (a 10M-record log audited in it on local[2]), and for an export "
        "of fewer than 2,000,000 records spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 "
        "-XX:ReservedCodeCacheSize=240m (C1 only: on a short audit C2's compiling costs more "
        "than it wins); everywhere, "
        "spark.sql.adaptive.enabled=true with coalescePartitions (on a cluster it makes Spark's "
        "200 shuffle partitions as few as the data needs). Measured in docs/pipeline.md "
        "(Performance).",
    )
    p.add_argument(
        "--input",
        required=True,
        help="an export directory (metaquorum export --out), or its URL (hdfs://, s3a://)",
    )
    p.add_argument("--report", help="write a self-contained HTML report here")
    p.add_argument(
        "--master",
        help="Spark master URL: local[N], spark://host:7077, yarn, k8s://... (default: the one "
        "spark-submit was given, else local[*]); on a cluster, --input and --output must be on "
        "storage every worker shares",
    )
    p.add_argument("--output", help="where violations and timelines go (default <input>-audit)")
    p.add_argument("--shuffle-partitions", type=int,
                   help="spark.sql.shuffle.partitions (default: 2 per core on local[N], else "
                   "Spark's 200, which adaptive execution coalesces)")  # fmt: skip
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting, as spark-submit's --conf (repeatable), e.g. "
                   "spark.executor.memory=4g")  # fmt: skip
    p.add_argument("--executor-wait", type=float, default=120.0, metavar="SECONDS",
                   help="on a cluster: fail when no executor is there this long, at the start "
                   "or after losing them all (default 120)")  # fmt: skip

    from .synth_log import PLANT_KINDS, PLANT_NAMES

    p = commands.add_parser(
        "synth-log",
        help="write a large, realistic metadata log made by the real controller",
        description="Simulated brokers (registrations, heartbeats, crashes, controlled shutdowns, "
        "ISR churn, controller failovers) drive the real controller; --plant adds a violation.",
    )
    p.add_argument("--records", type=int, required=True, help="about this many records")
    p.add_argument("--out", required=True, help=f"{OUT_HELP}; new or empty")
    p.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    p.add_argument("--plant", action="append", default=[], choices=PLANT_NAMES, metavar="KIND",
                   help=f"append a violation of this kind (repeatable): {', '.join(PLANT_KINDS)}, "
                   "or the id of the invariant it breaks (docs/rules.md)")  # fmt: skip
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--brokers", type=int, default=12)
    p.add_argument("--topics", type=int, default=20)
    p.add_argument("--partitions", type=int, default=50, help="partitions per topic")
    p.add_argument("--records-per-file", type=int, default=1_000_000)


def _fail(message: str, code: int = 2) -> int:
    print(f"metaquorum: {message}", file=sys.stderr)
    return code


def missing_extra(command: str) -> str | None:
    """Why ``command`` cannot run here and what to install, or None when it can."""
    missing = [m for m in PIPELINE_COMMANDS[command] if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    pip = _own_pip()
    here = pip if pip == "pip" or os.path.relpath(pip).startswith("..") else os.path.relpath(pip)
    names = ", ".join(missing[:-1]) + " and " + missing[-1] if len(missing) > 1 else missing[0]
    lines = [
        f"`metaquorum {command}` needs {names}, of the pipeline extra that the core install "
        "leaves out.",
        f"  install it:        {here} install 'metaquorum[pipeline]'",
    ]
    checkout = Path(__file__).resolve().parent.parent
    if not (checkout / "pyproject.toml").is_file():
        lines.append(f"  from a checkout:   {here} install -e '.[pipeline]'")
    elif checkout == Path.cwd().resolve():  # an editable install of the checkout we are in
        lines.append(f"  in this checkout:  {here} install -e '.[pipeline]'")
    else:
        lines.append(f"  in its checkout:   cd {checkout} && {pip} install -e '.[pipeline]'")
    return "\n".join(lines)


def _own_pip() -> str:
    """The pip of the Python running this (``.venv/bin/pip`` after ``make run``)
    as an absolute path, or plain ``pip`` when that is the one the shell finds."""
    own = os.path.join(os.path.dirname(sys.executable), "pip")
    if not os.path.isfile(own) or shutil.which("pip") == own:
        return "pip"
    return own


def run_pipeline_command(args: argparse.Namespace) -> int:
    problem = missing_extra(args.command)
    if problem:
        return _fail(problem)
    if args.command == "export":
        return _export(args)
    if args.command == "audit":
        return _audit(args)
    return _synth(args)


def _export(args: argparse.Namespace) -> int:
    from brokers.tls import ClientTlsError

    from .connection_flags import tls_from_args
    from .export import ExportError, run_export

    try:
        tls = tls_from_args(args)
    except ClientTlsError as e:
        return _fail(str(e))
    try:
        result = run_export(
            args.out,
            url=args.url,
            data_dir=args.data_dir,
            fmt=args.format,
            from_offset=args.from_offset,
            token=args.token,
            records_per_file=args.records_per_file,
            include_uncommitted=args.uncommitted,
            verify=tls.context if tls is not None else True,
            include_sensitive=args.include_sensitive,
        )
    except ExportError as e:
        return _fail(f"export failed: {e}")
    if result.note:
        print(result.note)
    if result.records == 0:
        print(f"nothing new to export; {args.out} ends before offset {result.next_offset}")
    else:
        print(
            f"exported {result.records:,} records (offsets {result.first_offset} to "
            f"{result.next_offset - 1}) into {len(result.files)} file(s) in {args.out}"
        )
    return 0


def _audit(args: argparse.Namespace) -> int:
    from pipeline.cluster import ClusterError
    from pipeline.export_files import ExportDirError
    from pipeline.run import main_audit

    if args.shuffle_partitions is not None and args.shuffle_partitions < 1:
        return _fail(f"--shuffle-partitions must be at least 1, not {args.shuffle_partitions}")
    conf = {}
    for setting in args.conf:
        key, eq, value = setting.partition("=")
        if not eq or not key:
            return _fail(f"--conf {setting!r}: expected KEY=VALUE, e.g. spark.executor.memory=4g")
        conf[key.strip()] = value.strip()
    console = Console()
    try:
        result = main_audit(
            args.input,
            args.report,
            args.master,
            output_dir=args.output,
            shuffle_partitions=args.shuffle_partitions,
            echo=lambda line: console.print(line, highlight=False),
            conf=conf,
            executor_wait=args.executor_wait,
        )
    except (ExportDirError, ValueError, ClusterError) as e:
        return _fail(str(e))
    if not result.violations:
        console.print(
            f"[green]OK[/]: every invariant held at every offset ({result.records:,} records)"
        )
        return 0
    table = Table(title=f"{result.violations} violation(s)", title_justify="left")
    for column in ("offset", "time (UTC)", "check", "entity", "explanation", "who"):
        table.add_column(column, overflow="fold")
    from pipeline.report import _when

    for offset, ts, check, entity, explanation, principal, api, *_ in result.first_rows:
        who = f"{principal} {api}" if principal else ""
        table.add_row(str(offset), _when(ts), check, entity, explanation, who)
    console.print(table)
    if result.violations > len(result.first_rows):
        console.print(
            f"... and {result.violations - len(result.first_rows)} more in "
            f"{os.path.join(result.output_dir, 'violations')}"
        )
    console.print("by check: " + ", ".join(f"{k} {v}" for k, v in sorted(result.counts.items())))
    return 1


def _synth(args: argparse.Namespace) -> int:
    from pipeline.export_files import ExportDirError

    from .synth_log import SynthError, run_synth_log

    try:
        summary = run_synth_log(
            args.records,
            args.out,
            plant_kinds=args.plant,
            fmt=args.format,
            seed=args.seed,
            brokers=args.brokers,
            topics=args.topics,
            partitions=args.partitions,
            records_per_file=args.records_per_file,
        )
    except (SynthError, ExportDirError) as e:
        return _fail(str(e))
    print(
        f"wrote {summary['records']:,} records ({summary['brokers']} brokers, "
        f"{summary['partitions']} partitions, {summary['simulatedMs'] / 60_000:.1f} simulated "
        f"minutes, controller epoch {summary['controllerEpoch']}) to {args.out}"
    )
    for p in summary["planted"]:
        print(f"planted {p['kind']} ({p['rule']}) at offset {p['offset']}: {p['what']}")
    return 0
