"""Tests of the Kafka wire codec (odradek.protocol)."""
