"""Privacy requests on a Spark data lake: identity indexes built at write time, access and delete.

`write` writes Parquet with identity filters in the same Spark job; `build_index` indexes a
dataset written by someone else; the request functions find, export and erase one user's records,
or ten thousand users', reading only the files the filters cannot rule out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracelake.model.lazy import lazy_exports

if TYPE_CHECKING:
    from tracelake.privacy.filters import IdentityFilter, hash_ids
    from tracelake.privacy.identity import IdentityError
    from tracelake.privacy.index import DatasetIndex, ScanPlan
    from tracelake.privacy.limits import DEFAULT_FPP
    from tracelake.privacy.writer import WriteReport, build_index, write

__all__ = [
    "DEFAULT_FPP",
    "DatasetIndex",
    "IdentityError",
    "IdentityFilter",
    "ScanPlan",
    "WriteReport",
    "build_index",
    "hash_ids",
    "write",
]

# Loaded when first used: the limits the CLI shows (`privacy.limits`) must not bring in Spark.
__getattr__ = lazy_exports(
    __name__,
    {
        "DEFAULT_FPP": "tracelake.privacy.limits:DEFAULT_FPP",
        "DatasetIndex": "tracelake.privacy.index:DatasetIndex",
        "IdentityError": "tracelake.privacy.identity:IdentityError",
        "IdentityFilter": "tracelake.privacy.filters:IdentityFilter",
        "ScanPlan": "tracelake.privacy.index:ScanPlan",
        "WriteReport": "tracelake.privacy.writer:WriteReport",
        "build_index": "tracelake.privacy.writer:build_index",
        "hash_ids": "tracelake.privacy.filters:hash_ids",
        "write": "tracelake.privacy.writer:write",
    },
)
