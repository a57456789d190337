"""The principal a client certificate names: Kafka's default principal builder, "User:" and the subject DN as Java's
X500Principal.getName() writes it (RFC 2253: most specific RDN first)."""

from __future__ import annotations

import ssl

from odradek.security.tls import principal_of_certificate


def test_the_principal_is_the_subject_dn_most_specific_first(certificates):
    # the dict ssl's getpeercert() gives for the client certificate made with -subj /C=DE/O=acme/OU=eng/CN=alice
    decoded = ssl._ssl._test_decode_cert(certificates.path("client.pem"))
    assert principal_of_certificate(decoded) == "User:CN=alice,OU=eng,O=acme,C=DE"


def test_special_characters_are_escaped_as_rfc_2253_says():
    certificate = {"subject": ((("organizationName", "Acme, Inc."),), (("commonName", "a+b=c"),))}
    assert principal_of_certificate(certificate) == "User:CN=a\\+b=c,O=Acme\\, Inc."
