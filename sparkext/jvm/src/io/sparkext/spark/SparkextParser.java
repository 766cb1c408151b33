package io.sparkext.spark;

import java.util.List;
import java.util.regex.Pattern;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTable;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.CacheTableAsSelect;
import org.apache.spark.sql.catalyst.plans.logical.DropIndex;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.connector.catalog.CatalogManager;
import org.apache.spark.sql.connector.catalog.CatalogPlugin;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.internal.VariableSubstitution;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import scala.collection.JavaConverters;
import scala.collection.Seq;

/**
 * Wraps the session's parser (Iceberg's, then Spark's).
 *
 * <ul>
 *   <li>{@code CALL sparkext.<name>(...)} becomes a {@link PendingRoutine}, and so do {@code
 *       SHOW INDEXES}, {@code CREATE INDEX ... USING <one of sparkext's index types>} and {@code
 *       DROP INDEX} on an Iceberg table (Spark's own index statements, for tables that support
 *       indexes, stay Spark's);
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
  private static final String ICEBERG_CALL =
      "org.apache.spark.sql.catalyst.plans.logical.CallStatement";
  private static final String ICEBERG_VIEWS =
      "org.apache.spark.sql.catalyst.analysis.RewriteViewCommands";
  private static final String ICEBERG_TABLE = "org.apache.iceberg.spark.source.SparkTable";

  private final SparkSession session;
  private final ParserInterface delegate;
  private final SparkextAstBuilder.Parser ours = new SparkextAstBuilder.Parser();

  SparkextParser(SparkSession session, ParserInterface delegate) {
    this.session = session;
    this.delegate = delegate;
  }

  static final String SERVER_VARIABLES =
      "A JDBC client's statement cannot read the server's environment or system properties"
          + " (${env:...}, ${system:...}): they hold its secrets; pass a value with SET"
          + " hivevar:name=value and write ${name}.";
  private static final Pattern SERVER_VARIABLE =
      Pattern.compile("\\$\\{\\s*(?:env|system)\\s*:", Pattern.CASE_INSENSITIVE);

  @Override
  public LogicalPlan parsePlan(String sql) throws ParseException {
    if (sql.contains("${") && SERVER_VARIABLE.matcher(sql).find() && Caller.isServe()) {
      return new RefusedStatement(SERVER_VARIABLES);
    }
    Sql.IndexStatement index = Sql.indexStatement(sql);
    if (Sql.isSparkextCall(sql)
        || index == Sql.IndexStatement.SHOW
        || (index == Sql.IndexStatement.CREATE && Sql.usesSkippingIndex(sql))) {
      return pending(sql);
    }
    LogicalPlan parsed;
    try {
      parsed = delegate.parsePlan(sql);
      if (index == Sql.IndexStatement.DROP && dropsIcebergIndex(parsed)) {
        return pending(sql);
      }
    } catch (ParseException refused) {
      if (!Sql.mentionsSparkext(sql)) {
        throw refused;
      }
      LogicalPlan plan = ours(sql, false, refused);
      if (plan instanceof CacheTableAsSelect) {
        return Bridge.cacheTable(session, sql);
      }
      return icebergViews(plan);
    }
    return Bridge.isRegistered() ? governed(parsed, sql) : parsed;
  }

  /** A statement the Python driver runs as a whole (as it runs {@code CALL sparkext.<name>}). */
  private static LogicalPlan pending(String sql) {
    String substituted = new VariableSubstitution().substitute(sql); // as Spark's parser does
    return new PendingRoutine(substituted, 0, true, PendingRoutine.nextParse());
  }

  /**
   * Whether {@code plan} is Spark's {@code DROP INDEX} on a table of Iceberg's (then the index
   * is sparkext's: Iceberg tables have no other); on any other table it stays Spark's.
   */
  private boolean dropsIcebergIndex(LogicalPlan plan) {
    if (!(plan instanceof DropIndex) || !(((DropIndex) plan).table() instanceof UnresolvedTable)) {
      return false;
    }
    List<String> name =
        JavaConverters.seqAsJavaList(
            ((UnresolvedTable) ((DropIndex) plan).table()).multipartIdentifier());
    try {
      CatalogManager manager = session.sessionState().catalogManager();
      CatalogPlugin catalog = manager.currentCatalog();
      List<String> rest = name;
      if (name.size() > 1 && manager.isCatalogRegistered(name.get(0))) {
        catalog = manager.catalog(name.get(0));
        rest = name.subList(1, name.size());
      }
      if (!(catalog instanceof TableCatalog) || rest.isEmpty()) {
        return false;
      }
      String[] namespace =
          rest.size() == 1 && rest == name // t alone: in the current namespace
              ? manager.currentNamespace()
              : rest.subList(0, rest.size() - 1).toArray(new String[0]);
      Table table =
          ((TableCatalog) catalog).loadTable(Identifier.of(namespace, rest.get(rest.size() - 1)));
      for (Class<?> c = table.getClass(); c != null; c = c.getSuperclass()) {
        if (ICEBERG_TABLE.equals(c.getName())) {
          return true;
        }
      }
      return false;
    } catch (Exception | LinkageError unknown) { // no such table or catalog: Spark's to say
      return false;
    }
  }

  /**
   * An Iceberg procedure call held for sparkext's policy and audit log ({@link IcebergCall});
   * any other plan as it is. Iceberg's classes are read by name: sparkext does not compile
   * against them, and a session without Iceberg has no such plans.
   */
  private static LogicalPlan governed(LogicalPlan plan, String sql) {
    if (!ICEBERG_CALL.equals(plan.getClass().getName())) {
      return plan;
    }
    try {
      Seq<?> parts = (Seq<?>) plan.getClass().getMethod("name").invoke(plan);
      Seq<?> args = (Seq<?>) plan.getClass().getMethod("args").invoke(plan);
      return new IcebergCall(plan, parts.mkString("."), tableArgument(args), sql);
    } catch (ReflectiveOperationException | ClassCastException other) {
      return plan; // another Iceberg version's shape: not recognised, left to Iceberg
    }
  }

  /** The literal of the argument named {@code table}, else of the first positional one. */
  private static String tableArgument(Seq<?> args) throws ReflectiveOperationException {
    Object positional = null;
    scala.collection.Iterator<?> each = args.iterator();
    while (each.hasNext()) {
      Object arg = each.next();
      Object expression = arg.getClass().getMethod("expr").invoke(arg);
      String kind = arg.getClass().getSimpleName();
      if (kind.equals("NamedArgument")
          && "table".equalsIgnoreCase((String) arg.getClass().getMethod("name").invoke(arg))) {
        return literal(expression);
      }
      if (kind.equals("PositionalArgument") && positional == null) {
        positional = expression;
      }
    }
    return positional == null ? null : literal(positional);
  }

  private static String literal(Object expression) {
    if (expression instanceof Literal) {
      Object value = ((Literal) expression).value();
      return value == null ? null : value.toString();
    }
    return null;
  }

  @Override
  public LogicalPlan parseQuery(String sql) throws ParseException {
    try {
      return delegate.parseQuery(sql);
    } catch (ParseException refused) {
      if (!Sql.mentionsSparkext(sql)) {
        throw refused;
      }
      return ours(sql, true, refused);
    }
  }

  private LogicalPlan ours(String sql, boolean query, ParseException refused)
      throws ParseException {
    SparkextAstBuilder.PARSE.set(PendingRoutine.nextParse());
    try {
      return query ? ours.parseQuery(sql) : ours.parsePlan(sql);
    } catch (Exception also) { // ParseException, thrown unchecked by Scala
      throw refused;
    } finally {
      SparkextAstBuilder.PARSE.remove();
    }
  }

  /**
   * What Iceberg's parser does to every plan it returns: view commands on Iceberg catalogs that
   * store views become Iceberg's (CREATE VIEW ... AS over a sparkext function in such a catalog).
   */
  private LogicalPlan icebergViews(LogicalPlan plan) {
    try {
      Class<?> rule = Class.forName(ICEBERG_VIEWS);
      Object instance = rule.getConstructor(SparkSession.class).newInstance(session);
      return (LogicalPlan) rule.getMethod("apply", LogicalPlan.class).invoke(instance, plan);
    } catch (ClassNotFoundException | NoSuchMethodException absent) {
      return plan; // no Iceberg runtime, or another version of it
    } catch (ReflectiveOperationException failed) {
      throw SparkextException.rethrow(failed.getCause() == null ? failed : failed.getCause());
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
