"""The Home Assistant data layer of the home_assistant capability.

`port.HomeAssistant` is what stages use: HA's REST API as typed operations. Two implementations:
`rest.RestHomeAssistant` (a real HA, by URL and long-lived token) and the development package's
`dev.sample.SampleHome` (the bundled sample home, in memory: the offline default, not in the Lambda
layer). `settings.connect()` picks one from HA_URL / HA_TOKEN.

Only the port and the settings are imported here: the HTTP client and the sample week load when
first used, so a stage that needs neither does not pay for them at a cold start.
"""

from capabilities.home_assistant.ha.port import (
    AreaEntry,
    ConfigCheck,
    Dashboard,
    DeviceEntry,
    EntityEntry,
    HABadRequest,
    HAConfig,
    HAError,
    HATokenRejected,
    HAUnknownEntity,
    HAUnreachable,
    HAUnsupported,
    HistoryPoint,
    HomeAssistant,
    LogbookEntry,
    Registries,
    ServiceDescription,
    ServiceDomain,
    ServiceField,
    State,
    StateContext,
    StatisticPoint,
    UnitSystem,
)
from capabilities.home_assistant.ha.settings import HASettings, connect, ha_settings

__all__ = [
    "AreaEntry",
    "DeviceEntry",
    "EntityEntry",
    "Registries",
    "ConfigCheck",
    "Dashboard",
    "HABadRequest",
    "HAConfig",
    "HAError",
    "HASettings",
    "HATokenRejected",
    "HAUnknownEntity",
    "HAUnreachable",
    "HAUnsupported",
    "HistoryPoint",
    "HomeAssistant",
    "LogbookEntry",
    "ServiceDescription",
    "ServiceDomain",
    "ServiceField",
    "State",
    "StateContext",
    "StatisticPoint",
    "UnitSystem",
    "connect",
    "ha_settings",
]
