"""The suite's performance records in a centre's time-series database
(VictoriaMetrics), beside the perflogs, which stay the source of truth:

- :mod:`.series`: what a record becomes (metric names, labels, companion
  series) and back: the one home of that mapping;
- :mod:`.push`: the ``json_formatter`` of ReFrame's ``httpjson`` perflog
  handler that sends each record, and keeps what it cannot send;
- :mod:`.read`: a system's history read back (``hpcml report --tsdb``).

The site setting is ``HPCML_TSDB_URL`` (:data:`.push.URL_ENV`).
"""
