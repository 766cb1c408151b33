"""spark.

Floor: spark (the py4j edge into Spark).
"""
