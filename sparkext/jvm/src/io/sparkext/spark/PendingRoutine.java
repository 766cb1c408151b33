package io.sparkext.spark;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A sparkext routine the analyser has not run yet: {@code CALL sparkext.<name>(...)} ({@code
 * call}) or {@code sparkext.<name>(...)} starting at character {@code start} of {@code sql}.
 *
 * <p>The parser writes it; {@link RoutineRule} replaces it with the result's plan. It is not a
 * table-valued function on purpose: Spark resolves those while it holds the session catalog's
 * lock, and a routine that runs Spark jobs (a stream, a commit) must not.
 */
public final class PendingRoutine extends HeldStatement {
  private static final long serialVersionUID = 1L;

  private static final AtomicLong PARSES = new AtomicLong();

  private final String sql;
  private final int start;
  private final boolean call;
  private final long parse;

  /**
   * {@code parse} tells statements apart: Spark copies a command's CTE into each place it is used,
   * and the copies of one invocation must run the routine once (see {@link RoutineRule}).
   */
  public PendingRoutine(String sql, int start, boolean call, long parse) {
    this.sql = sql;
    this.start = start;
    this.call = call;
    this.parse = parse;
  }

  /** A new parse id: one per statement (or view text) parsed. */
  static long nextParse() {
    return PARSES.incrementAndGet();
  }

  public String sql() {
    return sql;
  }

  public int start() {
    return start;
  }

  public boolean call() {
    return call;
  }

  @Override
  public int productArity() {
    return 4;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0:
        return sql;
      case 1:
        return start;
      case 2:
        return call;
      case 3:
        return parse;
      default:
        throw new IndexOutOfBoundsException(String.valueOf(n));
    }
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof PendingRoutine;
  }

  @Override
  public boolean equals(Object other) {
    if (!(other instanceof PendingRoutine)) {
      return false;
    }
    PendingRoutine that = (PendingRoutine) other;
    return start == that.start && call == that.call && parse == that.parse && sql.equals(that.sql);
  }

  @Override
  public int hashCode() {
    return (sql.hashCode() * 31 + start * 2 + (call ? 1 : 0)) * 31 + Long.hashCode(parse);
  }

  @Override
  public String simpleString(int maxFields) {
    return "sparkext routine " + (call ? "CALL" : "at " + start);
  }
}
