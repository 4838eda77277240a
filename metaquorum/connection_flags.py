"""How a command reaches a cluster: ``--url`` (any voter; several are tried in
turn), ``--token`` and the TLS flags, alike in every command that talks to one
(the operator commands, ``sim``, ``broker``, ``export``). Each defaults to its
environment variable (METAQUORUM_URL, METAQUORUM_TOKEN, METAQUORUM_CACERT,
METAQUORUM_CERT, METAQUORUM_KEY), so a shell or a pod sets them once.
"""

from __future__ import annotations

import argparse
import os

from brokers.tls import ClientTls, load_client_tls

DEFAULT_URL = "http://127.0.0.1:7070"


def add_tls_flags(p: argparse.ArgumentParser) -> None:
    """--cacert, --cert and --key (brokers/tls.py)."""
    p.add_argument(
        "--cacert",
        default=os.environ.get("METAQUORUM_CACERT"),
        help="PEM CA certificates to trust for https URLs (default: the system's) "
        "[env METAQUORUM_CACERT]",
    )
    p.add_argument(
        "--cert",
        default=os.environ.get("METAQUORUM_CERT"),
        help="this client's PEM certificate, for servers that take client certificates "
        "[env METAQUORUM_CERT]",
    )
    p.add_argument(
        "--key",
        default=os.environ.get("METAQUORUM_KEY"),
        help="the PEM private key of --cert [env METAQUORUM_KEY]",
    )


def tls_from_args(args: argparse.Namespace) -> ClientTls | None:
    """ClientTlsError (a ValueError) names the flag."""
    return load_client_tls(args.cacert, args.cert, args.key)


def add_connection_flags(p: argparse.ArgumentParser, token_help: str = "bearer token") -> None:
    """--url, --token and the TLS flags, as every command that talks to a cluster takes them."""
    p.add_argument(
        "--url",
        default=os.environ.get("METAQUORUM_URL", DEFAULT_URL),
        help="any voter's HTTP URL; several, comma-separated, are tried in turn [env METAQUORUM_URL]",
    )
    p.add_argument(
        "--token",
        default=os.environ.get("METAQUORUM_TOKEN"),
        help=f"{token_help} [env METAQUORUM_TOKEN]",
    )
    add_tls_flags(p)
