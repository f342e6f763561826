"""What the perflogs and the results DB say per system over time: a table
per workload x system:partition x case, a score against a saved baseline,
comparisons of two systems or two sessions, and figures (PNG and one
self-contained HTML page).

- :mod:`.history` reads the results (perflogs by field name, every header
  generation; ReFrame's results DB) and says what a case is;
- :mod:`.analysis` makes the table, the score and the baselines;
- :mod:`hpctestlib_ml.changes` and :mod:`.causes` flag a case's changes and name what
  changed with them; :mod:`.nodes` names the slow node of a node sweep;
- :mod:`.plots` draws; :mod:`.render` writes text and HTML.

The command, ``hpcml report``, is :mod:`hpctestlib_ml.commands.report`.
"""
