"""python -m print_storm N: print N lines as fast as possible, the way the
suite's programs print (``print`` with several arguments, a tab, a number),
through the programs' common entry (``fast_exit.run``). A test runs
several ranks of it on one output and looks for torn lines."""
import os
import sys


def main():
    rank = os.environ.get('RANK', '0')
    for i in range(int(sys.argv[1])):
        print(f'rank{rank}', '\timages/sec:', i, '+/-', 0.5, 'x' * 40)
    print(f'rank{rank} done', file=sys.stderr)
    return 0


if __name__ == '__main__':
    import fast_exit
    fast_exit.run(main)
