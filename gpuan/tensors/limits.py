"""Limits of the tensor views, apart from the analysis so that the command line reads them without it."""

#: points of one scatter or 3-D view: WebGL fails beyond this
MAX_POINTS = 500_000
