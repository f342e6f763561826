"""Run a command so that, however it ends, every process it started ends
with it:   python -S reaper.py COMMAND [ARGUMENT...]

``src/task_env.sh`` starts every task of every job under this (it execs
it first, so the reaper has the task's PID), locally, in a Slurm step and
in a container alike. Why: the end of a job reaches the processes the
scheduler knows of, not always the ranks. ReFrame's local scheduler
signals the job's process group, and torchrun starts each worker in a
session of its own (``start_new_session``): a torchrun that ends before
it has passed the signal on (a SIGTERM while it starts them; ReFrame's
SIGKILL 2 s after its SIGTERM) leaves its ranks running, reparented to
init. Slurm's ``proctrack/linuxproc`` finds a step's processes by their
parents, so it loses those as well; anything a rank detaches too.

What it does:

* It makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``,
  Linux 3.4): a process of the task orphaned by its parent's end is
  reparented to it, not to init, so the whole tree stays below it, found
  by parent links (here, and by Slurm's linuxproc).
* It runs COMMAND as its child (whose environment gains ``HPCML_REAPER``,
  this process's PID) in the process group the reaper started in, and
  itself leaves that group: a signal to the job's group (ReFrame's
  SIGTERM, then its SIGKILL 2 s later) reaches COMMAND as before, never
  the reaper, which must outlive the others to end them.
* When COMMAND has ended, by itself or killed, whatever is left below the
  reaper gets SIGTERM (then SIGCONT, for a stopped process), and SIGKILL
  :data:`GRACE` seconds later.
* An ending signal sent to the reaper itself (SIGTERM, SIGINT, SIGHUP,
  SIGQUIT: srun's or slurmstepd's at a time limit or ``scancel``, a
  container runtime's, Ctrl-C) goes at once to every process below it,
  as Slurm signals a step, and SIGKILL follows after the same grace.
  SIGUSR1 and SIGUSR2 go to COMMAND alone, as if it had been exec'd.
* It ends as COMMAND ended: its exit status, or killed by its signal.
* Where the job asks for it (``HPCML_HANG_DIR``, ``HPCML_HANG_BOUND_S``)
  it watches the ranks below it for a hang (:mod:`hang_watch`), once a
  second: when none has advanced for longer than the bound, it records
  their stacks and says who stopped where, then ends the task as an
  ending signal would (SIGTERM, SIGKILL after the grace), so that the job
  ends instead of waiting for its time limit.

``HPCML_REAPER_GRACE`` (seconds) sets the grace: by default 2 s, ReFrame's
own between its SIGTERM and SIGKILL of a local job; in a Slurm step 30 s,
Slurm's default KillWait, since there slurmstepd's own SIGKILL, which
reaches the whole tree that the reaper holds together, comes first.

Where ``prctl`` fails (not Linux) COMMAND is exec'd instead. Standard
library only; the suite runs it with ``-S``: no ``site``, so no
``sitecustomize`` on the job's PYTHONPATH is imported (``-I`` would also
drop PYTHONHOME, which some sites' Pythons need).
"""
import os
import signal
import socket
import sys
import time

import hang_watch

PR_SET_CHILD_SUBREAPER = 36

#: Signals that end the task: passed to every descendant.
ENDING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)

#: Signals passed to COMMAND alone, as if it had been exec'd.
PASSED = (signal.SIGUSR1, signal.SIGUSR2)

#: Seconds from the end of COMMAND, or an ending signal, to SIGKILL.
GRACE = 2.0
SLURM_GRACE = 30.0

#: How often, while ending, the reaper looks for processes left.
POLL = 0.05


def grace(env=os.environ):
    '''The grace in seconds: ``HPCML_REAPER_GRACE``, else :data:`GRACE`,
    or :data:`SLURM_GRACE` in a Slurm step.'''
    try:
        return float(env['HPCML_REAPER_GRACE'])
    except (KeyError, ValueError):
        return SLURM_GRACE if env.get('SLURM_STEP_ID') else GRACE


def become_subreaper():
    '''Whether this process is now a child subreaper.'''
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError, ImportError):
        return False


