package io.sparkext.spark;

import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

/**
 * An Iceberg procedure call ({@code CALL <catalog>.system.<name>(...)}) as Iceberg's parser wrote
 * it, held until the analyser reaches it: {@link RoutineRule} asks sparkext's policy, runs the
 * statement exactly as Spark would have, and reports it to the audit log. Its result and its
 * errors are Iceberg's own.
 */
public final class IcebergCall extends HeldStatement {
  private static final long serialVersionUID = 1L;
  private static final AtomicLong IDS = new AtomicLong();

  private final LogicalPlan statement;
  private final String procedure;
  private final String table;
  private final String sql;
  private final long id = IDS.incrementAndGet();

  IcebergCall(LogicalPlan statement, String procedure, String table, String sql) {
    this.statement = statement;
    this.procedure = procedure;
    this.table = table;
    this.sql = sql;
  }

  LogicalPlan statement() {
    return statement;
  }

  String procedure() {
    return procedure;
  }

  String table() {
    return table;
  }

  String sql() {
    return sql;
  }

  @Override
  public int productArity() {
    return 2;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0:
        return procedure;
      case 1:
        return id;
      default:
        throw new IndexOutOfBoundsException(String.valueOf(n));
    }
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof IcebergCall;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof IcebergCall && ((IcebergCall) other).id == id;
  }

  @Override
  public int hashCode() {
    return Long.hashCode(id);
  }

  @Override
  public String simpleString(int maxFields) {
    return "Iceberg procedure " + procedure;
  }
}
