package io.sparkext.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BinaryComparison;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Contains;
import org.apache.spark.sql.catalyst.expressions.EndsWith;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GreaterThan;
import org.apache.spark.sql.catalyst.expressions.GreaterThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.LessThan;
import org.apache.spark.sql.catalyst.expressions.LessThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.Like;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Lower;
import org.apache.spark.sql.catalyst.expressions.Not;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.catalyst.expressions.RLike;
import org.apache.spark.sql.catalyst.expressions.StringPredicate;
import org.apache.spark.sql.catalyst.expressions.Upper;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import scala.collection.Iterator;
import scala.collection.JavaConverters;

/**
 * A query's filter (Spark's optimized Catalyst condition above an Iceberg scan) as the predicate
 * JSON the Python driver's skipping indexes read (docs: the shared contracts of issue 56).
 *
 * <p>Everything this class does not recognise is {@code {"op":"unknown"}} (may be true), so the
 * translation is always safe: a file is skipped only where the recognised parts rule it out.
 */
final class PredicateJson {
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
  private static final String UNKNOWN = "unknown";

  /** Columns of the scanned table by the expression id of the plan's attribute for them. */
  private final Map<ExprId, String> columns;

  private PredicateJson(Map<ExprId, String> columns) {
    this.columns = columns;
  }

  /**
   * The JSON of {@code condition} over {@code columns}, or null when no index can use any part of
   * it (every leaf unknown, or unknown where it decides: one side of an OR).
   */
  static String translate(Expression condition, Map<ExprId, String> columns) {
    ObjectNode root = new PredicateJson(columns).node(condition);
    return usable(root) ? root.toString() : null;
  }

  /** Whether an index could rule a file out by {@code node}: some leaf that decides is known. */
  private static boolean usable(JsonNode node) {
    switch (node.path("op").asText()) {
      case UNKNOWN:
        return false;
      case "and":
        for (JsonNode arg : node.path("args")) {
          if (usable(arg)) {
            return true;
          }
        }
        return false;
      case "or":
        for (JsonNode arg : node.path("args")) {
          if (!usable(arg)) {
            return false;
          }
        }
        return true;
      case "not":
        return usable(node.path("arg"));
      default:
        return true;
    }
  }

  private ObjectNode node(Expression e) {
    if (e instanceof And || e instanceof Or) {
      ObjectNode out = op(e instanceof And ? "and" : "or");
      ArrayNode args = out.putArray("args");
      flatten(e, e.getClass(), args);
      return out;
    }
    if (e instanceof Not) {
      ObjectNode out = op("not");
      out.set("arg", node(((Not) e).child()));
      return out;
    }
    ObjectNode leaf = leaf(e);
    return leaf == null ? op(UNKNOWN) : leaf;
  }

  private void flatten(Expression e, Class<?> kind, ArrayNode into) {
    if (e.getClass() == kind) {
      Iterator<Expression> children = e.children().iterator();
      while (children.hasNext()) {
        flatten(children.next(), kind, into);
      }
    } else {
      into.add(node(e));
    }
  }

