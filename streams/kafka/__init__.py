"""Kafka as every component meets it: one factory per client kind (:mod:`.clients`) and the
topics of the catalogue ``schemas.topics`` made real (:mod:`.topics`)."""
