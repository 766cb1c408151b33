package io.sparkext.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import net.razorvine.pickle.Unpickler;
import org.apache.spark.api.python.SerDeUtil;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.execution.python.EvaluatePython;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import scala.Function1;
import scala.collection.JavaConverters;
import scala.collection.Seq;

/**
 * A routine's result rows, sent by the Python driver, as a {@link LocalRelation}: the rows live in
 * the plan, so collecting them is a local table scan with no Spark job and no Python worker (what
 * Iceberg's procedures return), where {@code createDataFrame} of Python rows runs a job whose
 * Python worker unpickles them.
 *
 * <p>The rows arrive as PySpark sends {@code createDataFrame}'s: one pickle of the rows already in
 * Spark's internal form ({@code StructType.toInternal}), turned into Catalyst values by the same
 * {@code EvaluatePython.makeFromJava} that {@code applySchemaToPythonRDD} uses; so every type,
 * null, timestamp, decimal, map and array comes out as {@code createDataFrame} would make it.
 */
public final class LocalRows {
  private LocalRows() {}

  /**
   * The rows of {@code pickled} (a Python list of tuples) as a Dataset of the schema {@code
   * schemaJson} ({@code StructType.json()}).
   */
  public static Dataset<Row> frame(SparkSession session, byte[] pickled, String schemaJson)
      throws IOException {
    StructType schema = (StructType) DataType.fromJson(schemaJson);
    SerDeUtil.initialize(); // bytearray and array.array, as PySpark's own unpickling reads them
    List<?> values = (List<?>) new Unpickler().loads(pickled);
    Function1<Object, Object> fromJava = EvaluatePython.makeFromJava(schema);
    List<InternalRow> rows = new ArrayList<>(values.size());
    for (Object value : values) {
      rows.add((InternalRow) fromJava.apply(value));
    }
    @SuppressWarnings("unchecked")
    Seq<Attribute> output = (Seq<Attribute>) (Seq<?>) DataTypeUtils.toAttributes(schema);
    Seq<InternalRow> data = JavaConverters.asScalaBuffer(rows).toSeq();
    return Dataset.ofRows(session, new LocalRelation(output, data, false));
  }
}
