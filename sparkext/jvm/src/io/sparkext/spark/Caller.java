package io.sparkext.spark;

import java.lang.reflect.Method;

/**
 * Who runs the statement on this thread, as sparkext's audit log and policy need it.
 *
 * <p>A JDBC client of the Thrift server ({@code sparkext-sql serve}): the user its authentication
 * established and its address, which Hive's Thrift processor keeps per request on the connection's
 * thread (statements run there: the server is synchronous). The shell and {@code sparkext.sql}
 * name themselves with {@link #enter} around the statements they pass to Spark (PySpark pins each
 * Python thread to one JVM thread). Anything else is a plain {@code spark.sql} call.
 */
public final class Caller {
  private static final ThreadLocal<String[]> ROUTE = new ThreadLocal<>();
  private static final Method USER = hiveMethod("getUserName");
  private static final Method ADDRESS = hiveMethod("getUserIpAddress");

  private Caller() {}

  /** Called by the Python driver: statements of this thread come from {@code route} for {@code user}. */
  public static void enter(String route, String user) {
    ROUTE.set(new String[] {route, user});
  }

  public static void leave() {
    ROUTE.remove();
  }

  /** Whether the statement on this thread comes from a JDBC client of the Thrift server. */
  static boolean isServe() {
    return call(USER) != null;
  }

  /** {@code route \t user \t address}; empty fields where nothing says (Python fills them in). */
  static String current() {
    String user = call(USER);
    if (user != null) {
      String address = call(ADDRESS);
      return "serve\t" + user + "\t" + (address == null ? "" : address);
    }
    String[] named = ROUTE.get();
    if (named != null) {
      return named[0] + "\t" + (named[1] == null ? "" : named[1]) + "\t";
    }
    return "spark.sql\t\t";
  }

  private static Method hiveMethod(String name) {
    try {
      return Class.forName("org.apache.hive.service.auth.TSetIpAddressProcessor").getMethod(name);
    } catch (ReflectiveOperationException | LinkageError absent) {
      return null; // no Thrift server classes in this application
    }
  }

  private static String call(Method method) {
    if (method == null) {
      return null;
    }
    try {
      return (String) method.invoke(null);
    } catch (ReflectiveOperationException | LinkageError failed) {
      return null;
    }
  }
}
