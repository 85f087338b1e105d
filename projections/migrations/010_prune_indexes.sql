-- `sluicegate projections prune` deletes an occurrence's rows by run id from every table that
-- names a run; these six had no index leading with it (the others have one, or a primary key
-- that starts with run_id). They hold a row per hold, expiry, refusal, gate decision or
-- rejected rerun, so the projector's cost of keeping them is small.
CREATE INDEX journal_holds_run_id ON journal_holds (run_id);
CREATE INDEX journal_hold_resolutions_run_id ON journal_hold_resolutions (run_id);
CREATE INDEX journal_expirations_run_id ON journal_expirations (run_id);
CREATE INDEX journal_refusals_run_id ON journal_refusals (run_id);
CREATE INDEX candidate_outcomes_run_id ON candidate_outcomes (run_id);
CREATE INDEX rerun_rejections_run_id ON rerun_rejections (run_id);
