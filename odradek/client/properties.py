"""Kafka's client properties, as a Java client or one of Kafka's tools reads them from a file (--command-config,
--producer.config), turned into librdkafka's settings, which every client of this layer runs on.

The names both share (security.protocol, sasl.mechanism, sasl.username/password, ssl.key.password, client.id,
acks, ...) pass as they are. Java's own spellings are translated: sasl.jaas.config's PlainLoginModule or
ScramLoginModule username and password, PEM truststores and keystores (by location or inline), PKCS12 keystores,
and ssl.endpoint.identification.algorithm's empty value (no host name check). What only a JVM reads (serializer
classes, store types once translated, the JVM's TLS tuning) is dropped; a JKS store, which librdkafka cannot read,
is a ValueError saying so. Any other name goes to librdkafka, which refuses one it does not know by name.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.security.sasl import jaas_options

# Settings only a JVM client reads, with no meaning for librdkafka once the others are translated.
JVM_ONLY = frozenset({
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer", "ssl.truststore.type",
    "ssl.keystore.type", "ssl.truststore.password", "ssl.protocol", "ssl.enabled.protocols",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
    "ssl.engine.factory.class", "interceptor.classes", "metric.reporters", "sasl.login.class",
    "sasl.login.callback.handler.class", "sasl.client.callback.handler.class", "default.api.timeout.ms",
})
LOGIN_MODULES = ("org.apache.kafka.common.security.plain.PlainLoginModule",
                 "org.apache.kafka.common.security.scram.ScramLoginModule")


def librdkafka_settings(properties: Mapping[str, str]) -> dict[str, str]:
    """The librdkafka settings for Kafka client properties."""
    settings = {key: value for key, value in properties.items()
                if key not in JVM_ONLY and not key.startswith(("ssl.truststore.", "ssl.keystore."))
                and key != "sasl.jaas.config"}
    jaas = properties.get("sasl.jaas.config")
    if jaas:
        if not jaas.strip().startswith(LOGIN_MODULES):
            raise ValueError(f"sasl.jaas.config {jaas.split()[0]!r}: only PlainLoginModule and ScramLoginModule "
                             "(username, password) can log in from this client")
        options = jaas_options(jaas)
        settings.setdefault("sasl.username", options.get("username", ""))
        settings.setdefault("sasl.password", options.get("password", ""))
    for store in ("truststore", "keystore"):
        kind = properties.get(f"ssl.{store}.type", "JKS" if f"ssl.{store}.location" in properties else "PEM")
        if kind.upper() == "JKS":
            raise ValueError(f"ssl.{store}.type JKS cannot be read by this client: give a PEM {store} "
                             f"(ssl.{store}.type=PEM){' or PKCS12' if store == 'keystore' else ''}")
    if "ssl.truststore.location" in properties:
        settings["ssl.ca.location"] = properties["ssl.truststore.location"]
    if "ssl.truststore.certificates" in properties:
        settings["ssl.ca.pem"] = properties["ssl.truststore.certificates"]
    if "ssl.keystore.location" in properties:
        if properties.get("ssl.keystore.type", "").upper() == "PKCS12":
            settings["ssl.keystore.location"] = properties["ssl.keystore.location"]
            settings["ssl.keystore.password"] = properties.get("ssl.keystore.password", "")
        else:  # a PEM keystore holds the certificate chain and its key
            settings["ssl.certificate.location"] = settings["ssl.key.location"] = properties["ssl.keystore.location"]
    if "ssl.keystore.certificate.chain" in properties:
        settings["ssl.certificate.pem"] = properties["ssl.keystore.certificate.chain"]
    if "ssl.keystore.key" in properties:
        settings["ssl.key.pem"] = properties["ssl.keystore.key"]
    if settings.get("ssl.endpoint.identification.algorithm") == "":
        settings["ssl.endpoint.identification.algorithm"] = "none"
    return settings
