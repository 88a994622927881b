"""The part of the payload script every adapter's managed jobs run alike: one unit of
work done at the speed of the job's current size (``TIMES``: seconds at each size), the
size read again every ``TICK`` seconds by the adapter's own ``size(last)``. When ``FINISH``
(a path on the node, or ``""`` for none) exists at a tick, the work left counts as done: the
script says so and ends as usual (exit 0). That is the site's ``finish_file`` (docs/slurm.md),
for tests that have checked all they need while the job still runs.

Script text, not code of this package: a payload template is ``HEAD + SECONDS +
"n = size(...)" + LOOP`` (no braces here, so the template can be ``str.format``-ed).
"""


def docstring_id(job_id: str) -> str:
    """``job_id`` as text that is safe inside the payload's triple-quoted docstring: any
    character a job id may hold (a backslash, ``\\x``, ``\\N``, quotes, a newline) is
    escaped, so the script always compiles."""
    return ascii(job_id).replace('"', '\\"')


SECONDS = '''def seconds(n):
    sizes = sorted(TIMES)
    n = min(max(n, sizes[0]), sizes[-1])
    while n not in TIMES:
        n -= 1
    return max(TIMES[n], 1e-3)
'''

LOOP = '''done, last = 0.0, time.monotonic()
print("start", JOB, "nodes", n, "seconds", seconds(n), flush=True)
while done < 1.0:
    time.sleep(max(0.0, min(TICK, (1.0 - done) * seconds(n))))
    now = time.monotonic()
    done += (now - last) / seconds(n)
    last = now
    m = size(n)
    if m != n:
        print("resized", n, "->", m, "done", round(done, 4), flush=True)
        n = m
    if FINISH and os.path.exists(FINISH):
        print("finish file", FINISH, "done", round(done, 4), flush=True)
        break
print("end", JOB, "nodes", n, flush=True)
sys.exit(0)
'''
