package io.sparkext.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.lang.ref.WeakReference;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.iceberg.BaseMetadataTable;
import org.apache.iceberg.BatchScan;
import org.apache.iceberg.BlobMetadata;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.StatisticsFile;
import org.apache.iceberg.Table;
import org.apache.iceberg.spark.source.SparkTable;
import org.apache.iceberg.util.SnapshotUtil;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.RowLevelWrite;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.SQLExecution;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.collection.Iterator;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractPartialFunction;

/**
 * Prunes the data files of Iceberg scans by sparkext's skipping indexes.
 *
 * <p>For each {@code Filter} over an Iceberg batch scan (directly or through a {@code Project}) of
 * a table that declares indexes ({@code sparkext.index.*} properties): the filter becomes the
 * predicate JSON ({@link PredicateJson}); the index is the Puffin statistics file of the scan's
 * snapshot or of its nearest ancestor holding a {@value #BLOB_TYPE} blob; the candidates are the
 * files Iceberg itself planned for the scan (its filter, case sensitivity, options, delete files);
 * the Python driver says which to keep ({@link Bridge#pruneFiles}); the scan becomes an {@link
 * IndexedScan} of those. Anything unexpected leaves the plan as it was: a failure here never
 * fails a query, it only costs the pruning.
 */
final class SkippingRule extends IndexHook.Installed {
  static final String BLOB_TYPE = "sparkext-skipping-index-v1";
  static final String INDEX_PROPERTY = "sparkext.index.";
  private static final String BATCH_QUERY_SCAN =
      "org.apache.iceberg.spark.source.SparkBatchQueryScan";
  private static final Logger LOG = LoggerFactory.getLogger(SkippingRule.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Map<String, Method> METHODS = new ConcurrentHashMap<>();
  private static final int DECLINED = 64;

  /**
   * Scans the driver kept whole: the batch runs to a fixed point, and a plan changed by another
   * scan's pruning is run again; the same scan is asked once. Weak: planned scans hold their
   * tasks.
   */
  private final Map<Object, Boolean> declined =
      Collections.synchronizedMap(
          new LinkedHashMap<Object, Boolean>(16, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<Object, Boolean> eldest) {
              return size() > DECLINED;
            }
          });

  SkippingRule(SparkSession session) {
    super(session);
  }

  /** A scan by identity, held weakly. */
  private static final class Same {
    private final WeakReference<Scan> scan;
    private final int hash;

    Same(Scan scan) {
      this.scan = new WeakReference<>(scan);
      this.hash = System.identityHashCode(scan);
    }

    @Override
    public boolean equals(Object other) {
      Scan mine = scan.get();
      return other instanceof Same && mine != null && mine == ((Same) other).scan.get();
    }

    @Override
    public int hashCode() {
      return hash;
    }
  }

  @Override
  public String ruleName() {
    return "io.sparkext.spark.SkippingRule";
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    if (!Bridge.isRegistered() || !IndexHook.enabled(session)) {
      return plan;
    }
    try {
      if (plan.find(ROW_LEVEL_WRITE).isDefined() || inRowLevelWrite()) {
        return plan; // MERGE, UPDATE, DELETE read what they rewrite: Iceberg plans those reads
      }
      return (LogicalPlan) plan.transformUpWithSubqueries(new Prune());
    } catch (RuntimeException | LinkageError failed) {
      LOG.warn("sparkext's skipping indexes left a plan as it was", failed);
      return plan;
    }
  }

  /**
   * Whether the statement running on this thread is a row-level write: Spark plans the query that
   * finds a copy-on-write operation's files (its runtime group filter) as a plan of its own while
   * it plans the write, and those reads are Iceberg's too.
   */
  private boolean inRowLevelWrite() {
    String id = session.sparkContext().getLocalProperty(SQLExecution.EXECUTION_ID_KEY());
    if (id == null) {
      return false;
    }
    QueryExecution running = SQLExecution.getQueryExecution(Long.parseLong(id));
    return running != null && running.logical().find(ROW_LEVEL_WRITE).isDefined();
  }

  private static final AbstractFunction1<LogicalPlan, Object> ROW_LEVEL_WRITE =
      new AbstractFunction1<LogicalPlan, Object>() {
        @Override
        public Object apply(LogicalPlan node) {
          return node instanceof RowLevelWrite;
        }
      };

