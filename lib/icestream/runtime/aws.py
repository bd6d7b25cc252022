"""AWS access outside Kinesis: the S3 warehouse and the Glue catalog, for every engine alike.

One set of settings (:mod:`icestream.config`) becomes what each engine needs:

- :func:`iceberg_properties`: Iceberg's Java catalog properties (Spark's GlueCatalog and S3FileIO):
  endpoints, ``glue.id`` for a catalog in another account, ``s3.sse.*`` for SSE-KMS, and
  ``AssumeRoleAwsClientFactory`` when ``aws_role_arn`` is set.
- :func:`executor_environ`: the environment the driver JVM and the executors start with. The AWS
  SDK in an executor reads its region and named profile from the environment, and a driver's
  ``AWS_PROFILE`` never reaches executors on a cluster unless it is passed along.
- :func:`session`: a boto3 session for the Python side (pyiceberg's Glue client, DuckDB's keys,
  Glue look-ups), with the emulators' dummy keys, or the role assumed through STS.
- :func:`pyiceberg_properties`: pyiceberg's names for the same things (its S3 reads go through pyarrow).

No credential is ever written into Spark's configuration: executors resolve their own (instance
role, profile, or the role they assume); only the emulators' fixed dummy keys travel as variables.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlparse

from icestream.config import EMULATOR_DUMMY_KEYS, Settings
from icestream.errors import ConfigError, ServiceUnavailableError

ROLE_SESSION_NAME = "icestream"
ASSUME_ROLE_FACTORY = "org.apache.iceberg.aws.AssumeRoleAwsClientFactory"
SERVICE_ENDPOINTS = {"s3": "s3_endpoint", "glue": "glue_endpoint", "kinesis": "kinesis_endpoint"}
# What a boto3 session reads from the environment once, when it first needs credentials or its config:
# a change to any of them gets a new session (see kept_session).
SESSION_ENVIRON = (
    "AWS_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
)
_kept: dict[tuple[object, ...], Any] = {}
# Held while a session is made or makes a client: a boto3 session is not safe to make clients from in two
# threads at once (the clients it makes are).
KEPT_LOCK = threading.RLock()


def dummy_keys(settings: Settings) -> tuple[str, str] | None:
    """The emulator's fixed keys for the ``local`` and ``localstack`` profiles, else None (real AWS)."""
    return EMULATOR_DUMMY_KEYS.get(settings.profile)


def _catalog_location(settings: Settings) -> dict[str, str]:
    """Where the catalog and its files are: Iceberg Java and pyiceberg spell these alike."""
    named = {"glue.id": settings.glue_catalog_id, "glue.endpoint": settings.glue_endpoint}
    named["s3.endpoint"] = settings.s3_endpoint
    return {key: value for key, value in named.items() if value}


def iceberg_properties(settings: Settings) -> dict[str, str]:
    """Iceberg's AWS catalog properties (without the ``spark.sql.catalog.<name>.`` prefix).

    Args:
        settings: The active settings (a Glue catalog).

    Returns:
        Properties for GlueCatalog and S3FileIO; they travel with the FileIO to the executors.
    """
    properties = {"client.region": settings.region, **_catalog_location(settings)}
    if settings.s3_endpoint:
        # Emulators answer on one host name, not on <bucket>.<host>.
        properties["s3.path-style-access"] = "true"
    if settings.s3_sse_type != "none":
        properties["s3.sse.type"] = settings.s3_sse_type
        if settings.s3_sse_key:
            properties["s3.sse.key"] = settings.s3_sse_key
    if settings.aws_role_arn:
        properties |= {
            "client.factory": ASSUME_ROLE_FACTORY,
            "client.assume-role.arn": settings.aws_role_arn,
            "client.assume-role.region": settings.region,
            "client.assume-role.session-name": ROLE_SESSION_NAME,
        }
    return properties


