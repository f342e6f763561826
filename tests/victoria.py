"""A real VictoriaMetrics (Debian's ``victoria-metrics``) for the tests:
on a free loopback port, its storage in a temporary directory."""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

BINARY = 'victoria-metrics'


def why_unavailable():
    if not shutil.which(BINARY):
        return (f'{BINARY} is not installed (apt-get install -y '
                f'victoria-metrics; .ci/run does)')
    return None


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class Victoria:
    '''One server: :meth:`start`, :meth:`stop`, :meth:`export`.'''

    def __init__(self, storage):
        self.storage = str(storage)
        self.port = free_port()
        self.url = f'http://127.0.0.1:{self.port}'
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [BINARY, f'-storageDataPath={self.storage}',
             f'-httpListenAddr=127.0.0.1:{self.port}',
             '-retentionPeriod=100y', '-search.latencyOffset=0s'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f'{self.url}/health',
                                            timeout=2) as answer:
                    if answer.read().strip() == b'OK':
                        return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f'{BINARY} did not start on {self.url}')

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)

    def get(self, path, **params):
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(f'{self.url}{path}?{query}',
                                    timeout=60) as answer:
            return answer.read().decode()

    def export(self, selector='{__name__=~"hpcml_.+"}', expect=None,
               wait=30):
        '''The raw samples of *selector* (JSON lines); with *expect*, wait
        until that many samples are searchable. Ingestion is buffered (an
        import was searchable about 10 s later on this VM, whatever the
        load): each read first makes what was imported searchable
        (``/internal/force_flush``), so the wait is no race with the
        buffer; *wait* only bounds a sample that never comes.'''
        deadline = time.time() + wait
        while True:
            self.get('/internal/force_flush')
            text = self.get('/api/v1/export', **{'match[]': selector})
            count = sum(len(json.loads(line)['values'])
                        for line in text.splitlines() if line.strip())
            if expect is None or count >= expect or time.time() > deadline:
                return text
            time.sleep(0.5)

    def query(self, promql, when):
        '''An instant PromQL query's result (``data.result``).'''
        found = json.loads(self.get('/api/v1/query', query=promql,
                                    time=str(when)))
        return found['data']['result']
