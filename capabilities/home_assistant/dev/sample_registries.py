"""The sample home's registries, as HA's websocket API lists them: its areas, a device for each
integration in each area (a real home's devices group entities much this way), and every entity with
its integration and device. Entities take their area from their device, as most do in HA."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from capabilities.home_assistant.dev.sample_data import AREAS, Entity
from capabilities.home_assistant.ha.port import AreaEntry, DeviceEntry, EntityEntry, Registries

WITHOUT_DEVICE = ("automation", "script", "zone", "sun", "person")


def registries(entities: Mapping[str, Entity]) -> Registries:
    devices: dict[str, DeviceEntry] = {}
    listed: list[EntityEntry] = []
    for entity in entities.values():
        device_id = None
        if entity.domain not in WITHOUT_DEVICE and entity.area is not None:
            device_id = hashlib.sha1(f"{entity.integration}:{entity.area}".encode()).hexdigest()[:32]
            devices.setdefault(
                device_id,
                DeviceEntry(
                    id=device_id,
                    name=f"{AREAS[entity.area]} {entity.integration.replace('_', ' ').title()}",
                    area_id=entity.area,
                    manufacturer=entity.integration.replace("_", " ").title(),
                ),
            )
        listed.append(
            EntityEntry(
                entity_id=entity.entity_id,
                original_name=entity.name,
                platform=entity.integration,
                device_id=device_id,
                area_id=entity.area if device_id is None else None,
            )
        )
    areas = [AreaEntry(area_id=area_id, name=name) for area_id, name in AREAS.items()]
    return Registries(areas=areas, devices=list(devices.values()), entities=listed)