  private ObjectNode leaf(Expression e) {
    if (e instanceof Attribute && e.dataType() instanceof BooleanType) {
      Column column = column(e); // WHERE flag: Spark's optimizer writes flag = true so
      if (column == null) {
        return null;
      }
      ObjectNode out = column.leaf("eq");
      out.put("value", true);
      return out;
    }
    if (e instanceof IsNull || e instanceof IsNotNull) {
      Column column = column(e.children().apply(0));
      if (column == null) {
        return null; // lower(c) IS NULL is c IS NULL, but say nothing of what is not a column
      }
      ObjectNode out = op(e instanceof IsNull ? "is_null" : "is_not_null");
      out.put("col", column.name);
      return out;
    }
    if (e instanceof EqualTo
        || e instanceof EqualNullSafe
        || e instanceof LessThan
        || e instanceof LessThanOrEqual
        || e instanceof GreaterThan
        || e instanceof GreaterThanOrEqual) {
      return comparison((BinaryComparison) e);
    }
    if (e instanceof In) {
      In in = (In) e;
      List<Object> values = new ArrayList<>();
      Iterator<Expression> items = in.list().iterator();
      while (items.hasNext()) {
        Expression item = items.next();
        if (!(item instanceof Literal)) {
          return null;
        }
        values.add(((Literal) item).value());
      }
      return in(in.value(), values, false);
    }
    if (e instanceof InSet) {
      InSet in = (InSet) e;
      return in(in.child(), new ArrayList<>(JavaConverters.setAsJavaSet(in.hset())), true);
    }
    if (e instanceof StringPredicate) {
      StringPredicate predicate = (StringPredicate) e;
      String name =
          e instanceof Contains ? "contains" : e instanceof EndsWith ? "ends_with" : "starts_with";
      return text(name, predicate.left(), predicate.right(), "value");
    }
    if (e instanceof Like) {
      ObjectNode out = text("like", ((Like) e).left(), ((Like) e).right(), "pattern");
      if (out != null) {
        out.put("escape", String.valueOf(((Like) e).escapeChar()));
      }
      return out;
    }
    if (e instanceof RLike) {
      return text("rlike", ((RLike) e).left(), ((RLike) e).right(), "pattern");
    }
    return null;
  }

  private static final Map<Class<?>, String> FLIPPED =
      Map.of(
          LessThan.class, "gt",
          LessThanOrEqual.class, "ge",
          GreaterThan.class, "lt",
          GreaterThanOrEqual.class, "le");

  private static final Map<Class<?>, String> NAMES =
      Map.of(
          EqualTo.class, "eq",
          EqualNullSafe.class, "eq_null_safe",
          LessThan.class, "lt",
          LessThanOrEqual.class, "le",
          GreaterThan.class, "gt",
          GreaterThanOrEqual.class, "ge");

  /** {@code c op literal} or {@code literal op c} (then written with the column on the left). */
  private ObjectNode comparison(BinaryComparison e) {
    Column column = column(e.left());
    Expression other = e.right();
    String name = NAMES.get(e.getClass());
    if (column == null) {
      column = column(e.right());
      other = e.left();
      name = FLIPPED.getOrDefault(e.getClass(), name);
    }
    if (column == null || !(other instanceof Literal)) {
      return null;
    }
    Literal literal = (Literal) other;
    JsonNode value = value(literal.value(), column.type);
    if (value == null || !literal.dataType().equals(column.type)) {
      return null;
    }
    ObjectNode out = column.leaf(name);
    out.set("value", value);
    return out;
  }

  private ObjectNode in(Expression target, List<Object> values, boolean sort) {
    Column column = column(target);
    if (column == null) {
      return null;
    }
    List<JsonNode> encoded = new ArrayList<>();
    for (Object v : values) {
      JsonNode value = value(v, column.type);
      if (value == null) {
        return null;
      }
      encoded.add(value);
    }
    if (sort) { // a hash set's order: the same set gives the same JSON
      encoded.sort(ORDER);
    }
    ObjectNode out = column.leaf("in");
    out.putArray("values").addAll(encoded);
    return out;
  }

  /** Null first, numbers by value, the rest by their JSON text. */
  private static final Comparator<JsonNode> ORDER =
      (a, b) -> {
        if (a.isNull() || b.isNull()) {
          return Boolean.compare(!a.isNull(), !b.isNull());
        }
        if (a.isNumber() && b.isNumber()) {
          return a.decimalValue().compareTo(b.decimalValue());
        }
        return a.toString().compareTo(b.toString());
      };

  /** A string predicate whose right side is a non-null string literal. */
  private ObjectNode text(String name, Expression left, Expression right, String key) {
    Column column = column(left);
    if (column == null
        || !(column.type instanceof StringType)
        || !(right instanceof Literal)
        || ((Literal) right).value() == null
        || !(right.dataType() instanceof StringType)) {
      return null;
    }
    ObjectNode out = column.leaf(name);
    out.put(key, ((Literal) right).value().toString());
    return out;
  }

