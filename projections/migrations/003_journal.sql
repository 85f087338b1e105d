-- The execution gateway: dispatches (from the actions topic) and the action journal (from the
-- journal topic, keyed by run id, so one run's records are ordered by their offset).

-- ActionDispatched: the gate handed the action to the gateway (counted: actions_dispatched).
CREATE TABLE dispatches (
    action_id        text   PRIMARY KEY,
    run_id           text   NOT NULL,
    kind             text   NOT NULL,
    scope_key        text   NOT NULL,
    side             text   NOT NULL,
    quantity         text,
    notional         text,
    instrument       text,
    account          text,
    expires_at_ms    bigint,
    requested_at_ms  bigint NOT NULL,
    dispatched_at_ms bigint NOT NULL
);
CREATE INDEX dispatches_run_id ON dispatches (run_id);

-- ActionIntended: the exact authorized parameters, before any attempt.
CREATE TABLE journal_intents (
    action_id           text   PRIMARY KEY,
    run_id              text   NOT NULL,
    slot                text   NOT NULL,
    client_order_id     text   NOT NULL,
    side                text,
    quantity            text,
    notional            text,
    limit_price         text,
    instrument          text   NOT NULL,
    venue               text   NOT NULL,
    account             text   NOT NULL,
    environment         text   NOT NULL,
    expires_at_ms       bigint NOT NULL,
    authorized_until_ms bigint,
    depends_on          text,
    sized_from_json     text,
    recv_window_ms      bigint NOT NULL,
    quiet_period_ms     bigint NOT NULL,
    intended_at_ms      bigint NOT NULL
);
CREATE INDEX journal_intents_run_id ON journal_intents (run_id);

-- AttemptStarted: dispatch-start, committed before the request may leave.
CREATE TABLE journal_attempts (
    action_id        text   NOT NULL,
    attempt          bigint NOT NULL,
    run_id           text   NOT NULL,
    slot             text   NOT NULL,
    client_order_id  text   NOT NULL,
    request_json     text   NOT NULL,
    attempted_at_ms  bigint NOT NULL,
    recv_window_ms   bigint NOT NULL,
    send_by_ms       bigint NOT NULL,
    absence_after_ms bigint NOT NULL,
    owner_instance   text   NOT NULL,
    owner_generation bigint NOT NULL,
    reason           text   NOT NULL,
    PRIMARY KEY (action_id, attempt)
);
CREATE INDEX journal_attempts_run_id ON journal_attempts (run_id);

-- ReceiptRecorded: every receipt (a receipt never overwrites an earlier one).
CREATE TABLE journal_receipts (
    src_partition     integer NOT NULL,
    src_offset        bigint  NOT NULL,
    action_id         text    NOT NULL,
    run_id            text    NOT NULL,
    slot              text    NOT NULL,
    attempt           bigint  NOT NULL,
    client_order_id   text    NOT NULL,
    outcome           text    NOT NULL,
    venue_order_id    text,
    status            text,
    executed_quantity text,
    fills_json        text,
    source            text    NOT NULL,
    queried_at_ms     bigint,
    observed_at_ms    bigint  NOT NULL,
    conflict          text,
    error_code        text,
    detail            text,
    recorded_at_ms    bigint  NOT NULL,
    PRIMARY KEY (src_partition, src_offset)
);
CREATE INDEX journal_receipts_action ON journal_receipts (action_id);
CREATE INDEX journal_receipts_run_id ON journal_receipts (run_id);

-- ActionHeld and HoldResolved (an audit record per hold).
CREATE TABLE journal_holds (
    action_id     text   NOT NULL,
    held_since_ms bigint NOT NULL,
    run_id        text   NOT NULL,
    slot          text   NOT NULL,
    attempt       bigint NOT NULL,
    owner         text   NOT NULL,
    reason        text   NOT NULL,
    detail        text   NOT NULL,
    PRIMARY KEY (action_id, held_since_ms)
);
CREATE TABLE journal_hold_resolutions (
    action_id      text   NOT NULL,
    held_since_ms  bigint NOT NULL,
    run_id         text   NOT NULL,
    resolution     text   NOT NULL,
    resolved_by    text   NOT NULL,
    reason         text   NOT NULL,
    held_reason    text   NOT NULL,
    resolved_at_ms bigint NOT NULL,
    PRIMARY KEY (action_id, held_since_ms)
);

-- ActionExpired: never sent (counted: expired_before_send, for that reason).
CREATE TABLE journal_expirations (
    action_id           text   PRIMARY KEY,
    run_id              text   NOT NULL,
    slot                text   NOT NULL,
    reason              text   NOT NULL,
    attempts            bigint NOT NULL,
    expires_at_ms       bigint NOT NULL,
    authorized_until_ms bigint,
    checked_at_ms       bigint NOT NULL
);

-- RunCheckpointed: the run's checkpoint history.
CREATE TABLE journal_checkpoints (
    run_id             text   NOT NULL,
    sequence           bigint NOT NULL,
    checkpoint_id      text   NOT NULL,
    workflow_revision  bigint NOT NULL,
    completed_json     text   NOT NULL,
    next_tasks         text[] NOT NULL,
    checkpointed_at_ms bigint NOT NULL,
    PRIMARY KEY (run_id, sequence)
);

-- RecoveryStarted and RecoveryReceiptRecorded.
CREATE TABLE journal_recoveries (
    recovery_id           text   PRIMARY KEY,
    run_id                text   NOT NULL,
    requested_by          text   NOT NULL,
    reason                text   NOT NULL,
    journal_origin        text   NOT NULL,
    owner_instance        text   NOT NULL,
    owner_generation      bigint NOT NULL,
    checkpoint_id         text,
    records_consulted     text[] NOT NULL,
    routed_to_lookup      text[] NOT NULL,
    absence_not_before_ms bigint,
    supersedes            text,
    started_at_ms         bigint NOT NULL
);
CREATE INDEX journal_recoveries_run_id ON journal_recoveries (run_id);
CREATE TABLE journal_recovery_receipts (
    recovery_id            text   PRIMARY KEY,
    run_id                 text   NOT NULL,
    checkpoint_id          text,
    records_consulted      text[] NOT NULL,
    evidence_json          text   NOT NULL,
    next_permitted         text[] NOT NULL,
    checkpoint_advanced_to text,
    held                   text[] NOT NULL,
    recorded_at_ms         bigint NOT NULL
);
CREATE INDEX journal_recovery_receipts_run_id ON journal_recovery_receipts (run_id);

-- The current status of each action; rank = [offset on the journal topic].
CREATE TABLE action_status (
    action_id text     PRIMARY KEY,
    run_id    text     NOT NULL,
    slot      text     NOT NULL,
    status    text     NOT NULL,
    at_ms     bigint   NOT NULL,
    rank      bigint[] NOT NULL
);
CREATE INDEX action_status_status ON action_status (status);
CREATE INDEX action_status_run_id ON action_status (run_id);
