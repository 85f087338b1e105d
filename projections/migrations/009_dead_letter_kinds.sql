-- What kind of failure each dead letter is, from its `sluicegate.kind` header: undecodable,
-- unrecordable, unread (input offsets that left retention) or moved (a partition read again
-- from its start). Dead letters written without the header (before 0.2.0) have ''.
ALTER TABLE dead_letters ADD COLUMN kind text NOT NULL DEFAULT '';
CREATE INDEX dead_letters_kind ON dead_letters (kind, src_topic, src_partition, src_offset);
