"""Who and where: ``context``, ``login``, ``logout`` and ``token``."""

from __future__ import annotations

from urllib.parse import urlsplit

import click

from .. import output
from ..auth import DeviceFlowLogin, DeviceFlowNotAvailable, LoginMethod, PasswordLogin, TokenLogin
from ..client import Client
from ..config import Context
from ..resources import NotFoundError, resource
from . import output_option, session

# ---------------------------------------------------------------------------- contexts

@click.group()
def context() -> None:
    """Contexts: named Meridians with their tokens.

    They live in ~/.config/meridian/config.yaml ($MERIDIAN_CONFIG elsewhere), mode 0600.

    \b
    Examples:
      meridian context add prod --server https://meridian.example.com
      meridian context use prod
      meridian context list
    """


@context.command("add")
@click.argument("name")
@click.option("--server", required=True, metavar="URL", help="Meridian's URL.")
@click.option("--token", default="", help="An API token (or run `meridian login` afterwards).")
@click.option("--ca-file", default="", type=click.Path(dir_okay=False), help="CA bundle checking the server's certificate.")
@click.option("--insecure-skip-tls-verify", "insecure", is_flag=True, help="Do not check the server's certificate.")
@click.option("--use/--no-use", default=True, show_default=True, help="Make it the current context.")
def context_add(name: str, server: str, token: str, ca_file: str, insecure: bool, use: bool) -> None:
    """Add (or replace) a context."""
    if urlsplit(server).scheme not in ("http", "https") or not urlsplit(server).netloc:
        raise click.BadParameter(f"{server!r} is not an http(s) URL", param_hint="--server")
    config = session().config
    previous = config.contexts.get(name)
    config.contexts[name] = Context(name=name, server=server.rstrip("/"),
                                    token=token or (previous.token if previous and previous.server == server else ""),
                                    user=previous.user if previous else "", ca_file=ca_file, insecure=insecure)
    if use or not config.current:
        config.current = name
    config.save()
    output.err.print(f"Context {name} → {server}{' (current)' if config.current == name else ''}")


@context.command("use")
@click.argument("name")
def context_use(name: str) -> None:
    """Make NAME the current context."""
    config = session().config
    config.context(name)
    config.current = name
    config.save()
    output.err.print(f"Switched to context {name}.")


@context.command("list")
@output_option("table", ("table", "name", "yaml"))
def context_list(fmt: str) -> None:
    """List contexts; * marks the current one (tokens are never shown)."""
    config = session().config
    if fmt == "name":
        for name in sorted(config.contexts):
            output.write(name)
        return
    rows = [{"current": name == config.current, "name": name, "server": ctx.server, "user": ctx.user,
             "logged_in": bool(ctx.token)} for name, ctx in sorted(config.contexts.items())]
    if fmt == "yaml":
        output.write(output.to_yaml(rows))
        return
    output.table(["CURRENT", "NAME", "SERVER", "USER", "LOGGED-IN"],
                 [["*" if r["current"] else "", r["name"], r["server"], r["user"], "yes" if r["logged_in"] else "no"]
                  for r in rows])


@context.command("current")
def context_current() -> None:
    """Print the current context's name."""
    output.write(session().config.context().name)


@context.command("delete")
@click.argument("name")
def context_delete(name: str) -> None:
    """Forget a context (its token stays valid on the server: `meridian logout` revokes it)."""
    config = session().config
    config.context(name)
    del config.contexts[name]
    if config.current == name:
        config.current = ""
    config.save()
    output.err.print(f"Deleted context {name}.")


# ---------------------------------------------------------------------------- login, logout

@click.command()
@click.option("--server", "login_server", default="", metavar="URL", help="Meridian's URL (default: the context's).")
@click.option("--context", "context_name", default="", metavar="NAME",
              help="Store the token in this context (default: the current one, or one named after the host).")
