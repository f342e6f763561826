"""The ``*Container`` checks for real: config/local.py's Podman platform runs
them in the suite's image (``make image``), one case per launch mode, with
the same sanity and performance checks as the bare cases; the image's
digest is logged. Where Podman or the image is missing these tests skip,
except under CI, which builds the image first (.ci/run)."""
import json
import re

import pytest

import conftest
from conftest import BIN
from perflog import read_perflog

HPCML = BIN / 'hpcml'

pytestmark = [pytest.mark.integration, pytest.mark.image]

#: One case per launch mode, of a workload quick at tiny size.
CASES = ('^CosmoFlowContainer%scale=1_proc%launch_mode=per_task',
         '^CosmoFlowContainer%scale=2_procs%launch_mode=torchrun')


@pytest.fixture(scope='module')
def suite_image():
    return conftest.suite_image()


def test_container_cases_pass_in_the_image(run_reframe, suite_image):
    proc, var = run_reframe(HPCML, 'suite', '-n', CASES[0], '-n', CASES[1],
                            '--keep-stage-files')
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert 'Ran 2/2 test case(s)' in proc.stdout
    rows = read_perflog(var / 'perflogs' / 'local' / 'cpu' /
                        'CosmoFlowContainer.log')
    assert {(r['scale'], r['launch_mode']) for r in rows} == {
        ('1_proc', 'per_task'), ('2_procs', 'torchrun')}
    for row in rows:
        assert row['result'] == 'pass'
        assert row['environ'] == 'container'
        assert re.fullmatch(rf'{re.escape(suite_image)}@sha256:[0-9a-f]{{64}}',
                            row['container_image']), row['container_image']
        assert 'torch=2.14.1' in row['framework_versions']
    for stage in (var / 'stage' / 'local' / 'cpu' / 'container').iterdir():
        script = (stage / 'rfm_job.sh').read_text()
        assert f' {suite_image} ' in script and 'podman run' in script
        # The program ran in a container: Podman's marker.
        facts = json.loads((stage / 'hpcml_provenance.json').read_text())
        assert facts['container'] == 'podman', facts


def test_a_missing_image_stops_the_job_naming_the_fix(run_reframe,
                                                      suite_image):
    proc, _ = run_reframe(HPCML, 'suite', '-n', CASES[0], '-S',
                          'container_image=localhost/hpcml:missing')
    assert proc.returncode == 1
    assert ('hpcml: container image localhost/hpcml:missing not found: put '
            'it where Podman finds it on the nodes '
            '(docs/guide/containers.md), or set -S container_image=') \
        in proc.stdout
