"""How each client is told to reach Kafka: Spark's kafka.* options and librdkafka's keys, per security mode."""

from __future__ import annotations

import pytest

from icestream.config import load_settings
from icestream.errors import ConfigError
from icestream.kafka.connection import IAM_CALLBACK, IAM_JAAS, KafkaConnection, kafka_connection


def test_the_local_broker_is_plaintext_for_both_clients() -> None:
    connection = KafkaConnection("127.0.0.1:9092", "events")
    assert connection.spark_options() == {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "kafka.security.protocol": "PLAINTEXT",
    }
    assert connection.client_config(**{"group.id": "g"}) == {
        "bootstrap.servers": "127.0.0.1:9092",
        "log_level": 0,
        "group.id": "g",
    }


def test_msk_over_tls_and_with_iam() -> None:
    tls = KafkaConnection("b-1.msk.example:9094,b-2.msk.example:9094", "events", "tls")
    assert tls.spark_options()["kafka.security.protocol"] == "SSL"
    assert tls.client_config()["security.protocol"] == "SSL"
    iam = KafkaConnection("b-1.msk.example:9098", "events", "iam")
    assert iam.spark_options() == {
        "kafka.bootstrap.servers": "b-1.msk.example:9098",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "AWS_MSK_IAM",
        "kafka.sasl.jaas.config": IAM_JAAS,
        "kafka.sasl.client.callback.handler.class": IAM_CALLBACK,
    }
    with pytest.raises(ConfigError, match="OAUTHBEARER token callback"):
        iam.client_config()
    assert iam.client_config(oauth_cb=print)["sasl.mechanisms"] == "OAUTHBEARER"


def test_a_set_bootstrap_is_used_as_it_is(monkeypatch) -> None:
    monkeypatch.setenv("ICESTREAM_KAFKA_BOOTSTRAP", "kafka.example:9092")
    monkeypatch.setenv("ICESTREAM_KAFKA_TOPIC", "orders")
    assert kafka_connection(load_settings()) == KafkaConnection("kafka.example:9092", "orders", "plaintext")


def test_no_bootstrap_and_no_local_broker_is_one_clear_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ICESTREAM_RUN_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="No Kafka broker: start the local one with `icestream kafka start`"):
        kafka_connection(load_settings())
