"""py4j proxies that ask the JVM about a name once per process, not on every call.

``spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(...)`` asks the JVM whether
each of ``org``, ``apache``, ``iceberg``, ``spark`` and ``Spark3Util`` is a package or a class,
and then what ``loadIcebergTable`` is, before it calls it: seven round trips for one call, on
every call. :func:`jvm` is the same view with the answers remembered (names do not change while
a JVM runs), so a repeated call costs one round trip. Static fields are still read on each
access.

A Python ``for`` over a py4j ``JavaMap``, ``JavaList`` or ``JavaSet`` ends in a Java
``NoSuchElementException`` that PySpark's error converter inspects with about 70 more round
trips: :func:`iterate` stops at ``hasNext()``, and :func:`string_map` turns a
``Map<String, String>`` (a table's properties, a snapshot's summary) into a dict with one call.

Floor: spark (the py4j edge into Spark).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

_views: dict[int, _Package] = {}  # id(gateway client) -> its root view


@functools.cache
def _class_type() -> type:
    """The ``JavaClass`` that remembers which of its names are methods and nested classes
    (made on first use: importing sparkext does not import py4j)."""
    from py4j.java_gateway import JavaClass, JavaMember

    class _Class(JavaClass):
        def __init__(self, fqn: str, gateway_client: Any) -> None:
            super().__init__(fqn, gateway_client)
            self._sparkext_members: dict[str, Any] = {}

        def __getattr__(self, name: str) -> Any:
            if name.startswith("_"):  # py4j's own attributes, magic names
                return super().__getattr__(name)
            members = self._sparkext_members
            found = members.get(name)
            if found is None:
                found = super().__getattr__(name)
                if isinstance(found, JavaClass):
                    found = _Class(found._fqn, self._gateway_client)
                elif not isinstance(found, JavaMember):
                    return found  # a static field's value: read again next time
                members[name] = found
            return found

    return _Class


class _Package:
    """A Java package whose sub-packages and classes are looked up once."""

    def __init__(self, fqn: str, client: Any, jvm_id: str) -> None:
        self._fqn, self._client, self._jvm_id = fqn, client, jvm_id
        self._names: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        found = self._names.get(name)
        if found is None:
            found = self._look_up(name)
            # A capitalised name the JVM calls a package is a class it cannot load (yet: a jar
            # added later, ADD JAR): asked again next time.
            if isinstance(found, _class_type()) or not name[:1].isupper():
                self._names[name] = found
        return found

    def __call__(self, *args: Any) -> Any:
        from py4j.protocol import Py4JError

        raise Py4JError(f"Trying to call a package ({self._fqn}): no such class in the JVM.")

    def _look_up(self, name: str) -> Any:
        from py4j import protocol
        from py4j.java_gateway import JavaPackage

        fqn = f"{self._fqn}.{name}" if self._fqn else name
        answer = self._client.send_command(
            protocol.REFLECTION_COMMAND_NAME
            + protocol.REFL_GET_UNKNOWN_SUB_COMMAND_NAME
            + fqn
            + "\n"
            + self._jvm_id
            + "\n"
            + protocol.END_COMMAND_PART
        )
        if answer == protocol.SUCCESS_PACKAGE:
            return _Package(fqn, self._client, self._jvm_id)
        if answer.startswith(protocol.SUCCESS_CLASS):
            return _class_type()(answer[protocol.CLASS_FQN_START :], self._client)
        # what py4j says (a JavaPackage would say it only when used)
        return getattr(JavaPackage(self._fqn, self._client, self._jvm_id), name)


def jvm(spark: Any) -> Any:
    """``spark._jvm`` (a SparkSession's or a SparkContext's) with its lookups remembered."""
    context = getattr(spark, "sparkContext", spark)
    view = context._jvm
    return _root(view._gateway_client, view._id)


def _root(client: Any, jvm_id: str = "rj") -> _Package:
    """The one root view of this gateway (two threads making it at once both get a usable one)."""
    root = _views.get(id(client))
    if root is None or root._client is not client:
        root = _views[id(client)] = _Package("", client, jvm_id)
    return root


def iterate(java_iterable: Any) -> Iterator[Any]:
    """The elements of a Java ``Iterable``, ending at ``hasNext()`` (no exception to convert)."""
    if not hasattr(java_iterable, "iterator"):  # a Python view of one (JavaMap.values())
        yield from java_iterable
        return
    iterator = java_iterable.iterator()
    while iterator.hasNext():
        yield iterator.next()


def map_values(java_map: Any) -> Iterator[Any]:
    """The values of a Java ``Map`` (py4j's ``JavaMap.values()`` is Python's, over the keys)."""
    for entry in iterate(java_map.entrySet()):
        yield entry.getValue()


def string_map(java_map: Any) -> dict[str, str]:
    """A Java ``Map`` (of strings, or of values with a plain JSON form) as a dict of strings, in
    one call (its JSON); ``{}`` for ``null``."""
    if java_map is None:
        return {}
    root = _root(java_map._gateway_client)
    text = root.org.apache.iceberg.util.JsonUtil.mapper().writeValueAsString(java_map)
    return {str(k): str(v) for k, v in json.loads(text).items()}


# Names PySpark looks up on the gateway's default view by their short names on every call
# (``sc._jvm.functions`` in each ``F.col``/``F.lit``..., ``PythonUtils.toSeq`` in each
# ``select``...). The view resolves a short name through PySpark's wildcard imports in order, a
# failed ``Class.forName`` per package before the right one: ~0.6 ms per lookup, more than the
# call itself. A single-class import of what the wildcards already resolve to answers at once.
PYSPARK_SHORT_NAMES = (
    "functions",
    "PythonUtils",
    "PythonRDD",
    "PythonSQLUtils",
    "SerDeUtil",
    "SparkSession",
)


def import_pyspark_short_names(spark: Any) -> list[str]:
    """Import each of :data:`PYSPARK_SHORT_NAMES` into the default view as the single class it
    resolves to now (never another one: behaviour is unchanged, only faster); return them."""
    from py4j.java_gateway import JavaClass, java_import

    context = getattr(spark, "sparkContext", spark)
    view = context._jvm
    imported = []
    for name in PYSPARK_SHORT_NAMES:
        try:
            found = getattr(view, name)
        except Exception:  # not in this Spark: PySpark's own code will say so if it needs it
            continue
        if isinstance(found, JavaClass):
            java_import(view, found._fqn)
            imported.append(found._fqn)
    return imported


def callback_connection() -> Any | None:
    """The py4j connection this thread serves when it runs a callback from a JVM thread (a
    ``foreachBatch`` function on a streaming query's thread), else None.

    py4j gives every JVM thread that calls Python a socket of its own, served by a Python thread,
    and keeps both, with a reader thread in the JVM, until the process ends: a finished
    streaming query's thread leaves all three behind. :func:`close_connections` lets them go.
    """
    import threading

    from py4j.clientserver import ClientServerConnection

    connection = getattr(getattr(threading.current_thread(), "_target", None), "__self__", None)
    if isinstance(connection, ClientServerConnection) and not connection.initiated_from_client:
        return connection
    return None


def close_connections(connections: set[Any]) -> None:
    """Close the connections :func:`callback_connection` returned on JVM threads that have ended
    (a streaming query's, once it terminated). Each socket is shut down, not closed: its Python
    thread, blocked reading it, then reads the end, closes it and ends (closing it from here
    would wait for that read's lock), and the JVM's side sees it close and lets its thread go."""
    import contextlib
    import socket

    while connections:
        held = connections.pop().socket
        if held is not None:
            with contextlib.suppress(OSError):  # closed meanwhile
                held.shutdown(socket.SHUT_RDWR)
