package io.sparkext.spark;

/**
 * A statement sparkext refuses before Spark reads it, with its one sentence: the parser cannot
 * throw it (Spark's parser interface declares only {@code ParseException}), so {@link
 * RoutineRule} raises it when the analyser reaches it, as it raises a routine's refusal.
 */
final class RefusedStatement extends HeldStatement {
  private static final long serialVersionUID = 1L;

  private final String sentence;

  RefusedStatement(String sentence) {
    this.sentence = sentence;
  }

  String sentence() {
    return sentence;
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    if (n == 0) {
      return sentence;
    }
    throw new IndexOutOfBoundsException(String.valueOf(n));
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof RefusedStatement;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof RefusedStatement
        && ((RefusedStatement) other).sentence.equals(sentence);
  }

  @Override
  public int hashCode() {
    return sentence.hashCode();
  }

  @Override
  public String simpleString(int maxFields) {
    return "refused by sparkext";
  }
}
