-- Reserved for the action journal's migration (the execution gateway's): its number is taken
-- so that the gate's tables (004) apply in order. Nothing to do here.
SELECT 1;
