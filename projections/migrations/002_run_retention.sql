-- RunAdmitted v2 carries the retention horizon the run was admitted under (NULL for runs
-- admitted by v1 processors).
ALTER TABLE runs ADD COLUMN retention_ms bigint;
