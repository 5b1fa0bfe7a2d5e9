"""Options of the table: tLS of the streaming server's connection to NATS (``tls``)."""

from __future__ import annotations

from stanpkg.plan.options.core import Kind, Option

OPTIONS: tuple[Option, ...] = (
    Option(
        "tls.client_cert",
        Kind.STRING,
        "",
        "Client certificate for the streaming server",
        keys=("client_cert",),
        flags=("-tls_client_cert",),
        file_path=True,
    ),
    Option(
        "tls.client_key",
        Kind.STRING,
        "",
        "Client key for the streaming server",
        keys=("client_key",),
        flags=("-tls_client_key",),
        file_path=True,
    ),
    Option(
        "tls.client_ca",
        Kind.STRING,
        "",
        "Client certificate CA for the streaming server",
        keys=("client_ca", "client_cacert"),
        flags=("-tls_client_cacert",),
        file_path=True,
    ),
    Option(
        "tls.server_name",
        Kind.STRING,
        "",
        "Expected host name of the NATS server's certificate",
        keys=("server_name", "server_hostname"),
    ),
    Option(
        "tls.skip_verify",
        Kind.BOOL,
        False,
        "Do not verify the NATS server's certificate (DO NOT USE IN PRODUCTION)",
        keys=("skip_verify", "insecure"),
    ),
)
