"""The sample home renders HA templates as HA does (Jinja2's sandbox, HA's functions, filters and
tests), refuses what it cannot render with a TemplateError (HA's 400), and reaches nothing else."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from capabilities.home_assistant.dev.templates import TemplateError, TemplateHome, render
from capabilities.home_assistant.ha.port import State

NOW = datetime(2025, 3, 14, 11, 0, tzinfo=UTC)


def state(entity_id: str, value: str, **attributes: object) -> State:
    return State(entity_id=entity_id, state=value, attributes=attributes, last_changed=NOW, last_updated=NOW)


HOME = TemplateHome(
    states={
        s.entity_id: s
        for s in (
            state("sensor.power", "1250", unit_of_measurement="W", friendly_name="Power"),
            state("sensor.broken", "unavailable"),
            state("light.desk", "on", brightness=128, friendly_name="Desk"),
            state("light.hall", "off", friendly_name="Hall"),
            state("climate.hp", "heat", temperature=20.0),
        )
    },
    now=NOW,
    time_zone=ZoneInfo("Europe/Amsterdam"),
    areas={"office": "Office", "hallway": "Hallway"},
    entity_areas={"light.desk": "office", "light.hall": "hallway", "sensor.power": "office"},
    entity_integrations={"light.desk": "hue", "light.hall": "hue", "sensor.power": "dsmr"},
)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Power is {{ states('sensor.power') }} W", "Power is 1250 W"),
        ("{{ states('sensor.power') | float + 50 }}", "1300.0"),  # the filter binds before the +
        ("{{ states('sensor.power') | int / 1000 }}", "1.25"),
        ("{{ (states('sensor.power') | float / 3) | round(1) }}", "416.7"),
        ("{{ states('sensor.power', with_unit=True) }}", "1250 W"),
        ("{{ states('sensor.nothing') }}", "unknown"),
        ("{{ states('sensor.broken') | float(0) }}", "0"),
        ("{{ is_state('light.desk', 'on') and not is_state('light.hall', 'on') }}", "True"),
        ("{{ state_attr('light.desk', 'brightness') }}", "128"),
        ("{{ state_attr('climate.hp', 'temperature') > 19 }}", "True"),
        ("{{ states.light.desk.state }} {{ states.light.desk.name }}", "on Desk"),
        ("{{ states['light.desk'].state }} {{ states.light['hall'].state }}", "on off"),
        ("{{ states.light | map(attribute='entity_id') | join(', ') }}", "light.desk, light.hall"),
        ("{{ states.light | selectattr('state', 'eq', 'on') | list | count }}", "1"),
        ("{{ ['light.desk', 'light.hall'] | select('is_state', 'off') | list }}", "['light.hall']"),
        ("{{ area_entities('office') }}", "['light.desk', 'sensor.power']"),
        (
            "{{ area_name('light.hall') }} {{ area_id('Office') }} {{ areas() | tojson }}",
            'Hallway office ["hallway", "office"]',
        ),
        ("{{ integration_entities('hue') | count }}", "2"),
        ("{{ now().hour }} {{ now().isoformat() }}", "12 2025-03-14T12:00:00+01:00"),
        ("{{ 'yes' if has_value('sensor.broken') else 'no' }}", "no"),
        ("{{ 'a' ~ 1 ~ none }}", "a1None"),
        ("{{ {'x': [1, 2]} | tojson }}", '{"x": [1, 2]}'),
        ("{{ 7 // 2 }} {{ 7 % 2 }} {{ 2 ** 3 }} {{ -(1 + 2) * 2 }}", "3 1 8 -6"),
        ("{{ 'Desk' in states.light.desk.name }} {{ 3 not in [1, 2] }}", "True True"),
        ("{{ missing_variable }}|{{ states.light.nope.state }}|", "||"),
        ("{{ states('sensor.power') is number }} {{ 1 is number }} {{ x is defined }}", "False True False"),
        ("{{- '  trimmed  ' | trim -}}   !", "trimmed!"),
        ("{# a comment #}{{ 1 }}", "1"),
        ("{% if true %}x{% endif %}", "x"),  # statements, as HA renders them
        ("{% for s in states.light %}{{ s.name }},{% endfor %}", "Desk,Hall,"),
        ("{{ iif(is_state('light.desk', 'on'), 'lit', 'dark') }} {{ none | iif('y', 'n', 'unknown') }}", "lit unknown"),
        ("{{ (now() - as_datetime('2025-03-14T10:00:00+00:00')).total_seconds() }}", "3600.0"),
        ("no template at all", "no template at all"),
    ],
)
def test_expressions_render_as_HA_renders_them(template: str, expected: str) -> None:
    assert render(template, HOME) == expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ states('sensor.broken') | float }}", "float got invalid input 'unavailable'"),
        ("{{ states('sensor.power') | nope }}", "No filter named 'nope'"),
        ("{{ nope() }}", "'nope' is undefined"),
        ("{{ 1 + }}", "TemplateSyntaxError: unexpected"),
        ("{{ states.__class__ }}", "not allowed"),
        ("{{ ''.join(['a']) }}", "not allowed"),  # only a few harmless methods are reachable
        ("{{ [1].append(2) }}", "not allowed"),
        ("{{ 'x' * 100000000 }}", "not supported"),
        ("{{ 2 ** 100000 }}", "too large"),
        ("{{ " + "(" * 70 + "1" + ")" * 70 + " }}", "nested"),
        ("{{ 1 }", "TemplateSyntaxError: unexpected '}' \\(line 1\\)"),
        ("{% if true %}x", "TemplateSyntaxError: Unexpected end of template"),
    ],
)
def test_what_cannot_render_is_a_TemplateError(template: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        render(template, HOME)


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ states.light.desk._state }}",
        "{{ now().__class__.__init__.__globals__ }}",
        "{{ cycler.__init__.__globals__.os }}",
        "{{ lipsum.__globals__['os'].popen('id').read() }}",
        "{{ '{0.__class__}'.format(1) }}",
        "{{ self.__init__.__globals__.__builtins__ }}",
        "{{ namespace.__init__.__globals__ }}",
        "{% for c in [].__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
    ],
)
def test_a_template_cannot_reach_python_internals(template: str) -> None:
    # Given a template that climbs from a value to Python's classes, modules or builtins
    # When it is rendered
    # Then the sandbox refuses it with a TemplateError that says so, before anything is reached
    with pytest.raises(TemplateError, match="SecurityError: access to '_+[a-z]+_*' of a .* is not allowed"):
        render(template, HOME)
