"""Measurements kept between runs, one JSON file per kind under the cache
directory (:data:`hpctestlib_ml.paths.CACHE_DIR`): what is slow to find
and does not change from run to run (the CPU's peak, a model's parameter
count), found once in a child process by whoever needs it first."""
import json
import os
import time


def cached_value(cache_dir, filename, key, field, compute):
    '''*field* of *key*'s entry in ``<cache_dir>/<filename>``, or
    ``compute()`` stored there now (with the time it was found) and
    returned; None, and nothing stored, where *compute* returns None. The
    file is replaced whole, so that a reader never sees half of it.'''
    path = os.path.join(cache_dir, filename)
    try:
        with open(path) as fp:
            cache = json.load(fp)
    except (OSError, ValueError):
        cache = {}
    if key not in cache:
        value = compute()
        if value is None:
            return None
        cache[key] = {field: value,
                      'measured': time.strftime('%Y-%m-%dT%H:%M:%S%z')}
        try:
            os.makedirs(cache_dir, exist_ok=True)
            tmp = f'{path}.{os.getpid()}.tmp'
            with open(tmp, 'w') as fp:
                json.dump(cache, fp, indent=2)
            os.replace(tmp, path)
        except OSError:
            pass        # kept for this process only; what needs the
            #             directory to be writable says so itself
    return cache[key][field]
