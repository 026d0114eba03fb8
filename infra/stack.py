"""One environment of the runtime: storage, secrets, the layer, a pipeline per capability,
triggers, the HTTP API and monitoring, composed from one construct per concern."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from aws_cdk import ArnFormat, CfnOutput, Stack
from aws_cdk import aws_events as events
from constructs import Construct

from infra.components.access import ACCESS, Resources, bedrock_model_arns, grant, grant_timers
from infra.components.agent_versions import AgentVersions
from infra.components.api import Api
from infra.components.functions import FunctionFactory, RuntimeLayer
from infra.components.housekeeping import Housekeeping
from infra.components.monitoring import AlarmTopic, Monitoring
from infra.components.nag import acknowledge, rendered
from infra.components.notices import Notices
from infra.components.pipeline import CapabilityStack
from infra.components.repositories import Repositories
from infra.components.sandbox import Sandbox
from infra.components.secrets import Secrets
from infra.components.site import Site
from infra.components.storage import Storage
from infra.components.streaming import Streaming
from infra.components.triggers import Triggers, schedule_function_arn
from infra.components.user_schedules import UserSchedules, user_schedule_group
from infra.config import EnvironmentConfig
from missions.core.capability import registry as registry
from missions.core.capability.registry import Capability
from missions.core.settings import LIBRARY_ENVIRONMENT, environment_of
from missions.core.specs import INTERRUPT_FUNCTION, SCHEDULE_FUNCTION, TABLES, TRIGGER_FUNCTION, state_machine_name


def selected_capabilities(config: EnvironmentConfig) -> list[Capability]:
    """The environment's capabilities (cdk.json; all installed when it names none), and those they delegate to."""
    names = config.capabilities if config.capabilities is not None else registry.installed()
    return [registry.load(name) for name in registry.with_delegates(names)]


