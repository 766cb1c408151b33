package io.sparkext.spark;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import javax.crypto.SecretKeyFactory;
import javax.crypto.spec.PBEKeySpec;
import javax.security.sasl.AuthenticationException;
import org.apache.hive.service.auth.PasswdAuthenticationProvider;
import org.apache.hive.service.auth.TSetIpAddressProcessor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code sparkext-sql serve --auth password}: HiveServer2's CUSTOM authentication against a file of
 * salted PBKDF2-HMAC-SHA256 hashes that {@code sparkext-sql serve --add-user} writes.
 *
 * <p>One line per user: {@code name:$pbkdf2-sha256$<iterations>$<salt>$<hash>} (salt and hash in
 * base64). The file's path is the system property {@code sparkext.serve.password-file} (Hive
 * builds this class with a configuration of its own, not the server's). The file is read again
 * when it changes, so users added or removed while the server runs take effect at their next
 * login. A refused login gets the client's standard "Error validating the login" and one line in
 * the server's log that names the user, never the password.
 */
public final class PasswordFile implements PasswdAuthenticationProvider {
  static final String PATH_PROPERTY = "sparkext.serve.password-file";
  private static final String SCHEME = "pbkdf2-sha256";
  private static final Logger LOG = LoggerFactory.getLogger("io.sparkext.serve");
  private static final Object LOCK = new Object();
  private static Path loadedPath;
  private static long loadedModified = Long.MIN_VALUE;
  private static long loadedSize = -1;
  private static Map<String, String[]> users = new HashMap<>();
  // Compared against when the user is unknown, so a refusal takes as long either way.
  private static final String[] NOBODY = {
    "600000", "c3BhcmtleHQtbm9ib2R5", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
  };

  @Override
  public void Authenticate(String user, String password) throws AuthenticationException {
    String[] entry;
    try {
      entry = entries().get(user);
    } catch (IOException unreadable) {
      LOG.error("sparkext serve: the password file cannot be read ({}); every login is refused",
          unreadable.getMessage());
      throw new AuthenticationException("Error validating the login");
    }
    boolean known = entry != null;
    boolean matches = verify(known ? entry : NOBODY, password == null ? "" : password);
    if (!known || !matches) {
      String from = TSetIpAddressProcessor.getUserIpAddress();
      LOG.warn("sparkext serve: login refused for user '{}'{} ({})", user,
          from == null ? "" : " from " + from, known ? "wrong password" : "no such user");
      throw new AuthenticationException("Error validating the login");
    }
  }

  private static Map<String, String[]> entries() throws IOException {
    String configured = System.getProperty(PATH_PROPERTY);
    if (configured == null || configured.isEmpty()) {
      throw new IOException("the system property " + PATH_PROPERTY + " is not set");
    }
    Path path = Paths.get(configured);
    synchronized (LOCK) {
      long modified = Files.getLastModifiedTime(path).toMillis();
      long size = Files.size(path);
      if (!path.equals(loadedPath) || modified != loadedModified || size != loadedSize) {
        users = parse(Files.readAllLines(path, StandardCharsets.UTF_8));
        loadedPath = path;
        loadedModified = modified;
        loadedSize = size;
      }
      return users;
    }
  }

  /** Lines {@code name:$pbkdf2-sha256$iterations$salt$hash}; blank lines and # comments skipped. */
  static Map<String, String[]> parse(List<String> lines) {
    Map<String, String[]> parsed = new HashMap<>();
    for (String line : lines) {
      String text = line.trim();
      int colon = text.lastIndexOf(':');
      if (text.isEmpty() || text.startsWith("#") || colon <= 0) {
        continue;
      }
      String[] parts = text.substring(colon + 1).split("\\$");
      if (parts.length == 5 && parts[0].isEmpty() && parts[1].equals(SCHEME)) {
        parsed.put(text.substring(0, colon), new String[] {parts[2], parts[3], parts[4]});
      }
    }
    return parsed;
  }

  private static boolean verify(String[] entry, String password) {
    try {
      int iterations = Integer.parseInt(entry[0]);
      byte[] salt = Base64.getDecoder().decode(entry[1]);
      byte[] expected = Base64.getDecoder().decode(entry[2]);
      PBEKeySpec spec =
          new PBEKeySpec(password.toCharArray(), salt, iterations, expected.length * 8);
      byte[] actual =
          SecretKeyFactory.getInstance("PBKDF2WithHmacSHA256").generateSecret(spec).getEncoded();
      spec.clearPassword();
      return MessageDigest.isEqual(expected, actual);
    } catch (GeneralSecurityException | IllegalArgumentException malformed) {
      return false;
    }
  }
}
