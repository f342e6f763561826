"""python bench/container_vs_bare.py OUT_DIR [CHECK]: the figures of
bench/container_vs_bare.sh's sessions, bare against container: each
figure's median over the passed cases of each, its range, the container's
median over the bare one's, and each pair's ratio (container over the bare
session just before it: the machine's load drifts less within a pair)."""
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent /
                       'tests'))
from perflog import read_perflog  # noqa: E402


def pair_figures(pair, check):
    '''{figure: value} of *check*'s passed case in session dir *pair*.'''
    found = {}
    for log in pair.glob(f'{check}/perflogs/*/*/{check}.log'):
        for row in read_perflog(log):
            if row['result'] != 'pass':
                continue
            for column, value in row.items():
                if column.endswith('_value'):
                    try:
                        found[column[:-len('_value')]] = float(value)
                    except ValueError:
                        pass
    return found


def main(out, check='CosmoFlow'):
    pairs = [(pair_figures(p, check), pair_figures(p, f'{check}Container'))
             for p in sorted(pathlib.Path(out).glob('p*'))]
    names = sorted(set.intersection(*(set(b) & set(c) for b, c in pairs)))
    print(f'{len(pairs)} pairs; per figure: bare median (range), container '
          f'median (range), ratio of medians, per-pair ratio median (range)')
    for name in names:
        bare = [b[name] for b, _ in pairs]
        inside = [c[name] for _, c in pairs]
        ratios = [c / b for b, c in zip(bare, inside) if b]
        line = (f'{name:<28} {statistics.median(bare):>9.4g} '
                f'({min(bare):.4g}-{max(bare):.4g}) '
                f'{statistics.median(inside):>9.4g} '
                f'({min(inside):.4g}-{max(inside):.4g})')
        if ratios:
            of_medians = statistics.median(inside) / statistics.median(bare)
            line += (f' {of_medians:6.3f} {statistics.median(ratios):6.3f} '
                     f'({min(ratios):.3f}-{max(ratios):.3f})')
        print(line)


if __name__ == '__main__':
    main(*sys.argv[1:])
