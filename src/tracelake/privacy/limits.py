"""The privacy engine's defaults and limits, in a module of their own: the CLI shows them in its
options' help without loading the engine (Spark, Arrow, the filters)."""

DEFAULT_FPP = 0.01  # the false-positive rate filters are built for
MAX_IDS = 10_000  # user ids a sub-job searches at once
# A user id is a key, an email, a device id: anything longer is a file pasted by mistake.
MAX_ID_LENGTH = 1024
