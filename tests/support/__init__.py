"""What the tests share: isolated topics and settings on the real broker (:mod:`.kafka`), the
admission processor in threads with a controllable clock (:mod:`.admission`), the cores'
builders (:mod:`.core`, :mod:`.gate`, :mod:`.journal`), a toy app for the engine
(:mod:`.engine_toy`), fault injection on the real client (:mod:`.faults`), the ingest and venue
set-ups (:mod:`.ingest`, :mod:`.venue`) and projection histories made by the real core
(:mod:`.history`, with :mod:`.memory_projection`). Nothing here is collected as tests."""
