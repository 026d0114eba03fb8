"""The stream function: streamed responses (SSE, the OpenAI-compatible chat API) on a Lambda function URL.

API Gateway HTTP APIs give an integration 30 seconds and do not stream, and Lambda's managed Python
runtime cannot stream a response itself. So this function runs a web server (missions.app.streaming,
started by functions/stream/run.sh) behind the AWS Lambda Web Adapter, a public layer whose wrapper
(`AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap`) starts that server and forwards each invocation to it; in
`response_stream` mode it streams the server's response back through a function URL whose invoke mode is
RESPONSE_STREAM, for up to 15 minutes (the function's timeout, Lambda's ceiling).

The URL's AuthType is NONE: the function verifies the caller's bearer token itself, as the HTTP API's
JWT authorizer does, against the same issuer and audiences (the stack's Cognito user pool and its app
clients, or auth.issuer/auth.audience). Browsers on the sign-in callbacks' origins (the apps that sign
users in) may call it (CORS). Environments with IAM auth (auth.type "iam") get no stream function: a
function URL with AWS_IAM auth names a principal, not the JWT claims the stream handler reads.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.components.access import ACCESS, Resources, grant
from infra.components.api import browser_origins
from infra.components.functions import FunctionFactory
from infra.config import EnvironmentConfig
from missions.app.streaming import DEFAULT_PORT, READINESS_PATH
from missions.core.settings import environment_of
from missions.core.specs import STREAM_FUNCTION

# The Lambda Web Adapter's public layer (github.com/awslabs/aws-lambda-web-adapter, published by AWS in
# account 753240598075 of every commercial region; China regions publish it under another account), pinned:
# version 30 is the adapter 1.1.0 its README names for zip packages. A new version is a deliberate bump,
# after reading its changelog (the adapter's environment variables have changed between majors).
WEB_ADAPTER_LAYER = "arn:{partition}:lambda:{region}:753240598075:layer:LambdaAdapterLayer{arch}:30"
WEB_ADAPTER_ARCH = {"arm64": "Arm64", "x86_64": "X86"}
TIMEOUT_SECONDS = 900  # a chat turn may take minutes; a function URL streams for at most 15
CORS_MAX_AGE = Duration.hours(1)


def web_adapter_environment() -> dict[str, str]:
    """How the adapter runs the function: its wrapper starts run.sh, which serves on AWS_LWA_PORT; the
    adapter waits for READINESS_PATH to answer, then streams each response as the server sends it."""
    return {
        "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
        "AWS_LWA_INVOKE_MODE": "response_stream",
        "AWS_LWA_PORT": str(DEFAULT_PORT),
        "AWS_LWA_READINESS_CHECK_PATH": READINESS_PATH,
    }


class Streaming(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: EnvironmentConfig,
        functions: FunctionFactory,
        resources: Resources,
        issuer: str,
        audience: list[str],
        site_url: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        adapter = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "WebAdapter",
            WEB_ADAPTER_LAYER.format(
                partition=stack.partition, region=stack.region, arch=WEB_ADAPTER_ARCH[config.architecture]
            ),
        )
        self.function = functions.create(
            self,
            "stream",
            STREAM_FUNCTION,
            description="streamed responses: mission events (SSE) and the OpenAI-compatible chat API",
            timeout_seconds=TIMEOUT_SECONDS,
            extra_layers=[adapter],
            environment={
                **web_adapter_environment(),
                # the audiences joined: a list of CDK tokens (client ids) renders as one string
                **environment_of(jwt_issuer=issuer, jwt_audience=",".join(audience)),
            },
        )
        grant(self.function.role, ACCESS["stream"], resources)  # type: ignore[arg-type]
        self.url = self.function.add_function_url(
            auth_type=lambda_.FunctionUrlAuthType.NONE,
            invoke_mode=lambda_.InvokeMode.RESPONSE_STREAM,
            cors=lambda_.FunctionUrlCorsOptions(
                allowed_origins=browser_origins(config, site_url),
                allowed_methods=[lambda_.HttpMethod.GET, lambda_.HttpMethod.POST],
                allowed_headers=["authorization", "content-type", "last-event-id", "x-conversation-id"],
                exposed_headers=["x-conversation-id", "x-mission-id"],
                max_age=CORS_MAX_AGE,
            ),
        )
