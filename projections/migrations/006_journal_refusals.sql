-- DispatchRefused: a dispatch of a run the gateway keeps no journal of, read an hour or more
-- after its send horizon, refused without a journal (counted: dispatches_refused, once per
-- action, however often it was read again).
CREATE TABLE journal_refusals (
    action_id           text   PRIMARY KEY,
    run_id              text   NOT NULL,
    kind                text   NOT NULL,
    reason              text   NOT NULL,
    expires_at_ms       bigint NOT NULL,
    authorized_until_ms bigint,
    send_horizon_ms     bigint NOT NULL,
    dispatched_at_ms    bigint NOT NULL,
    refused_at_ms       bigint NOT NULL
);
