"""``python -m sparkext.jvm``: rebuild sparkext-spark.jar from src/."""

from sparkext.jvm import build

if __name__ == "__main__":
    print(build())
