"""``completion`` (Click's shell completion, for bash, zsh and fish) and ``version``."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from .. import __version__, output
from . import session

COMPLETE_VAR = "_MERIDIAN_COMPLETE"


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script (commands, options, kinds).

    \b
    Examples:
      source <(meridian completion bash)                      # this shell
      meridian completion bash > /etc/bash_completion.d/meridian
      meridian completion zsh > "${fpath[1]}/_meridian"
      meridian completion fish > ~/.config/fish/completions/meridian.fish
    """
    completer = get_completion_class(shell)
    if completer is None:  # Click knows all three
        raise click.UsageError(f"no completion for {shell}")
    root = click.get_current_context().find_root().command
    output.write(completer(root, {}, "meridian", COMPLETE_VAR).source())


@click.command()
@click.option("--client", "client_only", is_flag=True, help="Only the command line's version (no server asked).")
def version(client_only: bool) -> None:
    """Print the command line's version and the server it talks to."""
    output.write(f"Client: meridian-cli {__version__}")
    if client_only:
        return
    current = session()
    me = current.client.get("auth/me/")
    output.write(f"Server: {current.context.server} (as {me.get('username')}, role {me.get('role') or 'none'})")


COMMANDS = [completion, version]
