"""Run by an ordinary user on a testbed login node: dask-jobqueue's SLURMCluster.

Two workers (each a Slurm job asking --mem), a map over them, scale down to one, close.
Prints one JSON object (the test reads it).
"""

import json
import sys
import time

from dask_jobqueue import SLURMCluster
from distributed import Client


def wait_workers(client: Client, count: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = len(client.scheduler_info()["workers"])
        if found == count:
            return found
        time.sleep(1)
    return len(client.scheduler_info()["workers"])


def main(logs: str) -> None:
    out: dict = {}
    began = time.monotonic()
    cluster = SLURMCluster(cores=1, processes=1, memory="1GB", queue="batch",
                           walltime="00:10:00", job_name="dask-test", log_directory=logs,
                           local_directory="/tmp")
    out["script"] = cluster.job_script()
    cluster.scale(2)
    client = Client(cluster)
    client.wait_for_workers(2, timeout=180)
    out["workers_after_s"] = round(time.monotonic() - began, 1)
    out["sum"] = sum(client.gather(client.map(lambda x: x * x, range(10))))
    hosts = client.run(lambda: __import__("socket").gethostname())
    out["worker_hosts"] = sorted(hosts.values())
    cluster.scale(1)
    out["after_scale_down"] = wait_workers(client, 1, 90)
    client.close()
    cluster.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
