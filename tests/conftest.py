"""Fixtures shared by the API test modules: one real single-voter node per
module (started once, always stopped) and the real app over it."""

import pytest

from api.app import create_app

from .local_node import LocalNode


@pytest.fixture(scope="module")
def local(tmp_path_factory, request):
    node = LocalNode(str(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])))
    try:
        node.wait_active()
        yield node
    finally:
        node.close()


@pytest.fixture(scope="module")
def app(local):
    return create_app(local.node)
