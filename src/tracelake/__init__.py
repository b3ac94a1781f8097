"""Tracelake: privacy-aware data lineage for Spark data lakes.

The public Python API, from the top: `Tracelake`, the application every interface goes
through (lineage, review, entities, privacy requests); `track`, one line that records a PySpark
job's runtime lineage; `Probes`, lineage probes for web code; `privacy`, identity indexes written
beside the data and the access and delete requests they serve.

The names are loaded when first used, so a web app that only imports `Probes` does not pay for
Spark, SQL parsing or the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracelake.model.lazy import lazy_exports

if TYPE_CHECKING:
    from tracelake import privacy
    from tracelake.app import Tracelake
    from tracelake.collect.probes import Probes
    from tracelake.spark import track

__all__ = ["Probes", "Tracelake", "__version__", "privacy", "track"]
__getattr__ = lazy_exports(
    __name__,
    {
        "Probes": "tracelake.collect.probes:Probes",
        "Tracelake": "tracelake.app:Tracelake",
        "__version__": "tracelake.model:VERSION",
        "privacy": "tracelake.privacy",
        "track": "tracelake.spark:track",
    },
)
