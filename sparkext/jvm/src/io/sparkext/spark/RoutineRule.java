package io.sparkext.spark;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import scala.runtime.AbstractPartialFunction;

/** Runs each {@link PendingRoutine} of a plan through the Python driver (see {@link Bridge}). */
final class RoutineRule extends Rule<LogicalPlan> {
  private final SparkSession session;

  RoutineRule(SparkSession session) {
    this.session = session;
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    return plan.resolveOperatorsUp(
        new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
          @Override
          public boolean isDefinedAt(LogicalPlan node) {
            return node instanceof PendingRoutine;
          }

          @Override
          public LogicalPlan apply(LogicalPlan node) {
            PendingRoutine pending = (PendingRoutine) node;
            return Bridge.plan(session, pending.call(), pending.sql(), pending.start());
          }
        });
  }
}
