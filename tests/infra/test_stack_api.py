"""The synthesized stacks' API and sign-in: routes, authorizers, the user pool and the outputs a client needs.

The synth itself runs cdk-nag's AwsSolutions pack and fails on any unacknowledged finding, so
every test here also stands on a nag-clean template.
"""

from __future__ import annotations

import json

import pytest

from infra.components.api import WEBHOOK_ROUTE, api_routes
from missions.core.capability import registry as registry
from tests.infra.conftest import OPS_CALLBACKS, Assembly
from tests.support.stack import ENVIRONMENTS, _one

SITE_PAGE = {"Fn::Join": ["", ["https://", {"Fn::GetAtt": ["SiteDistribution390DED28", "DomainName"]}, "/"]]}


def test_the_api_serves_every_handler_route_behind_jwt_and_webhooks_and_health_without(assembly: Assembly):
    routes = {
        r["Properties"]["RouteKey"]: r["Properties"]
        for r in assembly.resources("dev", "AWS::ApiGatewayV2::Route").values()
    }
    assert set(routes) == {f"{m} {p}" for m, p in api_routes()} | {f"POST {WEBHOOK_ROUTE}"}
    public = {f"{m} {p}" for m, p in api_routes(public=True)}
    # uptime checks hold no token, nor does an MCP client before it signs in (the endpoint's OAuth metadata)
    assert public == {
        "GET /health",
        "GET /ready",
        "GET /openapi.json",
        "GET /.well-known/oauth-protected-resource",
        "GET /.well-known/oauth-protected-resource/mcp",
    }
    assert {"POST /mcp", "GET /mcp", "DELETE /mcp"} <= set(routes) - public  # the MCP endpoint: behind the JWT
    for key, props in routes.items():
        expected = "NONE" if key == f"POST {WEBHOOK_ROUTE}" or key in public else "JWT"
        assert props.get("AuthorizationType", "NONE") == expected, key
    (authorizer,) = assembly.resources("dev", "AWS::ApiGatewayV2::Authorizer").values()
    assert authorizer["Properties"]["AuthorizerType"] == "JWT"
    assert "cognito-idp" in json.dumps(authorizer["Properties"]["JwtConfiguration"])  # the pool made here
    (stage,) = assembly.resources("dev", "AWS::ApiGatewayV2::Stage").values()
    assert stage["Properties"]["DefaultRouteSettings"]["ThrottlingRateLimit"] == 10
    assert "DestinationArn" in stage["Properties"]["AccessLogSettings"]
    (pool,) = assembly.resources("dev", "AWS::Cognito::UserPool").values()
    assert pool["Properties"]["MfaConfiguration"] == "ON"


def test_the_api_function_names_the_user_pools_issuer_for_the_mcp_endpoints_metadata(assembly: Assembly):
    from missions.core.settings import environment_of

    (variable,) = environment_of(jwt_issuer="https://issuer").keys()
    functions = assembly.resources("dev", "AWS::Lambda::Function").values()
    api = next(
        f
        for f in functions
        if f["Properties"]["Environment"]["Variables"].get("POWERTOOLS_SERVICE_NAME") == "missions-api"
    )
    issuer = json.dumps(api["Properties"]["Environment"]["Variables"][variable])
    assert "https://cognito-idp." in issuer and "ApiUsers" in issuer, issuer  # the pool made here


def test_iam_auth_and_an_external_issuer_are_configurable(variants: Assembly):
    synthesized = variants
    iam_routes = [r["Properties"] for r in synthesized.resources("iamonly", "AWS::ApiGatewayV2::Route").values()]
    public = {f"POST {WEBHOOK_ROUTE}", *(f"{m} {p}" for m, p in api_routes(public=True))}
    assert {r["AuthorizationType"] for r in iam_routes if r["RouteKey"] not in public} == {"AWS_IAM"}
    assert not synthesized.resources("iamonly", "AWS::Cognito::UserPool")
    (authorizer,) = synthesized.resources("sso", "AWS::ApiGatewayV2::Authorizer").values()
    assert authorizer["Properties"]["JwtConfiguration"] == {
        "Issuer": "https://login.example.com",
        "Audience": ["missions"],
    }
    assert not synthesized.resources("sso", "AWS::Cognito::UserPool")


