"""The console on a secured broker (SASL with ACLs enforced, User:admin a super user), in a browser: `odradek
console` shows only what its principal may see; the ACL, SCRAM user and broker settings pages show and change what
the principal may, and show the broker's refusal where it may not (alice, no rights on the cluster), quotas
included; reading records
needs READ on the console's read group, and the messages page names that ACL when it is missing."""

from __future__ import annotations

import subprocess
import threading

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                   ResourceType)

from odradek.client import Admin, Producer
from odradek.console import Console, ConsoleSettings
from tests.cli.run import odradek_command
from tests.console.conftest import http_get as get
from tests.console.conftest import screenshot
from tests.security.test_acls_sasl import properties_file, sasl_broker  # noqa: F401 (a fixture)

pytestmark = pytest.mark.timeout(120)
READ_GROUP = "console-reader"


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


def client_config(sasl_broker, user: str) -> dict[str, str]:
    config = sasl_broker.client_config(user)
    config.pop("bootstrap.servers")
    return config


@pytest.fixture(scope="module")
def admin(sasl_broker) -> Admin:
    return Admin(sasl_broker.bootstrap_servers, config=client_config(sasl_broker, "admin"))


def start_console(sasl_broker, user: str):
    console = Console(ConsoleSettings(sasl_broker.bootstrap_servers, port=0,
                                      client_config=client_config(sasl_broker, user), read_group=READ_GROUP))
    console.start_thread()
    return console


@pytest.fixture(scope="module")
def admin_console(sasl_broker):
    console = start_console(sasl_broker, "admin")
    yield console
    console.stop()


@pytest.fixture(scope="module")
def alice_console(sasl_broker):
    console = start_console(sasl_broker, "alice")
    yield console
    console.stop()


def refused(page, selector: str) -> str:
    """Click, expect the console's error page (400, which Chromium logs), and return the broker's reason."""
    with page.expect_console_message(lambda message: "400" in message.text):
        page.click(selector)
    page.console_errors.clear()
    return page.text_content(".error")


def acl(principal: str, resource_type: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    return AclBinding(resource_type, name, ResourcePatternType.LITERAL, principal, "*", operation,
                      AclPermissionType.ALLOW)


def acls_of(admin: Admin, principal: str) -> list[AclBinding]:
    return admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                                                AclOperation.ANY, AclPermissionType.ANY))


def add_acl_in_page(page, principal: str, operation: str, resource_type: str, name: str) -> None:
    page.fill("#add-acl input[name=principal]", principal)
    page.select_option("#add-acl select[name=operation]", operation)
    page.select_option("#add-acl select[name=resource_type]", resource_type)
    page.fill("#add-acl input[name=resource_name]", name)


def test_acls_page_adds_and_removes_and_shows_the_brokers_refusal(admin_console, alice_console, admin, page,
                                                                  topic_name):
    page.goto(admin_console.url + "acls")
    add_acl_in_page(page, "User:bob", "WRITE", "TOPIC", topic_name)
    page.click("#add-acl button")
    page.wait_for_url("**/acls?notice=*")
    row = page.locator("#acls tr.acl", has_text=topic_name)
    assert [cell.strip() for cell in row.locator("td").all_text_contents()][:7] == \
        ["User:bob", "*", "ALLOW", "WRITE", "TOPIC", topic_name, "LITERAL"]
    assert acl("User:bob", ResourceType.TOPIC, topic_name, AclOperation.WRITE) in acls_of(admin, "User:bob")
    screenshot(page, "acls")
    row.locator("button").click()
    page.wait_for_url("**/acls?notice=*")
    assert page.locator("#acls tr.acl", has_text=topic_name).count() == 0
    assert acl("User:bob", ResourceType.TOPIC, topic_name, AclOperation.WRITE) not in acls_of(admin, "User:bob")

    # alice may neither see nor change the ACLs: the pages say what the broker answered
    page.goto(alice_console.url + "acls")
    assert "CLUSTER_AUTHORIZATION_FAILED" in page.text_content("#refusal")
    add_acl_in_page(page, "User:alice", "ALL", "CLUSTER", "kafka-cluster")
    assert "CLUSTER_AUTHORIZATION_FAILED" in refused(page, "#add-acl button")


