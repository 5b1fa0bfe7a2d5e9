"""stanpkg.loadgen: the ``stanpkg bench`` STAN load generator (see cli.py)."""
