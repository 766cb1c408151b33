package io.sparkext.spark;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.CatalogManager;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

/** The one Python driver this JVM serves, and the call into it. */
public final class Bridge {
  static final String NO_PYTHON =
      "sparkext's procedures and table functions run in its Python driver and none is attached to"
          + " this JVM: start the server with `sparkext-sql serve` (not start-thriftserver.sh or"
          + " spark-sql), or call sparkext.attach(spark) in PySpark.";

  private static volatile Routines routines;

  private Bridge() {}

  /** Called by the Python driver (sparkext.attach) once its callback server runs. */
  public static void register(Routines python) {
    routines = python;
  }

  public static void unregister() {
    routines = null;
  }

  /** Whether {@code parser} (a session's {@code sqlParser()}) is sparkext's. */
  public static boolean isSparkextParser(Object parser) {
    return ParserFacade.isOurs(parser);
  }

  public static boolean isRegistered() {
    return routines != null;
  }

  /** The analysed plan of a routine's result, or a {@link SparkextException} with its sentence. */
  static LogicalPlan plan(SparkSession session, boolean call, String sql, int start) {
    return answer(session, call ? Kind.CALL : Kind.TABLE, sql, start);
  }

  static LogicalPlan cacheTable(SparkSession session, String sql) {
    return answer(session, Kind.CACHE_TABLE, sql, 0);
  }

  private enum Kind {
    CALL,
    TABLE,
    CACHE_TABLE
  }

  private static LogicalPlan answer(SparkSession session, Kind kind, String sql, int start) {
    Routines python = routines;
    if (python == null) {
      throw SparkextException.raise(NO_PYTHON);
    }
    Object result;
    try {
      String caller = Caller.current();
      switch (kind) {
        case CALL:
          result = python.call(session, sql, caller);
          break;
        case TABLE:
          result = python.table(session, sql, start, caller);
          break;
        default:
          result = python.cacheTable(session, sql, caller);
      }
    } catch (RuntimeException e) {
      throw SparkextException.raise(
          "sparkext's Python driver did not answer (" + firstLine(e.getMessage()) + "); check that"
              + " the process that attached it is still running.");
    }
    if (result instanceof Dataset) {
      return ((Dataset<?>) result).logicalPlan(); // a command already run: its result
    }
    throw SparkextException.raise(String.valueOf(result));
  }

  /**
   * The Python driver's answer to {@link Routines#pruneFiles}; "" (keep every file) without a
   * driver or when it fails: an index never fails a query.
   */
  static String pruneFiles(
      SparkSession session,
      Object table,
      long snapshotId,
      String indexPath,
      long indexSize,
      long footerSize,
      String predicate,
      String candidates) {
    Routines python = routines;
    if (python == null || PRUNING.get() != null) {
      return ""; // a query the driver runs while it answers is not pruned (nor asked again)
    }
    PRUNING.set(Boolean.TRUE);
    try {
      String answer =
          python.pruneFiles(
              session,
              table,
              snapshotId,
              indexPath,
              indexSize,
              footerSize,
              predicate,
              candidates);
      return answer == null ? "" : answer;
    } catch (RuntimeException failed) {
      return "";
    } finally {
      PRUNING.remove();
    }
  }

  private static final ThreadLocal<Boolean> PRUNING = new ThreadLocal<>();

  /**
   * Runs an Iceberg procedure call as Spark would have (its rows, its errors), once sparkext's
   * policy allows it, and reports it to the audit log. Without a Python driver it runs as is.
   */
  static LogicalPlan icebergCall(SparkSession session, IcebergCall call) {
    Routines python = routines;
    String token = null;
    if (python != null) {
      String answer;
      try {
        answer =
            python.beginProcedure(
                session,
                call.procedure(),
                qualified(session, call.procedure(), call.table()),
                call.sql(),
                Caller.current());
      } catch (RuntimeException e) {
        throw SparkextException.raise(
            "sparkext's Python driver did not answer (" + firstLine(e.getMessage()) + "); check"
                + " that the process that attached it is still running.");
      }
      if (answer == null || !answer.startsWith("#")) {
        throw SparkextException.raise(String.valueOf(answer));
      }
      token = answer;
    }
    try {
      LogicalPlan result = Dataset.ofRows(session, call.statement()).logicalPlan();
      end(python, token, null);
      return result;
    } catch (Throwable failed) {
      end(python, token, failed.getMessage() == null ? failed.toString() : failed.getMessage());
      throw SparkextException.rethrow(failed);
    }
  }

  /**
   * A procedure's table argument as a whole name: Iceberg reads {@code db.t} in the procedure's
   * catalog ({@code lake.system.x}), or in the current one ({@code system.x}).
   */
  static String qualified(SparkSession session, String procedure, String table) {
    if (table == null) {
      return null;
    }
    CatalogManager manager = session.sessionState().catalogManager();
    String[] parts = procedure.split("\\.");
    String catalog = parts.length >= 3 ? parts[0] : manager.currentCatalog().name();
    String first = table.split("\\.", 2)[0].replace("`", "");
    if (first.equals(catalog) || manager.isCatalogRegistered(first)) {
      return table;
    }
    return catalog + "." + table;
  }

  private static void end(Routines python, String token, String error) {
    if (python == null || token == null) {
      return;
    }
    try {
      python.endProcedure(token, error == null ? null : firstLine(error));
    } catch (RuntimeException ignored) {
      // the audit record is the driver's to lose; the call's own outcome stands
    }
  }

  private static String firstLine(String text) {
    if (text == null) {
      return "no message";
    }
    int end = text.indexOf('\n');
    return end < 0 ? text : text.substring(0, end);
  }
}
