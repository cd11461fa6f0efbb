"""A package's public names imported from their modules when first asked for (PEP 562), so
that importing the package costs only what its user touches."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_exports(
    package: str, module_of: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> Callable[[str], Any]:
    """Return the ``__getattr__`` of ``package``: a name in ``module_of`` is imported from
    ``package.<module>`` on first use and kept in ``namespace`` (the package's globals), so
    later uses find it there."""

    def attribute(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return attribute
