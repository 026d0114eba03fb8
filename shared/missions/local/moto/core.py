"""moto's core, shared by every service, patched: what it keeps, redoes or loads for nothing.

7. The instance tracker: every object of a moto model (each DynamoDB item, and each copy of a whole
   table that a TransactWriteItems takes for its rollback; each state machine copy an execution takes)
   is appended to its class's `instances_tracked` for moto's dashboard, and so never freed. The list
   holds them weakly now: what a table, bucket or execution still holds is tracked as before, and what
   nothing holds any more is freed.
8. (its core part) every request to any moto service lists its handler class's methods (by
   `inspect.getmembers`); a class's methods are listed once.
9. moto's CloudFormation imports every service's models, EC2's among them, which load EC2's catalog of
   instance types and their offerings per region at import: about 56 MB of a dev server's memory. The
   stack has no EC2 resource, so while the patches are installed that catalog loads empty (if EC2's
   models were imported before, they keep what they loaded). Installed first: the owners of the other
   patches may import EC2's models.
26. EC2's models list its regions at import, for three partitions, each call through a new boto3 Session
   that loads EC2's service model (botocore's largest) only to read its endpoint prefix: about 0.3 s of
   every process that starts the emulation (each `missions run`). The prefix is the same for every
   session and partition: each service's model is loaded once for it.
28. moto reads a service's botocore model (to parse requests and serialize answers) through a new Loader
   of its own (botocore's, with moto's extras) at each call, and each new Loader lists every service's
   directory first: about 0.2 s of every process that starts the emulation. One Loader now serves moto's
   calls (botocore's instance cache then keeps the listing, and the models, which nothing changes).
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from missions.local.moto._mechanism import Patch

_UNUSED_RESOURCES = ("ec2/resources/instance_types.json", "ec2/resources/instance_type_offerings/")


def _load_resource(resource: str) -> Any:
    if resource.startswith(_UNUSED_RESOURCES):
        return [] if "offerings" in resource else {}
    return LEAN_RESOURCES.original(resource)


class _WeakInstances:
    """A moto model's `instances_tracked` (its dashboard lists them; S3's reset disposes its keys),
    holding each instance weakly. Iterating yields the ones still alive."""

    def __init__(self, instances: Iterable[Any] = ()):
        self._lock = threading.Lock()
        self._refs: list[Callable[[], Any]] = []
        self._compact_at = 64
        for instance in instances:
            self.append(instance)

    def append(self, instance: Any) -> None:
        try:
            ref: Callable[[], Any] = weakref.ref(instance)
        except TypeError:  # a class without weak references: held as moto held it

            def ref(instance: Any = instance) -> Any:
                return instance

        with self._lock:
            self._refs.append(ref)
            if len(self._refs) >= self._compact_at:
                self._refs = [r for r in self._refs if r() is not None]
                self._compact_at = max(64, 2 * len(self._refs))

    def __iter__(self) -> Iterator[Any]:
        with self._lock:
            refs = list(self._refs)
        return iter([instance for r in refs if (instance := r()) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _weakly_tracked_new(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """moto's BaseModel.__new__, with the class's tracker made weak first (moto resets it to a list)."""
    tracked = cls.__dict__.get("instances_tracked")
    if tracked is not None and not isinstance(tracked, _WeakInstances):
        cls.instances_tracked = _WeakInstances(tracked)
    return WEAK_INSTANCES.original(cls, *args, **kwargs)


def _regions_listed_once(original: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """botocore's Session.get_available_regions, reading each service's endpoint prefix once (botocore
    loads the service's model for it at each call), then asking the endpoint data as botocore does."""
    prefixes: dict[str, str] = {}

    def get_available_regions(
        self: Any, service_name: str, partition_name: str = "aws", allow_non_regional: bool = False
    ) -> list[str]:
        from botocore.exceptions import UnknownServiceError

        if service_name not in prefixes:
            try:
                metadata = self.get_service_data(service_name)["metadata"]
            except UnknownServiceError:  # botocore's own answer (an empty list)
                return original(self, service_name, partition_name, allow_non_regional)
            prefixes[service_name] = metadata.get("endpointPrefix", service_name)
        resolver = self._get_internal_component("endpoint_resolver")
        return list(resolver.get_available_endpoints(prefixes[service_name], partition_name, allow_non_regional))

    return get_available_regions


@functools.cache
def _models_loader() -> Any:
    from moto.core.loaders import create_loader  # moto's: botocore's search path, then moto's extras

    return create_loader()


def _load_service_model(service_name: str, model_name: str) -> dict[str, Any]:
    """moto's loading of a service's model, through one Loader for the process."""
    loaded: dict[str, Any] = _models_loader().load_service_model(service_name, model_name)
    return loaded


LEAN_RESOURCES = Patch(
    "moto.utilities.utils",
    "load_resource",
    _load_resource,
    "9: EC2's models load its instance catalog (~56 MB) at import; the stack has no EC2 resource",
)
WEAK_INSTANCES = Patch(
    "moto.core.common_models:BaseModel",
    "__new__",
    staticmethod(_weakly_tracked_new),
    "7: moto tracks every model object for its dashboard and so never frees one; tracked weakly",
)
METHODS_LISTED_ONCE = Patch(
    "moto.core.responses",
    "method_names_from_class",
    functools.cache,
    "8: every request to moto lists its handler class's methods; listed once per class",
    wraps=True,
)
REGIONS_LISTED_ONCE = Patch(
    "botocore.session:Session",
    "get_available_regions",
    _regions_listed_once,
    "26: EC2's models list its regions at import, loading EC2's service model at each call; once per service",
    wraps=True,
)
MODELS_LOADED_ONCE = Patch(
    "moto.core.utils",
    "_load_service_model",
    _load_service_model,
    "28: moto loads each botocore model through a new Loader, which lists every service first; one Loader",
)
PATCHES = (REGIONS_LISTED_ONCE, LEAN_RESOURCES, WEAK_INSTANCES, METHODS_LISTED_ONCE, MODELS_LOADED_ONCE)
