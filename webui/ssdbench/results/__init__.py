"""Results: the SQLite store, the run document, bundles with their offline report, and export to USB."""
