"""The unit tests never wait for a real image build nor use another image repository.

``.ci/run`` sets ``MALLEABLE_IMAGES_WAIT`` for the whole test run (the integration tests wait
there for their testbed images while they build); a unit test that calls
:func:`malleable.testbed.images.ensure_image` on a fake engine must not wait for the real
build, nor see ``MALLEABLE_TESTBED_REPO``.
"""

from __future__ import annotations

import pytest

from malleable.testbed import images


@pytest.fixture(autouse=True)
def _no_image_build_to_wait_for(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (images.WAIT_ENV, images.WAIT_TIMEOUT_ENV, images.REPO_ENV):
        monkeypatch.delenv(name, raising=False)
