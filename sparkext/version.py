"""sparkext's version, in a module of its own so that every floor may read it.

Floor: util.
"""

__version__ = "0.1.0"
