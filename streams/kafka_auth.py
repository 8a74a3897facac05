"""Kafka security from settings: one place that turns ``kafka.security_protocol`` and friends into faust
credentials, and (through faust's own mapping) into the keyword arguments of our aiokafka clients, so the
worker, ``replay`` and topic creation authenticate the same way."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

import faust
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth
from faust.types.auth import CredentialsT

from schemas.errors import KafkaAuthError
from schemas.settings import KafkaSettings


def ssl_context(kafka: KafkaSettings) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(kafka.ssl_cafile) if kafka.ssl_cafile else None)
    if kafka.ssl_certfile is not None:
        context.load_cert_chain(
            str(kafka.ssl_certfile), str(kafka.ssl_keyfile) if kafka.ssl_keyfile else None
        )
    elif kafka.ssl_keyfile is not None:
        raise KafkaAuthError("GROUNDWATCH_KAFKA__SSL_KEYFILE is set without GROUNDWATCH_KAFKA__SSL_CERTFILE")
    return context


def faust_credentials(kafka: KafkaSettings) -> CredentialsT | None:
    """None for PLAINTEXT; SSL or SASL (PLAIN / SCRAM) credentials otherwise."""
    protocol = kafka.security_protocol
    if protocol == "PLAINTEXT":
        return None
    if protocol == "SSL":
        return faust.SSLCredentials(ssl_context(kafka))
    if not kafka.sasl_username or kafka.sasl_password is None:
        raise KafkaAuthError(
            f"security_protocol {protocol} needs GROUNDWATCH_KAFKA__SASL_USERNAME and "
            "GROUNDWATCH_KAFKA__SASL_PASSWORD"
        )
    return faust.SASLCredentials(
        username=kafka.sasl_username,
        password=kafka.sasl_password.get_secret_value(),
        ssl_context=ssl_context(kafka) if protocol == "SASL_SSL" else None,
        mechanism=kafka.sasl_mechanism,
    )


def aiokafka_auth(kafka: KafkaSettings) -> Mapping[str, Any]:
    """Keyword arguments for AIOKafkaProducer / AIOKafkaConsumer / AIOKafkaAdminClient."""
    return dict(credentials_to_aiokafka_auth(faust_credentials(kafka)))
