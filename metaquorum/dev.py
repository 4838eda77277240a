"""``metaquorum dev``: a local cluster on 127.0.0.1 in a local data dir.

One voter runs in this process; ``--nodes 3`` starts three ``metaquorum serve``
child processes (with a generated Raft secret) and stops them together on
Ctrl-C. Either way it prints where to look and ready-to-paste curl commands.

``--tls``: a throwaway CA (metaquorum/dev_certs.py) in the data dir's ``tls/``
signs the voters' certificate (127.0.0.1 and localhost) and an admin client
certificate (CN=admin-dev); the voters serve HTTPS and take client
certificates, and the curl commands carry ``--cacert``, ``--cert`` and
``--key``. The files are kept for the next start (made again once expired).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import os
import secrets
import shlex
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

DEFAULT_DIR = ".metaquorum-dev"
HTTP_BASE = 7070  # voter i: HTTP 7070 + 2i, Raft 7071 + 2i


def add_dev_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=1, choices=[1, 3, 5], help="voters to run")
    parser.add_argument("--data-dir", default=DEFAULT_DIR, help="where the voters keep their data")
    parser.add_argument("--http-port", type=int, default=HTTP_BASE, help="first voter's HTTP port")
    parser.add_argument("--fsync", choices=["always", "never"], default="always")
    parser.add_argument("--fresh", action="store_true", help="delete the data dir first")
    parser.add_argument(
        "--http-workers",
        default="1",
        help="each voter's HTTP worker processes (serve --http-workers; 0: one process): one "
        "by default, so that dev runs the layout of a production voter on a machine the "
        "voters share",
    )
    parser.add_argument(
        "--sim",
        action="store_true",
        help="also run simulated brokers with chaos and a live dashboard (metaquorum sim); "
        "Ctrl-C stops the brokers cleanly, then the voters",
    )
    parser.add_argument("--sim-brokers", type=int, default=20, help="brokers for --sim")
    parser.add_argument("--sim-seed", type=int, default=0, help="chaos seed for --sim")
    parser.add_argument(
        "--tls",
        action="store_true",
        help="HTTPS with a throwaway CA made in the data dir, and an admin client certificate "
        "for the curl commands and the simulator",
    )


@dataclass(frozen=True)
class DevTls:
    """The throwaway CA's files in ``<data dir>/tls``."""

    ca: str
    server_cert: str
    server_key: str
    client_cert: str  # CN=admin-dev: an admin by the default certificate rules
    client_key: str

    def serve_flags(self) -> list[str]:
        return ["--tls-cert-file", self.server_cert, "--tls-key-file", self.server_key,
                "--tls-client-ca-file", self.ca]  # fmt: skip

    def client_flags(self) -> list[str]:
        return ["--cacert", self.ca, "--cert", self.client_cert, "--key", self.client_key]

    def curl(self) -> str:
        return " ".join(shlex.quote(f) for f in self.client_flags())

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx


