"""Kafka adapters around the core: the workflow table every process reads
(:mod:`.workflow_table`), the front doors' delivery producer (:mod:`.deliveries`) and the
topics decoded for analysts (:mod:`.replay`)."""
