package io.sparkext.spark;

import java.util.Locale;

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
