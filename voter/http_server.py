"""The API's HTTP server, the same in a voter of one process and in each of
its HTTP workers: uvicorn's configuration (``http_config``) and the TLS
context and client-certificate rules the TLS flags ask for (``build_tls``).

Both are read from the serve flags (a worker gets them in its config), so a
worker serves exactly what the one-process voter would; the command
(metaquorum/serve.py) calls ``build_tls`` first, to refuse bad files before
anything starts.
"""

from __future__ import annotations

import argparse


def build_tls(args: argparse.Namespace):
    """(the reloading server context, the certificate principal rules), each
    None when off; TlsConfigError / PrincipalsFileError name the flag."""
    from api.cert_principals import CertPrincipals, load_rules
    from api.tls import ReloadingContext, TlsConfigError, settings_from_flags

    interval = getattr(args, "tls_reload_interval_ms", None)
    settings = settings_from_flags(
        getattr(args, "tls_cert_file", None) or None,
        getattr(args, "tls_key_file", None) or None,
        getattr(args, "tls_client_ca_file", None) or None,
        getattr(args, "tls_client_auth", None) or None,
        None if interval is None else int(interval),
    )
    principals_file = getattr(args, "tls_principals_file", None) or None
    if settings is None or settings.client_ca_file is None:
        if principals_file:
            raise TlsConfigError(
                "--tls-principals-file needs --tls-client-ca-file (no client certificates "
                "are asked for without it)"
            )
        return (None if settings is None else ReloadingContext(settings)), None
    if principals_file:
        try:
            principals = CertPrincipals(load_rules(principals_file), principals_file)
        except ValueError as e:
            raise TlsConfigError(f"--tls-principals-file: {e}") from None
    else:
        principals = CertPrincipals.default()
    return ReloadingContext(settings), principals


def http_config(app, host: str, port: int, limits, stats, tls):
    """The uvicorn configuration of the API, in one process or in each HTTP worker."""
    import uvicorn

    from api.connections import guarded_protocol

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        workers=1,
        timeout_graceful_shutdown=5,
        # Brokers and operators connect directly (a Kubernetes Service is
        # not a proxy): no X-Forwarded-* rewriting on every request.
        proxy_headers=False,
        # Deadlines, head limits and connection caps (api/connections.py).
        # Over TLS the protocol starts TLS itself, once the connection is
        # counted, with our context, which is swapped under the listening
        # socket when the files change (api/tls.py): uvicorn listens for TCP.
        http=guarded_protocol(limits, stats, None if tls is None else tls.listening),
        timeout_keep_alive=5,
    )