def _output(assembly: Assembly, env: str, name: str) -> dict:
    (value,) = [o["Value"] for key, o in assembly.templates[env]["Outputs"].items() if key.startswith(f"Api{name}")]
    return value


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_user_pool_has_hosted_sign_in_for_people_and_client_credentials_for_machines(assembly: Assembly, env):
    # Given the pool made for an environment of cdk.json (no auth.issuer)
    pool_id, _ = _one(assembly, env, "AWS::Cognito::UserPool")
    # Then it has a domain named after the stack and the account (prefixes are unique per region)
    _, domain = _one(assembly, env, "AWS::Cognito::UserPoolDomain")
    assert domain["Properties"]["Domain"] == {"Fn::Join": ["", [f"missions-{env}-", {"Ref": "AWS::AccountId"}]]}
    assert domain["Properties"]["UserPoolId"] == {"Ref": pool_id}
    # and a resource server whose scope is missions/api
    server_id, server = _one(assembly, env, "AWS::Cognito::UserPoolResourceServer")
    assert server["Properties"]["Identifier"] == "missions"
    assert server["Properties"]["Scopes"] == [{"ScopeName": "api", "ScopeDescription": "use the missions API"}]
    api_scope = {"Fn::Join": ["", [{"Ref": server_id}, "/api"]]}
    # and a public client for people: authorization code (with PKCE: no secret) to the local callback
    user_id, user = _one(assembly, env, "AWS::Cognito::UserPoolClient", "ApiUsersClient")
    props = user["Properties"]
    assert props["AllowedOAuthFlows"] == ["code"] and props["AllowedOAuthFlowsUserPoolClient"] is True
    assert props["GenerateSecret"] is False
    assert props["CallbackURLs"] == ["http://localhost:8787/callback", SITE_PAGE]  # and the dashboard
    assert props["AllowedOAuthScopes"] == ["openid", "email", "profile", api_scope]
    assert props["SupportedIdentityProviders"] == ["COGNITO"]
    # and a confidential client for machines: client credentials for the API scope only, no user sign-in
    machine_id, machine = _one(assembly, env, "AWS::Cognito::UserPoolClient", "ApiUsersMachine")
    props = machine["Properties"]
    assert props["AllowedOAuthFlows"] == ["client_credentials"] and props["GenerateSecret"] is True
    assert props["AllowedOAuthScopes"] == [api_scope]
    assert props["ExplicitAuthFlows"] == ["ALLOW_REFRESH_TOKEN_AUTH"]
    # and the API's JWT authorizer accepts tokens of both clients from this pool
    _, authorizer = _one(assembly, env, "AWS::ApiGatewayV2::Authorizer")
    jwt = authorizer["Properties"]["JwtConfiguration"]
    assert jwt["Audience"] == [{"Ref": user_id}, {"Ref": machine_id}]
    assert {"Ref": pool_id} in jwt["Issuer"]["Fn::Join"][1]
    # and nothing of CDK's placeholder redirect is left anywhere
    assert "example.com" not in json.dumps(assembly.templates[env])


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_stack_outputs_what_a_client_needs_to_sign_in_and_call_the_api(assembly: Assembly, env):
    # Given the outputs of a stack with its own user pool
    pool_id, _ = _one(assembly, env, "AWS::Cognito::UserPool")
    domain_id, _ = _one(assembly, env, "AWS::Cognito::UserPoolDomain")
    user_id, _ = _one(assembly, env, "AWS::Cognito::UserPoolClient", "ApiUsersClient")
    machine_id, _ = _one(assembly, env, "AWS::Cognito::UserPoolClient", "ApiUsersMachine")
    # Then the API URL, the pool, both clients, the hosted UI, its token endpoint and sign-in page are there
    assert _output(assembly, env, "Url")["Fn::Join"][1][0] == "https://"
    assert _output(assembly, env, "UserPoolId") == {"Ref": pool_id}
    assert _output(assembly, env, "UserClientId") == {"Ref": user_id}
    assert _output(assembly, env, "MachineClientId") == {"Ref": machine_id}
    assert _output(assembly, env, "ApiScope") == "missions/api"
    hosted = _output(assembly, env, "HostedUiDomain")["Fn::Join"][1]
    assert hosted == ["https://", {"Ref": domain_id}, ".auth.", {"Ref": "AWS::Region"}, ".amazoncognito.com"]
    assert _output(assembly, env, "TokenUrl")["Fn::Join"][1] == [*hosted[:-1], ".amazoncognito.com/oauth2/token"]
    sign_in = _output(assembly, env, "SignInUrl")["Fn::Join"][1]
    assert {"Ref": user_id} in sign_in
    assert sign_in[-1] == "&response_type=code&redirect_uri=http%3A%2F%2Flocalhost%3A8787%2Fcallback"


def test_the_sign_in_domain_and_callbacks_come_from_the_environment(variants: Assembly):
    # Given an environment that names its domain prefix and callback URLs
    _, domain = _one(variants, "ops", "AWS::Cognito::UserPoolDomain")
    _, user = _one(variants, "ops", "AWS::Cognito::UserPoolClient", "ApiUsersClient")
    # Then the pool's domain and the people's client use them
    assert domain["Properties"]["Domain"] == "team-missions"
    assert user["Properties"]["CallbackURLs"] == [*OPS_CALLBACKS, SITE_PAGE]