def descendants(root):
    '''PIDs of the processes below *root*, by their parent links in
    /proc. Zombies too: a process whose first thread has ended shows as
    one while its other threads, and its children, still run (torchrun,
    killed, for a moment); a zombie of the reaper's own is reaped
    before.'''
    children = {}
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open(f'/proc/{name}/stat', 'rb') as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parens.
        ppid = int(stat[stat.rfind(b')') + 2:].split()[1])
        children.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found


def signal_all(pids, signum):
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError:
            pass                    # gone already


def reap(child):
    '''Collect every ended child (COMMAND and adopted orphans); COMMAND's
    wait status if it was among them, else None.'''
    status = None
    while True:
        try:
            pid, wstatus = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == child:
            status = wstatus


def end_tree(child, status, signum, grace_s):
    '''Send *signum* to every descendant, then SIGCONT (a stopped process
    acts on the signal only once it runs: Slurm ends a step so too),
    SIGKILL what is left after *grace_s* seconds, and reap all;
    COMMAND's wait status (*status* if it was reaped already).'''
    me = os.getpid()
    left = descendants(me)
    signal_all(left, signum)
    signal_all(left, signal.SIGCONT)
    deadline = time.monotonic() + grace_s
    while left:
        signal.sigtimedwait({signal.SIGCHLD}, POLL)
        done = reap(child)
        status = status if done is None else done
        left = descendants(me)
        if left and time.monotonic() >= deadline:
            signal_all(left, signal.SIGKILL)
    return status


def exit_as(status):
    '''End this process as a process with wait status *status* ended.'''
    sys.stdout.flush()
    sys.stderr.flush()
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum != signal.SIGKILL:
            signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)      # a signal that does not kill
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def start(argv, env, job_group, mask):
    '''Fork and exec *argv* in process group *job_group* with signal mask
    *mask*; its PID.'''
    child = os.fork()
    if child == 0:
        try:
            os.setpgid(0, job_group)
        except OSError:
            pass
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.execvpe(argv[0], argv, env)
        except OSError as err:
            print(f'reaper.py: {argv[0]}: {err.strerror}', file=sys.stderr)
        os._exit(127)
    try:
        os.setpgid(child, job_group)    # whichever of the two comes first
    except OSError:
        pass
    return child


def main(argv):
    if not argv:
        print('usage: reaper.py COMMAND [ARGUMENT...]', file=sys.stderr)
        return 2
    if not become_subreaper():
        # HPCML_REAPER: the command's own PID, which task_env.sh takes as
        # "already under the reaper".
        os.execvpe(argv[0], argv,
                   {**os.environ, 'HPCML_REAPER': str(os.getpid())})
    grace_s = grace()
    watched = {signal.SIGCHLD, *ENDING, *PASSED}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    job_group = os.getpgrp()
    try:
        os.setpgid(0, 0)            # out of the job's process group
    except OSError:
        pass                        # a session leader stays where it is
    watch = hang_watch.from_env(
        os.environ, os.environ.get('SLURMD_NODENAME') or socket.gethostname())
    env = {**os.environ, 'HPCML_REAPER': str(os.getpid()),
           **(watch.child_env() if watch else {})}
    child = start(argv, env, job_group, mask)
    try:
        status = supervise(child, watched, grace_s, watch)
    finally:
        if watch:
            watch.close()
    exit_as(status)


def supervise(child, watched, grace_s, watch):
    '''Wait for COMMAND (*child*), passing *watched* signals on, and end
    what is left below when it ends, when an ending signal comes or when
    *watch* finds the ranks hung; COMMAND's wait status.'''
    while True:
        info = signal.sigtimedwait(watched, hang_watch.POLL)
        if info is not None and info.si_signo in ENDING:
            return end_tree(child, None, info.si_signo, grace_s)
        if info is not None and info.si_signo in PASSED:
            signal_all([child], info.si_signo)
        status = reap(child)
        if status is not None:
            return end_tree(child, status, signal.SIGTERM, grace_s)
        if watch and watch.hung():
            return end_tree(child, None, signal.SIGTERM, grace_s)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
