"""``stanpkg migrate``: a standalone server's store, read-only, into the JetStream layout of
stanpkg's clustered mode (``stores/jetstream``), keeping every sequence.

``source_factory.open_source_store`` opens the store a configuration describes without
writing to it (a ``source_store.SourceStore``: ``file_source`` or ``sql_source``);
``destination`` writes streams and records with the clustered store's own writers;
``verify`` compares the two channel by channel; ``run`` puts them together; ``cli`` is
the command line.
"""
