-- Records a stream app could not decide, as the topic `dead-letters` holds them (for 30
-- days): the reason and origin its headers give, the original bytes when it carries them
-- (none for input records that left retention unread). Kept here for good.
CREATE TABLE dead_letters (
    src_topic     text   NOT NULL,
    src_partition int    NOT NULL,
    src_offset    bigint NOT NULL,
    key           text,
    reason        text   NOT NULL,
    origin        text   NOT NULL,
    value         bytea,
    kafka_ts_ms   bigint,
    PRIMARY KEY (src_topic, src_partition, src_offset)
);
