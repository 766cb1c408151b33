package io.sparkext.spark;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import scala.collection.IndexedSeq;
import scala.collection.Seq;
import scala.collection.immutable.Nil$;

/**
 * A plan leaf that stands for work {@link RoutineRule} does during analysis ({@link
 * PendingRoutine}, {@link IcebergCall}): unresolved until then, with no output and no children.
 */
abstract class HeldStatement extends LogicalPlan {
  private static final long serialVersionUID = 1L;

  @Override
  public boolean resolved() {
    return false;
  }

  @Override
  @SuppressWarnings("unchecked")
  public Seq<Attribute> output() {
    return (Seq<Attribute>) (Seq<?>) Nil$.MODULE$;
  }

  @Override
  @SuppressWarnings("unchecked")
  public Seq<LogicalPlan> children() {
    return (Seq<LogicalPlan>) (Seq<?>) Nil$.MODULE$;
  }

  @Override
  public LogicalPlan withNewChildrenInternal(IndexedSeq<LogicalPlan> children) {
    return this;
  }
}
