"""The standalone cluster's wait for its master reads the status page only once it answers in JSON."""

from __future__ import annotations

import http.server
import threading

import pytest

from tests.deploy.standalone import StandaloneCluster


@pytest.fixture
def status_page():
    """A loopback HTTP server whose answer to every GET is what the test puts in ``body``."""
    answer = {"body": b""}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(answer["body"])

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], answer
    server.shutdown()
    server.server_close()


def test_the_master_page_in_html_while_pages_are_added_counts_as_not_up(status_page, tmp_path):
    port, answer = status_page
    cluster = StandaloneCluster(None, tmp_path)
    cluster.ui_port = port
    answer["body"] = b'<!DOCTYPE html><html data-bs-theme="light"></html>'
    assert cluster._state() is None and cluster.alive_workers() == []
    answer["body"] = b'{"workers": [{"state": "ALIVE"}, {"state": "DEAD"}]}'
    assert cluster.alive_workers() == [{"state": "ALIVE"}]
