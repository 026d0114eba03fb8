"""The HTTP API: the api handler's routes behind JWT (or IAM) auth, webhooks behind their HMAC."""

from __future__ import annotations

import json
from urllib.parse import quote, urlsplit

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.components.access import ACCESS, Resources, grant
from infra.components.functions import FunctionFactory, retention
from infra.components.nag import acknowledge, rendered
from infra.components.storage import removal_policy
from infra.config import EnvironmentConfig
from missions.core.settings import environment_of
from missions.core.specs import API_FUNCTION, WEBHOOK_FUNCTION

WEBHOOK_ROUTE = "/webhooks/{source}"
RESOURCE_SERVER, API_SCOPE = "missions", "api"  # machines ask for the scope "missions/api"
# one JSON line per request: enough to trace a call to its Lambda invocation without logging bodies
ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "method": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "latencyMs": "$context.responseLatency",
    "integrationError": "$context.integrationErrorMessage",
    "user": "$context.authorizer.claims.sub",
}


def api_routes(*, public: bool | None = None) -> list[tuple[str, str]]:
    """(method, path) of every route the api handler serves, read from its OpenAPI document, and the MCP
    endpoint's (its contract is MCP's, not in the document); `public`: only those that take no token (the
    operation's `security` is empty: /health, /ready, /openapi.json; the MCP endpoint's OAuth metadata), or
    only those that do."""
    from missions.app.api import app
    from missions.app.api.mcp_routes import MCP_ROUTES

    schema = app.get_openapi_schema()
    routes = []
    for path, item in schema.paths.items():
        for method in ("get", "post", "put", "delete", "patch"):
            operation = getattr(item, method, None)
            if operation is not None and (public is None or (operation.security == []) == public):
                routes.append((method.upper(), path))
    routes += [(method, path) for method, path, token in MCP_ROUTES if public is None or token != public]
    return sorted(routes)


