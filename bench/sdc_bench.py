"""The false alarms of the check of silent data corruption, from the
unchanged runs of bench/sdc_runs.sh: how many runs passed, how many named
a wrong answer (each a false alarm: nothing was changed), how many
answers the runs computed (one: every run, rank, node and repetition bit
for bit), whether the judged runs were held against the known-good
digest the first ones gave, and what a run cost (the check's answer_s,
and the session's seconds per run: the cluster runs one 2-node job at a
time, so that ReFrame's own job time would count the queue).

    .venv/bin/python bench/sdc_bench.py OUT_DIR [--json FILE]
"""
import argparse
import collections
import json
import pathlib
import re
import statistics
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hpctestlib_ml.report import history  # noqa: E402


def session_seconds(out):
    '''Label (history, judged) -> the seconds its session took
    (sessions.log).'''
    found = {}
    for line in (out / 'sessions.log').read_text().splitlines():
        match = re.match(r'(\w+) .*: exit \d+, (\d+) s$', line)
        if match:
            found[match.group(1)] = int(match.group(2))
    return found


def summary(out):
    '''What the sessions of *out* (bench/sdc_runs.sh's OUT_DIR) show.'''
    found = {'sessions': (out / 'sessions.log').read_text().splitlines()}
    digests = collections.Counter()
    took = session_seconds(out)
    for label in ('history', 'judged'):
        runs = sorted(history.read_perflogs([out / label / 'perflogs']).runs,
                      key=lambda r: r.time)
        named = [r for r in runs if r.params.get('wrong_answer')]
        seconds = [r.metrics['answer_s'].value for r in runs
                   if 'answer_s' in r.metrics]
        for r in runs:
            digests[r.params.get('answer_digest') or '(none)'] += 1
        found[label] = {
            'runs': len(runs),
            'passed': sum(r.result == 'pass' for r in runs),
            'wrong_answers_named': len(named),
            'named': [r.params['wrong_answer'] for r in named],
            'nodes': sorted({r.params.get('job_nodelist', '') for r in runs}),
            'answer_s_median': statistics.median(seconds) if seconds else None,
            'answer_s_max': max(seconds) if seconds else None,
            'session_s': took.get(label),
            'session_s_per_run': (took[label] / len(runs)
                                  if runs and label in took else None),
        }
    found['digests'] = dict(digests)
    written = (out / 'references.out').read_text()
    found['known_good'] = [line.strip() for line in written.splitlines()
                           if 'known-good answer' in line]
    return found


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('out', type=pathlib.Path,
                   help="bench/sdc_runs.sh's OUT_DIR")
    p.add_argument('--json', type=pathlib.Path, help='write the figures')
    args = p.parse_args(argv)
    found = summary(args.out)
    for line in found['sessions']:
        print(f'session {line}')
    for line in found['known_good']:
        print(line)
    print(f'{"session":<8} {"runs":>4} {"passed":>6} {"named":>5} '
          f'{"answer_s median/max":>20} {"session s (per run)":>20}  nodes')
    for label in ('history', 'judged'):
        s = found[label]
        answer = (f'{s["answer_s_median"]:.3f}/{s["answer_s_max"]:.3f}'
                  if s['answer_s_median'] is not None else '-')
        job = (f'{s["session_s"]} ({s["session_s_per_run"]:.1f})'
               if s['session_s_per_run'] is not None else '-')
        print(f'{label:<8} {s["runs"]:>4} {s["passed"]:>6} '
              f'{s["wrong_answers_named"]:>5} {answer:>20} {job:>20}  '
              f'{", ".join(s["nodes"])}')
        for line in s['named']:
            print(f'  named: {line}')
    total = sum(found[label]['runs'] for label in ('history', 'judged'))
    alarms = sum(found[label]['wrong_answers_named']
                 for label in ('history', 'judged'))
    print(f'{total} unchanged runs: {alarms} false alarms (wrong answers '
          f'named); answers computed: ' + ', '.join(
              f'{d} x{n}' for d, n in sorted(found['digests'].items())))
    if args.json:
        args.json.write_text(json.dumps(found, indent=1) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
