"""The slow node, named: a night's single-node runs of one case on one
partition (a node sweep, ``reframe --distribute=all``), each node's
headline figure scored against the partition's other nodes; and the
multi-node runs whose check named a slowest rank.

The score is the modified z-score of B. Iglewicz and D. C. Hoaglin ("How
to Detect and Handle Outliers", ASQC Basic References in Quality Control
16, 1993, section 3.2): ``M = 0.6745 (x - median) / MAD``, where 0.6745
makes the median absolute deviation (MAD) a standard deviation's
estimate for normal noise; they call ``|M| > 3.5`` a potential outlier.
Median and MAD, unlike the mean and standard deviation, are not dragged
by the outlier they are to find. Two changes for a partition of a few
nodes, each of which the score needs:

- *against the others*: a node's median and MAD are those of the
  partition's other nodes. With all nodes, two nodes always score
  +-0.6745 (the MAD is half their gap), and at three the outlier is half
  the sample its own scale comes from; with a partition of hundreds of
  nodes the two are the same;
- *a floor under the spread*: the others' spread (MAD / 0.6745, a
  standard deviation's estimate) is taken as at least :data:`MIN_SPREAD`
  of their median. A few nodes can agree by chance to a fraction of a
  percent, and a MAD of almost nothing would flag ordinary run-to-run
  noise (one other node has a MAD of 0). The floor is chosen on real
  sweeps (``bench/slow_node_bench.py``, :data:`MIN_SPREAD`); above it the
  score is Iglewicz and Hoaglin's.

The score is oriented so that below zero is slower: for a figure where
lower is better (step time) its sign is turned. A node is flagged when it
is slower than :data:`THRESHOLD` and, where its partition declares how far
its figures move with nothing changed (``extras['reference_noise_pct']``,
logged with every result), slower than the others by more than that: a
partition whose figures move by 25 % from run to run cannot tell a node
20 % slower from noise in one night's runs, however close the other nodes
happened to agree. :data:`THRESHOLD` and :data:`MIN_SPREAD` come from the
false alarms and detections measured on the project's Slurm cluster
(docs/guide/regression.md, "Slow nodes").

A node is a single-node run's :attr:`~hpctestlib_ml.report.history.Run.node`:
its ``job_nodelist``, else ReFrame's ``.nid``
parameter of ``--distribute`` in its name (ReFrame's ``squeue`` scheduler
may not learn the node of a short job). Several runs of one node in the
window count as their median. Any check joins with its headline figure
(:func:`hpctestlib_ml.report.analysis.headline`): the training checks'
declared ones, a component check's first rate.
"""
import dataclasses
import statistics

from hpctestlib_ml.history_refs.lookup import NOISE_FLOOR_EXTRA, noise_floor
from hpctestlib_ml.report.analysis import CaseFigure, group, headline

#: Iglewicz and Hoaglin's constant: 0.6745 x MAD estimates the standard
#: deviation of normal noise (the 0.75 quantile of the standard normal).
CONSISTENCY = 0.6745
#: Slower than this score is a slow node (Iglewicz and Hoaglin's 3.5).
#: Measured on the project's Slurm cluster (bench/README.md, "The slow
#: node"; CosmoFlow tiny, 200 steps): 36 unslowed 2-node sweeps flagged no
#: node (lowest score -1.36); a node held to 20, 50 and 80 % of a core
#: scored -16.2 .. -16.4, -9.9 .. -11.4 and -4.0 .. -4.6 (15 of 15
#: named, no other node flagged).
THRESHOLD = 3.5
#: The least spread (a standard deviation's estimate) assumed among nodes,
#: as a fraction of their median: 5 %. With 2 % an unslowed sweep scored
#: -3.41, 0.1 from the threshold; with 8 % the node at 80 % of a core
#: (21 % slower) scored only -2.51; 5 % keeps both clear (-1.36, -4.02).
MIN_SPREAD = 0.05
#: A night: a case's runs this far before its latest run are compared.
WINDOW = 12 * 3600


@dataclasses.dataclass
class NodeScore:
    node: str
    value: float            # median of the node's passing runs
    runs: int
    others: float           # median of the other nodes' figures
    score: float            # modified z-score, below 0: slower
    #: Slower than the others by no more than the partition's declared
    #: noise (:attr:`Sweep.noise`): never slow, whatever its score.
    within_noise: bool = False

    @property
    def deviation(self):
        '''The node's figure over the others' median, minus 1.'''
        return self.value / self.others - 1 if self.others else 0.0

    def slow(self, threshold=THRESHOLD):
        return self.score < -threshold and not self.within_noise


@dataclasses.dataclass
class Sweep(CaseFigure):
    '''A case's single-node runs on one partition in one window.'''
    start: float
    end: float
    nodes: list             # NodeScore, by node name
    failed: list            # nodes whose every run in the window failed
    #: The partition's declared noise (a fraction; ``reference_noise_pct``
    #: of its latest run), None where it declares none.
    noise: float = None

    def slow(self, threshold=THRESHOLD):
        return [n for n in self.nodes if n.slow(threshold)]


def modified_z(value, others, higher_is_better=True, min_spread=MIN_SPREAD):
    '''(score, others' median) of *value* against *others* (at least one):
    Iglewicz and Hoaglin's modified z-score with the others' median and
    MAD, the spread the MAD stands for (MAD / 0.6745) no smaller than
    *min_spread* of their median; below zero is worse in the figure's own
    direction.'''
    center = statistics.median(others)
    mad = statistics.median(abs(x - center) for x in others)
    return _score(value, center, mad, higher_is_better, min_spread), center


