"""Kafka security settings -> faust credentials -> aiokafka keyword arguments."""

from __future__ import annotations

import ssl

import faust
import pytest

from schemas.errors import KafkaAuthError
from schemas.settings import KafkaSettings, Settings
from streams.kafka_auth import aiokafka_auth, faust_credentials


def test_plaintext_has_no_credentials() -> None:
    kafka = KafkaSettings()
    assert faust_credentials(kafka) is None
    assert aiokafka_auth(kafka) == {"security_protocol": "PLAINTEXT"}


def test_sasl_ssl_scram() -> None:
    kafka = KafkaSettings(
        security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="u", sasl_password="pw"
    )
    creds = faust_credentials(kafka)
    assert isinstance(creds, faust.SASLCredentials)
    auth = aiokafka_auth(kafka)
    assert auth["security_protocol"] == "SASL_SSL"
    assert auth["sasl_mechanism"] == "SCRAM-SHA-512"
    assert auth["sasl_plain_username"] == "u"
    assert auth["sasl_plain_password"] == "pw"
    assert isinstance(auth["ssl_context"], ssl.SSLContext)


def test_sasl_plaintext_has_no_tls() -> None:
    kafka = KafkaSettings(security_protocol="SASL_PLAINTEXT", sasl_username="u", sasl_password="p")
    auth = aiokafka_auth(kafka)
    assert auth["security_protocol"] == "SASL_PLAINTEXT"
    assert auth["ssl_context"] is None


def test_ssl_only() -> None:
    auth = aiokafka_auth(KafkaSettings(security_protocol="SSL"))
    assert auth["security_protocol"] == "SSL"
    assert isinstance(auth["ssl_context"], ssl.SSLContext)


def test_sasl_without_password_is_a_clear_error() -> None:
    with pytest.raises(KafkaAuthError, match="SASL_PASSWORD"):
        faust_credentials(KafkaSettings(security_protocol="SASL_SSL", sasl_username="u"))


def test_key_without_certificate_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(KafkaAuthError, match="SSL_CERTFILE"):
        aiokafka_auth(KafkaSettings(security_protocol="SSL", ssl_keyfile=tmp_path / "k.pem"))


def test_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDWATCH_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("GROUNDWATCH_KAFKA__SASL_USERNAME", "svc")
    monkeypatch.setenv("GROUNDWATCH_KAFKA__SASL_PASSWORD", "s3cret")
    kafka = Settings().kafka  # read from the environment
    assert "s3cret" not in repr(kafka)
    assert aiokafka_auth(kafka)["sasl_plain_password"] == "s3cret"
