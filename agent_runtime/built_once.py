"""An attribute built when first read, once per object, for objects that assemble parts a
caller may never use (``bot.app.wiring.Services``, ``store.Stores``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

Owner = TypeVar("Owner")
Part = TypeVar("Part")

_BUILDING = threading.RLock()
"""Held while a part is built: two threads reading the same unbuilt part get one part, not
two (``functools.cached_property`` makes no such promise since Python 3.12). Reentrant, as
one part's builder reads others."""


class BuiltOnce(Generic[Owner, Part]):
    """A read-only attribute whose value ``build(owner)`` makes on first read and the object
    keeps (in its ``__dict__``) for every later read."""

    def __init__(self, build: Callable[[Owner], Part]) -> None:
        self._build = build
        self._name = build.__name__
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type[Owner], name: str) -> None:
        self._name = name

    @overload
    def __get__(
        self, instance: None, owner: type[Owner] | None = None
    ) -> BuiltOnce[Owner, Part]: ...

    @overload
    def __get__(self, instance: Owner, owner: type[Owner] | None = None) -> Part: ...

    def __get__(self, instance: Owner | None, owner: type[Owner] | None = None) -> Any:
        """The part, built now if this is its first read."""
        if instance is None:
            return self
        kept: dict[str, Any] = instance.__dict__
        if self._name not in kept:
            with _BUILDING:
                if self._name not in kept:
                    kept[self._name] = self._build(instance)
        return kept[self._name]

    def built(self, instance: Owner) -> bool:
        """Whether ``instance``'s part has been built (read) already."""
        return self._name in instance.__dict__


def built_once(build: Callable[[Owner], Part]) -> BuiltOnce[Owner, Part]:
    """Decorate a method into an attribute built on first read, once (see ``BuiltOnce``)."""
    return BuiltOnce(build)
