"""``python -m sparkext.jvm``: rebuild sparkext-spark.jar from src/.

Floor: spark (the JVM extension's sources and jar).
"""

from sparkext.jvm import build

if __name__ == "__main__":
    print(build())
