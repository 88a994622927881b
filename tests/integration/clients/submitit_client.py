"""Run by an ordinary user on a testbed login node: submitit against the site's Slurm.

Submit a function and get its result, submit a sleeper and cancel it, a small job array
(map_array). Prints one JSON object (the test reads it). Job states come from submitit's
own sacct polling.
"""

import json
import sys
import time

import submitit


def square(x: int) -> int:
    return x * x


def wait_state(job: submitit.Job, wanted: set, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.watcher.update()  # one sacct call for every job of this executor
        if job.state in wanted:
            return job.state
        time.sleep(1)
    return job.state


def main(folder: str) -> None:
    executor = submitit.AutoExecutor(folder=folder + "/%j", cluster="slurm")
    executor.update_parameters(timeout_min=10, slurm_partition="batch", nodes=1,
                               tasks_per_node=1, slurm_job_name="submitit-test")
    out: dict = {}
    job = executor.submit(square, 12)
    out["result"] = job.result()
    out["job_id"] = job.job_id
    out["state"] = wait_state(job, {"COMPLETED"}, 60)
    sleeper = executor.submit(time.sleep, 600)
    out["sleeper_running"] = wait_state(sleeper, {"RUNNING"}, 90)
    sleeper.cancel(check=True)
    out["sleeper_id"] = sleeper.job_id
    out["sleeper_state"] = wait_state(sleeper, {"CANCELLED"}, 60).split()[0]
    executor.update_parameters(slurm_array_parallelism=2)
    jobs = executor.map_array(square, [1, 2, 3])
    out["array"] = [j.result() for j in jobs]
    out["array_ids"] = [j.job_id for j in jobs]
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
