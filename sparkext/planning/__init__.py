"""Pure planners over metadata: no pyspark, no py4j; unit-testable in milliseconds."""
