"""How each client is told to reach Kafka: Spark's kafka.* options and librdkafka's keys, per security mode; MSK IAM
for the Python clients, an OAUTHBEARER callback signing a token offline, or one line saying what lacks."""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from icestream.config import load_settings
from icestream.errors import ConfigError
from icestream.kafka.connection import IAM_CALLBACK, IAM_JAAS, IAM_SIGNER, KafkaConnection, kafka_connection

IAM = KafkaConnection("b-1.example:9098", "user-events", "iam", "eu-west-1")


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
    iam = KafkaConnection("b-1.msk.example:9098", "events", "iam", "eu-west-1")
    assert iam.spark_options() == {
        "kafka.bootstrap.servers": "b-1.msk.example:9098",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "AWS_MSK_IAM",
        "kafka.sasl.jaas.config": IAM_JAAS,
        "kafka.sasl.client.callback.handler.class": IAM_CALLBACK,
    }
    assert iam.client_config(oauth_cb=print)["sasl.mechanisms"] == "OAUTHBEARER"
    assert callable(iam.client_config()["oauth_cb"]), "the signer's callback (see below)"
    with pytest.raises(ConfigError, match="signed for a region: set ICESTREAM_REGION"):
        KafkaConnection("b-1.msk.example:9098", "events", "iam").client_config()


def test_a_set_bootstrap_is_used_as_it_is(monkeypatch) -> None:
    monkeypatch.setenv("ICESTREAM_KAFKA_BOOTSTRAP", "kafka.example:9092")
    monkeypatch.setenv("ICESTREAM_KAFKA_TOPIC", "orders")
    settings = load_settings()
    assert kafka_connection(settings) == KafkaConnection("kafka.example:9092", "orders", "plaintext", settings.region)


def test_no_bootstrap_and_no_local_broker_is_one_clear_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ICESTREAM_RUN_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="No Kafka broker: start the local one with `icestream kafka start`"):
        kafka_connection(load_settings())


@pytest.fixture
def aws_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Made-up keys in the environment, and no AWS files: the credentials chain finds these and asks nobody."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


def test_iam_signs_in_with_a_token_for_the_clusters_region(aws_keys: None) -> None:
    config = IAM.client_config()
    assert (config["security.protocol"], config["sasl.mechanisms"]) == ("SASL_SSL", "OAUTHBEARER")
    token, expires = config["oauth_cb"]("")
    url = urlparse(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())
    query = {name: values[0] for name, values in parse_qs(url.query).items()}
    assert url.netloc == "kafka.eu-west-1.amazonaws.com"
    assert query["Action"] == "kafka-cluster:Connect"
    assert query["X-Amz-Credential"].startswith("AKIDEXAMPLE/")
    assert "/eu-west-1/kafka-cluster/aws4_request" in query["X-Amz-Credential"]
    assert query["X-Amz-Signature"]
    assert int(query["X-Amz-Expires"]) == 900, "a token for 15 minutes; librdkafka asks again before then"
    assert expires > 0


def test_a_callback_of_the_callers_own_is_kept() -> None:
    def own(_config: str) -> tuple[str, float]:
        return "token", 1.0

    assert IAM.client_config(oauth_cb=own)["oauth_cb"] is own


def test_the_settings_region_signs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICESTREAM_REGION", "ap-south-1")
    settings = load_settings(kafka_bootstrap="b-1.example:9098", kafka_security="iam")
    assert kafka_connection(settings).region == "ap-south-1"


def test_iam_without_the_signer_installed_is_one_line_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer", None)  # an import of it fails, as when not installed
    with pytest.raises(ConfigError, match=f"{IAM_SIGNER}, which is not installed") as raised:
        IAM.client_config()
    assert "\n" not in str(raised.value)


def test_plaintext_and_tls_need_no_signer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer", None)
    assert "security.protocol" not in KafkaConnection("127.0.0.1:9092", "t").client_config()
    assert KafkaConnection("b-1.example:9094", "t", "tls").client_config()["security.protocol"] == "SSL"
