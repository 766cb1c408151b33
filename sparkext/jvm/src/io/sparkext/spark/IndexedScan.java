package io.sparkext.spark;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.apache.iceberg.BatchScan;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.MetadataColumns;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.expressions.Binder;
import org.apache.iceberg.expressions.Evaluator;
import org.apache.iceberg.expressions.Expression;
import org.apache.iceberg.expressions.Expressions;
import org.apache.iceberg.expressions.Projections;
import org.apache.iceberg.spark.ScanTaskSetManager;
import org.apache.iceberg.spark.SparkReadOptions;
import org.apache.iceberg.spark.SparkSchemaUtil;
import org.apache.iceberg.spark.SparkV2Filters;
import org.apache.iceberg.spark.source.SparkTable;
import org.apache.iceberg.types.Types;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.connector.read.SupportsRuntimeV2Filtering;
import org.apache.spark.sql.connector.read.colstats.ColumnStatistics;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * An Iceberg scan of the files sparkext's indexes kept: read through Iceberg's staged scan (the
 * tasks staged with {@link ScanTaskSetManager} and read with {@code scan-task-set-id}, as
 * Iceberg's own {@code rewrite_data_files} reads exact file sets), grouped into splits as the
 * original scan would have grouped them.
 *
 * <p>Tasks are staged only while {@link #toBatch} builds the batch (the batch holds its task
 * groups) and removed at once, under one id made from their content: equal scans get equal
 * batches (so Spark can reuse an exchange of them) and nothing stays staged. Runtime filters
 * (dynamic partition pruning) apply to the kept tasks as Iceberg's scan applies them.
 */
final class IndexedScan implements Scan, SupportsReportStatistics, SupportsRuntimeV2Filtering {
  private static final Object STAGING = new Object();
  private static final String SET_PREFIX = "sparkext-index-";
  /** Read options that chose the snapshot: the staged tasks are already that snapshot's. */
  private static final List<String> SNAPSHOT_OPTIONS =
      List.of(
          SparkReadOptions.SNAPSHOT_ID,
          SparkReadOptions.AS_OF_TIMESTAMP,
          SparkReadOptions.BRANCH,
          SparkReadOptions.TAG,
          SparkReadOptions.START_SNAPSHOT_ID,
          SparkReadOptions.END_SNAPSHOT_ID,
          SparkReadOptions.SCAN_TASK_SET_ID);

  private final SparkTable sparkTable;
  private final Table table;
  private final Scan original;
  private final StructType readSchema;
  private final Schema expectedSchema;
  private final boolean caseSensitive;
  private final Map<String, String> options; // for the staged scan, without its set id
  private final long snapshotId;
  private final int candidates;
  private final int keptByIndex;
  private final List<String> used;
  // replaced whole (never changed in place) by filter(): read without a lock
  private volatile List<String> runtimeFilters = List.of();
  private volatile List<FileScanTask> tasks;
  private List<FileScanTask> batchedTasks; // the tasks of batch, the last toBatch()
  private Batch batch;

  private IndexedScan(
      SparkTable sparkTable,
      Scan original,
      Schema expectedSchema,
      boolean caseSensitive,
      Map<String, String> options,
      long snapshotId,
      List<FileScanTask> tasks,
      int candidates,
      List<String> used) {
    this.sparkTable = sparkTable;
    this.table = sparkTable.table();
    this.original = original;
    this.readSchema = original.readSchema();
    this.expectedSchema = expectedSchema;
    this.caseSensitive = caseSensitive;
    this.options = options;
    this.snapshotId = snapshotId;
    this.tasks = List.copyOf(tasks);
    this.candidates = candidates;
    this.keptByIndex = tasks.size();
    this.used = List.copyOf(used);
  }

  /**
   * The scan of {@code kept} in place of {@code original} (Iceberg's scan of {@code relation}),
   * or null when Iceberg's staged scan would not read exactly the same columns (metadata
   * columns, a schema that changed since a time-travelled snapshot, another grouping).
   */
  static IndexedScan of(
      SparkTable sparkTable,
      DataSourceV2ScanRelation relation,
      Scan original,
      BatchScan planned,
      List<FileScanTask> kept,
      int candidates,
      List<String> used,
      Snapshot snapshot)
      throws ReflectiveOperationException {
    Schema expected = (Schema) SkippingRule.call(original, "expectedSchema");
    Types.StructType grouping = (Types.StructType) SkippingRule.call(original, "groupingKeyType");
    if (!grouping.fields().isEmpty()) {
      return null;
    }
    for (Types.NestedField field : expected.columns()) {
      if (MetadataColumns.isMetadataColumn(field.fieldId())
          || MetadataColumns.isMetadataColumn(field.name())) {
        return null;
      }
    }
    Map<String, String> options = new HashMap<>(relation.relation().options().asCaseSensitiveMap());
    options.keySet().removeIf(key -> SNAPSHOT_OPTIONS.contains(key.toLowerCase()));
    String branch = (String) SkippingRule.call(original, "branch");
    if (branch != null) {
      options.put(SparkReadOptions.BRANCH, branch);
    }
    long splitSize = (Long) SkippingRule.call(original, "adjustSplitSize", kept, planned.targetSplitSize());
    options.put(SparkReadOptions.SPLIT_SIZE, String.valueOf(splitSize));
    options.put(SparkReadOptions.LOOKBACK, String.valueOf(planned.splitLookback()));
    options.put(SparkReadOptions.FILE_OPEN_COST, String.valueOf(planned.splitOpenFileCost()));
    boolean caseSensitive = (Boolean) SkippingRule.call(original, "caseSensitive");
    IndexedScan scan =
        new IndexedScan(
            sparkTable,
            original,
            expected,
            caseSensitive,
            options,
            snapshot.snapshotId(),
            kept,
            candidates,
            used);
    Scan staged = scan.staged(SET_PREFIX + "check"); // built, not read: nothing is staged
    Schema stagedSchema = (Schema) SkippingRule.call(staged, "expectedSchema");
    if (!stagedSchema.asStruct().equals(expected.asStruct())
        || !staged.readSchema().equals(scan.readSchema)) {
      return null;
    }
    return scan;
  }

  private Scan staged(String setId) {
    Map<String, String> read = new HashMap<>(options);
    read.put(SparkReadOptions.SCAN_TASK_SET_ID, setId);
    ScanBuilder builder = sparkTable.newScanBuilder(new CaseInsensitiveStringMap(read));
    ((SupportsPushDownRequiredColumns) builder).pruneColumns(readSchema);
    return builder.build();
  }

  @Override
  public synchronized Batch toBatch() {
    List<FileScanTask> current = tasks;
    if (batch == null || batchedTasks != current) { // Spark asks again after runtime filters
      batch = current.isEmpty() ? new EmptyBatch(setId(current)) : stagedBatch(current);
      batchedTasks = current;
    }
    return batch;
  }

  private Batch stagedBatch(List<FileScanTask> current) {
    String setId = setId(current);
    ScanTaskSetManager manager = ScanTaskSetManager.get();
    synchronized (STAGING) {
      manager.stageTasks(table, setId, current);
      try {
        return staged(setId).toBatch(); // the batch holds its task groups: unstage at once
      } finally {
        manager.removeTasks(table, setId);
      }
    }
  }

  /** The same id for the same tasks of the same read of the same table. */
  private String setId(List<FileScanTask> current) {
    try {
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      update(digest, table.uuid().toString());
      update(digest, String.valueOf(snapshotId));
      update(digest, readSchema.json());
      update(digest, String.valueOf(new java.util.TreeMap<>(options)));
      for (FileScanTask task : current) {
        update(digest, task.file().location());
      }
      StringBuilder hex = new StringBuilder(SET_PREFIX);
      for (byte b : digest.digest()) {
        hex.append(String.format("%02x", b));
      }
      return hex.toString();
    } catch (NoSuchAlgorithmException impossible) {
      throw new IllegalStateException(impossible);
    }
  }

  private static void update(MessageDigest digest, String text) {
    digest.update(text.getBytes(StandardCharsets.UTF_8));
    digest.update((byte) 0);
  }

  @Override
  public StructType readSchema() {
    return readSchema;
  }

  @Override
  public String description() {
    String sources = used.isEmpty() ? "" : " (" + String.join("; ", used) + ")";
    return original.description()
        + ", sparkext index: kept "
        + keptByIndex
        + " of "
        + candidates
        + " files"
        + sources;
  }

  @Override
  public Statistics estimateStatistics() {
    long rows = 0;
    for (FileScanTask task : tasks) {
      rows += task.estimatedRowsCount();
    }
    long size = SparkSchemaUtil.estimateSize(readSchema, rows);
    Map<NamedReference, ColumnStatistics> columns = Collections.emptyMap();
    if (original instanceof SupportsReportStatistics) {
      try {
        columns = ((SupportsReportStatistics) original).estimateStatistics().columnStats();
      } catch (RuntimeException unavailable) {
        // no column statistics: the row count and size still hold
      }
    }
    return new Stats(size, rows, columns);
  }

  @Override
  public NamedReference[] filterAttributes() {
    return ((SupportsRuntimeV2Filtering) original).filterAttributes();
  }

  /** Iceberg's runtime filtering ({@code SparkBatchQueryScan.filter}) over the kept tasks. */
  @Override
  public synchronized void filter(Predicate[] predicates) {
    Expression runtime = Expressions.alwaysTrue();
    for (Predicate predicate : predicates) {
      Expression converted = SparkV2Filters.convert(predicate);
      if (converted == null) {
        continue;
      }
      try {
        Binder.bind(expectedSchema.asStruct(), converted, caseSensitive);
        runtime = Expressions.and(runtime, converted);
      } catch (ValidationException unbound) {
        // as Iceberg does: a filter that does not bind to the read columns filters nothing
      }
    }
    if (runtime == Expressions.alwaysTrue()) {
      return;
    }
    Map<Integer, Evaluator> bySpec = new HashMap<>();
    List<FileScanTask> matching = new ArrayList<>();
    for (FileScanTask task : tasks) {
      PartitionSpec spec = task.spec();
      Expression projected = runtime;
      Evaluator evaluator =
          bySpec.computeIfAbsent(
              spec.specId(),
              id ->
                  new Evaluator(
                      spec.partitionType(),
                      Projections.inclusive(spec, caseSensitive).project(projected)));
      if (evaluator.eval(task.partition())) {
        matching.add(task);
      }
    }
    List<String> filters = new ArrayList<>(runtimeFilters);
    filters.add(runtime.toString());
    if (matching.size() < tasks.size()) { // as Iceberg: no new batch when nothing was filtered
      tasks = List.copyOf(matching);
    }
    runtimeFilters = List.copyOf(filters);
  }

  @Override
  public CustomMetric[] supportedCustomMetrics() {
    return original.supportedCustomMetrics();
  }

  @Override
  public CustomTaskMetric[] reportDriverMetrics() {
    return original.reportDriverMetrics();
  }

  @Override
  public boolean equals(Object other) {
    if (this == other) {
      return true;
    }
    if (!(other instanceof IndexedScan)) {
      return false;
    }
    IndexedScan that = (IndexedScan) other;
    return original.equals(that.original)
        && runtimeFilters.equals(that.runtimeFilters)
        && paths(tasks).equals(paths(that.tasks));
  }

  @Override
  public int hashCode() {
    return Objects.hash(original, paths(tasks), runtimeFilters);
  }

  private static List<String> paths(List<FileScanTask> tasks) {
    List<String> out = new ArrayList<>(tasks.size());
    for (FileScanTask task : tasks) {
      out.add(task.file().location());
    }
    return out;
  }

  @Override
  public String toString() {
    return "SparkextIndexedScan(" + original + ", kept " + keptByIndex + " of " + candidates + ")";
  }

  private static final class Stats implements Statistics {
    private final long size;
    private final long rows;
    private final Map<NamedReference, ColumnStatistics> columns;

    Stats(long size, long rows, Map<NamedReference, ColumnStatistics> columns) {
      this.size = size;
      this.rows = rows;
      this.columns = columns;
    }

    @Override
    public java.util.OptionalLong sizeInBytes() {
      return java.util.OptionalLong.of(size);
    }

    @Override
    public java.util.OptionalLong numRows() {
      return java.util.OptionalLong.of(rows);
    }

    @Override
    public Map<NamedReference, ColumnStatistics> columnStats() {
      return columns;
    }
  }

  /** No file is left to read. */
  private static final class EmptyBatch implements Batch {
    private final String id;

    EmptyBatch(String id) {
      this.id = id;
    }

    @Override
    public InputPartition[] planInputPartitions() {
      return new InputPartition[0];
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new NoReader();
    }

    @Override
    public boolean equals(Object other) {
      return other instanceof EmptyBatch && ((EmptyBatch) other).id.equals(id);
    }

    @Override
    public int hashCode() {
      return id.hashCode();
    }
  }

  private static final class NoReader implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      throw new IllegalStateException("sparkext's pruned scan has no partition to read");
    }
  }
}
