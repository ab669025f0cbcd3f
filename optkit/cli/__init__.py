"""Stage 8, cli: the ``optkit`` command. Parse, call one library function, render. Nothing else.

One module per command group; the only place that imports click and renders for people (plain
text tables, ``render.py`` and ``table.py``), and the only place where exceptions become exit
codes (``optkit.cli.main``).

May import: every stage.
"""
