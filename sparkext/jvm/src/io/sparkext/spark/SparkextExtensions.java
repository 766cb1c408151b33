package io.sparkext.spark;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;
import scala.runtime.BoxedUnit;

/**
 * {@code spark.sql.extensions=io.sparkext.spark.SparkextExtensions} (after Iceberg's): sparkext's
 * SQL in every statement of every session of this Spark application, the Thrift server's
 * included. Its parser writes {@link PendingRoutine}s; its analyser rule runs them; its optimizer
 * hook ({@link IndexHook}) prunes Iceberg scans by sparkext's skipping indexes.
 */
public final class SparkextExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectParser(
        new AbstractFunction2<SparkSession, ParserInterface, ParserInterface>() {
          @Override
          public ParserInterface apply(SparkSession session, ParserInterface delegate) {
            return ParserFacade.wrap(new SparkextParser(session, delegate), delegate);
          }
        });
    extensions.injectResolutionRule(
        new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
          @Override
          public Rule<LogicalPlan> apply(SparkSession session) {
            return new RoutineRule(session);
          }
        });
    extensions.injectOptimizerRule(
        new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
          @Override
          public Rule<LogicalPlan> apply(SparkSession session) {
            return IndexHook.install(session); // see there: the rule runs in a later batch
          }
        });
    return BoxedUnit.UNIT;
  }
}
