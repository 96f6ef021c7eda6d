"""The docs site's build-time generation (``mkdocs.yml`` loads :mod:`.hooks`).

- :mod:`.pages`: which pages are generated, and which repository files are published;
- :mod:`.cli_reference`, :mod:`.config_reference`, :mod:`.api_reference`: the reference,
  read from the ``ptm`` parser, the typed config schemas and the packages' modules;
- :mod:`.links`: Markdown links and heading anchors (also used by ``tests/docs``).
"""
