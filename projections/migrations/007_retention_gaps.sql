-- Offsets of a source partition that left the topic's retention while the projector was
-- positioned before them (stopped, or behind): the read model lacks whatever records they
-- held. Written in the transaction that moves the stored offset over them.
CREATE TABLE retention_gaps (
    src_topic     text   NOT NULL,
    src_partition int    NOT NULL,
    first_offset  bigint NOT NULL,
    end_offset    bigint NOT NULL,
    PRIMARY KEY (src_topic, src_partition, first_offset)
);
