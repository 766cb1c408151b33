"""The only package that touches py4j, Iceberg's Java API and Iceberg metadata tables.

JavaObjects never leave it: callers get small typed Python objects (:class:`TableRef`, stats rows).

Floor: iceberg (the Iceberg Java API).
"""
