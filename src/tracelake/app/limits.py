"""The defaults and limits the interfaces show in their options, from a module that loads nothing
heavy: `tracelake --help` reads them without loading Spark, Arrow or the store."""

from tracelake.privacy.limits import DEFAULT_FPP, MAX_ID_LENGTH, MAX_IDS

__all__ = ["DEFAULT_FPP", "MAX_IDS", "MAX_ID_LENGTH"]