def dev_tls(data_dir: str) -> DevTls:
    """The files, made (again) unless all are there and valid for a day more."""
    from cryptography import x509

    from .dev_certs import ThrowawayCA, write_file

    d = os.path.join(data_dir, "tls")
    files = DevTls(*(os.path.join(d, n) for n in
                     ("ca.crt", "server.crt", "server.key", "admin-dev.crt", "admin-dev.key")))  # fmt: skip
    try:
        with open(files.server_cert, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
        fresh = cert.not_valid_after_utc > dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
        if fresh and all(os.path.exists(p) for p in files.__dict__.values()):
            return files
    except (OSError, ValueError):
        pass
    os.makedirs(d, exist_ok=True)
    ca = ThrowawayCA("metaquorum dev CA")
    write_file(files.ca, ca.cert_pem, 0o644)
    write_file(os.path.join(d, "ca.key"), ca.key_pem)  # to issue more: not needed to run
    ca.issue("metaquorum dev", ips=["127.0.0.1"], dns=["localhost"]).write(
        files.server_cert, files.server_key
    )
    ca.issue("admin-dev", server=False).write(files.client_cert, files.client_key)
    return files


def _ready(url: str, tls: DevTls | None = None) -> bool:
    try:
        context = tls.context() if tls is not None else None
        with urllib.request.urlopen(url + "/readyz", timeout=1, context=context) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def curl_recipes(url: str, cluster_id: str, tls: DevTls | None = None) -> str:
    from metadata_records.uuids import random_uuid

    flags = f" {tls.curl()}" if tls is not None else ""
    curl = f"curl -s{flags}"
    post = f"curl -sL{flags} -X POST -H 'content-type: application/json'"
    return f"""
  Where to look:
    {url}/ui                       the web console: quorum, brokers, partitions, log, what-if
    {url}/docs                     the API, try it in the browser
    {url}/v1/quorum/status         who leads, offsets, voters
    {url}/metrics                  Prometheus metrics
    metaquorum status --url {url}{flags}  the same, as a table

  Paste these (-L follows a follower's 307 to the leader):
    {post} {url}/v1/brokers/register -d '{{"brokerId": 1, "clusterId": "{cluster_id}", "incarnationId": "{random_uuid()}", "listeners": [{{"name": "PLAINTEXT", "host": "localhost", "port": 9092, "securityProtocol": 0}}], "features": [{{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}}]}}'
    {post} {url}/v1/brokers/heartbeat -d '{{"brokerId": 1, "brokerEpoch": EPOCH_FROM_REGISTER, "currentMetadataOffset": 1000000, "wantFence": false, "wantShutDown": false}}'
    {post} {url}/v1/topics -d '{{"topics": [{{"name": "orders", "numPartitions": 3, "replicationFactor": 1}}]}}'
    {curl} {url}/v1/topics/orders
    {curl} '{url}/v1/log?fromOffset=0&maxRecords=20'
    {curl} '{url}/v1/brokers?consistency=linearizable'
"""


def _voter_preexec(parent_pid: int) -> None:
    # Their own session: Ctrl-C reaches this process only, which stops the
    # simulated brokers cleanly before it stops the voters. And if this process
    # dies without stopping them (kill -9), the kernel sends them SIGTERM.
    os.setsid()
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return  # not Linux: Ctrl-C and SIGTERM still stop them
    if os.getppid() != parent_pid:  # this process died before the prctl: no voter
        os._exit(1)


def run_dev(args: argparse.Namespace) -> int:
    from quorum.node_config import ConfigError
    from quorum.startup_checks import lock_data_dir, lock_holder
    from voter.worker_pool import parse_workers

    try:
        parse_workers(args.http_workers)
    except ValueError as e:
        print(f"metaquorum dev: {e}", file=sys.stderr)
        return 2
    data_dir = os.path.abspath(args.data_dir)
    os.makedirs(data_dir, exist_ok=True)
    try:
        lock_data_dir(data_dir)  # held until this process ends, however it ends
    except ConfigError:
        print(
            f"metaquorum dev: an earlier cluster still runs on {data_dir}, held by "
            f"{lock_holder(data_dir)}. Stop it first (Ctrl-C in its terminal, or kill "
            "that pid), or give this one another --data-dir",
            file=sys.stderr,
        )
        return 2
    if args.fresh:  # the contents: the locked directory itself stays
        import shutil

        for entry in os.scandir(data_dir):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    n = args.nodes
    http = [args.http_port + 2 * i for i in range(n)]
    raft = [p + 1 for p in http]
    voters = ",".join(f"{i}@127.0.0.1:{raft[i]}" for i in range(n))
    cluster_file = os.path.join(data_dir, "cluster-id")
    if not os.path.exists(cluster_file):
        from metadata_records.uuids import random_uuid

        with open(cluster_file, "w") as f:
            f.write(random_uuid())
    with open(cluster_file) as f:
        cluster_id = f.read().strip()
    secret_file = os.path.join(data_dir, "raft-secret")
    if n > 1 and not os.path.exists(secret_file):
        with open(secret_file, "w") as f:
            f.write(secrets.token_urlsafe(32))
        os.chmod(secret_file, 0o600)
    tls = dev_tls(data_dir) if args.tls else None
    scheme = "https" if tls is not None else "http"

    def serve_args(i: int) -> list[str]:
        out = [
            "serve",
            "--node-id", str(i),
            "--voters", voters,
            "--http-host", "127.0.0.1",
            "--http-port", str(http[i]),
            "--advertised-url", f"{scheme}://127.0.0.1:{http[i]}",
            "--data-dir", os.path.join(data_dir, f"node-{i}"),
            "--cluster-id", cluster_id,
            "--fsync", args.fsync,
            "--http-workers", str(args.http_workers),
        ]  # fmt: skip
        if n > 1:
            out += ["--raft-secret-file", secret_file]
        if tls is not None:  # the OpenAPI page opens in a browser, which has no client certificate
            out += [*tls.serve_flags(), "--public-docs"]
        return out

    urls = [f"{scheme}://127.0.0.1:{p}" for p in http]
    print(f"metaquorum dev: {n} voter(s), cluster {cluster_id}, data in {data_dir}")
    if n == 1 and not args.sim:
        from .cli import main

        print(curl_recipes(urls[0], cluster_id, tls))
        print("  Ctrl-C stops it; the data dir keeps the log for the next start.\n")
        return main(serve_args(0))

    logs = [open(os.path.join(data_dir, f"node-{i}.log"), "ab") for i in range(n)]
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "metaquorum.cli", *serve_args(i)],
            stdout=logs[i],
            stderr=subprocess.STDOUT,
            preexec_fn=functools.partial(_voter_preexec, os.getpid()),
        )
        for i in range(n)
    ]
    try:
        deadline = time.monotonic() + 60
        while not all(_ready(u, tls) for u in urls):
            for i, child in enumerate(children):
                if child.poll() is not None:
                    logs[i].flush()
                    print(
                        f"voter {i} exited with {child.returncode}: {_last_line(logs[i].name)}\n"
                        f"  (its whole log: {logs[i].name})"
                    )
                    return 1
            if time.monotonic() > deadline:
                print("the voters did not become ready within 60 s; see the node-*.log files")
                return 1
            time.sleep(0.2)
        if args.sim:
            return _run_sim(args, urls, cluster_id, [f.name for f in logs], tls)
        for i, url in enumerate(urls):
            print(f"  voter {i}: {url}  (log: {logs[i].name})")
        print(curl_recipes(urls[0], cluster_id, tls))
        print("  Writes sent to a follower answer 307 to the leader: use curl -L.")
        print("  Ctrl-C stops all voters.\n")
        while all(c.poll() is None for c in children):
            time.sleep(0.5)
        print("a voter exited; stopping the others")
        return 1
    except KeyboardInterrupt:
        print("\nstopping the voters")
        return 0
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for f in logs:
            f.close()