class MissionsStack(Stack):
    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, layer_dir: Path, **kwargs: Any):
        super().__init__(scope, id, description=f"missions runtime ({config.name})", **kwargs)
        self.config = config
        capabilities = selected_capabilities(config)

        storage = Storage(self, "Storage", config=config)
        secrets = Secrets(self, "Secrets", config=config)
        layer = RuntimeLayer(self, "Runtime", layer_dir=layer_dir, config=config).layer
        bus = events.EventBus(self, "Bus", event_bus_name=f"{config.prefix}-bus")
        notices = Notices(self, "Notices", config=config)
        on_bedrock = config.llm.provider == "bedrock"
        resources = Resources(
            tables=storage.tables,
            bucket=storage.bucket,
            snapshots_bucket=storage.snapshots,
            bus_arn=bus.event_bus_arn,
            # the provider's key (OpenAI's or Anthropic's); on Bedrock, the models the roles may invoke instead
            openai_secret_arn=None if on_bedrock else secrets.model_key_arn_pattern,
            bedrock_model_arns=bedrock_model_arns(config.llm.named_models()) if on_bedrock else [],
            webhook_secrets_arn_pattern=secrets.webhook_arn_pattern,
            notices_topic=notices.topic,
        )
        # every function's settings, named by the runtime's own settings model (missions.core.settings)
        environment = {
            **environment_of(
                **{f"{spec.id}_table": storage.tables[spec.id].table_name for spec in TABLES},
                blob_bucket=storage.bucket.bucket_name,
                snapshot_bucket=storage.snapshots.bucket_name,
                event_bus=bus.event_bus_name,
                notifications_topic=notices.topic.topic_arn,
                **config.llm.settings(),
                openai_secret=secrets.openai_key_name,
                anthropic_secret=secrets.anthropic_key_name,
                webhook_secrets_prefix=secrets.webhook_prefix,
                concurrency_limit=config.concurrency_limit,
                daily_budget_usd=config.daily_budget_usd,
                interrupt_sla_hours=config.interrupt_sla_hours,
                repo_roots=config.repo_roots or None,
                local_git_sources=config.local_git_sources or None,
                checkpoint_ttl_days=config.checkpoint_ttl_days,
            ),
            **LIBRARY_ENVIRONMENT,
        }
        functions = FunctionFactory(config=config, layer=layer, environment=environment)
        # analysis scripts run only in the sandbox functions: every function made after them knows their
        # names (so no runtime falls back to a child process of its own), and only the stages granted
        # invoke (Sandbox.grant_invoke: none of the installed capabilities runs scripts yet) may call them
        self.sandbox = Sandbox(self, "Sandbox", config=config, functions=functions)
        functions.environment.update(self.sandbox.settings())

        interrupt = functions.create(
            self, "interrupt", INTERRUPT_FUNCTION, description="records a question and the task token that resumes it"
        )
        alarm_topic = AlarmTopic(self, "Alarms", config=config).topic if config.alarms else None
        self.capability_stacks = {
            capability.name: CapabilityStack(
                self,
                f"Capability-{capability.name}",
                capability=capability,
                config=config,
                functions=functions,
                resources=resources,
                interrupt_function=interrupt,
                alarm_topic=alarm_topic,
                sandbox=self.sandbox,
            )
            for capability in capabilities
        }
        self.pipelines = {name: stack.pipeline for name, stack in self.capability_stacks.items()}
        state_machines = {name: pipeline.state_machine for name, pipeline in self.pipelines.items()}
        resources.state_machine_arns = [machine.state_machine_arn for machine in state_machines.values()]
        resources.execution_arn_patterns = [
            self.format_arn(
                service="states",
                resource="execution",
                resource_name=f"{state_machine_name(config.prefix, name)}:*",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            for name in state_machines
        ]
        functions.environment.update(
            environment_of(
                state_machine_arns=self.to_json_string(
                    {name: machine.state_machine_arn for name, machine in state_machines.items()}
                )
            )
        )
        # The interrupt function starts sub-missions too, but it was made before the machines (their await
        # states name it): it gets their ARNs built from their names, which refer to nothing of theirs (a
        # reference to the machines would be a cycle between this stack and the capabilities' stacks).
        named = {
            name: self.format_arn(
                service="states",
                resource="stateMachine",
                resource_name=state_machine_name(config.prefix, name),
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            for name in state_machines
        }
        for key, value in environment_of(state_machine_arns=self.to_json_string(named)).items():
            interrupt.add_environment(key, value)
        # and its grant, starting those machines by the same names
        grant(interrupt.role, ACCESS["interrupt"], replace(resources, state_machine_arns=list(named.values())))  # type: ignore[arg-type]

        # the schedule function reads users' schedules when they fire: it knows their group by name (its ARN
        # and the scheduler's role come after it, and a function cannot name its own ARN)
        functions.environment.update(environment_of(schedule_group=user_schedule_group(config)))
        triggers = Triggers(
            self,
            "Triggers",
            config=config,
            capabilities=capabilities,
            bus=bus,
            memory_table=storage.tables["memory"],
            state_machine_arns=resources.state_machine_arns,
            functions=functions,
            resources=resources,
        )
        # users' own schedules fire the schedule function; the API (made below) creates them
        user_schedules = UserSchedules(
            self,
            "UserSchedules",
            config=config,
            target=triggers.functions[SCHEDULE_FUNCTION.id],
            dead_letter_queue=triggers.dead_letter_queues[SCHEDULE_FUNCTION.id],
        )
        resources.user_schedule_arns = user_schedules.schedule_arns
        resources.scheduler_role_arn = user_schedules.role.role_arn
        functions.environment.update(user_schedules.settings())
        # flow control's debounce timers live in that group too: the trigger function sets them, the schedule
        # function (which they invoke, so its settings name it by its ARN built from its name) sets them again
        timers = {
            **user_schedules.settings(),
            **environment_of(schedule_target_arn=schedule_function_arn(self, config)),
        }
        for spec in (TRIGGER_FUNCTION, SCHEDULE_FUNCTION):
            grant_timers(triggers.functions[spec.id].role, resources)  # type: ignore[arg-type]
            for name, value in timers.items():
                triggers.functions[spec.id].add_environment(name, value)
        # the dashboard: its own pool's hosted sign-in redirects to it (an outside issuer's sign-in is not ours)
        ours = config.auth.type == "jwt" and not config.auth.issuer
        site = Site(self, "Site", config=config) if config.dashboard and ours else None
        api = Api(
            self, "Api", config=config, functions=functions, resources=resources, site_url=site.url if site else None
        )
        # the functions that cancel missions stop their executions (ACCESS: control_missions)
        controllers = [api.function, triggers.functions[TRIGGER_FUNCTION.id], triggers.functions[SCHEDULE_FUNCTION.id]]

        # streamed responses on a function URL, behind the same tokens as the API (none with IAM auth)
        streaming = None
        if api.jwt_issuer:
            streaming = Streaming(
                self,
                "Stream",
                config=config,
                functions=functions,
                resources=resources,
                issuer=api.jwt_issuer,
                audience=api.jwt_audience,
                site_url=site.url if site else None,
            )
            controllers.append(streaming.function)
            CfnOutput(
                self,
                "StreamUrl",
                value=streaming.url.url,
                description="streamed routes (SSE, the OpenAI-compatible chat API: base URL <StreamUrl>v1)",
            )

        for function in controllers:
            for name in state_machines:
                acknowledge(
                    function.role,  # type: ignore[arg-type]
                    "AwsSolutions-IAM5[Resource::"
                    + rendered(self, "arn:{partition}:states:{region}:{account}:execution:")
                    + f"{state_machine_name(config.prefix, name)}:*]",
                    "Executions are named by mission id at run time; a mission is cancelled only by its own user, "
                    "or by a trigger for a key of its own (checked in code).",
                )

        if site is not None and streaming is not None:
            assert api.domain is not None and api.user_client is not None  # the site exists with our own pool
            stack = Stack.of(self)
            site.publish(
                {
                    "auth": "cognito",
                    "api": f"https://{api.http_api.api_id}.execute-api.{stack.region}.{stack.url_suffix}",
                    "stream": streaming.url.url,
                    "cognito": {
                        "domain": api.domain.base_url(),
                        "client_id": api.user_client.user_pool_client_id,
                        "redirect_uri": f"{site.url}/",
                    },
                }
            )
            CfnOutput(self, "SiteUrl", value=f"{site.url}/", description="the dashboard (sign in with the user pool)")

        housekeeping = Housekeeping(self, "Housekeeping", config=config, factory=functions, resources=resources)
        agent_versions = AgentVersions(
            self, "AgentVersions", capabilities=capabilities, functions=functions, resources=resources
        )
        repositories = Repositories(
            self, "Repositories", config=config, bus=bus, functions=functions, resources=resources
        )
        service_functions = {
            "interrupt": interrupt,
            "api": api.function,
            "webhook": api.webhook_function,
            **({"stream": streaming.function} if streaming else {}),
            "repository-import": repositories.function,
            **triggers.functions,
            **housekeeping.functions,
            "deploy": agent_versions.function,
            **{f"sandbox-{tier}": fn for tier, fn in self.sandbox.functions.items()},
        }
        all_functions = dict(service_functions)
        for name, pipeline in self.pipelines.items():
            all_functions.update({f"{name}-{stage}": fn for stage, fn in pipeline.stages.items()})
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            topic=alarm_topic,
            state_machines=state_machines,
            functions=all_functions,
            service_functions=service_functions,
            dead_letter_queues={
                **triggers.dead_letter_queues,
                **housekeeping.dead_letter_queues,
                "repository-import": repositories.dead_letter_queue,
            },
        )
        self.storage, self.api, self.triggers, self.secrets = storage, api, triggers, secrets
        self.user_schedules = user_schedules
        CfnOutput(self, "Capabilities", value=json.dumps(sorted(state_machines)))
