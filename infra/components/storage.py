"""Every table the runtime uses (from missions.core.specs, shared with the emulation), the blob bucket and
the bucket of repository snapshots."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.components.nag import acknowledge
from infra.config import EnvironmentConfig
from missions.core.specs import TABLES, TableSpec


def removal_policy(config: EnvironmentConfig) -> RemovalPolicy:
    return RemovalPolicy.DESTROY if config.removal_policy == "destroy" else RemovalPolicy.RETAIN


def _attribute(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)  # every key is a string


class Storage(Construct):
    """`tables[spec.id]` and `bucket`; names are left to CloudFormation so tables can be replaced."""

    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig) -> None:
        super().__init__(scope, id)
        self.tables: dict[str, dynamodb.Table] = {spec.id: self._table(spec, config) for spec in TABLES}
        self.bucket = s3.Bucket(
            self,
            "Blobs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            removal_policy=removal_policy(config),
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-offloaded-fields",
                    expiration=Duration.days(config.blob_expiry_days),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "Server access logging is off: the bucket holds only offloaded envelope fields, expired after "
            "blob_expiry_days, read and written by key by the runtime's own roles (public access blocked, TLS "
            "only). This stack creates no access-log bucket and no CloudTrail trail; object-level auditing, "
            "when required, is CloudTrail S3 data events configured for the account.",
        )

        self.snapshots = s3.Bucket(
            self,
            "Snapshots",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,  # a deleted or overwritten snapshot stays recoverable until its version expires
            removal_policy=removal_policy(config),
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="forget-deleted-repositories",
                    noncurrent_version_expiration=Duration.days(config.deleted_snapshot_days),
                    expired_object_delete_marker=True,
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
                s3.LifecycleRule(  # an upload is consumed by its import; one never imported is dropped
                    id="expire-uploads", prefix="uploads/", expiration=Duration.days(1)
                ),
            ],
        )
        acknowledge(
            self.snapshots,
            "AwsSolutions-S1",
            "Server access logging is off: snapshots are written only by the import function and read by key "
            "by stages that read code (public access blocked, TLS only, versioned). Each live repository's owner "
            "and snapshots are in its record in the repositories table (deleting a repository deletes the record; "
            "point-in-time recovery keeps 35 days of the table); object-level access is in CloudTrail only where "
            "the account records S3 data events (this stack creates no trail).",
        )

    def _table(self, spec: TableSpec, config: EnvironmentConfig) -> dynamodb.Table:
        table = dynamodb.Table(  # not TableV2: the emulation's CloudFormation cannot deploy it
            self,
            spec.id.capitalize(),
            partition_key=_attribute(spec.partition_key),
            sort_key=_attribute(spec.sort_key) if spec.sort_key else None,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=spec.ttl_attribute,
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES if spec.stream else None,
            removal_policy=removal_policy(config),
        )
        for index in spec.indexes:  # each holds what its queries read (specs), so updates write it rarely
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_attribute(index.partition_key),
                sort_key=_attribute(index.sort_key) if index.sort_key else None,
                projection_type=dynamodb.ProjectionType(index.projection_type),
                non_key_attributes=list(index.non_key_attributes) or None,
            )
        return table
