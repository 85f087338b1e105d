-- The supersession gate's read model: one row per candidate (its times and its outcome), each
-- candidate's terminal outcome once (the counts), and each scope's current generation per kind.

CREATE TABLE candidates (
    candidate_id         text     PRIMARY KEY,
    run_id               text     NOT NULL,
    admission_key        text     NOT NULL,
    scope_key            text     NOT NULL,
    kind                 text     NOT NULL,
    generation           text     NOT NULL,
    generation_kind      text     NOT NULL,
    expires_at_ms        bigint,
    source_time_ms       bigint   NOT NULL,
    enqueued_at_ms       bigint   NOT NULL,
    dequeued_at_ms       bigint,
    proposed_at_ms       bigint   NOT NULL,
    final_at_ms          bigint,
    current_generation   text,
    outcome              text     NOT NULL,
    reason               text,
    rank                 bigint[] NOT NULL
);
CREATE INDEX candidates_by_run ON candidates (run_id);
CREATE INDEX candidates_by_scope ON candidates (scope_key, outcome);

CREATE TABLE candidate_outcomes (
    candidate_id         text   PRIMARY KEY,
    run_id               text   NOT NULL,
    scope_key            text   NOT NULL,
    kind                 text   NOT NULL,
    outcome              text   NOT NULL,
    reason               text,
    generation           text   NOT NULL,
    current_generation   text,
    decided_at_ms        bigint NOT NULL
);
CREATE INDEX candidate_outcomes_by_scope ON candidate_outcomes (scope_key, decided_at_ms);

CREATE TABLE scope_generations (
    scope_key            text     NOT NULL,
    kind                 text     NOT NULL,
    generation           text     NOT NULL,
    generation_kind      text     NOT NULL,
    candidate_id         text     NOT NULL,
    accepted_at_ms       bigint   NOT NULL,
    rank                 bigint[] NOT NULL,
    PRIMARY KEY (scope_key, kind)
);
