"""The REST proxy with basic auth in front of a secured broker (SASL/PLAIN, ACLs enforced, User:admin a super
user): each request logs in as its basic-auth user, so the broker's ACLs decide what it may do; the admin grants
alice her ACLs through the v3 API; a consumer instance belongs to the user who made it; and the proxy serves HTTPS
with a PEM certificate."""

from __future__ import annotations

import base64
import ssl

import httpx
import pytest

from odradek.restproxy import ProxySettings, RestProxy
from tests.http_services import served
from tests.restproxy.conftest import BINARY, V2, proxy_on
from tests.security.conftest import certificates  # noqa: F401  (the session's test certificates)
from tests.security.test_acls_sasl import PASSWORDS, sasl_broker  # noqa: F401 (a fixture)

pytestmark = pytest.mark.timeout(120)
SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}


@pytest.fixture(scope="module")
def secured(sasl_broker):
    with served(proxy_on(sasl_broker.bootstrap_servers, client_config=SASL, basic_auth=True)) as proxy:
        yield proxy


def client(proxy, user: str | None, password: str | None = None) -> httpx.Client:
    auth = None if user is None else (user, password if password is not None else PASSWORDS[user])
    return httpx.Client(base_url=proxy.url, auth=auth, timeout=30)


@pytest.fixture(scope="module")
def cluster(secured) -> str:
    with client(secured, "admin") as admin:
        return f"/v3/clusters/{admin.get('/v3/clusters').json()['data'][0]['cluster_id']}"


def grant(admin: httpx.Client, cluster: str, resource_type: str, name: str, operation: str) -> None:
    answer = admin.post(f"{cluster}/acls", json={"resource_type": resource_type, "resource_name": name,
                                                 "pattern_type": "LITERAL", "principal": "User:alice", "host": "*",
                                                 "operation": operation, "permission": "ALLOW"})
    assert answer.status_code == 201, answer.text


def produce(http: httpx.Client, topic: str):
    return http.post(f"/topics/{topic}", headers={"Content-Type": BINARY},
                     json={"records": [{"value": base64.b64encode(b"from alice").decode()}]})


def test_requests_without_or_with_wrong_credentials_are_refused(secured):
    with client(secured, None) as anonymous:
        answer = anonymous.get("/topics")
        assert (answer.status_code, answer.json()["error_code"]) == (401, 401)
        assert answer.headers["www-authenticate"].startswith("Basic")
    with client(secured, "alice", "wrong") as wrong:
        answer = wrong.get("/topics")
        assert (answer.status_code, answer.json()["error_code"]) == (401, 40101)
    with client(secured, None) as garbled:
        answer = garbled.get("/topics", headers={"Authorization": "Basic !!!"})
        assert answer.status_code == 401


def test_each_request_acts_as_its_user_so_the_brokers_acls_apply(secured, cluster, topic_name):
    with client(secured, "admin") as admin, client(secured, "alice") as alice:
        assert admin.post(f"{cluster}/topics", json={"topic_name": topic_name}).status_code == 201
        assert topic_name in admin.get("/topics").json()
        assert topic_name not in alice.get("/topics").json()  # alice may not even see it
        refused = alice.post(f"{cluster}/topics", json={"topic_name": f"{topic_name}-alice"})
        assert (refused.status_code, refused.json()["error_code"]) == (403, 40301)
        listing = alice.get(f"{cluster}/acls")
        assert (listing.status_code, listing.json()["error_code"]) == (403, 40301)

        grant(admin, cluster, "TOPIC", topic_name, "DESCRIBE")
        offsets = produce(alice, topic_name).json()["offsets"]
        assert offsets[0]["error_code"] == 1 and "TOPIC_AUTHORIZATION_FAILED" in offsets[0]["error"]
        v3 = alice.post(f"{cluster}/topics/{topic_name}/records", json={"value": {"type": "STRING", "data": "x"}})
        assert (v3.status_code, v3.json()["error_code"]) == (403, 40301)

        grant(admin, cluster, "TOPIC", topic_name, "WRITE")
        assert produce(alice, topic_name).json()["offsets"][0]["error_code"] is None
        acls = admin.get(f"{cluster}/acls", params={"principal": "User:alice"}).json()
        assert acls["kind"] == "KafkaAclList"
        assert sorted(acl["operation"] for acl in acls["data"]) == ["DESCRIBE", "WRITE"]
        deleted = admin.delete(f"{cluster}/acls", params={"principal": "User:alice", "operation": "WRITE",
                                                          "resource_name": topic_name})
        assert [acl["operation"] for acl in deleted.json()["data"]] == ["WRITE"]
        assert produce(alice, topic_name).json()["offsets"][0]["error_code"] == 1


def test_a_consumer_instance_reads_as_its_user_and_is_hers_alone(secured, cluster, topic_name):
    group = f"g-{topic_name}"
    with client(secured, "admin") as admin, client(secured, "alice") as alice:
        admin.post(f"{cluster}/topics", json={"topic_name": topic_name})
        admin.post(f"{cluster}/topics/{topic_name}/records", json={"value": {"type": "STRING", "data": "secret"}})
        grant(admin, cluster, "TOPIC", topic_name, "READ")
        grant(admin, cluster, "GROUP", group, "READ")
        made = alice.post(f"/consumers/{group}", headers={"Content-Type": V2},
                          json={"name": "hers", "auto.offset.reset": "earliest"})
        assert made.status_code == 200, made.text
        base = f"/consumers/{group}/instances/hers"
        assert admin.get(f"{base}/subscription").json()["error_code"] == 40403  # not the admin's instance
        alice.post(f"{base}/subscription", headers={"Content-Type": V2}, json={"topics": [topic_name]})
        found = []
        for _ in range(20):
            found += alice.get(f"{base}/records", headers={"Accept": BINARY}).json()
            if found:
                break
        assert [base64.b64decode(record["value"]) for record in found] == [b"secret"]
        assert alice.delete(base).status_code == 204
        # another group is not hers to read
        alice.post("/consumers/not-hers", headers={"Content-Type": V2}, json={"name": "x"})
        alice.post("/consumers/not-hers/instances/x/subscription", headers={"Content-Type": V2},
                   json={"topics": [topic_name]})
        answer = alice.get("/consumers/not-hers/instances/x/records", headers={"Accept": BINARY},
                           params={"timeout": 5000})
        assert (answer.status_code, answer.json()["error_code"]) == (403, 40301)
        alice.delete("/consumers/not-hers/instances/x")


def test_the_proxy_serves_https_with_a_pem_certificate(sasl_broker, certificates):
    proxy = RestProxy(ProxySettings(sasl_broker.bootstrap_servers, client_config=SASL, basic_auth=True), port=0,
                      ssl_certfile=certificates.path("broker.pem"), ssl_keyfile=certificates.path("broker.key"))
    with served(proxy):
        assert proxy.url.startswith("https://127.0.0.1:")
        trusted = ssl.create_default_context(cafile=certificates.path("ca.pem"))
        with httpx.Client(base_url=proxy.url, verify=trusted, auth=("admin", PASSWORDS["admin"]),
                          timeout=30) as https:
            assert https.get("/brokers").json() == {"brokers": [1]}
        with httpx.Client(base_url=proxy.url, timeout=30) as unverified, pytest.raises(httpx.ConnectError):
            unverified.get("/brokers")  # a client that does not trust the test CA refuses the certificate
