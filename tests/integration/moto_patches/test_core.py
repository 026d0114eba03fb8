"""Patches 26 and 28 (missions.local.moto.core), tested against botocore and moto themselves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from missions.local import moto as moto_patches
from missions.local.moto import core


@pytest.fixture
def regions_patched(keep_patch_state: None) -> Iterator[None]:
    moto_patches.install()
    yield


def test_regions_are_listed_as_botocore_lists_them(regions_patched: None) -> None:
    import botocore.session

    # Given services whose endpoint prefix is and is not their name, and one botocore does not know
    session = botocore.session.get_session()
    original = core.REGIONS_LISTED_ONCE.original
    assert botocore.session.Session.get_available_regions is not original  # the patch answers below
    for service in ("ec2", "stepfunctions", "dynamodb", "s3", "no-such-service"):
        for partition in ("aws", "aws-cn", "aws-us-gov"):
            for non_regional in (False, True):
                # When the patched session lists them, Then it answers as botocore does
                listed = session.get_available_regions(service, partition, non_regional)
                assert listed == original(session, service, partition, non_regional), (service, partition)
    assert "us-east-1" in session.get_available_regions("stepfunctions")  # its prefix is "states"


def test_moto_reads_each_botocore_model_as_its_own_loader_did_through_one_loader(regions_patched: None) -> None:
    """Patch 28."""
    from moto.core import utils

    # Given the models moto reads to parse requests, paginate and serialize answers
    original = core.MODELS_LOADED_ONCE.original
    assert utils._load_service_model is not original  # the patch answers below
    for service, model in (("dynamodb", "service-2"), ("stepfunctions", "service-2"), ("lambda", "paginators-1")):
        # When the patched loader reads one, twice, Then it is what moto's own loader reads, read once
        first = utils._load_service_model(service, model)
        assert first == original(service, model)
        assert utils._load_service_model(service, model) is first
