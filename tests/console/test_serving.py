"""How the console is served, without a browser: `odradek console` against a SASL listener with ACLs shows only
what its principal may see, changes from another site's page or a DNS-rebound host name are refused, and the
ZooKeeper page reads a cluster's registries."""

from __future__ import annotations

import subprocess
import threading
import urllib.parse
import urllib.request

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from odradek.client import Admin
from tests.cli.run import odradek_command
from tests.console.conftest import http_get as get
from tests.security.test_acls_sasl import properties_file, start_sasl_broker

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


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    sasl = start_sasl_broker(tmp_path_factory.mktemp("console-sasl") / "data")
    yield sasl
    sasl.process.stop()


def test_console_command_over_sasl_shows_what_its_principal_may_see(sasl_broker, tmp_path, topic_name):
    admin_config = sasl_broker.client_config("admin")
    admin = Admin(admin_config.pop("bootstrap.servers"), config=admin_config)
    visible, hidden = f"{topic_name}-visible", f"{topic_name}-hidden"
    admin.create_topic(visible, 1)
    admin.create_topic(hidden, 1)
    admin.create_acls([AclBinding(ResourceType.TOPIC, visible, ResourcePatternType.LITERAL, "User:alice", "*",
                                  AclOperation.DESCRIBE, AclPermissionType.ALLOW)])
    process = subprocess.Popen(odradek_command("console", "--port", "0", "--bootstrap-server",
                                               sasl_broker.bootstrap_servers, "--command-config",
                                               str(properties_file(tmp_path, sasl_broker, "alice"))),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready: list[str] = []
        reader = threading.Thread(target=lambda: ready.append(process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(30)
        assert ready and ready[0].startswith("odradek: console ready on http://127.0.0.1:"), ready
        url = ready[0].split(" on ", 1)[1].strip()
        status, topics = get(url + f"topics?q={topic_name}")
        assert status == 200 and visible in topics and hidden not in topics
        assert get(url + f"topics/{hidden}")[0] == 404
    finally:
        process.terminate()
        process.wait(30)


def test_a_missing_topic_or_partition_is_a_clear_404(console, topic_name):
    Admin(console.bootstrap_servers).create_topic(topic_name, 1)
    status, body = get(console.url + f"topics/{topic_name}/messages?partition=7")
    assert status == 404 and f"topic {topic_name!r} has partitions 0 to 0, not 7" in body.replace("&#39;", "'")
    status, body = get(console.url + "topics/no-such-topic/messages")
    assert status == 404 and "does not exist" in body
    assert get(console.url + "topics/no-such-topic")[0] == 404
    assert get(console.url + f"topics/{topic_name}/messages?partition=x")[0] == 400