def executor_environ(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment variables the driver JVM and every executor need to reach AWS as the driver does.

    Args:
        settings: The active settings.
        environ: The driver's environment (default ``os.environ``): its ``AWS_PROFILE`` and
            ``AWS_CONFIG_FILE``/``AWS_SHARED_CREDENTIALS_FILE`` are passed on when set.

    Returns:
        ``AWS_REGION`` and ``AWS_DEFAULT_REGION`` always; the driver's profile variables when set;
        the emulator's dummy keys for the ``local`` and ``localstack`` profiles.
    """
    environ = os.environ if environ is None else environ
    variables = {"AWS_REGION": settings.region, "AWS_DEFAULT_REGION": settings.region}
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        if environ.get(name):
            variables[name] = environ[name]
    keys = dummy_keys(settings)
    if keys is not None:
        variables |= {"AWS_ACCESS_KEY_ID": keys[0], "AWS_SECRET_ACCESS_KEY": keys[1]}
    return variables


def session(settings: Settings) -> Any:
    """A boto3 session for the active profile, the role in ``aws_role_arn`` assumed when set.

    The assumed role's credentials refresh themselves before they expire (botocore's
    ``AssumeRoleCredentialFetcher``), so a long notebook keeps working.

    Returns:
        A ``boto3.Session`` in the settings' region.
    """
    return kept_session(
        ("plain", settings.profile, settings.region, settings.aws_role_arn),
        lambda: profile_session(settings.profile, settings.region, settings.aws_role_arn),
    )


def kept_session(key: tuple[object, ...], make: Callable[[], Any]) -> Any:
    """The process's boto3 session for ``key``, made by ``make`` the first time it is asked for.

    A new boto3 session parses botocore's endpoint and service models again: a client made from a
    new session cost 88 ms of CPU, one made from a kept session 2.4 ms (2026-11-27, this machine).
    Made per call, that was half of the pytest workers' Python time in the integration tests, and
    every CLI command, notebook cell or producer that opens a client paid it. A session is kept per
    process (a forked Spark worker makes its own) and per the variables in :data:`SESSION_ENVIRON`.

    Args:
        key: What the session is for: its kind, profile, region and role.
        make: Builds the session.
    """
    full = (os.getpid(), *key, *(os.environ.get(name) for name in SESSION_ENVIRON))
    with KEPT_LOCK:
        if full not in _kept:
            _kept[full] = make()
        return _kept[full]


def profile_session(profile: str, region: str, role_arn: str | None = None, botocore_session: Any = None) -> Any:
    """A boto3 session from a profile's credentials (dummy keys for emulators), then ``role_arn`` assumed.

    Args:
        profile: The icestream profile (``local`` and ``localstack`` use the emulator's dummy keys).
        region: The region.
        role_arn: A role to assume through STS (refreshed before it expires), or None.
        botocore_session: A configured botocore session to build on (default: a new one).

    Returns:
        A ``boto3.Session``.
    """
    import boto3
    import botocore.session

    keys = EMULATOR_DUMMY_KEYS.get(profile)
    base_botocore = botocore_session or botocore.session.get_session()
    if keys is not None:
        base_botocore.set_credentials(*keys)
    base = boto3.Session(botocore_session=base_botocore, region_name=region)
    if not role_arn:
        return base
    from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials

    fetcher = AssumeRoleCredentialFetcher(
        client_creator=base_botocore.create_client,
        source_credentials=base.get_credentials(),
        role_arn=role_arn,
        extra_args={"RoleSessionName": ROLE_SESSION_NAME},
    )
    # The caller's botocore session keeps its customisations (clients.py's timestamp parser); the
    # STS client above was given the base keys explicitly, so replacing the session's keys is safe.
    assumed = botocore_session or botocore.session.get_session()
    assumed._credentials = DeferredRefreshableCredentials(method="assume-role", refresh_using=fetcher.fetch_credentials)
    return boto3.Session(botocore_session=assumed, region_name=region)


def client(settings: Settings, service: str, aws_session: Any = None, **options: Any) -> Any:
    """A boto3 client for ``s3``, ``glue`` or ``kinesis`` at the settings' endpoint for it.

    Args:
        settings: The active settings.
        service: The service name.
        aws_session: A session from :func:`session` to reuse (default: a new one).
        **options: Client options (``config=botocore.config.Config(...)``).

    Returns:
        The client; a Glue client names ``glue_catalog_id`` in every call when it is set.
    """
    endpoint = getattr(settings, SERVICE_ENDPOINTS[service]) if service in SERVICE_ENDPOINTS else None
    with KEPT_LOCK:
        made = (aws_session or session(settings)).client(
            service, region_name=settings.region, endpoint_url=endpoint, **options
        )
    if service == "glue" and settings.glue_catalog_id:
        catalog_id = settings.glue_catalog_id

        def name_the_catalog(params: dict[str, Any], **_: Any) -> None:
            params.setdefault("CatalogId", catalog_id)

        # botocore's hook for default parameters: every Glue call then targets the other account.
        made.meta.events.register("provide-client-params.glue", name_the_catalog)
    return made


def pyiceberg_properties(settings: Settings, aws_session: Any = None) -> dict[str, str]:
    """pyiceberg's Glue catalog and S3 (pyarrow) properties for the active settings.

    Credentials are passed only when boto3's own chain would not find the right ones: the
    emulators' dummy keys, or the assumed role's current keys (frozen when the table is opened;
    open the table again after the role's session, an hour by default, has expired).

    Args:
        settings: The active settings (a Glue catalog).
        aws_session: The session whose credentials pyarrow should use (default: :func:`session`).

    Returns:
        Properties for ``pyiceberg.catalog.glue.GlueCatalog``.
    """
    properties = {"glue.region": settings.region, "s3.region": settings.region, "warehouse": settings.warehouse_uri}
    properties |= _catalog_location(settings)
    if settings.s3_endpoint:
        properties["s3.force-virtual-addressing"] = "false"
    if dummy_keys(settings) is not None or settings.aws_role_arn:
        frozen = (aws_session or session(settings)).get_credentials().get_frozen_credentials()
        properties |= {"s3.access-key-id": frozen.access_key, "s3.secret-access-key": frozen.secret_key}
        if frozen.token:
            properties["s3.session-token"] = frozen.token
    return properties


def glue_unavailable(settings: Settings, table: str, error: Exception) -> ServiceUnavailableError:
    """The one error for a Glue catalog that did not answer, whichever engine asked."""
    where = settings.glue_endpoint or f"AWS Glue in {settings.region}"
    return ServiceUnavailableError(
        f"Glue at {where} did not answer for {table}: {error}. Check the region, the endpoint and the "
        "credentials (`icestream doctor`)."
    )


def ensure_bucket(settings: Settings) -> str:
    """Create the warehouse's bucket unless it exists (idempotent): for an emulator, whose state starts empty.

    On real AWS the bucket, its encryption and its policy come from the deployment (CloudFormation).

    Returns:
        The bucket name.

    Raises:
        ServiceUnavailableError: If S3 does not answer at the endpoint.
    """
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    bucket = urlparse(settings.warehouse_uri).netloc
    s3 = client(settings, "s3", config=Config(connect_timeout=3, retries={"mode": "standard", "max_attempts": 2}))
    try:
        existing = {item["Name"] for item in s3.list_buckets().get("Buckets", [])}
        if bucket not in existing:
            where = {} if settings.region == "us-east-1" else {"LocationConstraint": settings.region}
            s3.create_bucket(Bucket=bucket, **({"CreateBucketConfiguration": where} if where else {}))
    except (BotoCoreError, ClientError) as error:
        raise ServiceUnavailableError(
            f"S3 at {settings.s3_endpoint or 'AWS'} could not create the warehouse bucket {bucket} ({error}). "
            "Is the emulator running (LocalStack: docker run -p 4566:4566 localstack/localstack)?"
        ) from None
    return bucket


ACCESS_DENIED = ("AccessDenied", "AccessDeniedException", "403")  # a role that may not ask: not a bad setting


def check_catalog_access(settings: Settings, creates_namespace: bool = False) -> None:
    """Before a Spark session on Glue starts: its credentials, its role, Glue and the warehouse's bucket.

    Each problem is one error that names the setting and the fix, before Spark starts and before any
    table is touched; without the check, each was a Java stack trace at the first statement. The calls
    are ``GetDatabase`` and a one-key listing of the warehouse. Not every duty may make them (the
    ingest's and the maintenance job's roles have neither ``s3:ListBucket`` nor, for maintenance,
    ``glue:GetDatabase``: policies/duties.json), so an access denial passes: it says nothing about the
    setting, and the statements the role is granted run as before. A database that does not exist is
    refused, except for a session that creates it (``icestream setup``, notebook 00).

    Args:
        settings: The session's settings.
        creates_namespace: The session goes on to create the namespace: its database may be missing.

    Raises:
        ConfigError: No credentials, a role that cannot be assumed, no such database or no such bucket.
        ServiceUnavailableError: Glue or S3 does not answer at its endpoint.
    """
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    quick = Config(connect_timeout=3, read_timeout=15, retries={"mode": "standard", "max_attempts": 2})
    aws_session = session(settings)
    try:
        credentials = aws_session.get_credentials()
        if credentials is None:
            raise ConfigError(
                "No AWS credentials for the Glue catalog: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (on EMR and Glue, the instance's or the job's role provides them)."
            )
        credentials.get_frozen_credentials()  # with aws_role_arn: the role is assumed here
    except ClientError as error:
        raise ConfigError(
            f"ICESTREAM_AWS_ROLE_ARN / aws_role_arn: {settings.aws_role_arn} could not be assumed "
            f"({_code(error)}): its trust policy must name the caller (`aws sts get-caller-identity`)."
        ) from None
    glue_where = settings.glue_endpoint or f"AWS Glue in {settings.region}"
    try:
        client(settings, "glue", aws_session, config=quick).get_database(Name=settings.namespace)
    except ClientError as error:
        if _code(error) == "EntityNotFoundException" and not creates_namespace:
            raise ConfigError(
                f"ICESTREAM_NAMESPACE / namespace: the Glue database {settings.namespace} does not exist at "
                f"{glue_where}: run `icestream setup` first (it creates it), or name the namespace's database."
            ) from None
        if _code(error) not in ("EntityNotFoundException", *ACCESS_DENIED):
            setting = "ICESTREAM_GLUE_ENDPOINT / ICESTREAM_REGION"
            raise ConfigError(f"Glue at {glue_where} answered {_code(error)}: {error}. Check {setting}.") from None
    except BotoCoreError as error:
        raise ServiceUnavailableError(
            f"Glue at {glue_where} does not answer ({error}): check ICESTREAM_GLUE_ENDPOINT and ICESTREAM_REGION."
        ) from None
    parsed = urlparse(settings.warehouse_uri)
    s3_where = settings.s3_endpoint or f"S3 in {settings.region}"
    try:
        client(settings, "s3", aws_session, config=quick).list_objects_v2(
            Bucket=parsed.netloc, Prefix=parsed.path.lstrip("/"), MaxKeys=1
        )
    except ClientError as error:
        if _code(error) == "NoSuchBucket":
            raise ConfigError(
                f"ICESTREAM_WAREHOUSE / warehouse: the bucket {parsed.netloc} does not exist at {s3_where}: create "
                "it (the CloudFormation stack makes it), or name the warehouse's bucket."
            ) from None
        if _code(error) not in ACCESS_DENIED:
            raise ConfigError(
                f"{s3_where}, bucket {parsed.netloc}, answered {_code(error)}: {error}. Check ICESTREAM_WAREHOUSE."
            ) from None
    except BotoCoreError as error:
        raise ServiceUnavailableError(
            f"{s3_where} does not answer ({error}): check ICESTREAM_S3_ENDPOINT and ICESTREAM_REGION."
        ) from None


def _code(error: Exception) -> str:
    return str(getattr(error, "response", {}).get("Error", {}).get("Code", type(error).__name__))


def endpoint_host(endpoint: str) -> tuple[str, bool]:
    """``host:port`` of an endpoint URL and whether it uses TLS (DuckDB's ENDPOINT and USE_SSL)."""
    parsed = urlparse(endpoint)
    return parsed.netloc, parsed.scheme == "https"
