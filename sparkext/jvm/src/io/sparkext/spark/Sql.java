package io.sparkext.spark;

import java.util.Locale;
import java.util.Set;

/** The little of SQL's lexical structure the parser needs before Spark's own parser runs. */
final class Sql {
  static final String NAMESPACE = "sparkext";

  private Sql() {}

  /** Whether {@code sql} is a {@code CALL sparkext.<name>} statement (comments and case aside). */
  static boolean isSparkextCall(String sql) {
    int i = skipBlank(sql, 0);
    if (!wordAt(sql, i, "call")) {
      return false;
    }
    i = skipBlank(sql, i + 4);
    boolean quoted = i < sql.length() && sql.charAt(i) == '`';
    int nameStart = quoted ? i + 1 : i;
    if (!wordAt(sql, nameStart, NAMESPACE)) {
      return false;
    }
    i = nameStart + NAMESPACE.length();
    if (quoted) {
      if (i >= sql.length() || sql.charAt(i) != '`') {
        return false;
      }
      i++;
    }
    i = skipBlank(sql, i);
    return i < sql.length() && sql.charAt(i) == '.';
  }

  /** The statements about skipping indexes that the Python driver runs. */
  enum IndexStatement {
    CREATE,
    DROP,
    SHOW
  }

  /** The index types of {@code CREATE INDEX ... USING <type>} that are sparkext's. */
  static final Set<String> INDEX_TYPES =
      Set.of(
          "bloom_filter",
          "bitmap",
          "bloom_range_filter",
          "token_bloom_filter",
          "token_bitmap",
          "ngram_bloom_filter",
          "ngram_bitmap");

  /**
   * Which index statement {@code sql} starts with ({@code CREATE INDEX}, {@code DROP INDEX},
   * {@code SHOW INDEX} or {@code SHOW INDEXES}, comments and case aside), or null.
   */
  static IndexStatement indexStatement(String sql) {
    int i = skipBlank(sql, 0);
    IndexStatement kind;
    if (wordAt(sql, i, "create")) {
      kind = IndexStatement.CREATE;
    } else if (wordAt(sql, i, "drop")) {
      kind = IndexStatement.DROP;
    } else if (wordAt(sql, i, "show")) {
      kind = IndexStatement.SHOW;
    } else {
      return null;
    }
    int next = skipBlank(sql, i + kind.name().length());
    if (wordAt(sql, next, "index")) {
      return kind;
    }
    return kind == IndexStatement.SHOW && wordAt(sql, next, "indexes") ? kind : null;
  }

  /**
   * Whether {@code sql} says {@code USING <type>} outside parentheses with one of sparkext's
   * index types: Spark's own {@code CREATE INDEX} (tables that support indexes, JDBC ones)
   * names others.
   */
  static boolean usesSkippingIndex(String sql) {
    int n = sql.length();
    int depth = 0;
    boolean afterUsing = false;
    int i = skipBlank(sql, 0);
    while (i < n) {
      char c = sql.charAt(i);
      String word = null;
      if (c == '\'' || c == '"') {
        i = endOfString(sql, i);
      } else if (c == '`') {
        int end = sql.indexOf('`', i + 1);
        while (end >= 0 && end + 1 < n && sql.charAt(end + 1) == '`') {
          end = sql.indexOf('`', end + 2);
        }
        end = end < 0 ? n : end;
        word = sql.substring(i + 1, end).replace("``", "`");
        i = end + 1;
      } else if (isIdentifierPart(c)) {
        int start = i;
        while (i < n && isIdentifierPart(sql.charAt(i))) {
          i++;
        }
        word = sql.substring(start, i);
        if (depth == 0 && word.equalsIgnoreCase("using")) {
          afterUsing = true;
          i = skipBlank(sql, i);
          continue;
        }
      } else {
        depth += c == '(' ? 1 : c == ')' ? -1 : 0;
        i++;
      }
      if (afterUsing && word != null && INDEX_TYPES.contains(word.toLowerCase(Locale.ROOT))) {
        return true;
      }
      afterUsing = false;
      i = skipBlank(sql, i);
    }
    return false;
  }

  /** The index just after the string literal starting at {@code i} (backslash escapes). */
  private static int endOfString(String sql, int i) {
    char quote = sql.charAt(i);
    int n = sql.length();
    for (int j = i + 1; j < n; j++) {
      char c = sql.charAt(j);
      if (c == '\\') {
        j++;
      } else if (c == quote) {
        return j + 1;
      }
    }
    return n;
  }

  /** A cheap test before walking a parsed plan: can {@code sql} name a sparkext routine at all? */
  static boolean mentionsSparkext(String sql) {
    return sql.toLowerCase(Locale.ROOT).contains(NAMESPACE);
  }

  /** The first index at or after {@code i} that is neither white space nor inside a comment. */
  static int skipBlank(String sql, int i) {
    int n = sql.length();
    while (i < n) {
      char c = sql.charAt(i);
      if (Character.isWhitespace(c)) {
        i++;
      } else if (c == '-' && i + 1 < n && sql.charAt(i + 1) == '-') {
        int end = sql.indexOf('\n', i);
        i = end < 0 ? n : end + 1;
      } else if (c == '/' && i + 1 < n && sql.charAt(i + 1) == '*') {
        i = endOfBracketedComment(sql, i);
      } else {
        return i;
      }
    }
    return n;
  }

  /** Spark's bracketed comments nest. */
  private static int endOfBracketedComment(String sql, int i) {
    int depth = 0;
    int n = sql.length();
    while (i < n) {
      if (sql.startsWith("/*", i)) {
        depth++;
        i += 2;
      } else if (sql.startsWith("*/", i)) {
        depth--;
        i += 2;
        if (depth == 0) {
          return i;
        }
      } else {
        i++;
      }
    }
    return n;
  }

  private static boolean wordAt(String sql, int i, String word) {
    int end = i + word.length();
    return end <= sql.length()
        && sql.regionMatches(true, i, word, 0, word.length())
        && (end == sql.length() || !isIdentifierPart(sql.charAt(end)));
  }

  private static boolean isIdentifierPart(char c) {
    return Character.isLetterOrDigit(c) || c == '_';
  }
}
