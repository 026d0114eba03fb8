"""The synthesized stacks' pipelines: a function per stage, a state machine per capability.

The synth itself runs cdk-nag's AwsSolutions pack and fails on any unacknowledged finding, so
every test here also stands on a nag-clean template.
"""

from __future__ import annotations

import json

from infra.components.pipeline import definition_of
from missions.core.capability import registry as registry
from tests.infra.conftest import Assembly
from tests.support.stack import SUITE_PYTHON, _actions, _function_service, _machines, _role_statements


def test_a_lambda_per_stage_per_capability_sized_by_the_capability(assembly: Assembly):
    functions = assembly.resources("dev", "AWS::Lambda::Function")
    assert registry.installed(), "no capability installed"
    for name in registry.installed():
        capability = registry.load(name)
        stages = {
            f["Properties"]["Description"].split(": ", 1)[1].removesuffix(" stage"): f["Properties"]
            for f in functions.values()
            if f["Properties"]["Environment"]["Variables"].get("MISSIONS_CAPABILITY") == name
        }
        assert set(stages) == {agent.name for agent in capability.pipeline.agents}
        for agent in capability.pipeline.agents:
            props = stages[agent.name]
            assert props["MemorySize"] == agent.memory_mb
            assert props["Timeout"] == agent.timeout_seconds
            assert props.get("ReservedConcurrentExecutions") == agent.reserved_concurrency
            assert (props["Handler"], props["Runtime"], props["Architectures"]) == (
                "handler.lambda_handler",
                SUITE_PYTHON,
                ["arm64"],
            )
            assert props["TracingConfig"] == {"Mode": "Active"} and len(props["Layers"]) == 1


def test_a_state_machine_per_capability_whose_definition_is_the_compilers(assembly: Assembly):
    machines = _machines(assembly, "dev")
    segments = _machines(assembly, "dev", "EXPRESS")
    functions = assembly.resources("dev", "AWS::Lambda::Function")
    assert len(machines) == len(registry.installed())
    for name in registry.installed():
        capability = registry.load(name)
        (machine,) = [
            m
            for m in machines.values()
            if m["Properties"]["StateMachineName"] == f"missions-dev-{name}".replace("_", "-")
        ]
        props = machine["Properties"]
        # the definition is the compiler's output verbatim; CloudFormation substitutes the ARNs
        assert props["DefinitionString"] == definition_of(capability)
        substitutions = props["DefinitionSubstitutions"]
        interrupt = functions[substitutions["fn_interrupt"]["Fn::GetAtt"][0]]
        assert _function_service(interrupt) == "missions-interrupt"
        assert props["TracingConfiguration"] == {"Enabled": True}
        assert props["LoggingConfiguration"]["Level"] == "ALL"
        # and its stages run in an Express machine of its own, the one the mission's machine starts
        segment = segments[substitutions["segment"]["Ref"]]["Properties"]
        assert segment["StateMachineName"] == f"missions-dev-{name}-segment".replace("_", "-")
        assert segment["DefinitionString"] == definition_of(capability, "segment")
        assert segment["TracingConfiguration"] == {"Enabled": True}
        assert segment["LoggingConfiguration"]["Level"] == "ALL"
        for agent in capability.pipeline.agents:
            target = functions[segment["DefinitionSubstitutions"][f"fn_{agent.name}"]["Fn::GetAtt"][0]]
            assert target["Properties"]["Description"] == f"{name}: {agent.name} stage"
        assert (
            substitutions[f"fn_{capability.pipeline.final}"]
            == segment["DefinitionSubstitutions"][f"fn_{capability.pipeline.final}"]
        )
    assert len(segments) == len(machines)


def test_a_missions_machine_may_start_only_its_own_segments_and_follow_them(assembly: Assembly):
    assert _machines(assembly, "dev"), "no mission state machine"
    for machine in _machines(assembly, "dev").values():
        props = machine["Properties"]
        name = props["StateMachineName"]
        statements = _role_statements(assembly, "dev", props["RoleArn"]["Fn::GetAtt"][0])
        (start,) = [s for s in statements if "states:StartExecution" in _actions(s)]
        # Then it starts its own segment machine and nothing else
        assert start["Resource"] == props["DefinitionSubstitutions"]["segment"]
        # and describes and stops only that machine's executions (standard and express ARNs)
        (follow,) = [s for s in statements if "states:DescribeExecution" in _actions(s)]
        assert _actions(follow) == {"states:DescribeExecution", "states:StopExecution"}
        rendered = json.dumps(follow["Resource"])
        assert f":execution:{name}-segment:*" in rendered and f":express:{name}-segment:*" in rendered
        # and the managed rule through which Step Functions learns that a segment ended
        (rule,) = [s for s in statements if "events:PutRule" in _actions(s)]
        assert "rule/StepFunctionsGetEventsForStepFunctionsExecutionRule" in json.dumps(rule["Resource"])
        assert _actions(rule) == {"events:PutTargets", "events:PutRule", "events:DescribeRule"}
