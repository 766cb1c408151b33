package io.sparkext.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTableValuedFunction;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.parser.SqlBaseParser.FunctionNameContext;
import org.apache.spark.sql.catalyst.parser.SqlBaseParser.FunctionTableContext;
import org.apache.spark.sql.catalyst.parser.SqlBaseParser.TableValuedFunctionContext;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.trees.CurrentOrigin;
import org.apache.spark.sql.catalyst.trees.Origin;
import org.apache.spark.sql.execution.SparkSqlAstBuilder;
import org.apache.spark.sql.execution.SparkSqlParser;
import org.apache.spark.sql.types.DataTypes;
import scala.collection.JavaConverters;
import scala.collection.Seq;
import scala.runtime.AbstractPartialFunction;

/**
 * Spark's AST builder, except that {@code sparkext.<name>(...)} in FROM (which Spark refuses: a
 * table-valued function has a one-part name) becomes {@value SparkextExtensions#TABLE}{@code (sql,
 * start, name)}, with the invocation's position as its origin. Everything else (aliases, column
 * aliases, LATERAL, CTEs, subqueries, views) is Spark's own code.
 */
final class SparkextAstBuilder extends SparkSqlAstBuilder {

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
      return seq(Arrays.asList(SparkextExtensions.TABLE));
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
    return (LogicalPlan) plan.transformUp(new Rewrite(name.apply(1)));
  }

  static boolean isOurs(Seq<String> name) {
    return name.size() == 2 && Sql.NAMESPACE.equalsIgnoreCase(name.apply(0));
  }

  static <T> Seq<T> seq(List<T> items) {
    return JavaConverters.asScalaBuffer(new ArrayList<>(items)).toList();
  }

  /** The user's arguments are bound by the Python driver from the SQL text: carry the text. */
  private static final class Rewrite extends AbstractPartialFunction<LogicalPlan, LogicalPlan> {
    private final String routine;

    Rewrite(String routine) {
      this.routine = routine;
    }

    @Override
    public boolean isDefinedAt(LogicalPlan node) {
      return node instanceof UnresolvedTableValuedFunction
          && ((UnresolvedTableValuedFunction) node).name().size() == 1
          && SparkextExtensions.TABLE.equals(((UnresolvedTableValuedFunction) node).name().apply(0));
    }

    @Override
    public LogicalPlan apply(LogicalPlan node) {
      Origin origin = node.origin();
      String sql = origin.sqlText().isDefined() ? origin.sqlText().get() : "";
      int start = origin.startIndex().isDefined() ? (Integer) origin.startIndex().get() : -1;
      List<Expression> args =
          Arrays.asList(
              Literal.create(sql, DataTypes.StringType),
              Literal.create(start, DataTypes.IntegerType),
              Literal.create(routine, DataTypes.StringType));
      Origin previous = CurrentOrigin.get();
      CurrentOrigin.set(origin);
      try {
        return new UnresolvedTableValuedFunction(
            ((UnresolvedTableValuedFunction) node).name(), seq(args));
      } finally {
        CurrentOrigin.set(previous);
      }
    }
  }
}