def _last_line(path: str) -> str:
    """The last line a voter logged: why it exited, when it refused to start."""
    try:
        with open(path, "rb") as f:
            lines = f.read()[-8192:].decode(errors="replace").strip().splitlines()
    except OSError:
        return "(its log could not be read)"
    return lines[-1] if lines else "(it logged nothing)"


def _run_sim(
    args: argparse.Namespace,
    urls: list[str],
    cluster_id: str,
    logs: list[str],
    tls: DevTls | None = None,
) -> int:
    """The README's main job: the voters plus simulated brokers on a live dashboard."""
    from .sim import add_sim_flags, run_sim

    url = urls[0]
    flags = f" {tls.curl()}" if tls is not None else ""
    header = "\n".join(
        [
            f"metaquorum dev: {len(urls)} voters  "
            + "  ".join(urls)
            + f"   console: {url}/ui   docs: {url}/docs",
            f"  curl -s{flags} {url}/v1/quorum/status        # who leads, offsets, per-voter lag",
            f"  curl -s{flags} '{url}/v1/brokers?consistency=linearizable'   # the brokers below",
            f"  curl -sL{flags} -H 'content-type: application/json' {url}/v1/topics "
            '-d \'{"topics": [{"name": "orders", "numPartitions": 6}]}\'',
            f"  voter logs: {os.path.dirname(logs[0])}/node-*.log   Ctrl-C: stop brokers cleanly, "
            "then the voters",
        ]
    )
    if not sys.stdout.isatty():
        print(header)  # on a terminal it heads the dashboard instead
    parser = argparse.ArgumentParser(prog="metaquorum dev --sim")
    add_sim_flags(parser)
    sim_args = parser.parse_args(
        [
            "--url", ",".join(urls),
            "--brokers", str(args.sim_brokers),
            "--topics", "4",
            "--partitions", "25",
            "--duration", "0",  # until Ctrl-C
            "--chaos", "all",
            "--seed", str(args.sim_seed),
            *(tls.client_flags() if tls is not None else []),
        ]
    )  # fmt: skip
    return run_sim(sim_args, header=header)
