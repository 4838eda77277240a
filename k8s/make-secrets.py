#!/usr/bin/env python3
"""Writes the files the kustomize base turns into Secrets and the cluster id:
k8s/base/local/{raft-secret, tokens, admin-token, cluster.env}. They are never
committed (.gitignore). Standard library only: run it with any python3.

    python3 k8s/make-secrets.py            # once per cluster, before the first apply
    python3 k8s/make-secrets.py --dir DIR  # somewhere else (tests render a copy)

It refuses to overwrite: a running cluster's data dirs remember their cluster
id, and its voters share the Raft secret, so new values need a new cluster
(or, for the secret alone, a restart of every voter at once).
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import sys
from pathlib import Path

FILES = ("raft-secret", "tokens", "admin-token", "cluster.env")


def kafka_uuid() -> str:
    """A Kafka-style cluster id: 16 random bytes as 22 characters of base64url,
    never starting with '-' (1 in 64 would, and could not be passed as
    ``--cluster-id <id>``; Kafka's Uuid.randomUuid draws again too)."""
    while True:
        text = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def write(directory: Path, force: bool = False) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    existing = [name for name in FILES if (directory / name).exists()]
    if existing and not force:
        raise FileExistsError(
            f"{directory} already has {', '.join(existing)}: a cluster may be using them "
            "(its data dirs remember the cluster id). Use --force only for a new cluster."
        )
    admin, operator, reader, broker = (secrets.token_urlsafe(32) for _ in range(4))
    contents = {
        "raft-secret": secrets.token_urlsafe(48) + "\n",
        "tokens": (
            '# token role [brokerId]  (api/auth.py, API.md "Auth")\n'
            f"{admin} admin    # the pods' own preStop hook and in-pod commands\n"
            f"{operator} admin    # operators\n"
            f"{reader} read     # dashboards, read-only tools\n"
            f"{broker} broker   # brokers (add one line per broker, bound: TOKEN broker ID)\n"
        ),
        "admin-token": admin + "\n",
        "cluster.env": f"METAQUORUM_CLUSTER_ID={kafka_uuid()}\n",
    }
    for name, text in contents.items():
        path = directory / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    return {"operator-token": operator, "read-token": reader, "broker-token": broker}


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=here / "base" / "local")
    parser.add_argument("--force", action="store_true", help="overwrite (a new cluster only)")
    args = parser.parse_args(argv)
    try:
        write(args.dir, args.force)
    except FileExistsError as e:
        print(f"make-secrets: {e}", file=sys.stderr)
        return 1
    print(f"wrote {', '.join(FILES)} to {args.dir} (mode 0600; never commit them)")
    print("tokens for people are in its 'tokens' file: keep a copy in your password manager")
    return 0


if __name__ == "__main__":
    sys.exit(main())
