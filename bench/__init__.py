"""`make bench`: Sluicegate measured beside the bare limit and the alternatives.

Not part of the product and not part of `make test`. Each section is a module
``bench/<name>.py`` runnable as ``python -m bench.<name> --runs N --out FILE``; it writes a
:class:`bench.results.Section` as JSON, and ``bench.report`` renders every section found into
``docs/benchmarks.md`` (and its plot).
"""