def _score(value, center, mad, higher_is_better, min_spread):
    scale = max(mad, CONSISTENCY * min_spread * abs(center))
    if scale == 0:
        return 0.0
    score = CONSISTENCY * (value - center) / scale
    return score if higher_is_better else -score


def _median_without(ordered, index):
    '''The median of *ordered* (sorted) without its element *index*, as
    :func:`statistics.median` computes it.'''
    half = (len(ordered) - 1) // 2

    def at(position):
        return ordered[position if position < index else position + 1]
    if len(ordered) % 2 == 0:           # an odd number left
        return at(half)
    return (at(half - 1) + at(half)) / 2


def others_median_and_mad(values):
    '''For each of *values* (at least two), the median and the MAD of the
    other values: what :func:`modified_z` computes against the others,
    for all of them in O(n log n) rather than O(n^2) (a sweep of 6,000
    nodes: 36 million differences). Removing one value leaves one of at
    most three medians (the value is below, at or above the middle); for
    each, the deviations of all values are sorted once and each value's
    own deviation left out the same way.'''
    order = sorted(range(len(values)), key=values.__getitem__)
    ordered = [values[i] for i in order]
    centers = [0.0] * len(values)
    for position, index in enumerate(order):
        centers[index] = _median_without(ordered, position)
    deviations = {}
    for center in set(centers):
        spread = [abs(x - center) for x in values]
        by_size = sorted(range(len(values)), key=spread.__getitem__)
        where = [0] * len(values)
        for position, index in enumerate(by_size):
            where[index] = position
        deviations[center] = ([spread[i] for i in by_size], where)
    found = []
    for index, center in enumerate(centers):
        spread, where = deviations[center]
        found.append((center, _median_without(spread, where[index])))
    return found


def score_nodes(figures, higher_is_better=True, min_spread=MIN_SPREAD):
    ''':class:`NodeScore` of each node of *figures* (node -> its values),
    against the others (:func:`modified_z`); [] with fewer than two
    nodes.'''
    medians = sorted((node, statistics.median(values))
                     for node, values in figures.items() if values)
    if len(medians) < 2:
        return []
    against = others_median_and_mad([value for _, value in medians])
    return [NodeScore(node, value, len(figures[node]), center,
                      _score(value, center, mad, higher_is_better,
                             min_spread))
            for (node, value), (center, mad) in zip(medians, against)]


def in_window(runs, window=WINDOW):
    '''The runs of the *window* seconds up to the latest one (a night).'''
    latest = max(r.time for r in runs)
    return [r for r in runs if r.time > latest - window]


def sweep(case_runs, chosen, min_spread=MIN_SPREAD):
    '''The :class:`Sweep` of one case's runs on one partition, for the
    :class:`~hpctestlib_ml.registry.Headline` *chosen*; None where fewer
    than two nodes ran it alone.'''
    figures, failed = {}, set()
    for run in case_runs:
        node = run.node
        if node is None or run.param_int('num_nodes') != 1:
            continue
        values = figures.setdefault(node, [])
        if run.result == 'pass' and chosen.metric in run.metrics:
            values.append(run.metrics[chosen.metric].value)
        elif run.result != 'pass':
            failed.add(node)
    scores = score_nodes(figures, chosen.higher_is_better, min_spread)
    if not scores:
        return None
    latest = case_runs[-1]
    noise = declared_noise(latest)
    for score in scores:
        score.within_noise = within_noise(score, noise,
                                          chosen.higher_is_better)
    unit = next((r.metrics[chosen.metric].unit for r in case_runs
                 if chosen.metric in r.metrics), '')
    return Sweep(latest.workload, latest.where, latest.name,
                 latest.params.get('resolved_size', ''), chosen.metric,
                 unit, case_runs[0].time, latest.time, scores,
                 sorted(n for n in failed if not figures[n]), noise)


def declared_noise(run):
    '''The noise *run*'s partition declared (``reference_noise_pct``, a
    fraction), None where it declared none. The check refused a value
    that is not a percentage before its job was queued, so one here is a
    damaged line: it declares nothing.'''
    try:
        return noise_floor(run.params.get(NOISE_FLOOR_EXTRA))
    except ValueError:
        return None


def within_noise(score, noise, higher_is_better=True):
    '''Whether the node of *score* is slower than the others by no more
    than *noise* (a fraction; None: no noise declared, False): its figure
    at least ``(1 - noise)`` times theirs, or at most ``(1 + noise)``
    times for a figure where lower is better, as history references bound
    a figure by the same noise.'''
    if noise is None or not score.others:
        return False
    ratio = score.value / score.others
    return ratio >= 1 - noise if higher_is_better else ratio <= 1 + noise


def sweeps(runs, headlines, window=WINDOW, min_spread=MIN_SPREAD):
    '''Each case's :class:`Sweep` over its latest *window* seconds, per
    system:partition (:attr:`~hpctestlib_ml.report.history.Run.
    case_here`), where at least two nodes ran it.'''
    found = []
    for (workload, *_), case_runs in sorted(
            group(runs, lambda r: r.case_here).items()):
        chosen = headline(workload, case_runs, headlines)
        if chosen is None:
            continue
        result = sweep(in_window(case_runs, window), chosen, min_spread)
        if result:
            found.append(result)
    return found


def slow_ranks(runs, window=WINDOW):
    '''The latest run of each multi-rank case in its latest *window*
    whose check named a slowest rank (``slowest_rank``, beyond the
    measured noise): [(run, text)].'''
    found = []
    for _, case_runs in sorted(group(runs, lambda r: r.case_here).items()):
        latest = in_window(case_runs, window)[-1]
        text = latest.params.get('slowest_rank') or ''
        if text and text not in ('None', 'null'):
            found.append((latest, text))
    return found
