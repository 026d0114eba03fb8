"""The dashboard's static site in the template (moto's CloudFormation has no CloudFront, so the deploy into
moto runs without it): a private bucket read only by its distribution through origin access control, HTTPS
and security headers, the page uploaded with a config.json naming the API, the stream URL and the hosted
sign-in that redirects back to the site, and the API and stream URL answering the site's origin."""

from __future__ import annotations

import json
from typing import Any

from tests.infra.conftest import Assembly, deploy_time

DEV = "dev"


def _one(assembly: Assembly, type_: str, prefix: str = "") -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, r) for k, r in assembly.templates[DEV]["Resources"].items() if r["Type"] == type_ and k.startswith(prefix)
    ]
    return found


def test_the_site_bucket_is_private_and_read_only_by_its_distribution(assembly: Assembly):
    bucket_id, bucket = _one(assembly, "AWS::S3::Bucket", "SiteFiles")
    assert bucket["Properties"]["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    _, policy = _one(assembly, "AWS::S3::BucketPolicy", "SiteFilesPolicy")
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    reads = [s for s in statements if s["Effect"] == "Allow"]
    (read,) = reads
    assert read["Principal"] == {"Service": "cloudfront.amazonaws.com"} and read["Action"] == "s3:GetObject"
    distribution_id, distribution = _one(assembly, "AWS::CloudFront::Distribution", "SiteDistribution")
    assert "AWS:SourceArn" in json.dumps(read["Condition"]) and distribution_id in json.dumps(read["Condition"])
    assert any(s["Effect"] == "Deny" and "aws:SecureTransport" in json.dumps(s) for s in statements)
    # through origin access control (not the legacy identity), HTTPS only, index.html at /
    config = distribution["Properties"]["DistributionConfig"]
    (origin,) = config["Origins"]
    oac_id, oac = _one(assembly, "AWS::CloudFront::OriginAccessControl")
    assert origin["OriginAccessControlId"] == {"Fn::GetAtt": [oac_id, "Id"]}
    assert oac["Properties"]["OriginAccessControlConfig"]["SigningBehavior"] == "always"
    assert config["DefaultRootObject"] == "index.html"
    assert config["DefaultCacheBehavior"]["ViewerProtocolPolicy"] == "redirect-to-https"


def test_the_site_answers_with_security_headers_and_reaches_only_its_own_services(assembly: Assembly):
    headers_id, headers = _one(assembly, "AWS::CloudFront::ResponseHeadersPolicy", "SiteHeaders")
    _, distribution = _one(assembly, "AWS::CloudFront::Distribution", "SiteDistribution")
    behavior = distribution["Properties"]["DistributionConfig"]["DefaultCacheBehavior"]
    assert behavior["ResponseHeadersPolicyId"] == {"Ref": headers_id}
    security = headers["Properties"]["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    assert security["FrameOptions"]["FrameOption"] == "DENY" and security["ContentTypeOptions"]["Override"]
    assert security["StrictTransportSecurity"]["AccessControlMaxAgeSec"] >= 31536000
    csp = json.dumps(security["ContentSecurityPolicy"]["ContentSecurityPolicy"])
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "cdn" not in csp.lower()  # nothing from anywhere else


def test_the_page_goes_up_with_its_config_and_sign_in_redirects_back_to_it(assembly: Assembly):
    _, upload = _one(assembly, "Custom::CDKBucketDeployment", "SiteUpload")
    properties = upload["Properties"]
    assert properties["DestinationBucketName"] == {"Ref": _one(assembly, "AWS::S3::Bucket", "SiteFiles")[0]}
    assert properties["DistributionPaths"] == ["/*"]  # a new page is served at once
    markers = json.dumps(properties.get("SourceMarkers", []))
    # config.json: the API, the stream URL, the pool's domain, the people's client and the site as redirect
    for name in ("ApiHttp", "StreamstreamFunctionFunctionUrl", "ApiUsersClient", "ApiUsersDomain", "SiteDistribution"):
        assert name in markers, name
    _, client = _one(assembly, "AWS::Cognito::UserPoolClient", "ApiUsersClient")
    site = {
        "Fn::Join": [
            "",
            ["https://", {"Fn::GetAtt": [_one(assembly, "AWS::CloudFront::Distribution")[0], "DomainName"]}, "/"],
        ]
    }
    assert site in client["Properties"]["CallbackURLs"] and site in client["Properties"]["LogoutURLs"]
    assert "SiteUrl" in assembly.templates[DEV]["Outputs"]


def test_the_api_answers_the_sites_origin(assembly: Assembly):
    _, api = _one(assembly, "AWS::ApiGatewayV2::Api", "ApiHttp")
    cors = api["Properties"]["CorsConfiguration"]
    origin = {
        "Fn::Join": [
            "",
            ["https://", {"Fn::GetAtt": [_one(assembly, "AWS::CloudFront::Distribution")[0], "DomainName"]}],
        ]
    }
    assert origin in cors["AllowOrigins"] and "authorization" in cors["AllowHeaders"]


def test_cdks_upload_function_touches_only_the_two_buckets_and_the_cache(assembly: Assembly):
    policies = {
        k: p
        for k, p in assembly.templates[DEV]["Resources"].items()
        if p["Type"] == "AWS::IAM::Policy" and deploy_time(k)
    }
    (policy,) = policies.values()
    site_bucket = _one(assembly, "AWS::S3::Bucket", "SiteFiles")[0]
    assert policy["Properties"]["PolicyDocument"]["Statement"], policy
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        text = json.dumps(statement["Resource"])
        if all(a.startswith("s3:") for a in actions):
            assert site_bucket in text or "cdk-hnb659fds-assets" in text, statement
        else:
            assert actions in (
                ["cloudfront:GetInvalidation", "cloudfront:CreateInvalidation"],
                ["cloudfront:CreateInvalidation", "cloudfront:GetInvalidation"],
            ), actions


def test_every_environment_of_cdk_json_deploys_the_dashboard(assembly: Assembly):
    # (only the deploy into moto turns it off: moto has no CloudFront)
    for env in ("dev", "staging", "prod"):
        assert [k for k in assembly.templates[env]["Resources"] if k.startswith("SiteDistribution")], env
