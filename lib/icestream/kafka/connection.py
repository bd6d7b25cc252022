"""How icestream reaches a Kafka cluster: the local broker, or MSK by configuration.

One :class:`KafkaConnection`, resolved once from the settings (``kafka_bootstrap``, ``kafka_topic``,
``kafka_security``), gives every client its configuration in that client's own spelling:

- :meth:`KafkaConnection.spark_options`: the ``kafka.*`` options of Spark's Kafka source
  (``spark.read.format("kafka")``), which hands them to the Java client;
- :meth:`KafkaConnection.client_config`: librdkafka's keys, for confluent-kafka (the producer, the
  driver's offset lookups, the tests).

``kafka_security`` is ``plaintext`` (the local broker), ``tls`` (MSK's TLS listener, port 9094) or
``iam`` (MSK's IAM listener, port 9098: SASL ``AWS_MSK_IAM`` in Java through ``aws-msk-iam-auth``).
docs/aws.md says what MSK needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icestream.config import Settings
from icestream.errors import ConfigError

# The Java client's SASL settings for MSK IAM: the login module and callback handler of
# software.amazon.msk:aws-msk-iam-auth (the jar a session on kafka_security=iam loads).
IAM_JAAS = "software.amazon.msk.auth.iam.IAMLoginModule required;"
IAM_CALLBACK = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
_JAVA_PROTOCOL = {"plaintext": "PLAINTEXT", "tls": "SSL", "iam": "SASL_SSL"}


@dataclass(frozen=True)
class KafkaConnection:
    """Where a Kafka cluster answers and how to talk to it (see the module docstring)."""

    bootstrap: str  # host:port[,host:port]
    topic: str
    security: str = "plaintext"

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

        Raises:
            ConfigError: For ``iam``: librdkafka signs MSK IAM only through an OAUTHBEARER callback,
                which the caller supplies (``oauth_cb`` in ``extra``).
        """
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "log_level": 0}
        if self.security == "tls":
            config["security.protocol"] = "SSL"
        elif self.security == "iam":
            if "oauth_cb" not in extra:
                raise ConfigError(
                    "kafka_security=iam: a Python Kafka client needs an OAUTHBEARER token callback (oauth_cb) "
                    "for MSK IAM; see docs/aws.md."
                )
            config |= {"security.protocol": "SASL_SSL", "sasl.mechanisms": "OAUTHBEARER"}
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
    return KafkaConnection(bootstrap, settings.kafka_topic, settings.kafka_security)
