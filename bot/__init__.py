"""Signoff's application layer: settings, the composition root and the command line."""