  /** A table column, possibly under lower()/upper() or a widening cast; null if not one. */
  private Column column(Expression e) {
    if (e instanceof Attribute) {
      String name = columns.get(((Attribute) e).exprId());
      return name == null ? null : new Column(name, e.dataType(), null);
    }
    if (e instanceof Lower || e instanceof Upper) {
      Column inner = column(e.children().apply(0));
      if (inner == null || inner.fold != null || !(inner.type instanceof StringType)) {
        return null;
      }
      return new Column(inner.name, inner.type, e instanceof Lower ? "lower" : "upper");
    }
    if (e instanceof Cast) {
      Column inner = column(((Cast) e).child());
      DataType to = ((Cast) e).dataType();
      if (inner == null || inner.fold != null || !widening(inner.type, to)) {
        return null;
      }
      return new Column(inner.name, to, null);
    }
    return null;
  }

  /** A cast that keeps every value as it is: a wider integer, float to double, a wider decimal. */
  static boolean widening(DataType from, DataType to) {
    int a = integralRank(from);
    int b = integralRank(to);
    if (a > 0 && b > 0) {
      return a <= b;
    }
    if (from instanceof FloatType || from instanceof DoubleType) {
      return to instanceof DoubleType || (from instanceof FloatType && to instanceof FloatType);
    }
    if (from instanceof DecimalType && to instanceof DecimalType) {
      DecimalType f = (DecimalType) from;
      DecimalType t = (DecimalType) to;
      return f.scale() == t.scale() && f.precision() <= t.precision();
    }
    return false;
  }

  private static int integralRank(DataType type) {
    if (type instanceof ByteType) {
      return 1;
    }
    if (type instanceof ShortType) {
      return 2;
    }
    if (type instanceof IntegerType) {
      return 3;
    }
    if (type instanceof LongType) {
      return 4;
    }
    return 0;
  }

  /** A literal's internal value as the contracts write it; null when the type has no form. */
  static JsonNode value(Object v, DataType type) {
    if (!encodable(type)) {
      return null;
    }
    if (v == null) {
      return NODES.nullNode();
    }
    if (integralRank(type) > 0) {
      return NODES.numberNode(((Number) v).longValue());
    }
    if (type instanceof DateType) {
      return NODES.numberNode(((Number) v).intValue());
    }
    if (type instanceof TimestampType || type instanceof TimestampNTZType) {
      return NODES.numberNode(((Number) v).longValue());
    }
    if (type instanceof FloatType || type instanceof DoubleType) {
      double d = ((Number) v).doubleValue();
      if (Double.isNaN(d)) {
        return NODES.textNode("NaN");
      }
      if (Double.isInfinite(d)) {
        return NODES.textNode(d > 0 ? "Infinity" : "-Infinity");
      }
      return type instanceof FloatType
          ? NODES.numberNode(((Number) v).floatValue())
          : NODES.numberNode(d);
    }
    if (type instanceof DecimalType) {
      return NODES.textNode(((Decimal) v).toJavaBigDecimal().toPlainString());
    }
    if (type instanceof StringType) {
      return NODES.textNode(v.toString());
    }
    if (type instanceof BinaryType) {
      return NODES.textNode(Base64.getEncoder().encodeToString((byte[]) v));
    }
    return NODES.booleanNode((Boolean) v);
  }

  private static boolean encodable(DataType type) {
    return integralRank(type) > 0
        || type instanceof FloatType
        || type instanceof DoubleType
        || type instanceof DecimalType
        || type instanceof StringType
        || type instanceof BinaryType
        || type instanceof BooleanType
        || type instanceof DateType
        || type instanceof TimestampType
        || type instanceof TimestampNTZType;
  }

  private static ObjectNode op(String name) {
    ObjectNode out = NODES.objectNode();
    out.put("op", name);
    return out;
  }

  private static final class Column {
    final String name;
    final DataType type;
    final String fold;

    Column(String name, DataType type, String fold) {
      this.name = name;
      this.type = type;
      this.fold = fold;
    }

    ObjectNode leaf(String name) {
      ObjectNode out = op(name);
      out.put("col", this.name);
      out.put("type", type.simpleString());
      if (fold != null) {
        out.put("fold", fold);
      }
      return out;
    }
  }
}
