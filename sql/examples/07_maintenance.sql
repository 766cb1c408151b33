-- maintain: the table's policy lives in its properties (sparkext.maintenance.*); here the
-- newest two snapshots are kept and the max age is overridden for this call.
ALTER TABLE lake.db.events SET TBLPROPERTIES ('sparkext.maintenance.min-snapshots' = '2');
CALL sparkext.maintain(table => 'lake.db.events', options => map('snapshot-max-age', '1 ms'),
                       dry_run => true);
CALL sparkext.maintain(table => 'lake.db.events', options => map('snapshot-max-age', '1 ms'));
