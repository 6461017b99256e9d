"""I/O at the edge: HTTP scrape of engine ``/metrics`` and exposition parsing.

* :mod:`advisor.sources.scrape` — ``scrape(url, session) -> ScrapeResult`` (never raises for network
  problems; failures carry a reason from ``advisor.conventions.SCRAPE_ERROR_REASONS``).
* :mod:`advisor.sources.exposition` — ``parse_exposition(text, keep) -> {sample name: [Sample]}``
  (raises ``advisor.errors.ParseError``).
"""