def browser_origins(config: EnvironmentConfig, site_url: str | None = None) -> list[str]:
    """Where the apps that sign users in run (the sign-in callbacks' origins), and the dashboard's site."""
    origins = {f"{part.scheme}://{part.netloc}" for part in map(urlsplit, config.auth.callback_urls)}
    return [*sorted(origins), *([site_url] if site_url else [])]


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: EnvironmentConfig,
        functions: FunctionFactory,
        resources: Resources,
        site_url: str | None = None,
    ) -> None:
        """`site_url`: the dashboard's (CloudFront) origin: a sign-in redirect, and a browser origin the API
        answers (CORS)."""
        super().__init__(scope, id)
        self.site_url = site_url
        self.function = functions.create(self, "api", API_FUNCTION, description="HTTP API: missions, memory, feedback")
        grant(self.function.role, ACCESS["api"], resources)  # type: ignore[arg-type]
        self.webhook_function = functions.create(
            self, "webhook", WEBHOOK_FUNCTION, description="webhooks: verify, drop replays, put on the bus"
        )
        grant(self.webhook_function.role, ACCESS["webhook"], resources)  # type: ignore[arg-type]
        acknowledge(
            self.webhook_function.role,
            "AwsSolutions-IAM5[Resource::"
            + rendered(self, "arn:{partition}:secretsmanager:{region}:{account}:secret:")
            + f"{config.prefix}/webhooks/*]",
            "A webhook source is added by creating its secret under this prefix, without a redeploy.",
        )

        # the JWT authorizer's issuer and audiences (None with IAM auth): the stream function verifies the same
        self.jwt_issuer: str | None = None
        self.jwt_audience: list[str] = []
        self.user_pool: cognito.UserPool | None = None
        self.user_client: cognito.UserPoolClient | None = None
        self.machine_client: cognito.UserPoolClient | None = None
        self.domain: cognito.UserPoolDomain | None = None
        self.http_api = apigw.HttpApi(
            self,
            "Http",
            api_name=f"{config.prefix}-api",
            description="missions: start, watch, answer and rate long-running missions",
            create_default_stage=False,
            default_authorizer=self._authorizer(config),
            cors_preflight=apigw.CorsPreflightOptions(
                allow_origins=browser_origins(config, site_url),
                allow_methods=[apigw.CorsHttpMethod.ANY],
                allow_headers=["authorization", "content-type", "idempotency-key", "mcp-protocol-version"],
                expose_headers=["retry-after", "idempotent-replayed", "x-correlation-id"],
                max_age=Duration.hours(1),
            ),
        )
        log_group = logs.LogGroup(
            self, "AccessLogs", retention=retention(config), removal_policy=removal_policy(config)
        )
        stage = apigw.HttpStage(
            self,
            "Stage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigw.ThrottleSettings(
                rate_limit=config.throttle.rate_limit, burst_limit=config.throttle.burst_limit
            ),
        )
        cfn_stage: apigw.CfnStage = stage.node.default_child  # type: ignore[assignment]
        cfn_stage.access_log_settings = apigw.CfnStage.AccessLogSettingsProperty(
            destination_arn=log_group.log_group_arn, format=json.dumps(ACCESS_LOG_FORMAT)
        )

        if self.jwt_issuer:  # named in the MCP endpoint's OAuth metadata: where its clients sign in
            for name, value in environment_of(jwt_issuer=self.jwt_issuer).items():
                self.function.add_environment(name, value)
        api_integration = integrations.HttpLambdaIntegration("Api", self.function)
        for method, path in api_routes(public=False):
            self.http_api.add_routes(path=path, methods=[apigw.HttpMethod(method)], integration=api_integration)
        for method, path in api_routes(public=True):
            for route in self.http_api.add_routes(
                path=path,
                methods=[apigw.HttpMethod(method)],
                integration=api_integration,
                authorizer=apigw.HttpNoneAuthorizer(),
            ):
                acknowledge(
                    route,
                    "AwsSolutions-APIG4",
                    "Liveness, readiness and the API contract are read by uptime checks and load balancers that "
                    "hold no token, and the MCP endpoint's OAuth metadata (RFC 9728) by clients before they sign "
                    "in; they reveal nothing a user owns (readiness names the dependencies only).",
                )
        webhook_routes = self.http_api.add_routes(
            path=WEBHOOK_ROUTE,
            methods=[apigw.HttpMethod.POST],
            integration=integrations.HttpLambdaIntegration("Webhook", self.webhook_function),
            authorizer=apigw.HttpNoneAuthorizer(),
        )
        for route in webhook_routes:
            acknowledge(
                route,
                "AwsSolutions-APIG4",
                "Webhook senders cannot hold user tokens; each delivery is authenticated by an HMAC of its "
                "timestamp and body under the source's secret, checked for freshness and replay.",
            )
        stack = Stack.of(self)  # built from the API id: the emulation's CloudFormation has no ApiEndpoint attribute
        CfnOutput(self, "Url", value=f"https://{self.http_api.api_id}.execute-api.{stack.region}.{stack.url_suffix}/")

    def _authorizer(self, config: EnvironmentConfig) -> apigw.IHttpRouteAuthorizer:
        auth = config.auth
        if auth.type == "iam":
            return authorizers.HttpIamAuthorizer()
        if auth.issuer:
            self.jwt_issuer, self.jwt_audience = auth.issuer, list(auth.audience)
            return authorizers.HttpJwtAuthorizer("Jwt", auth.issuer, jwt_audience=list(auth.audience))
        self.user_pool = cognito.UserPool(
            self,
            "Users",
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(email=True),
            mfa=cognito.Mfa.REQUIRED,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            password_policy=cognito.PasswordPolicy(
                min_length=12, require_digits=True, require_lowercase=True, require_uppercase=True, require_symbols=True
            ),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            removal_policy=removal_policy(config),
        )
        for finding in ("AwsSolutions-COG3", "AwsSolutions-COG8"):
            acknowledge(
                self.user_pool,
                finding,
                "Threat protection needs Cognito's Plus plan (billed per user); MFA is required instead. "
                "Teams with their own identity provider set auth.issuer and no pool is created.",
            )
        clients = self._sign_in(self.user_pool, config)
        # what HttpUserPoolAuthorizer configures: the pool's issuer, its clients as the audience
        region = Stack.of(self.user_pool).region
        self.jwt_issuer = f"https://cognito-idp.{region}.amazonaws.com/{self.user_pool.user_pool_id}"
        self.jwt_audience = [client.user_pool_client_id for client in clients]
        return authorizers.HttpUserPoolAuthorizer("Cognito", self.user_pool, user_pool_clients=clients)

    def _sign_in(self, pool: cognito.UserPool, config: EnvironmentConfig) -> list[cognito.IUserPoolClient]:
        """Hosted sign-in on the pool's domain, a public client for people and one for machines; the
        authorizer accepts tokens of both (their ids are its audience)."""
        auth, stack = config.auth, Stack.of(self)
        # prefixes are global per region: the account id keeps the default unique (unresolved until deploy
        # when the environment names no account)
        prefix = auth.domain_prefix or f"{stack.stack_name}-{stack.account}"
        self.domain = pool.add_domain("Domain", cognito_domain=cognito.CognitoDomainOptions(domain_prefix=prefix))
        api_scope = cognito.ResourceServerScope(scope_name=API_SCOPE, scope_description="use the missions API")
        server = pool.add_resource_server(
            "ResourceServer", identifier=RESOURCE_SERVER, scopes=[api_scope], user_pool_resource_server_name="missions"
        )
        api = cognito.OAuthScope.resource_server(server, api_scope)
        # people: the CLI or a browser, authorization code flow with PKCE (a public client has no secret: it
        # sends a code_challenge, and Cognito then gives tokens for the code only with its verifier); SRP
        # for SDK sign-in as before
        self.user_client = pool.add_client(
            "Client",
            auth_flows=cognito.AuthFlow(user_srp=True),
            generate_secret=False,
            prevent_user_existence_errors=True,
            supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=[cognito.OAuthScope.OPENID, cognito.OAuthScope.EMAIL, cognito.OAuthScope.PROFILE, api],
                callback_urls=[*auth.callback_urls, *([f"{self.site_url}/"] if self.site_url else [])],
                logout_urls=[*auth.logout_urls, *([f"{self.site_url}/"] if self.site_url else [])],
            ),
        )
        # machines: client credentials (id + secret) for the API scope only; a token's sub is the client id,
        # so missions a machine starts belong to that client
        self.machine_client = pool.add_client(
            "Machine",
            generate_secret=True,
            prevent_user_existence_errors=True,
            supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
            o_auth=cognito.OAuthSettings(flows=cognito.OAuthFlows(client_credentials=True), scopes=[api]),
        )
        machine: cognito.CfnUserPoolClient = self.machine_client.node.default_child  # type: ignore[assignment]
        machine.explicit_auth_flows = ["ALLOW_REFRESH_TOKEN_AUTH"]  # no user may sign in through it

        base = self.domain.base_url()
        CfnOutput(self, "UserPoolId", value=pool.user_pool_id, description="Cognito user pool of the API's users")
        CfnOutput(self, "UserClientId", value=self.user_client.user_pool_client_id, description="people: code + PKCE")
        CfnOutput(
            self,
            "MachineClientId",
            value=self.machine_client.user_pool_client_id,
            description="machines: client credentials (its secret: aws cognito-idp describe-user-pool-client)",
        )
        CfnOutput(self, "HostedUiDomain", value=base, description="hosted sign-in (OAuth 2.0 endpoints under it)")
        CfnOutput(self, "TokenUrl", value=f"{base}/oauth2/token", description="POST here for tokens")
        CfnOutput(
            self,
            "SignInUrl",
            value=self.domain.sign_in_url(
                self.user_client, redirect_uri=quote(auth.callback_urls[0], safe=""), sign_in_path="/login"
            ),
            description="hosted sign-in page (authorization code flow to the first callback URL)",
        )
        CfnOutput(self, "ApiScope", value=f"{RESOURCE_SERVER}/{API_SCOPE}", description="the scope machines ask for")
        return [self.user_client, self.machine_client]
