package io.sparkext.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

/**
 * The maps of an Iceberg {@code Metrics} from the JSON an executor computed for a file it wrote
 * ({@code sparkext.cdc.files.parquet_metrics}), built in one call: through py4j, each map entry
 * would be a call of its own (about 80 per file).
 */
public final class FileMetrics {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String[] COUNTS = {
    "column_sizes", "value_counts", "null_value_counts", "nan_value_counts"
  };
  private static final String[] BOUNDS = {"lower_bounds", "upper_bounds"};

  private FileMetrics() {}

  /**
   * Column sizes, value counts, null counts, NaN counts (field id to Long), then lower and upper
   * bounds (field id to ByteBuffer): the last six arguments of Iceberg's {@code Metrics}.
   */
  public static Object[] maps(String json) throws IOException {
    JsonNode root = JSON.readTree(json);
    Object[] out = new Object[COUNTS.length + BOUNDS.length];
    for (int i = 0; i < COUNTS.length; i++) {
      Map<Integer, Long> longs = new HashMap<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = root.path(COUNTS[i]).fields();
          it.hasNext(); ) {
        Map.Entry<String, JsonNode> entry = it.next();
        longs.put(Integer.valueOf(entry.getKey()), entry.getValue().asLong());
      }
      out[i] = longs;
    }
    for (int i = 0; i < BOUNDS.length; i++) {
      Map<Integer, ByteBuffer> buffers = new HashMap<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = root.path(BOUNDS[i]).fields();
          it.hasNext(); ) {
        Map.Entry<String, JsonNode> entry = it.next();
        byte[] bytes = Base64.getDecoder().decode(entry.getValue().asText());
        buffers.put(Integer.valueOf(entry.getKey()), ByteBuffer.wrap(bytes));
      }
      out[COUNTS.length + i] = buffers;
    }
    return out;
  }
}
