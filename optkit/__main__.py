"""``python -m optkit``: the ``optkit`` command."""

from optkit.cli.main import main

main()
