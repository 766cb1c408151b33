-- rewrite_equality_deletes on the table 02_ingest_cdc.sql wrote: the equality deletes of its two
-- commits become position deletes, so readers stop comparing rows with delete keys, and
-- table_health's live_rows (which cannot subtract equality deletes) is exact afterwards.
SELECT equality_delete_files, position_delete_files, live_rows
FROM sparkext.table_health('lake.ods.orders');
CALL sparkext.rewrite_equality_deletes(
  table => 'lake.ods.orders',
  options => map('min-equality-delete-files', '1'),
  dry_run => false);
SELECT equality_delete_files, position_delete_files, live_rows
FROM sparkext.table_health('lake.ods.orders');
