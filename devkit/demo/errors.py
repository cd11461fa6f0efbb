"""The demo payment provider's errors: it cannot start, cannot listen, or cannot open its ledger."""


class ProviderError(Exception):
    """The demo provider cannot start or run."""


class PortInUse(ProviderError):
    """Another process already listens on the requested port."""


class LedgerError(ProviderError):
    """The ledger file cannot be opened or has an unknown layout."""
