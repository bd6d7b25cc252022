"""How icestream reaches a Kafka cluster: the local broker, or MSK by configuration.

One :class:`KafkaConnection`, resolved once from the settings (``kafka_bootstrap``, ``kafka_topic``,
``kafka_security``), gives every client its configuration in that client's own spelling:

- :meth:`KafkaConnection.spark_options`: the ``kafka.*`` options of Spark's Kafka source
  (``spark.read.format("kafka")``), which hands them to the Java client;
- :meth:`KafkaConnection.client_config`: librdkafka's keys, for confluent-kafka (the producer, the
  driver's offset lookups, the tests).

``kafka_security`` is ``plaintext`` (the local broker), ``tls`` (MSK's TLS listener, port 9094) or
``iam`` (MSK's IAM listener, port 9098: SASL ``AWS_MSK_IAM`` in Java through ``aws-msk-iam-auth``;
SASL ``OAUTHBEARER`` in librdkafka, with a token that ``aws-msk-iam-sasl-signer-python`` signs from
the AWS credentials chain, :func:`msk_iam_token`). docs/aws.md says what MSK needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from icestream.config import Settings
from icestream.errors import ConfigError

# The Java client's SASL settings for MSK IAM: the login module and callback handler of
# software.amazon.msk:aws-msk-iam-auth (the jar a session on kafka_security=iam loads).
IAM_JAAS = "software.amazon.msk.auth.iam.IAMLoginModule required;"
IAM_CALLBACK = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
_JAVA_PROTOCOL = {"plaintext": "PLAINTEXT", "tls": "SSL", "iam": "SASL_SSL"}
IAM_SIGNER = "aws-msk-iam-sasl-signer-python"  # the Python side's signer of MSK IAM tokens (PyPI name)


def msk_iam_token(region: str) -> Callable[[str], tuple[str, float]]:
    """librdkafka's OAUTHBEARER token callback (``oauth_cb``) for MSK IAM in ``region``.

    Each call signs a new token (a presigned ``kafka-cluster:Connect`` request, valid 15 minutes) with
    the AWS credentials chain, as the Kinesis clients find theirs; librdkafka calls it again before the
    token expires. Signing needs no network.

    Raises:
        ConfigError: If the signer is not installed.
    """
    try:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
    except ImportError:
        raise ConfigError(
            f"kafka_security=iam: the Python Kafka clients sign MSK IAM tokens with {IAM_SIGNER}, which is not "
            f"installed: run `make setup`, or `pip install -c constraints.txt {IAM_SIGNER}`."
        ) from None

    def token(_config: str) -> tuple[str, float]:
        signed, expires_ms = MSKAuthTokenProvider.generate_auth_token(region)
        return signed, expires_ms / 1000

    return token


@dataclass(frozen=True)
class KafkaConnection:
    """Where a Kafka cluster answers and how to talk to it (see the module docstring)."""

    bootstrap: str  # host:port[,host:port]
    topic: str
    security: str = "plaintext"
    region: str | None = None  # for iam: the cluster's AWS region, which signs the token

    def spark_options(self) -> dict[str, str]:
        """The ``kafka.*`` options Spark's Kafka source passes to the Java consumer."""
        options = {
            "kafka.bootstrap.servers": self.bootstrap,
            "kafka.security.protocol": _JAVA_PROTOCOL[self.security],
        }
        if self.security == "iam":
            options |= {
                "kafka.sasl.mechanism": "AWS_MSK_IAM",
                "kafka.sasl.jaas.config": IAM_JAAS,
                "kafka.sasl.client.callback.handler.class": IAM_CALLBACK,
            }
        return options

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka's configuration (confluent-kafka) for this cluster, with ``extra`` keys on top.

        For ``iam`` librdkafka signs in through an OAUTHBEARER callback: :func:`msk_iam_token` for
        ``region``, unless ``extra`` brings its own ``oauth_cb``.

        Raises:
            ConfigError: For ``iam`` without ``oauth_cb``, if no region is known or the signer is not installed.
        """
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "log_level": 0}
        if self.security == "tls":
            config["security.protocol"] = "SSL"
        elif self.security == "iam":
            config |= {"security.protocol": "SASL_SSL", "sasl.mechanisms": "OAUTHBEARER"}
            if "oauth_cb" not in extra:
                if not self.region:
                    raise ConfigError(
                        "kafka_security=iam: an MSK IAM token is signed for a region: set ICESTREAM_REGION."
                    )
                config["oauth_cb"] = msk_iam_token(self.region)
        return config | extra


def kafka_connection(settings: Settings) -> KafkaConnection:
    """The connection of these settings: ``kafka_bootstrap``, else the local broker of their run folder.

    Raises:
        ConfigError: If no bootstrap address is set and no local broker answers.
    """
    bootstrap = settings.kafka_bootstrap
    if bootstrap is None:
        from icestream.kafka.broker import Broker

        bootstrap = Broker.from_settings(settings).bootstrap()
        if bootstrap is None:
            raise ConfigError(
                "No Kafka broker: start the local one with `icestream kafka start` (or `make kafka`), "
                "or set ICESTREAM_KAFKA_BOOTSTRAP to your cluster's (MSK: docs/aws.md)."
            )
    return KafkaConnection(bootstrap, settings.kafka_topic, settings.kafka_security, settings.region)
