"""MLPerf's compliance checker (``mlperf_logging.compliance_checker``) on a
training log, with its findings sorted by what they mean for the suite.

The suite's MLPerf-style programs run a fixed number of steps, on
synthetic data by default, and log as MLPerf's references do. The checker
applies a benchmark's whole rule set, so on such a run it also reports
what only a complete run on the benchmark's dataset can meet. Those
findings are :data:`RUN_LENGTH_RULES`; everything else (a missing or
misplaced event, a hyperparameter key or value other than the reference's)
is a violation.

Which rules: each MLPerf-style workload's declaration says
(:attr:`hpctestlib_ml.registry.Workload.mlperf_rules`, by the benchmark
its program names in the log).
"""
import dataclasses
import os
import tempfile

from hpctestlib_ml import registry
from hpctestlib_ml.parsers.mllog import MARKER


def rulesets():
    '''submission_benchmark -> (usage, ruleset) of the checker: the
    declarations' (:mod:`hpctestlib_ml.registry`).'''
    return {declared.benchmark: declared.mlperf_rules
            for declared in registry.registered().values()
            if declared.mlperf_rules}

#: Findings a short run or synthetic data cannot avoid, by the key the
#: checker files them under: the quality target ("at least one"
#: eval_accuracy/eval_error reaching it), and the sizes of the benchmark's
#: own dataset, which the closed rules fix (DeepCAM 121,266 / 15,158
#: samples, OpenFold 594,595 / 180) and OpenFold's initial checkpoint.
RUN_LENGTH_RULES = {
    'eval_accuracy': 'the quality target is reached only by a full run',
    'eval_error': 'the quality target is reached only by a full run',
    'train_samples': "the count of the benchmark's own training set",
    'eval_samples': "the count of the benchmark's own evaluation set",
    # OpenFold: MLPerf HPC's runs start from a checkpoint that comes with
    # the benchmark's data; the suite's start from initialised weights.
    'init_checkpoint_sha256sum': "the benchmark's initial checkpoint",
}


@dataclasses.dataclass
class Finding:
    key: str          # the log key the checker filed it under, or None
    message: str

    @property
    def run_length_only(self):
        '''Whether only a full run on the benchmark's data avoids it.'''
        if self.key in RUN_LENGTH_RULES:
            return True
        # Quality targets come without a key: "Failed checks for KEY : ...".
        return any(self.message.startswith(f'Failed checks for {key} ')
                   for key in ('eval_accuracy', 'eval_error'))


@dataclasses.dataclass
class Report:
    usage: str
    ruleset: str
    findings: list

    @property
    def violations(self):
        '''Findings a compliant log of any length would not have.'''
        return [f for f in self.findings if not f.run_length_only]

    @property
    def passed(self):
        '''Every rule met (a complete run on the benchmark's data).'''
        return not self.findings


def mllog_lines(text):
    '''The ``:::MLLOG`` lines of *text*, each from its marker on (the
    checker reads lines that start with it; launchers prefix lines).'''
    lines = []
    for line in text.splitlines():
        at = line.find(MARKER)
        if at >= 0:
            lines.append(line[at:])
    return lines


def check(text, benchmark=None, usage=None, ruleset=None):
    '''Run MLPerf's checker on the MLLOG lines of *text*; the rules are
    the benchmark's (from its ``submission_benchmark`` event where
    *benchmark* is None) unless *usage*/*ruleset* say otherwise.'''
    from mlperf_logging.compliance_checker import mlp_compliance
    lines = mllog_lines(text)
    if not lines:
        from hpctestlib_ml import triage
        why = triage.unrecognised(text) or ''
        if not why.startswith('the file is'):       # not empty, not binary
            why = (f'no {MARKER.strip()} line: give the output of an MLPerf '
                   f"program (the suite's {', '.join(sorted(rulesets()))})")
        raise ValueError(f'not an MLPerf log: {why}')
    if benchmark is None:
        benchmark = next((_value(line) for line in lines
                          if '"submission_benchmark"' in line), None)
    if usage is None or ruleset is None:
        try:
            usage, ruleset = rulesets()[benchmark]
        except KeyError:
            named = (f'names benchmark {benchmark!r}, whose rules are not '
                     f'known here' if benchmark else
                     'names no submission_benchmark')
            rules = {}
            for name, pair in sorted(rulesets().items()):
                rules.setdefault(pair, []).append(name)
            known = '; '.join(f'--usage {u} --ruleset {r} for '
                              f'{", ".join(names)}'
                              for (u, r), names in sorted(rules.items()))
            raise ValueError(f'the log {named}: pass --usage and --ruleset '
                             f'({known})') from None
    checker = mlp_compliance.make_checker(usage, ruleset, quiet=True,
                                          werror=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'mllog.log')
        with open(path, 'w') as fp:
            fp.write('\n'.join(lines) + '\n')
        _quietly(lambda: checker.check_file(
            path, f'{usage}_{ruleset}/common.yaml'))
    findings = ([Finding(key, msg) for key, msg in
                 checker.overwritable.items()] +
                [Finding(None, msg) for msg in checker.not_overwritable])
    return Report(usage, ruleset, findings)


def _value(line):
    import json
    try:
        return json.loads(line[len(MARKER):]).get('value')
    except ValueError:
        return None


def _quietly(call):
    '''*call* with the checker's logging (warnings per finding) silenced:
    the findings are returned instead.'''
    import logging
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.CRITICAL)
    try:
        return call()
    finally:
        root.setLevel(level)
