"""Statement splitting, sparkext invocation parsing and routing.

Named ``routing`` rather than ``sql`` because ``sparkext.sql`` is the API function.

Floor: routing.
"""
