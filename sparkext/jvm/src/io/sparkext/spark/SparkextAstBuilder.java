package io.sparkext.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.antlr.v4.runtime.CharStream;
import org.antlr.v4.runtime.misc.Interval;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTableValuedFunction;
import org.apache.spark.sql.catalyst.parser.SqlBaseParser.FunctionNameContext;
import org.apache.spark.sql.catalyst.parser.SqlBaseParser.FunctionTableContext;
import org.apache.spark.sql.catalyst.parser.SqlBaseParser.TableValuedFunctionContext;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.trees.CurrentOrigin;
import org.apache.spark.sql.catalyst.trees.Origin;
import org.apache.spark.sql.execution.SparkSqlAstBuilder;
import org.apache.spark.sql.execution.SparkSqlParser;
import scala.collection.JavaConverters;
import scala.collection.Seq;
import scala.runtime.AbstractPartialFunction;

/**
 * Spark's AST builder, except that {@code sparkext.<name>(...)} in FROM (which Spark refuses: a
 * table-valued function has a one-part name) becomes a {@link PendingRoutine} holding the SQL
 * text and where the invocation starts. Everything else (aliases, column aliases, CTEs,
 * subqueries, views) is Spark's own code.
 */
final class SparkextAstBuilder extends SparkSqlAstBuilder {
  /** The statement being parsed on this thread (see {@link PendingRoutine}). */
  static final ThreadLocal<Long> PARSE = ThreadLocal.withInitial(() -> 0L);

  /** The one-part name Spark's own code builds the function under, before it is replaced. */
  private static final String PLACEHOLDER = "__sparkext_routine";

  /** Spark's SQL parser with this builder: for statements that hold sparkext's table functions. */
  static final class Parser extends SparkSqlParser {
    private SparkextAstBuilder builder;

    @Override
    public synchronized SparkSqlAstBuilder astBuilder() {
      if (builder == null) {
        builder = new SparkextAstBuilder();
      }
      return builder;
    }
  }

  @Override
  public Seq<String> getFunctionMultiparts(FunctionNameContext ctx) {
    Seq<String> name = super.getFunctionMultiparts(ctx);
    if (ctx.getParent() instanceof FunctionTableContext && isOurs(name)) {
      return seq(Arrays.asList(PLACEHOLDER));
    }
    return name;
  }

  @Override
  public LogicalPlan visitTableValuedFunction(TableValuedFunctionContext ctx) {
    LogicalPlan plan = super.visitTableValuedFunction(ctx);
    Seq<String> name = super.getFunctionMultiparts(ctx.functionTable().functionName());
    if (!isOurs(name)) {
      return plan;
    }
    // The text the parser read: Spark substitutes ${var}s before parsing, so the caller's text
    // may differ; the invocation's position is a position in this one.
    CharStream input = ctx.start.getInputStream();
    String sql = input.getText(Interval.of(0, input.size() - 1));
    return (LogicalPlan) plan.transformUp(new Rewrite(sql, ctx.start.getStartIndex()));
  }

  static boolean isOurs(Seq<String> name) {
    return name.size() == 2 && Sql.NAMESPACE.equalsIgnoreCase(name.apply(0));
  }

  static <T> Seq<T> seq(List<T> items) {
    return JavaConverters.asScalaBuffer(new ArrayList<>(items)).toList();
  }

  /** The user's arguments are bound by the Python driver from the SQL text: keep the text. */
  private static final class Rewrite extends AbstractPartialFunction<LogicalPlan, LogicalPlan> {
    private final String sql;
    private final int start;

    Rewrite(String sql, int start) {
      this.sql = sql;
      this.start = start;
    }

    @Override
    public boolean isDefinedAt(LogicalPlan node) {
      return node instanceof UnresolvedTableValuedFunction
          && ((UnresolvedTableValuedFunction) node).name().size() == 1
          && PLACEHOLDER.equals(((UnresolvedTableValuedFunction) node).name().apply(0));
    }

    @Override
    public LogicalPlan apply(LogicalPlan node) {
      Origin origin = node.origin();
      Origin previous = CurrentOrigin.get();
      CurrentOrigin.set(origin);
      try {
        return new PendingRoutine(sql, start, false, PARSE.get());
      } finally {
        CurrentOrigin.set(previous);
      }
    }
  }
}
