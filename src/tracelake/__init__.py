"""Tracelake: privacy-aware data lineage for Spark data lakes.

The public Python API, from the top: `Tracelake`, the application every interface goes
through (lineage, review, entities, privacy requests); `track`, one line that records a PySpark
job's runtime lineage; `Probes`, lineage probes for web code; `privacy`, identity indexes written
beside the data and the access and delete requests they serve.

The names are loaded when first used, so a web app that only imports `Probes` does not pay for
Spark, SQL parsing or the store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tracelake.model import VERSION

if TYPE_CHECKING:
    from tracelake import privacy
    from tracelake.app import Tracelake
    from tracelake.collect.probes import Probes
    from tracelake.spark import track

__all__ = ["Probes", "Tracelake", "__version__", "privacy", "track"]
__version__ = VERSION

_PUBLIC = {
    "Probes": ("tracelake.collect.probes", "Probes"),
    "Tracelake": ("tracelake.app", "Tracelake"),
    "privacy": ("tracelake.privacy", None),
    "track": ("tracelake.spark", "track"),
}


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'tracelake' has no attribute {name!r}")
    module_name, attribute = _PUBLIC[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value
