"""The running product: settings, the composition root, the servers of ``signoff serve``."""