  private final class Prune extends AbstractPartialFunction<LogicalPlan, LogicalPlan> {
    @Override
    public boolean isDefinedAt(LogicalPlan node) {
      if (!(node instanceof Filter)) {
        return false;
      }
      LogicalPlan child = ((Filter) node).child();
      if (child instanceof Project) {
        child = ((Project) child).child();
      }
      return child instanceof DataSourceV2ScanRelation
          && BATCH_QUERY_SCAN.equals(((DataSourceV2ScanRelation) child).scan().getClass().getName());
    }

    @Override
    public LogicalPlan apply(LogicalPlan node) {
      Same scan = new Same(relation(node).scan());
      if (declined.containsKey(scan)) {
        return node;
      }
      try {
        LogicalPlan pruned = prune((Filter) node);
        if (pruned == null) {
          declined.put(scan, Boolean.TRUE);
          return node;
        }
        return pruned;
      } catch (ReflectiveOperationException | IOException | RuntimeException | LinkageError e) {
        LOG.warn("sparkext's skipping indexes left a scan as it was", e);
        return node;
      }
    }
  }

  private static DataSourceV2ScanRelation relation(LogicalPlan filter) {
    LogicalPlan child = ((Filter) filter).child();
    return (DataSourceV2ScanRelation)
        (child instanceof Project ? ((Project) child).child() : child);
  }

  /** {@code filter} over a pruned scan, or null to leave it as it is. */
  private LogicalPlan prune(Filter filter) throws ReflectiveOperationException, IOException {
    Project project = filter.child() instanceof Project ? (Project) filter.child() : null;
    DataSourceV2ScanRelation relation = relation(filter);
    if (!(relation.relation().table() instanceof SparkTable)
        || relation.keyGroupedPartitioning().isDefined()
        || relation.ordering().isDefined()) {
      return null;
    }
    SparkTable sparkTable = (SparkTable) relation.relation().table();
    Table table = sparkTable.table();
    if (table instanceof BaseMetadataTable || !declaresIndexes(table)) {
      return null;
    }
    String predicate = PredicateJson.translate(filter.condition(), columns(relation, project));
    if (predicate == null) {
      return null;
    }
    Scan scan = relation.scan();
    BatchScan planned = (BatchScan) call(scan, "scan");
    Snapshot snapshot = planned == null ? null : planned.snapshot();
    StatisticsFile index = snapshot == null ? null : indexFile(table, snapshot.snapshotId());
    if (index == null) {
      return null;
    }
    List<FileScanTask> tasks = fileTasks((List<?>) call(scan, "tasks")); // planned already
    if (tasks == null || tasks.isEmpty()) {
      return null;
    }
    StringBuilder candidates = new StringBuilder();
    for (FileScanTask task : tasks) {
      String path = task.file().location();
      if (path.indexOf('\n') >= 0) {
        return null;
      }
      candidates.append(candidates.length() == 0 ? "" : "\n").append(path);
    }
    String answer =
        Bridge.pruneFiles(
            session,
            table,
            snapshot.snapshotId(),
            index.path(),
            index.fileSizeInBytes(),
            index.fileFooterSizeInBytes(),
            predicate,
            candidates.toString());
    Kept kept = Kept.parse(answer, tasks);
    if (kept == null || kept.tasks.size() == tasks.size()) {
      return null; // nothing to skip: Iceberg's own scan, untouched
    }
    IndexedScan pruned =
        IndexedScan.of(
            sparkTable, relation, scan, planned, kept.tasks, tasks.size(), kept.used, snapshot);
    if (pruned == null) {
      return null;
    }
    DataSourceV2ScanRelation replaced =
        relation.copy(
            relation.relation(),
            pruned,
            relation.output(),
            relation.keyGroupedPartitioning(),
            relation.ordering());
    if (project == null) {
      return filter.copy(filter.condition(), replaced);
    }
    return filter.copy(filter.condition(), project.copy(project.projectList(), replaced));
  }

  private static boolean declaresIndexes(Table table) {
    for (String key : table.properties().keySet()) {
      if (key.startsWith(INDEX_PROPERTY)) {
        return true;
      }
    }
    return false;
  }

