package io.sparkext.spark;

import org.apache.spark.QueryContext;
import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.catalyst.trees.Origin;
import scala.Option;
import scala.collection.immutable.Map$;

/**
 * A sparkext call refused with one sentence. An {@link AnalysisException}, so PySpark, spark-sql
 * and the Thrift server show its message, not a stack trace.
 */
public final class SparkextException extends AnalysisException {
  private static final long serialVersionUID = 1L;

  public SparkextException(String message) {
    super(
        message,
        Option.empty(),
        Option.empty(),
        Option.empty(),
        Option.empty(),
        Map$.MODULE$.<String, String>empty(),
        new QueryContext[0]);
  }

  /**
   * Keeps the sentence as it is: Spark's analyser would add "; line 1 pos 14" (the sentence names
   * its position itself where one helps) and turn this into a plain AnalysisException.
   */
  @Override
  public AnalysisException withPosition(Origin origin) {
    return this;
  }

  /** The sentence alone: the Thrift server sends clients "Error running query: " + this. */
  @Override
  public String toString() {
    return getMessage();
  }

  /**
   * Throws {@code new SparkextException(message)} from code that Scala calls: Java sees an
   * AnalysisException as checked, Scala does not (the signature returns so callers can write
   * {@code throw SparkextException.raise(...)}).
   */
  public static RuntimeException raise(String message) {
    return SparkextException.<RuntimeException>sneaky(new SparkextException(message));
  }

  /** Rethrows {@code error} as it is, checked or not (Scala's exceptions are all unchecked). */
  public static RuntimeException rethrow(Throwable error) {
    return SparkextException.<RuntimeException>sneaky(error);
  }

  @SuppressWarnings("unchecked")
  private static <E extends Throwable> RuntimeException sneaky(Throwable error) throws E {
    throw (E) error;
  }
}
