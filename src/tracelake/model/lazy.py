"""Public names of a package loaded when first used, so that importing one light module of a
package does not import its heavy siblings (the CLI's `--help` must not load Spark, numpy or the
store; a web app importing `Probes` must not either)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: each name in `exports` comes from the module its
    value names, `module:attribute`, or is that module itself; once loaded it is the package's
    own attribute."""

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, _, attribute = where.partition(":")
        module = importlib.import_module(module_name)
        value = getattr(module, attribute) if attribute else module
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
