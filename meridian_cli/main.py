"""The ``meridian`` command: the root group, its global options, and the one place where
outcomes become exit codes (``exitcodes.ExitCode``) and errors become the one error body's
messages on stderr."""

from __future__ import annotations

import sys
from functools import cached_property

import click

from . import __version__
from .client import ApiError, Client, Unreachable
from .config import Config, ConfigError, Context, load
from .exitcodes import ExitCode
from .live import WaitFailed, WaitTimeout
from .output import err, error
from .resources import NotFoundError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 110}

#: The root help's sections, as kubectl groups its commands.
SECTIONS = (
    ("Basic commands", ("get", "describe")),
    ("Configuration as code", ("apply", "diff", "delete", "export")),
    ("Operations", ("rollout", "downgrade", "quota", "federation", "sched", "cpu", "job")),
    ("Access", ("login", "logout", "context", "token")),
    ("Other", ("completion", "version")),
)


class Session:
    """What every command needs: the chosen context, flags over it, and a client made once."""

    def __init__(self, *, context: str | None, server: str | None, token: str | None, timeout: float,
                 insecure: bool) -> None:
        self.context_name, self.server_flag, self.token_flag = context, server, token
        self.timeout, self.insecure_flag = timeout, insecure

    @cached_property
    def config(self) -> Config:
        return load()

    @cached_property
    def context(self) -> Context:
        if self.server_flag:
            return Context(name="(flags)", server=self.server_flag, token=self.token_flag or "", insecure=self.insecure_flag)
        context = self.config.context(self.context_name)
        if self.token_flag:
            context = Context(**{**context.__dict__, "token": self.token_flag})
        return context

    @property
    def verify(self) -> bool | str:
        context = self.context
        if self.insecure_flag or context.insecure:
            return False
        return context.ca_file or True

    @cached_property
    def client(self) -> Client:
        context = self.context
        if not context.token:
            raise ConfigError(f"Context {context.name!r} has no token: run `meridian login` (or pass --token).")
        return Client(context.server, context.token, timeout=self.timeout, verify=self.verify)


class SectionedGroup(click.Group):
    """The root group: commands listed by section, in the order people need them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for _, names in SECTIONS for name in names if name in self.commands]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for title, names in SECTIONS:
            rows = [(name, self.commands[name].get_short_help_str(80)) for name in names if name in self.commands]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


@click.group(cls=SectionedGroup, context_settings=CONTEXT_SETTINGS,
             epilog="Use `meridian <command> --help` for a command's options and examples. "
                    "Exit codes: 0 ok, 1 error, 2 usage, 3 refused/denied, 4 stale/conflict, 5 timed out, "
                    "6 diff found changes (docs/cli.md).")
@click.option("--context", "context_name", envvar="MERIDIAN_CONTEXT", metavar="NAME",
              help="The context to use (default: the current one).")
@click.option("--server", envvar="MERIDIAN_SERVER", metavar="URL", help="Meridian's URL, instead of a context's.")
@click.option("--token", envvar="MERIDIAN_TOKEN", metavar="TOKEN", help="An API token, instead of the context's.")
@click.option("--request-timeout", default=30.0, show_default=True, metavar="SECONDS", help="Timeout of each request.")
@click.option("--insecure-skip-tls-verify", "insecure", is_flag=True, help="Do not check the server's certificate.")
@click.version_option(__version__, "--version", prog_name="meridian")
@click.pass_context
def cli(ctx: click.Context, context_name: str | None, server: str | None, token: str | None, request_timeout: float,
        insecure: bool) -> None:
    """meridian controls a Meridian control plane: the fleet, node config, quotas, federation and
    scheduling, and its configuration as code.

    \b
    Find more information at docs/cli.md, or `meridian <command> --help`.
    \b
    Examples:
      meridian login --server https://meridian.example.com --username ada
      meridian get targets -o wide
      meridian export -d config/ && meridian diff -f config/ && meridian apply -f config/
      meridian downgrade create --cluster bj-1 --reason "incident 4711" --wait
    """
    ctx.obj = Session(context=context_name, server=server, token=token, timeout=request_timeout, insecure=insecure)
    ctx.call_on_close(lambda: ctx.obj.__dict__.get("client") and ctx.obj.client.close())


def _register() -> None:
    from .commands import access, documents, operations, reading, shell

    for module in (reading, documents, operations, access, shell):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def main() -> None:
    """The console script: run, then exit with the code the outcome means."""
    try:
        code = cli.main(prog_name="meridian", standalone_mode=False)
    except click.exceptions.Abort:
        err.print("aborted")
        code = ExitCode.USAGE
    except click.ClickException as exc:
        exc.show()
        code = ExitCode.USAGE
    except (ConfigError, NotFoundError) as exc:
        error(str(exc))
        code = ExitCode.USAGE if isinstance(exc, ConfigError) else ExitCode.REFUSED
    except ApiError as exc:
        error(exc.detail, exc.errors, code=exc.code)
        code = exc.exit_code
    except Unreachable as exc:
        error(str(exc))
        code = ExitCode.ERROR
    except WaitTimeout as exc:
        error(str(exc))
        code = ExitCode.TIMEOUT
    except WaitFailed as exc:
        error(str(exc))
        code = ExitCode.ERROR
    except KeyboardInterrupt:
        code = 130
    sys.exit(int(code) if isinstance(code, int) else 0)
