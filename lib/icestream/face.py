"""A public face: the names a package offers notebooks, scripts and schedulers, each looked up on first use.

Every face is lazy, for one reason: a package's ``__init__`` runs whenever any module inside it is
imported, and ``import icestream`` runs in every Spark executor and child process. An eager face
would make an executor's import of the ingest's reader pull Spark's DataFrame API, pandas, DuckDB,
pyiceberg or matplotlib for names it never touches. A face is one table, each name written once
beside the module that defines it; ``__all__`` is read from the table::

    _FACE = Face(__name__, {"load_settings": "icestream.config", ...})
    __all__ = _FACE.names
    __getattr__ = _FACE.get
    __dir__ = _FACE.dir

A face may also offer some of its own modules as they are (``Face(__name__, {...}, modules=("realtime",))``
for ``from icestream.queries import realtime``). No other name a face offers may be the name of one of
the package's modules: importing that module binds its name on the package, over the lazy lookup
(``tests/unit/test_faces.py`` checks). The package's own code, the command line and the tests import
from the modules; faces are for what a learner copies into their code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


class Face:
    """The names one package offers, and the module each comes from.

    Attributes:
        package: The package whose face this is (``icestream.lake``).
        defined_in: Name → the module that defines it.
        modules: The package's own modules offered as they are.
        names: All the names, sorted: the package's ``__all__``.
    """

    def __init__(self, package: str, defined_in: Mapping[str, str], modules: Iterable[str] = ()) -> None:
        self.package = package
        self.defined_in = dict(defined_in)
        self.modules = tuple(modules)
        self.names = sorted([*self.defined_in, *self.modules])

    def dir(self) -> list[str]:
        """What ``dir(package)`` lists: the names offered (and so what a notebook's completion offers)."""
        return list(self.names)

    def get(self, name: str) -> Any:
        """The object ``name`` stands for, imported now.

        Raises:
            AttributeError: If the face does not offer ``name`` (so ``hasattr`` and ``from ... import``
                of a submodule behave as they do without a face).
        """
        if name in self.modules:
            return importlib.import_module(f"{self.package}.{name}")
        if name not in self.defined_in:
            raise AttributeError(f"module {self.package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(self.defined_in[name]), name)
