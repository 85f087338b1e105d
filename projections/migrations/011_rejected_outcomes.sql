-- `sluicegate projections prune` looks for occurrences the processor never admitted (every
-- delivery rejected) in admission-key order: this index holds only the rejected outcomes, so
-- the look reads those instead of every outcome.
CREATE INDEX delivery_outcomes_rejected ON delivery_outcomes (admission_key)
    WHERE outcome = 'rejected';
