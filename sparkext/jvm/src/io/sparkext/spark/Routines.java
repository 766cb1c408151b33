package io.sparkext.spark;

import org.apache.spark.sql.SparkSession;

/**
 * The Python side of sparkext, called back through py4j (as PySpark's foreachBatch is).
 *
 * <p>Python is the one source of truth for every routine: its declaration, argument binding and
 * errors. Each method returns either the routine's result as a {@code Dataset} (a plan; rows never
 * cross py4j) or, when the call is refused, the one-sentence error as a {@code String}.
 */
public interface Routines {
  // Every method's {@code caller} is {@link Caller#current()}: route, user and client address.
  /** Runs the procedure of {@code sql}, a whole {@code CALL sparkext.<name>(...)} statement. */
  Object call(SparkSession session, String sql, String caller);

  /**
   * Builds the table of the {@code sparkext.<name>(...)} invocation that starts at character
   * {@code start} of {@code sql} (a statement or a view's text).
   */
  Object table(SparkSession session, String sql, int start, String caller);

  /**
   * Runs {@code sql}, a {@code CACHE TABLE ... AS} statement over sparkext table functions, the
   * way sparkext.sql does: each function's result is kept as a temp view that the cached query
   * reads, so the cache holds what the functions returned then (Spark would store the query's
   * text, run the functions again at each read and never hit the cache).
   */
  Object cacheTable(SparkSession session, String sql, String caller);

  /**
   * Asks whether {@code caller} may run the Iceberg procedure {@code procedure} (its name as
   * written, e.g. {@code lake.system.rewrite_data_files}) on {@code table} (its table argument, or
   * null) and opens its audit record. Returns a token starting with {@code #} for {@link
   * #endProcedure}, or the one-sentence refusal.
   */
  String beginProcedure(
      SparkSession session, String procedure, String table, String sql, String caller);

  /** Closes the audit record of {@code token}: {@code error} is null when the call succeeded. */
  void endProcedure(String token, String error);

  /**
   * Which of {@code candidates} ('\n'-joined data-file paths of the scan) may hold rows matching
   * {@code predicate} (the predicate JSON, see {@link PredicateJson}), by the skipping index in
   * the Puffin file {@code indexPath} of {@code table} (an {@code org.apache.iceberg.Table}) read
   * at {@code snapshotId}. Returns "" to keep every file (no usable index, or any failure), else
   * JSON {@code {"keep": "0110…", "used": ["bloom_filter, request_id", …]}}: one character per
   * candidate, '1' to read it.
   */
  String pruneFiles(
      SparkSession session,
      Object table,
      long snapshotId,
      String indexPath,
      long indexSize,
      long footerSize,
      String predicate,
      String candidates);
}
