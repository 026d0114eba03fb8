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


def test_a_missions_machine_starts_only_its_own_segments_and_a_segment_only_the_next_and_its_token(
    assembly: Assembly,
):
    machines = _machines(assembly, "dev")
    segments = _machines(assembly, "dev", "EXPRESS")
    assert machines, "no mission state machine"
    for machine in machines.values():
        props = machine["Properties"]
        name = props["StateMachineName"]
        statements = _role_statements(assembly, "dev", props["RoleArn"]["Fn::GetAtt"][0])
        (start,) = [s for s in statements if "states:StartExecution" in _actions(s)]
        # Then the mission's machine starts its own segment machine and nothing else, and needs nothing to
        # follow it (it waits on a task token, not on the execution)
        assert start["Resource"] == props["DefinitionSubstitutions"]["segment"]
        assert not [s for s in statements if _actions(s) & {"states:DescribeExecution", "events:PutRule"}]
        # and its segment machine starts only its own next segment, and speaks only on this machine's tokens
        segment = segments[props["DefinitionSubstitutions"]["segment"]["Ref"]]["Properties"]
        own = _role_statements(assembly, "dev", segment["RoleArn"]["Fn::GetAtt"][0])
        (chain,) = [s for s in own if "states:StartExecution" in _actions(s)]
        assert _actions(chain) == {"states:StartExecution"}
        assert json.dumps(chain["Resource"]).endswith(f':stateMachine:{name}-segment"]]}}'), chain["Resource"]
        (token,) = [s for s in own if "states:SendTaskSuccess" in _actions(s)]
        assert _actions(token) == {"states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"}
        assert json.dumps(token["Resource"]).endswith(f':stateMachine:{name}"]]}}'), token["Resource"]
