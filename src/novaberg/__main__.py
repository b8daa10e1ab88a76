"""``python -m novaberg`` is the ``novaberg`` command."""

from novaberg.cli.app import main

main()
