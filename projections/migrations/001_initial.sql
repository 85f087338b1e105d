-- The first read model: admission, branch slots, reruns, the event log and the counters.
-- Applied with search_path set to the deployment's schema; never edit once released (add a
-- new numbered file instead: the migrator refuses a changed checksum).
--
-- Rules every table follows, because the projector may apply an event more than once and
-- may interleave topics differently on a rebuild than it did live:
--   * "first" tables: one row per natural key, first event wins (INSERT ... DO NOTHING);
--   * "max" tables: one row per key, the row with the greatest `rank` wins (rank is
--     compared as an array, so it orders by lifecycle stage first and offset last).
-- Nothing here reads a clock: every value comes from an event, so a rebuild is identical.

CREATE TABLE meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- Next offset to read per source partition; written in the same transaction as the rows.
CREATE TABLE offsets (
    topic       text   NOT NULL,
    partition   int    NOT NULL,
    next_offset bigint NOT NULL,
    PRIMARY KEY (topic, partition)
);

-- Incremented only by rows a "first" table really inserted, so replays never double them.
CREATE TABLE counters (
    name  text   NOT NULL,
    label text   NOT NULL,
    value bigint NOT NULL,
    PRIMARY KEY (name, label)
);

-- Every decoded record of every source topic, for timelines and ad-hoc questions.
CREATE TABLE event_log (
    src_topic     text   NOT NULL,
    src_partition int    NOT NULL,
    src_offset    bigint NOT NULL,
    type          text   NOT NULL,
    key           text,
    run_id        text,
    admission_key text,
    delivery_id   text,
    subscription  text,
    environment   text,
    scope_key     text,
    time_ms       bigint,
    kafka_ts_ms   bigint,
    record        jsonb  NOT NULL,
    PRIMARY KEY (src_topic, src_partition, src_offset)
);
CREATE INDEX event_log_run_id ON event_log (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX event_log_admission_key ON event_log (admission_key);
CREATE INDEX event_log_delivery_id ON event_log (delivery_id) WHERE delivery_id IS NOT NULL;

-- Messages that could not be decoded: kept with the error, never silently dropped.
CREATE TABLE parked (
    src_topic     text   NOT NULL,
    src_partition int    NOT NULL,
    src_offset    bigint NOT NULL,
    key           text,
    error         text   NOT NULL,
    value         bytea,
    kafka_ts_ms   bigint,
    PRIMARY KEY (src_topic, src_partition, src_offset)
);

CREATE TABLE workflows (
    subscription            text     NOT NULL,
    environment             text     NOT NULL,
    revision                bigint   NOT NULL,
    slots                   text[]   NOT NULL,
    branch_timeout_ms       bigint   NOT NULL,
    retention_ms            bigint   NOT NULL,
    identity_event_id_field text,
    identity_derived_fields text[]   NOT NULL,
    immutable_fields        text[]   NOT NULL,
    validity_source_time    text     NOT NULL,
    validity_window_ms      bigint   NOT NULL,
    scope_fields            text[]   NOT NULL,
    scope_sequence_field    text,
    auth_token_env          text,
    auth_hmac_secret_env    text,
    definition_digest       text     NOT NULL,
    applied_at_ms           bigint   NOT NULL,
    PRIMARY KEY (subscription, environment, revision)
);

-- AdmitDelivery commands: every delivery attempt that reached the deliveries topic.
CREATE TABLE deliveries (
    delivery_id    text   PRIMARY KEY,
    subscription   text   NOT NULL,
    environment    text   NOT NULL,
    admission_key  text   NOT NULL,
    source         text   NOT NULL,
    event_id       text,
    payload_json   text   NOT NULL,
    received_at_ms bigint NOT NULL,
    channel        text   NOT NULL,
    src_partition  int    NOT NULL,
    src_offset     bigint NOT NULL
);
CREATE INDEX deliveries_admission_key ON deliveries (admission_key);

-- The processor's one outcome per delivery: admitted | deduplicated | conflict | rejected.
CREATE TABLE delivery_outcomes (
    delivery_id        text   PRIMARY KEY,
    admission_key      text   NOT NULL,
    run_id             text,
    outcome            text   NOT NULL,
    reason             text,
    detail             text,
    original_digest    text,
    conflicting_digest text,
    differing_fields   text[],
    received_at_ms     bigint,
    decided_at_ms      bigint NOT NULL
);
CREATE INDEX delivery_outcomes_admission_key ON delivery_outcomes (admission_key);
CREATE INDEX delivery_outcomes_run_id ON delivery_outcomes (run_id);

CREATE TABLE runs (
    run_id               text   PRIMARY KEY,
    admission_key        text   NOT NULL,
    delivery_id          text   NOT NULL,
    subscription         text   NOT NULL,
    environment          text   NOT NULL,
    workflow_revision    bigint NOT NULL,
    source               text   NOT NULL,
    event_id             text,
    content_digest       text   NOT NULL,
    source_time_ms       bigint NOT NULL,
    expires_at_ms        bigint NOT NULL,
    validity_source_time text   NOT NULL,
    validity_window_ms   bigint NOT NULL,
    slots                text[] NOT NULL,
    scope_key            text,
    sequence             text,
    payload_json         text   NOT NULL,
    rerun_number         bigint NOT NULL,
    rerun_of             text,
    rerun_reason         text,
    admitted_at_ms       bigint NOT NULL
);
CREATE INDEX runs_admission_key ON runs (admission_key);
CREATE INDEX runs_rerun_of ON runs (rerun_of) WHERE rerun_of IS NOT NULL;

-- Current status per run; rank = [offset on the runs topic] (one partition per run).
CREATE TABLE run_status (
    run_id          text     PRIMARY KEY,
    status          text     NOT NULL,
    previous_status text,
    changed_at_ms   bigint   NOT NULL,
    rank            bigint[] NOT NULL
);

-- BranchLaunched / BranchRelaunched from the tasks topic.
CREATE TABLE branch_launches (
    run_id            text   NOT NULL,
    slot              text   NOT NULL,
    kind              text   NOT NULL,
    attempt           bigint NOT NULL,
    admission_key     text   NOT NULL,
    workflow_revision bigint NOT NULL,
    expires_at_ms     bigint NOT NULL,
    timeout_at_ms     bigint NOT NULL,
    reason            text,
    at_ms             bigint NOT NULL,
    PRIMARY KEY (run_id, slot, kind, attempt)
);

-- Branch reports the processor accepted (re-emitted on the runs topic).
CREATE TABLE branch_reports (
    run_id        text   NOT NULL,
    slot          text   NOT NULL,
    kind          text   NOT NULL,
    attempt       bigint NOT NULL,
    admission_key text   NOT NULL,
    worker        text   NOT NULL,
    detail        text,
    at_ms         bigint NOT NULL,
    PRIMARY KEY (run_id, slot, kind, attempt)
);

-- Current state per (run, slot); rank = [terminal, attempt, stage, offset].
CREATE TABLE branch_slots (
    run_id        text     NOT NULL,
    slot          text     NOT NULL,
    admission_key text     NOT NULL,
    status        text     NOT NULL,
    attempt       bigint   NOT NULL,
    worker        text,
    detail        text,
    at_ms         bigint   NOT NULL,
    rank          bigint[] NOT NULL,
    PRIMARY KEY (run_id, slot)
);

CREATE TABLE rerun_requests (
    request_id      text   PRIMARY KEY,
    admission_key   text   NOT NULL,
    run_id          text   NOT NULL,
    reason          text   NOT NULL,
    requested_by    text   NOT NULL,
    requested_at_ms bigint NOT NULL
);
CREATE INDEX rerun_requests_run_id ON rerun_requests (run_id);

CREATE TABLE rerun_rejections (
    request_id    text   PRIMARY KEY,
    admission_key text   NOT NULL,
    run_id        text   NOT NULL,
    reason        text   NOT NULL,
    decided_at_ms bigint NOT NULL
);

CREATE TABLE evictions (
    admission_key text   PRIMARY KEY,
    run_ids       text[] NOT NULL,
    evicted_at_ms bigint NOT NULL
);
