"""How the console is served, without a browser: changes from another site's page or a DNS-rebound host name are
refused, and a missing topic or partition is a clear 404."""

from __future__ import annotations

import urllib.parse
import urllib.request

from odradek.client import Admin
from tests.console.conftest import http_get as get


def post(url: str, fields: dict[str, str], **headers) -> int:
    request = urllib.request.Request(url, urllib.parse.urlencode(fields).encode(), headers=headers)
    opener = urllib.request.build_opener(NoRedirects)
    try:
        return opener.open(request, timeout=30).status
    except urllib.error.HTTPError as exc:
        return exc.code


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None


def test_changes_come_only_from_the_consoles_own_pages(console, topic_name):
    admin = Admin(console.bootstrap_servers)
    foreign = post(console.url + "topics", {"name": topic_name}, Origin="http://attacker.example")
    cross_site = post(console.url + "topics", {"name": topic_name}, **{"Sec-Fetch-Site": "cross-site"})
    other_scheme = post(console.url + "topics", {"name": topic_name},
                        Origin=console.url.rstrip("/").replace("http://", "https://", 1))
    assert (foreign, cross_site, other_scheme) == (403, 403, 403) and topic_name not in admin.list_topics()
    own = post(console.url + "topics", {"name": topic_name}, Origin=console.url.rstrip("/"),
               **{"Sec-Fetch-Site": "same-origin"})
    assert own == 303 and topic_name in admin.list_topics()


def test_a_rebound_host_name_is_refused(console):
    """A page on attacker.example whose name now resolves to 127.0.0.1 sends Host: attacker.example."""
    port = urllib.parse.urlsplit(console.url).port
    assert get(console.url, Host=f"attacker.example:{port}")[0] == 400
    assert get(console.url, Host=f"localhost:{port}")[0] == 200


def test_a_missing_topic_or_partition_is_a_clear_404(console, topic_name):
    Admin(console.bootstrap_servers).create_topic(topic_name, 1)
    status, body = get(console.url + f"topics/{topic_name}/messages?partition=7")
    assert status == 404 and f"topic {topic_name!r} has partitions 0 to 0, not 7" in body.replace("&#39;", "'")
    status, body = get(console.url + "topics/no-such-topic/messages")
    assert status == 404 and "does not exist" in body
    assert get(console.url + "topics/no-such-topic")[0] == 404
    assert get(console.url + f"topics/{topic_name}/messages?partition=x")[0] == 400
