"""Venue adapters: the interface the execution gateway is written against, and two venues.

- :mod:`consumers.venue.adapter` — the interface and its value types (answers that say how
  much they prove: Accepted, Rejected, NotFound, Unknown).
- :mod:`consumers.venue.binance_spot` — Binance Spot REST (the paper venue here, or
  https://testnet.binance.vision, or production).
- :mod:`consumers.venue.paper` — the paper venue's native JSON API.
"""
