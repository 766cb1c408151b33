package io.sparkext.spark;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import scala.runtime.AbstractPartialFunction;

/**
 * Runs each {@link PendingRoutine} of a plan through the Python driver, and each {@link
 * IcebergCall} past its policy (see {@link Bridge}).
 */
final class RoutineRule extends Rule<LogicalPlan> {
  private static final int REMEMBERED = 64;

  private final SparkSession session;

  /** Results by invocation and parse: the copies Spark makes of one CTE run the routine once. */
  private final Map<LogicalPlan, LogicalPlan> results =
      Collections.synchronizedMap(
          new LinkedHashMap<LogicalPlan, LogicalPlan>(16, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<LogicalPlan, LogicalPlan> eldest) {
              return size() > REMEMBERED;
            }
          });

  RoutineRule(SparkSession session) {
    this.session = session;
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    return plan.resolveOperatorsUp(
        new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
          @Override
          public boolean isDefinedAt(LogicalPlan node) {
            return node instanceof HeldStatement;
          }

          @Override
          public LogicalPlan apply(LogicalPlan node) {
            if (node instanceof RefusedStatement) {
              throw SparkextException.raise(((RefusedStatement) node).sentence());
            }
            LogicalPlan known = results.get(node);
            if (known != null) {
              return known;
            }
            LogicalPlan plan;
            if (node instanceof IcebergCall) {
              plan = Bridge.icebergCall(session, (IcebergCall) node);
            } else {
              PendingRoutine pending = (PendingRoutine) node;
              plan = Bridge.plan(session, pending.call(), pending.sql(), pending.start());
            }
            results.put(node, plan);
            return plan;
          }
        });
  }
}