  /**
   * The table column each attribute the filter can reference stands for: the scan's own output
   * (named as in the table's schema) and plain renames of it in a Project between them.
   */
  private static Map<ExprId, String> columns(DataSourceV2ScanRelation relation, Project project) {
    Set<String> fields = new HashSet<>(List.of(relation.relation().table().schema().fieldNames()));
    Map<ExprId, String> out = new HashMap<>();
    Iterator<? extends Attribute> output = relation.output().iterator();
    while (output.hasNext()) {
      Attribute attribute = output.next();
      if (fields.contains(attribute.name())) {
        out.put(attribute.exprId(), attribute.name());
      }
    }
    if (project != null) {
      Map<ExprId, String> visible = new HashMap<>();
      Iterator<NamedExpression> items = project.projectList().iterator();
      while (items.hasNext()) {
        NamedExpression item = items.next();
        Object source = item instanceof Alias ? ((Alias) item).child() : item;
        if (source instanceof Attribute && out.containsKey(((Attribute) source).exprId())) {
          visible.put(item.exprId(), out.get(((Attribute) source).exprId()));
        }
      }
      return visible;
    }
    return out;
  }

  /** The statistics file of the nearest ancestor-or-self of {@code snapshotId} with an index. */
  static StatisticsFile indexFile(Table table, long snapshotId) {
    Map<Long, StatisticsFile> indexed = new HashMap<>();
    for (StatisticsFile file : table.statisticsFiles()) {
      for (BlobMetadata blob : file.blobMetadata()) {
        if (BLOB_TYPE.equals(blob.type())) {
          indexed.put(file.snapshotId(), file);
          break;
        }
      }
    }
    if (indexed.isEmpty()) {
      return null;
    }
    for (Snapshot ancestor : SnapshotUtil.ancestorsOf(snapshotId, table::snapshot)) {
      StatisticsFile file = indexed.get(ancestor.snapshotId());
      if (file != null) {
        return file;
      }
    }
    return null;
  }

  /** The scan's planned tasks if each reads one data file (no metadata rows), else null. */
  private static List<FileScanTask> fileTasks(List<?> planned) {
    if (planned == null) {
      return null;
    }
    List<FileScanTask> tasks = new ArrayList<>(planned.size());
    for (Object task : planned) {
      if (!(task instanceof FileScanTask) || ((FileScanTask) task).isDataTask()) {
        return null;
      }
      tasks.add((FileScanTask) task);
    }
    return tasks;
  }

  /** The Python driver's answer: the tasks to read and the indexes that chose them. */
  private static final class Kept {
    final List<FileScanTask> tasks;
    final List<String> used;

    private Kept(List<FileScanTask> tasks, List<String> used) {
      this.tasks = tasks;
      this.used = used;
    }

    static Kept parse(String answer, List<FileScanTask> candidates) throws IOException {
      if (answer == null || answer.isEmpty()) {
        return null;
      }
      JsonNode root = JSON.readTree(answer);
      String keep = root.path("keep").asText("");
      if (keep.length() != candidates.size()) {
        return null;
      }
      List<FileScanTask> tasks = new ArrayList<>();
      for (int i = 0; i < keep.length(); i++) {
        char c = keep.charAt(i);
        if (c == '1') {
          tasks.add(candidates.get(i));
        } else if (c != '0') {
          return null;
        }
      }
      List<String> used = new ArrayList<>();
      for (JsonNode name : root.path("used")) {
        used.add(name.asText());
      }
      return new Kept(tasks, used);
    }
  }

  /** Calls a non-public method of Iceberg's scan classes (they are package-private). */
  static Object call(Object target, String name, Object... args)
      throws ReflectiveOperationException {
    Method method = METHODS.get(target.getClass().getName() + "#" + name);
    if (method == null) {
      method = find(target.getClass(), name, args.length);
      method.setAccessible(true);
      METHODS.put(target.getClass().getName() + "#" + name, method);
    }
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException thrown) {
      Throwable cause = thrown.getCause();
      if (cause instanceof RuntimeException) {
        throw (RuntimeException) cause;
      }
      throw thrown;
    }
  }

  private static Method find(Class<?> type, String name, int arity) throws NoSuchMethodException {
    for (Class<?> c = type; c != null; c = c.getSuperclass()) {
      for (Method method : c.getDeclaredMethods()) {
        if (method.getName().equals(name)
            && method.getParameterCount() == arity
            && !method.isBridge()) {
          return method;
        }
      }
    }
    throw new NoSuchMethodException(type.getName() + "." + name);
  }
}
