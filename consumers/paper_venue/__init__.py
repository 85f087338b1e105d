"""The paper venue: a separate process with durable state that stands in for an exchange.

It speaks a subset of the Binance Spot REST API with Binance's semantics (signed requests,
``timestamp``/``recvWindow``, client order ids unique among open orders only, Binance's error
codes) and a native JSON API of its own under ``/paper/v1/account``, plus an admin API for
drills (prices, faults, the full order book and trade log, reset).

This package imports nothing from the product (only the standard library and aiohttp), so it
can outlive, and never share a bug with, the gateway it is testing. A unit test checks that on
the source.
"""
