"""The privacy engine's defaults and limits, in a module of their own: the CLI shows them in its
options' help without loading the engine (Spark, Arrow, the filters)."""

# The false-positive rate filters are built for: 10-bit fingerprints, ~11.6 bits an id. A file
# a request reads for nothing costs a whole file's read; at 0.1% a request for 100 ids reads ~10%
# of the files that lack them (bench/privacy_search.py).
DEFAULT_FPP = 0.001
MAX_IDS = 10_000  # user ids a sub-job searches at once
# A user id is a key, an email, a device id: anything longer is a file pasted by mistake.
MAX_ID_LENGTH = 1024
