-- ingest_cdc: Debezium change events of the MySQL table shop.orders, as Kafka Connect's S3 sink
-- lands them (JSON lines, one file per day), into an Iceberg merge-on-read table.
-- Needs the example data: sparkext-demo --data /tmp/sparkext-examples (run it again to start
-- over: it rewrites the files and clears the checkpoint).
DROP TABLE IF EXISTS lake.ods.orders PURGE;
CALL sparkext.ingest_cdc(
  table => 'lake.ods.orders',
  source => '/tmp/sparkext-examples/shop.orders',   -- a directory (read recursively) or a glob
  checkpoint => '/tmp/sparkext-examples/checkpoints/orders',
  primary_key => 'id',                               -- needed to create the table (or Kafka keys)
  create => true,
  options => map('source-table', 'shop.orders', 'max-files-per-batch', '1'));
SELECT id, customer, status, amount, _cdc_op, _cdc_event_time FROM lake.ods.orders ORDER BY id;
-- what was rejected, and why: <checkpoint>/rejected/batch=N/, JSON
SELECT reject, source_file FROM json.`/tmp/sparkext-examples/checkpoints/orders/rejected`;
