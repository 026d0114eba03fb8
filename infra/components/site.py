"""The dashboard (shared/missions/web) as a static site: a private bucket behind CloudFront.

CloudFront reads the bucket through origin access control (the bucket stays private, its policy names
only this distribution), answers with security headers (a Content-Security-Policy that lets the page
reach only its own origin, the API, the stream URL and the sign-in domain), and HTTPS only. The files
go up with the deploy, laid out as `missions dev` serves them (`/` the page, `/ui/<file>` its modules),
beside `config.json`: the API and stream URLs and the hosted sign-in (its domain, the people's client,
this site as the redirect), resolved at deploy, so the same files work locally and here.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from infra.components.nag import acknowledge, rendered
from infra.components.storage import removal_policy
from infra.config import EnvironmentConfig

WEB_DIR = Path(__file__).resolve().parents[2] / "shared" / "missions" / "web"


def content_security_policy(region: str) -> str:
    """Where the page may connect: itself, the API, the stream function's URL and the hosted sign-in.
    Hosts by pattern (the API's and URL's ids are made in the same deploy; naming them would make the
    distribution wait on the API, whose CORS names the distribution)."""
    connect = " ".join(
        [
            "'self'",
            f"https://*.execute-api.{region}.amazonaws.com",
            f"https://*.lambda-url.{region}.on.aws",
            f"https://*.auth.{region}.amazoncognito.com",
        ]
    )
    return (
        f"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src {connect}; "
        "font-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
    )


def staged_files(source: Path = WEB_DIR) -> Path:
    """The page's files as the site serves them: index.html at the root, everything under ui/."""
    staged = Path(tempfile.mkdtemp(prefix="missions-site-"))
    atexit.register(shutil.rmtree, staged, True)  # CDK copies the asset into the cloud assembly at synth
    shutil.copytree(source, staged / "ui", ignore=shutil.ignore_patterns("__pycache__", "*.py", "*.pyc"))
    shutil.copy2(source / "index.html", staged / "index.html")
    return staged


class Site(Construct):
    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig) -> None:
        super().__init__(scope, id)
        self.bucket = s3.Bucket(
            self,
            "Files",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            removal_policy=removal_policy(config),
            auto_delete_objects=False,
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "The bucket holds the page's static files, written only by the deploy and read only by the "
            "distribution (origin access control); CloudFront's own logs are where requests are seen.",
        )
        headers = cloudfront.ResponseHeadersPolicy(
            self,
            "Headers",
            comment=f"{config.prefix} dashboard: security headers",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=content_security_policy(Stack.of(self).region), override=True
                ),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=Duration.days(365), include_subdomains=True, override=True
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True
                ),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.NO_REFERRER, override=True
                ),
            ),
        )
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment=f"{config.prefix} dashboard",
            default_root_object="index.html",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                response_headers_policy=headers,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
            ),
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
        )
        for finding, reason in (
            (
                "AwsSolutions-CFR1",
                "The dashboard is for the deployment's users wherever they are; no geography is excluded.",
            ),
            (
                "AwsSolutions-CFR2",
                "The site is static files; what it calls (the API) has its own throttling and "
                "authorizer. A WAF web ACL can be attached per deployment when its traffic asks for one.",
            ),
            (
                "AwsSolutions-CFR3",
                "Access logging to S3 needs an ACL-enabled log bucket this stack does not keep; "
                "CloudFront's standard metrics cover a static site. Enable logging per deployment if required.",
            ),
            (
                "AwsSolutions-CFR4",
                "The default *.cloudfront.net certificate is used (no custom domain configured); "
                "CloudFront then cannot pin the viewer TLS policy. A custom domain brings TLSv1.2_2021.",
            ),
        ):
            acknowledge(self.distribution, finding, reason)
        self.url = f"https://{self.distribution.distribution_domain_name}"

    def publish(self, settings: dict[str, Any]) -> s3deploy.BucketDeployment:
        """Upload the page with its config.json (`settings`, resolved at deploy) and refresh the cache."""
        deployment = s3deploy.BucketDeployment(
            self,
            "Upload",
            sources=[s3deploy.Source.asset(str(staged_files())), s3deploy.Source.json_data("config.json", settings)],
            destination_bucket=self.bucket,
            distribution=self.distribution,
            distribution_paths=["/*"],
            memory_limit=256,
        )
        # CDK makes the copying function once per stack, beside it (not under this construct)
        stack = Stack.of(self)
        copier = next(c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeployment"))
        bucket = stack.get_logical_id(self.bucket.node.default_child)  # type: ignore[arg-type]
        assets = rendered(self, "arn:{partition}:s3:::cdk-hnb659fds-assets-{account}-{region}/*")
        why = (
            "CDK's BucketDeployment function copies the page from the deploy's asset bucket into this site's "
            "bucket and invalidates this distribution; CDK writes its policy (wildcard actions on those two "
            "buckets, the invalidation on any distribution) and chooses its runtime. It runs only during deploys."
        )
        for finding in (
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            *(f"AwsSolutions-IAM5[Action::{a}]" for a in ("s3:GetObject*", "s3:GetBucket*", "s3:List*")),
            *(f"AwsSolutions-IAM5[Action::{a}]" for a in ("s3:DeleteObject*", "s3:Abort*")),
            f"AwsSolutions-IAM5[Resource::{assets}]",
            f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/*]",
            "AwsSolutions-IAM5[Resource::*]",
            "AwsSolutions-L1",
        ):
            acknowledge(copier, finding, why)
        return deployment
