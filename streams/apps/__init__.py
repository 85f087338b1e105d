"""The stream apps: each one binds a pure core (``streams.core``) to its topics and runs on the
exactly-once engine (``streams.engine``). :mod:`.admission` is run admission."""
