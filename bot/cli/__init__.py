"""The ``signoff`` command line: one module per group of commands, ``main`` the entry point."""