@click.option("-u", "--username", default="", help="Log in with this user's password (asked for).")
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin (for scripts).")
@click.option("--token", "given_token", default="", help="Use a token made elsewhere (the console, `meridian token create`).")
@click.option("--read-only", is_flag=True, help="Ask for a read-only token (safe methods only).")
@click.option("--sso", is_flag=True, help="Single sign-on (the OIDC device flow, once Meridian has SSO).")
def login(login_server: str, context_name: str, username: str, password_stdin: bool, given_token: str, read_only: bool,
          sso: bool) -> None:
    """Log in to Meridian and keep the API token in a context.

    \b
    Examples:
      meridian login --server https://meridian.example.com --username ada
      echo "$PASSWORD" | meridian login --username ci --password-stdin --read-only
      meridian login --token "$MERIDIAN_TOKEN" --context prod
    """
    current = session()
    config = current.config
    name = context_name or current.context_name or config.current
    existing = config.contexts.get(name) if name else None
    server = (login_server or current.server_flag or (existing.server if existing else "")).rstrip("/")
    if not server:
        raise click.UsageError("Which Meridian? Pass --server URL (or add a context first).")
    name = name or urlsplit(server).hostname or "default"
    method = _method(username, password_stdin, given_token, read_only, sso)
    verify = False if current.insecure_flag or (existing and existing.insecure) else (existing.ca_file if existing and
                                                                                      existing.ca_file else True)
    with Client(server, timeout=current.timeout, verify=verify) as client:
        try:
            credentials = method.login(client)
        except DeviceFlowNotAvailable as exc:
            raise click.UsageError(str(exc)) from exc
    config.contexts[name] = Context(name=name, server=server, token=credentials.token, user=credentials.user,
                                    ca_file=existing.ca_file if existing else "", insecure=bool(existing and existing.insecure))
    config.current = name
    config.save()
    output.err.print(f"Logged in to {server} as {credentials.user or 'the token’s user'} (context {name}).")


def _method(username: str, password_stdin: bool, token: str, read_only: bool, sso: bool) -> LoginMethod:
    if sum(map(bool, (username, token, sso))) != 1:
        raise click.UsageError("Log in with one of --username, --token or --sso.")
    if sso:
        return DeviceFlowLogin()
    if token:
        return TokenLogin(token)
    password = click.get_text_stream("stdin").readline().rstrip("\n") if password_stdin else \
        click.prompt("Password", hide_input=True, err=True)
    return PasswordLogin(username, password, read_only=read_only)


@click.command()
def logout() -> None:
    """Revoke the current context's token on the server and forget it."""
    current = session()
    config, ctx = current.config, current.context
    prefix = ctx.token[:8]
    mine = [t for t in current.client.items("auth/tokens/") if t["key_prefix"] == prefix]
    for token in mine:
        current.client.delete(f"auth/tokens/{token['id']}/")
    if ctx.name in config.contexts:
        config.contexts[ctx.name].token = ""
        config.save()
    output.err.print(f"Logged out of {ctx.server}{' (token revoked)' if mine else ''}.")


# ---------------------------------------------------------------------------- tokens

@click.group()
def token() -> None:
    """Your API tokens: issue one for a pipeline, list them, revoke one.

    A token issues tokens no stronger than itself: a read-only token only read-only ones,
    and none outliving it.

    \b
    Examples:
      meridian token create --name ci --read-only --ttl-days 30
      meridian token list
      meridian token revoke 12
    """


@token.command("create")
@click.option("--name", default="", help="What it is for (shown in lists and the audit log).")
@click.option("--read-only", is_flag=True, help="Safe methods only.")
@click.option("--ttl-days", type=int, default=None, help="Lifetime in days (default: the server's).")
@output_option("text", ("text", "json", "yaml"))
def token_create(name: str, read_only: bool, ttl_days: int | None, fmt: str) -> None:
    """Issue a token; it is printed once and stored nowhere."""
    body = session().client.post("auth/tokens/", {"name": name, "write_enabled": not read_only, "ttl_days": ttl_days})
    if fmt == "text":
        output.write(body["token"])
        output.err.print(f"expires {body.get('expires') or 'never'}; {'read-only' if read_only else 'read-write'}; "
                         "shown once")
    else:
        output.write(output.to_json(body) if fmt == "json" else output.to_yaml(body))


@token.command("list")
@output_option()
def token_list(fmt: str) -> None:
    """Your tokens (never their keys)."""
    tokens = resource("tokens")
    output.items(tokens, tokens.list(session().client, {}), fmt)


@token.command("revoke")
@click.argument("ref", metavar="ID|PREFIX")
def token_revoke(ref: str) -> None:
    """Revoke one of your tokens, by id or by its key prefix."""
    client = session().client
    found = [t for t in client.items("auth/tokens/") if str(t["id"]) == ref or t["key_prefix"] == ref]
    if len(found) != 1:
        raise NotFoundError(f"{ref!r} names {len(found)} of your tokens; use the id from `meridian token list`.")
    client.delete(f"auth/tokens/{found[0]['id']}/")
    output.write(f"token/{found[0]['id']} revoked")


COMMANDS = [context, login, logout, token]
