"""The application: the one front door the CLI, the HTTP API and Python users go through.

`Tracelake` (`service`) opens a store and answers every question of the lineage graph; the
workflows built on it sit beside it: label review and discovery sessions (`review`),
time-partitioned entities and their reprocessing (`entities`, `entity_lineage`), change
subscriptions and webhooks (`subscriptions`). `views` are the plain records all of them return.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracelake.model.lazy import lazy_exports

if TYPE_CHECKING:
    from tracelake.app.service import Tracelake

__all__ = ["Tracelake"]
__getattr__ = lazy_exports(__name__, {"Tracelake": "tracelake.app.service:Tracelake"})