def test_scram_users_page_sets_and_deletes_a_credential(admin_console, alice_console, admin, page, topic_name):
    user = f"user-{topic_name[-8:]}"
    page.goto(admin_console.url + "users")
    page.fill("#set-user input[name=user]", user)
    page.fill("#set-user input[name=password]", "a-secret")
    page.fill("#set-user input[name=iterations]", "8192")
    page.click("#set-user button")
    page.wait_for_url("**/users?notice=*")
    row = f"#users tr[data-user='{user}'][data-mechanism='SCRAM-SHA-512']"
    assert page.text_content(f"{row} td:nth-child(3)") == "8192"
    assert [info.iterations for info in admin.describe_user_scram_credentials([user])[user].scram_credential_infos] \
        == [8192]
    screenshot(page, "users")
    page.click(f"{row} button")
    page.wait_for_url("**/users?notice=*")
    assert page.locator(row).count() == 0

    page.goto(alice_console.url + "users")
    assert "AUTHORIZATION_FAILED" in page.text_content("#refusal")
    page.fill("#set-user input[name=user]", "mallory")
    page.fill("#set-user input[name=password]", "a-secret")
    assert "AUTHORIZATION_FAILED" in refused(page, "#set-user button")


def test_broker_settings_page_edits_a_dynamic_setting(admin_console, alice_console, admin, page):
    page.goto(admin_console.url)
    page.click("#brokers tbody tr a")
    page.wait_for_url("**/brokers/*")
    setting = "tr[data-config='log.cleaner.threads']"
    page.fill(f"{setting} input[name=value]", "2")
    page.click(f"{setting} button")
    page.wait_for_url("**notice=*")
    assert "override" in page.get_attribute(setting, "class")
    assert page.text_content("tr[data-config='log.retention.hours'] .unit") == "7 d"
    screenshot(page, "broker")
    page.fill(f"{setting} input[name=value]", "")
    page.click(f"{setting} button")
    page.wait_for_url("**notice=*")
    assert "override" not in (page.get_attribute(setting, "class") or "")

    page.goto(alice_console.url + "brokers/1")
    assert "AUTHORIZATION_FAILED" in page.text_content("#refusal")
    # client quotas (over odradek's own connection, which logs in as the console does) on the SASL listener
    page.goto(admin_console.url + "quotas")
    page.select_option("#set-quota select[name=entity_type]", "user")
    page.fill("#set-quota input[name=entity_name]", "alice")
    page.select_option("#set-quota select[name=key]", "consumer_byte_rate")
    page.fill("#set-quota input[name=value]", "2097152")
    page.click("#set-quota button")
    page.wait_for_url("**/quotas?notice=*")
    assert page.text_content("#quotas tr[data-entity='user=alice'][data-key='consumer_byte_rate'] .unit") == "2 MiB/s"
    page.goto(alice_console.url + "quotas")
    assert "CLUSTER_AUTHORIZATION_FAILED" in page.text_content("#refusal")


def test_messages_need_read_on_the_read_group_and_the_page_names_that_acl(sasl_broker, alice_console, admin, page,
                                                                         topic_name):
    admin.create_topic(topic_name, 1)
    with Producer(sasl_broker.bootstrap_servers, config=client_config(sasl_broker, "admin")) as producer:
        producer.send_sync(topic_name, "hello", key="k")
    admin.create_acls([acl("User:alice", ResourceType.TOPIC, topic_name, AclOperation.READ)])
    with page.expect_console_message(lambda message: "400" in message.text):
        page.goto(alice_console.url + f"topics/{topic_name}/messages")
    page.console_errors.clear()
    assert "GROUP_AUTHORIZATION_FAILED" in page.text_content(".error")
    hint = page.text_content("#read-group-acl")
    assert f"User:alice needs DESCRIBE on Group:{READ_GROUP}" in hint
    admin.create_acls([acl("User:alice", ResourceType.GROUP, READ_GROUP, AclOperation.DESCRIBE)])
    page.goto(alice_console.url + f"topics/{topic_name}/messages")
    assert page.locator("#messages tr.record").count() == 1 and page.locator("#read-group-acl").count() == 0
