package io.sparkext.spark;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Proxy;
import java.util.LinkedHashSet;
import java.util.Set;
import org.apache.spark.sql.catalyst.parser.ParserInterface;

/**
 * The session's parser as Spark and the libraries in it see it: {@link SparkextParser} for what
 * {@link ParserInterface} declares, and every other interface of the parser it wraps (Iceberg's
 * {@code ExtendedParser} with its {@code parseSortOrder}, Delta's, any other) answered by that
 * parser itself.
 *
 * <p>Iceberg finds its sort-order parser with {@code sessionState().sqlParser() instanceof
 * ExtendedParser}; a plain wrapper class hides it and breaks {@code rewrite_data_files}' sort and
 * Z-order strategies. A dynamic proxy implements whatever interfaces the wrapped parser does,
 * whichever order the extensions are configured in, without sparkext compiling against them.
 */
final class ParserFacade implements InvocationHandler {
  private final SparkextParser ours;
  private final ParserInterface delegate;

  private ParserFacade(SparkextParser ours, ParserInterface delegate) {
    this.ours = ours;
    this.delegate = delegate;
  }

  /** {@code ours} behind every public interface of {@code delegate}'s class. */
  static ParserInterface wrap(SparkextParser ours, ParserInterface delegate) {
    Set<Class<?>> interfaces = new LinkedHashSet<>();
    interfaces.add(ParserInterface.class);
    for (Class<?> c = delegate.getClass(); c != null; c = c.getSuperclass()) {
      collect(c, interfaces);
    }
    ClassLoader loader = delegate.getClass().getClassLoader();
    if (loader == null || !visible(loader, interfaces)) {
      loader = ParserFacade.class.getClassLoader();
      interfaces.removeIf(i -> !visibleFrom(ParserFacade.class.getClassLoader(), i));
    }
    return (ParserInterface)
        Proxy.newProxyInstance(
            loader, interfaces.toArray(new Class<?>[0]), new ParserFacade(ours, delegate));
  }

  /** Whether {@code parser} is sparkext's (a proxy of this class over a {@link SparkextParser}). */
  static boolean isOurs(Object parser) {
    return parser != null
        && Proxy.isProxyClass(parser.getClass())
        && Proxy.getInvocationHandler(parser) instanceof ParserFacade;
  }

  private static void collect(Class<?> type, Set<Class<?>> into) {
    for (Class<?> i : type.getInterfaces()) {
      if (Modifier.isPublic(i.getModifiers())) {
        into.add(i);
      }
      collect(i, into);
    }
  }

  private static boolean visible(ClassLoader loader, Set<Class<?>> interfaces) {
    for (Class<?> i : interfaces) {
      if (!visibleFrom(loader, i)) {
        return false;
      }
    }
    return true;
  }

  private static boolean visibleFrom(ClassLoader loader, Class<?> type) {
    try {
      return Class.forName(type.getName(), false, loader) == type;
    } catch (ClassNotFoundException absent) {
      return false;
    }
  }

  @Override
  public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
    if (method.getDeclaringClass() == Object.class) {
      switch (method.getName()) {
        case "equals":
          return proxy == args[0];
        case "hashCode":
          return System.identityHashCode(proxy);
        default:
          return "SparkextParser(" + delegate + ")";
      }
    }
    Object target = isParserInterfaceMethod(method) ? ours : delegate;
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException thrown) {
      throw thrown.getCause();
    }
  }

  private static boolean isParserInterfaceMethod(Method method) {
    try {
      ParserInterface.class.getMethod(method.getName(), method.getParameterTypes());
      return true;
    } catch (NoSuchMethodException notOurs) {
      return false;
    }
  }
}
