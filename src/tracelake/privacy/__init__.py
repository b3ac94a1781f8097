"""Privacy requests on a Spark data lake: identity indexes built at write time, access and delete.

`write` writes Parquet with identity filters in the same Spark job; `build_index` indexes a
dataset written by someone else; the request functions find, export and erase one user's records,
or ten thousand users', reading only the files the filters cannot rule out.
"""

from tracelake.privacy.filters import DEFAULT_FPP, IdentityFilter, hash_ids
from tracelake.privacy.identity import IdentityError
from tracelake.privacy.index import DatasetIndex, ScanPlan
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
