"""Stage 1, catalog: the data optkit plans from, loaded and checked.

Owns the recipe schema, the run-time records that validated models are frozen into
(``frozen.py``), the condition language and its fact registry, the one text reader
(``textfile``: encodings and the parsers' limits), line-tracking YAML and JSON, loading of
recipes and kernel specs (and the compiled cache of what was loaded, ``cache.py``), and
``optkit lint``. Everything here is about files in
``recipes/``, ``kernels/`` (and their patches) being well-formed and consistent; nothing here
knows about a request, a plan, a bundle or a source tree.

May import: ``optkit.errors`` only (no other stage).
"""
