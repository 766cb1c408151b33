"""Pure planners over metadata: no pyspark, no py4j; unit-testable in milliseconds.

Floor: planning (pure: no pyspark, no py4j).
"""
