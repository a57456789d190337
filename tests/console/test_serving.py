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
from odradek.embedded import BrokerProcess
from tests.cli.run import odradek_command
from tests.console.conftest import free_port, start_console_broker

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}


def sasl_config(user: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": PASSWORDS[user]}


def get(url: str, **headers) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


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


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    served = start_console_broker(tmp_path_factory.mktemp("console") / "data")
    yield served
    served.broker.stop()


def test_changes_come_only_from_the_consoles_own_pages(console, topic_name):
    admin = Admin(console.bootstrap_servers)
    foreign = post(console.url + "topics", {"name": topic_name}, Origin="http://attacker.example")
    cross_site = post(console.url + "topics", {"name": topic_name}, **{"Sec-Fetch-Site": "cross-site"})
    assert (foreign, cross_site) == (403, 403) and topic_name not in admin.list_topics()
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
    sasl_port = free_port()
    users = " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items())
    process = BrokerProcess(tmp_path_factory.mktemp("console-sasl") / "data", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": "false"})
    process.start()
    yield f"127.0.0.1:{sasl_port}"
    process.stop()


def test_console_command_over_sasl_shows_what_its_principal_may_see(sasl_broker, tmp_path, topic_name):
    admin = Admin(sasl_broker, config=sasl_config("admin"))
    visible, hidden = f"{topic_name}-visible", f"{topic_name}-hidden"
    admin.create_topic(visible, 1)
    admin.create_topic(hidden, 1)
    admin.create_acls([AclBinding(ResourceType.TOPIC, visible, ResourcePatternType.LITERAL, "User:alice", "*",
                                  AclOperation.DESCRIBE, AclPermissionType.ALLOW)])
    properties = tmp_path / "alice.properties"
    properties.write_text("".join(f"{key}={value}\n" for key, value in sasl_config("alice").items()))
    process = subprocess.Popen(odradek_command("console", "--port", "0", "--bootstrap-server", sasl_broker,
                                               "--command-config", str(properties)),
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
