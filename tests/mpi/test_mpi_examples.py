"""The example programs under real mpirun: a run that grows and shrinks ends with the same
result as a fixed-size run and as a serial numpy reference."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from malleable.mpi.channel import offer_to_json, read_json, write_json
from malleable.mpi.sources import Offer
from tests.fakes.mpirun import EXAMPLES, finish, needs_mpi, result, run, sizes, start, starts, stop

pytestmark = needs_mpi


def jacobi_reference(n: int, iterations: int) -> np.ndarray:
    """Serial Jacobi on the example's matrix (written again here, independently)."""
    a = 1.0 / (1.0 + np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]))
    np.fill_diagonal(a, 0.0)
    np.fill_diagonal(a, 1.0 + a.sum(axis=1))
    b = np.sin(np.arange(n) * 0.01) + 1.0
    x = np.zeros(n)
    d = np.diag(a)
    for _ in range(iterations):
        x = (b - a @ x + d * x) / d
    return x


def cg_reference(n: int, iterations: int) -> np.ndarray:
    a = 1.0 / (1.0 + np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]))
    np.fill_diagonal(a, 0.0)
    np.fill_diagonal(a, 1.0 + a.sum(axis=1))
    b = np.cos(np.arange(n) * 0.05)
    x, r, p = np.zeros(n), b.copy(), b.copy()
    rr = r @ r
    for _ in range(iterations):
        ap = a @ p
        alpha = rr / (p @ ap)
        x, r = x + alpha * p, r - alpha * ap
        rr_new = r @ r
        p, rr = r + rr_new / rr * p, rr_new
    return x


def test_jacobi_grows_2_to_4_and_shrinks_to_2_with_the_fixed_size_result(tmp_path: Path) -> None:
    n, iterations = 128, 30
    common = ["--size", str(n), "--iterations", str(iterations)]
    out = run(2, EXAMPLES / "jacobi.py", *common, "--schedule", "2,4,2", "--save", "m.npy",
              "--result", "m.json", cwd=tmp_path)
    run(2, EXAMPLES / "jacobi.py", *common, "--save", "f.npy", cwd=tmp_path)
    res = result(tmp_path / "m.json")
    assert sizes(res) == [2, 4, 2], out
    assert starts(res) == [0, 10, 20]
    malleable, fixed = np.load(tmp_path / "m.npy"), np.load(tmp_path / "f.npy")
    np.testing.assert_allclose(malleable, fixed, rtol=1e-12, atol=0)
    reference = jacobi_reference(n, iterations)
    np.testing.assert_allclose(malleable, reference, rtol=1e-10)
    # the comparison is sensitive: one iteration less is far from it
    assert np.abs(jacobi_reference(n, iterations - 1) - malleable).max() > 1e-4
    assert "jacobi checksum" in out


def test_cg_any_to_any_2_3_1_matches_serial_cg(tmp_path: Path) -> None:
    n, iterations = 96, 12
    out = run(2, EXAMPLES / "cg.py", "--size", str(n), "--iterations", str(iterations),
              "--schedule", "2,3,1", "--save", "x.npy", "--result", "r.json", cwd=tmp_path)
    assert sizes(result(tmp_path / "r.json")) == [2, 3, 1], out
    np.testing.assert_allclose(np.load(tmp_path / "x.npy"), cg_reference(n, iterations),
                               rtol=1e-9, atol=1e-12)


def test_nbody_particles_move_with_callbacks_and_match_a_fixed_run(tmp_path: Path) -> None:
    common = ["--size", "64", "--iterations", "9"]
    out = run(2, EXAMPLES / "nbody.py", *common, "--schedule", "2,3,1", "--save", "m.npy",
              "--result", "m.json", cwd=tmp_path)
    run(2, EXAMPLES / "nbody.py", *common, "--save", "f.npy", cwd=tmp_path)
    assert sizes(result(tmp_path / "m.json")) == [2, 3, 1], out
    np.testing.assert_allclose(np.load(tmp_path / "m.npy"), np.load(tmp_path / "f.npy"),
                               rtol=1e-12, atol=1e-14)


def test_fft_offered_5_takes_4_and_matches_numpy(tmp_path: Path) -> None:
    n, iterations = 32, 8
    out = run(2, EXAMPLES / "fft.py", "--size", str(n), "--iterations", str(iterations),
              "--schedule", "2,5", "--save", "u.npy", "--result", "r.json", cwd=tmp_path)
    assert sizes(result(tmp_path / "r.json")) == [2, 4], out
    x = np.arange(n)[None, :] / n
    y = np.arange(n)[:, None] / n
    u0 = np.sin(2 * np.pi * 3 * x) * np.cos(2 * np.pi * 5 * y) + (x > 0.5) * (y < 0.25)
    k = np.fft.fftfreq(n, d=1.0 / n)
    damp = np.exp(-1e-4 * (k[:, None] ** 2 + k[None, :] ** 2)) ** iterations
    expected = np.fft.ifft2(np.fft.fft2(u0) * damp).real
    np.testing.assert_allclose(np.load(tmp_path / "u.npy"), expected, atol=1e-12)


def test_jacobi_asks_for_more_processes_once_and_keeps_the_fixed_size_result(
        tmp_path: Path) -> None:
    """The program's own request (--request), granted by a runner through an ordinary offer."""
    channel = tmp_path / "ch"
    channel.mkdir()
    common = ["--size", "64", "--iterations", "40", "--max", "4"]
    proc = start(2, EXAMPLES / "jacobi.py", *common, "--channel", str(channel),
                 "--request", "5:3", "--delay", "0.05", "--save", "m.npy",
                 "--result", "m.json", cwd=tmp_path)
    try:
        deadline = time.monotonic() + 150
        asked = wait_file(channel / "request-1.json", deadline)
        assert (asked["target"], asked["iteration"]) == (3, 5)
        write_json(channel / "offer.json", offer_to_json(Offer(asked["target"], seq=1)))
        assert wait_file(channel / "done-1.json", deadline)["size"] == 3
        out = finish(proc)
    finally:
        stop(proc)
    res = result(tmp_path / "m.json")
    assert sizes(res) == [2, 3], out
    assert starts(res)[1] > 5  # granted after the request
    assert not (channel / "request-2.json").exists()  # the new process set did not ask again
    run(2, EXAMPLES / "jacobi.py", *common, "--save", "f.npy", cwd=tmp_path)
    np.testing.assert_allclose(np.load(tmp_path / "m.npy"), np.load(tmp_path / "f.npy"),
                               rtol=1e-12, atol=0)


def wait_file(path: Path, deadline: float) -> dict[str, Any]:
    while time.monotonic() < deadline:
        data = read_json(path)
        if data is not None:
            return data
        time.sleep(0.05)
    raise AssertionError(f"{path.name} did not appear in time")
