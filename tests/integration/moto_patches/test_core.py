"""Patch 26 (missions.local.moto.core), tested against botocore itself."""

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
