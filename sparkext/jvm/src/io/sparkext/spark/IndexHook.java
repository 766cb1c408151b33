package io.sparkext.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.ExperimentalMethods;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import scala.collection.JavaConverters;
import scala.collection.Seq;

/**
 * Puts sparkext's skipping-index rule ({@link SkippingRule}) where it sees Iceberg's planned scans.
 *
 * <p>The rule needs the plan after Spark pushed filters and columns into the scans (a {@code
 * DataSourceV2ScanRelation} holding Iceberg's scan). In Spark 3.5 the batch of {@code
 * injectPreCBORule} runs just before that push-down ("Pre CBO Rules", then "Early Filter and
 * Projection Push-Down"), and {@code injectOptimizerRule}'s rules run earlier still; the one
 * optimizer batch after it that a library can fill is "User Provided Optimizers" ({@code
 * spark.experimental().extraOptimizations}, run after partition pruning and runtime filters and
 * before physical planning, so joins see the pruned scan's statistics). An injected optimizer
 * rule is built by each session's optimizer with the session: {@link #install} adds the real rule
 * to that session's list there and is itself a no-op (the way Hyperspace installs its rules).
 *
 * <p>The rule's classes use Iceberg's; they are loaded by name only once Iceberg's classes are
 * found, so an application without Iceberg keeps working with the extension.
 */
final class IndexHook {
  static final String ENABLED = "spark.sparkext.index.enabled";
  private static final String RULE = "io.sparkext.spark.SkippingRule";
  private static final String[] ICEBERG = {
    "org.apache.iceberg.spark.source.SparkTable", "org.apache.iceberg.spark.ScanTaskSetManager"
  };
  private static final boolean AVAILABLE = icebergVisible();

  private IndexHook() {}

  /** A rule of sparkext's for one session; {@link #install} keeps one per session. */
  abstract static class Installed extends Rule<LogicalPlan> {
    final SparkSession session;

    Installed(SparkSession session) {
      this.session = session;
    }
  }

  private static final Rule<LogicalPlan> NOOP =
      new Rule<LogicalPlan>() {
        @Override
        public LogicalPlan apply(LogicalPlan plan) {
          return plan;
        }

        @Override
        public String ruleName() {
          return "io.sparkext.spark.IndexHook";
        }
      };

  /**
   * Adds the skipping rule to {@code session}'s extra optimizations (a clone of a session has its
   * parent's: that one is replaced); returns a rule that does nothing.
   */
  static Rule<LogicalPlan> install(SparkSession session) {
    if (!AVAILABLE) {
      return NOOP;
    }
    try {
      ExperimentalMethods methods = session.experimental();
      synchronized (methods) {
        List<Rule<LogicalPlan>> rules =
            new ArrayList<>(JavaConverters.seqAsJavaList(methods.extraOptimizations()));
        boolean ours = false;
        boolean stale = false;
        for (Rule<LogicalPlan> rule : rules) {
          if (rule instanceof Installed) {
            if (((Installed) rule).session == session) {
              ours = true;
            } else {
              stale = true;
            }
          }
        }
        if (ours && !stale) {
          return NOOP;
        }
        rules.removeIf(rule -> rule instanceof Installed && ((Installed) rule).session != session);
        if (!ours) {
          rules.add(newRule(session));
        }
        @SuppressWarnings("unchecked")
        Seq<Rule<LogicalPlan>> updated =
            (Seq<Rule<LogicalPlan>>) (Seq<?>) JavaConverters.asScalaBuffer(rules).toList();
        methods.extraOptimizations_$eq(updated);
      }
    } catch (ReflectiveOperationException | RuntimeException | LinkageError unavailable) {
      // no skipping in this session; its queries run as they would without sparkext
    }
    return NOOP;
  }

  /** Whether the session lets sparkext's indexes prune its scans ({@value #ENABLED}). */
  static boolean enabled(SparkSession session) {
    return !"false".equalsIgnoreCase(session.sessionState().conf().getConfString(ENABLED, "true"));
  }

  @SuppressWarnings("unchecked")
  private static Rule<LogicalPlan> newRule(SparkSession session)
      throws ReflectiveOperationException {
    Class<?> rule = Class.forName(RULE, true, IndexHook.class.getClassLoader());
    return (Rule<LogicalPlan>) rule.getDeclaredConstructor(SparkSession.class).newInstance(session);
  }

  private static boolean icebergVisible() {
    try {
      for (String name : ICEBERG) {
        Class.forName(name, false, IndexHook.class.getClassLoader());
      }
      return true;
    } catch (ClassNotFoundException | LinkageError absent) {
      return false;
    }
  }
}
