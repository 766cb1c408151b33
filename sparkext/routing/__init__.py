"""Statement splitting, sparkext invocation parsing and routing (named so: sparkext.sql is the API)."""
