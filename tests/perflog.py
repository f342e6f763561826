"""Read the suite's perflogs by field name (tests' helper)."""
import csv


def read_perflog(path):
    '''Rows of a '|'-separated ReFrame perflog as dicts keyed by its header.'''
    with open(path, newline='') as fp:
        rows = list(csv.reader(fp, delimiter='|'))
    header, *body = rows
    return [dict(zip(header, row)) for row in body]
