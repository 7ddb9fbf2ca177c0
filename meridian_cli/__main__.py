"""``python -m meridian_cli`` is the ``meridian`` command."""

from .main import main

main()
