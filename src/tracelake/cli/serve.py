"""`tracelake serve` (the HTTP API and web UI on one store) and `tracelake token add` (a bearer
token for it, kept in the token file as a digest and shown once)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tracelake.cli.common import DbOption, UserError, friendly_errors, open_service, out

if TYPE_CHECKING:
    from tracelake.api.auth import Scope

token_app = typer.Typer(help="Bearer tokens for the HTTP API.", no_args_is_help=True)

TokenFileOption = Annotated[
    Path | None,
    typer.Option(
        "--tokens", envvar="TRACELAKE_TOKENS", help="Token file: when given, every request needs a token"
    ),
]


@friendly_errors
def serve_command(
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on")] = 8750,
    tokens: TokenFileOption = None,
    policy_dir: Annotated[
        Path | None, typer.Option(help="The folder policy files may be checked from over HTTP")
    ] = None,
    max_body_mb: Annotated[float, typer.Option(help="Largest request body accepted")] = 16.0,
    lake: Annotated[
        list[Path] | None, typer.Option(help="A folder privacy requests may name datasets in (repeatable)")
    ] = None,
    hive_namespace: Annotated[
        str | None,
        typer.Option(
            envvar="TRACELAKE_HIVE_NAMESPACE",
            help="The home metastore (hive://host:port): its tables are the SQL collector's db.table",
        ),
    ] = None,
    webhook_allow: Annotated[
        list[str] | None,
        typer.Option(
            help="A host, address or network (10.0.0.0/8) webhooks may reach though not public (repeatable)"
        ),
    ] = None,
    read_concurrency: Annotated[
        int | None,
        typer.Option(min=1, help="Reads computing at once (default 1); the others queue in arrival order"),
    ] = None,
    db: DbOption = None,
) -> None:
    """Serve the HTTP API (OpenLineage ingest included) on the store."""
    from tracelake.api.app import ApiSettings, create_app
    from tracelake.api.auth import TokenFileError
    from tracelake.api.server import serve_forever
    from tracelake.app.subscriptions import WebhookAllowError
    from tracelake.model import names

    if hive_namespace is not None:
        if not hive_namespace.lower().startswith("hive://") or len(hive_namespace) <= len("hive://"):
            raise UserError(f"--hive-namespace {hive_namespace!r}: expected hive://host:port")
        names.set_hive_namespace(hive_namespace)

    if tokens is not None and not tokens.is_file():
        raise UserError(f"{tokens}: no such token file (make one with `tracelake token add`)")
    settings = ApiSettings(
        token_file=tokens,
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        policy_dir=policy_dir,
        lake_roots=tuple(lake or ()),
        webhook_allow=tuple(webhook_allow or ()),
        listen_host=host,
    )
    if read_concurrency is not None:
        settings = dataclasses.replace(settings, read_concurrency=read_concurrency)
    try:
        app = create_app(open_service(db), settings)
    except (TokenFileError, WebhookAllowError) as error:
        raise UserError(str(error)) from None
    auth = f"tokens from {tokens}" if tokens else "no authentication (give --tokens to require it)"
    out.print(f"Tracelake on http://{host}:{port}  ({auth}); OpenAPI at /docs", highlight=False)
    serve_forever(app, host, port)


@token_app.command("add")
@friendly_errors
def token_add(
    name: Annotated[str, typer.Argument(help="Who or what uses it, e.g. airflow")],
    file: Annotated[Path, typer.Option("--tokens", envvar="TRACELAKE_TOKENS", help="The token file")],
    scope: Annotated[list[str], typer.Option(help="read and/or write")] = ["read"],  # noqa: B006
) -> None:
    """Make a token; it is printed once, the file keeps only its SHA-256."""
    from tracelake.api.auth import SCOPES, new_token

    unknown = [s for s in scope if s not in SCOPES]
    if unknown:
        raise UserError(f"unknown scope {unknown[0]!r}: use {' or '.join(SCOPES)}")
    scopes: list[Scope] = [s for s in SCOPES if s in scope]
    print(new_token(name, scopes, file))


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
    app.add_typer(token_app, name="token")
