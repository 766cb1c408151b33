-- rewrite_equality_deletes on the table 02_ingest_cdc.sql wrote: its second commit's equality
-- deletes (keys 1, 2 and 4 changed on day two) become position deletes.
SELECT equality_delete_files, position_delete_files, live_rows, health_score
FROM sparkext.table_health('lake.ods.orders');
CALL sparkext.rewrite_equality_deletes(
  table => 'lake.ods.orders',
  options => map('min-equality-delete-files', '1'),
  dry_run => false);
SELECT equality_delete_files, position_delete_files, live_rows, health_score
FROM sparkext.table_health('lake.ods.orders');
