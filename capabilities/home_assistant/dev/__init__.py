"""Development only: the bundled sample home and what serves it, never in the Lambda layer.

`sample.SampleHome` (the house of `sample_data`, rendering templates with `templates`) answers the
HomeAssistant port in memory: the offline default of `missions run` and the emulation when no HA_URL
is set. `fake_server` serves a SampleHome over HTTP as HA's REST API does, for tests. layers/build.py
leaves every capability's `dev/` package out, so in AWS a mission needs a real Home Assistant
(a connection in cdk.json) and says so when none is configured (`ha.settings.connect`).
"""
