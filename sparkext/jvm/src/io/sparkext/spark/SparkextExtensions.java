package io.sparkext.spark;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.analysis.SimpleTableFunctionRegistry;
import org.apache.spark.sql.catalyst.analysis.TableFunctionRegistry$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import scala.Tuple3;
import scala.collection.Seq;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;
import scala.runtime.BoxedUnit;

/**
 * {@code spark.sql.extensions=io.sparkext.spark.SparkextExtensions} (after Iceberg's): sparkext's
 * SQL in every statement of every session of this Spark application, the Thrift server's
 * included.
 */
public final class SparkextExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
  /** {@code CALL sparkext.<name>(...)}: one argument, the statement's text. */
  public static final String CALL = "__sparkext_call";

  /** {@code sparkext.<name>(...)} in FROM: the SQL text, where the invocation starts, its name. */
  public static final String TABLE = "__sparkext_table";

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectParser(
        new AbstractFunction2<SparkSession, ParserInterface, ParserInterface>() {
          @Override
          public ParserInterface apply(SparkSession session, ParserInterface delegate) {
            return new SparkextParser(delegate);
          }
        });
    for (boolean call : new boolean[] {true, false}) {
      Tuple3<FunctionIdentifier, ExpressionInfo, scala.Function1<Seq<Expression>, LogicalPlan>>
          description = description(call ? CALL : TABLE, call);
      extensions.injectTableFunction(description);
      registerBuiltin(description);
    }
    return BoxedUnit.UNIT;
  }

  /**
   * Also a built-in of the application: Spark refuses a persistent view over a session's own
   * function, and a view over {@code sparkext.<name>(...)} is re-parsed (and re-run) at each read,
   * so it may be kept in a catalog.
   */
  private static synchronized void registerBuiltin(
      Tuple3<FunctionIdentifier, ExpressionInfo, scala.Function1<Seq<Expression>, LogicalPlan>>
          description) {
    SimpleTableFunctionRegistry builtin = TableFunctionRegistry$.MODULE$.builtin();
    if (!builtin.functionExists(description._1())) {
      builtin.registerFunction(description._1(), description._2(), description._3());
    }
  }

  private static Tuple3<
          FunctionIdentifier, ExpressionInfo, scala.Function1<Seq<Expression>, LogicalPlan>>
      description(String name, boolean call) {
    ExpressionInfo info =
        new ExpressionInfo(
            SparkextExtensions.class.getName(),
            null,
            name,
            "sparkext's own; written by its SQL parser, not by hand",
            "");
    return new Tuple3<>(new FunctionIdentifier(name), info, new Builder(call));
  }

  /** Resolves one invocation by asking the Python driver. */
  private static final class Builder extends AbstractFunction1<Seq<Expression>, LogicalPlan> {
    private final boolean call;

    Builder(boolean call) {
      this.call = call;
    }

    @Override
    public LogicalPlan apply(Seq<Expression> args) {
      int expected = call ? 1 : 3;
      if (args.size() != expected || !allLiterals(args)) {
        throw SparkextException.raise(
            "The " + (call ? CALL : TABLE) + " function is written by sparkext's SQL parser; "
                + "call the routine as CALL sparkext.<name>(...) or FROM sparkext.<name>(...).");
      }
      String sql = ((Literal) args.apply(0)).value().toString();
      int start = call ? 0 : (Integer) ((Literal) args.apply(1)).value();
      return Bridge.plan(call, sql, start);
    }

    private static boolean allLiterals(Seq<Expression> args) {
      for (int i = 0; i < args.size(); i++) {
        if (!(args.apply(i) instanceof Literal) || ((Literal) args.apply(i)).value() == null) {
          return false;
        }
      }
      return true;
    }
  }
}
