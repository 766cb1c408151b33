package io.sparkext.spark;

import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.CacheTableAsSelect;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import scala.collection.Seq;

/**
 * Wraps the session's parser (Iceberg's, then Spark's).
 *
 * <ul>
 *   <li>{@code CALL sparkext.<name>(...)} becomes a {@link PendingRoutine};
 *   <li>a statement Spark refuses that names sparkext is parsed again by {@link
 *       SparkextAstBuilder}, which turns each {@code sparkext.<name>(...)} in FROM into one;
 *   <li>{@code CACHE TABLE ... AS} over such functions is run by the Python driver, as {@code
 *       sparkext.sql} runs it (see {@link Routines#cacheTable});
 *   <li>everything else is the delegate's plan, untouched (one cheap prefix test).
 * </ul>
 *
 * {@link RoutineRule} runs them during analysis, through the Python driver.
 */
final class SparkextParser implements ParserInterface {
  private final SparkSession session;
  private final ParserInterface delegate;
  private final SparkextAstBuilder.Parser ours = new SparkextAstBuilder.Parser();

  SparkextParser(SparkSession session, ParserInterface delegate) {
    this.session = session;
    this.delegate = delegate;
  }

  @Override
  public LogicalPlan parsePlan(String sql) throws ParseException {
    if (Sql.isSparkextCall(sql)) {
      return new PendingRoutine(sql, 0, true);
    }
    try {
      return delegate.parsePlan(sql);
    } catch (ParseException refused) {
      if (!Sql.mentionsSparkext(sql)) {
        throw refused;
      }
      LogicalPlan plan;
      try {
        plan = ours.parsePlan(sql);
      } catch (Exception also) { // ParseException, thrown unchecked by Scala
        throw refused;
      }
      if (plan instanceof CacheTableAsSelect) {
        return Bridge.cacheTable(session, sql);
      }
      return plan;
    }
  }

  @Override
  public LogicalPlan parseQuery(String sql) throws ParseException {
    try {
      return delegate.parseQuery(sql);
    } catch (ParseException refused) {
      if (!Sql.mentionsSparkext(sql)) {
        throw refused;
      }
      try {
        return ours.parseQuery(sql);
      } catch (Exception also) { // ParseException, thrown unchecked by Scala
        throw refused;
      }
    }
  }

  @Override
  public Expression parseExpression(String sql) throws ParseException {
    return delegate.parseExpression(sql);
  }

  @Override
  public TableIdentifier parseTableIdentifier(String sql) throws ParseException {
    return delegate.parseTableIdentifier(sql);
  }

  @Override
  public FunctionIdentifier parseFunctionIdentifier(String sql) throws ParseException {
    return delegate.parseFunctionIdentifier(sql);
  }

  @Override
  public Seq<String> parseMultipartIdentifier(String sql) throws ParseException {
    return delegate.parseMultipartIdentifier(sql);
  }

  @Override
  public StructType parseTableSchema(String sql) throws ParseException {
    return delegate.parseTableSchema(sql);
  }

  @Override
  public DataType parseDataType(String sql) throws ParseException {
    return delegate.parseDataType(sql);
  }
}
