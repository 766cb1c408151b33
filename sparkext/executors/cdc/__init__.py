"""cdc.

Floor: executors (runs inside Spark's tasks; no JVM).
"""
