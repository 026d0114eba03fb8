"""Every patch of moto the local emulation needs, one module per AWS service (moto is pinned exactly).

Each patch is declared once, as a `Patch` (what it replaces, with what, and why), in its service's
module; one mechanism (`_mechanism.PatchSet`) installs them all, idempotently, refusing loudly if a
moto upgrade moved or re-signed what one replaces, and removes them, restoring moto exactly. The
numbers are the patches' names across the code and the tests:

- core: 7 the instance tracker, weak; 8 a handler class's methods listed once; 9 EC2's catalog unloaded;
  26 each service's regions found without reloading its model; 28 botocore's models through one loader
- awslambda: 1 functions run in-process (`functions`); 3 stream records with Binary, base64
- events: 2 rules deliver to Lambda and Step Functions targets; 4 a custom bus's Ref
- dynamodb: 11 one request at a time; 17 a key query reads only its partition; 18 an index query
  too (each index's partitions kept by the writes); 20 a response's attribute values written as they are;
  21 an update expression parsed once; 22 its tree copied node by node; 23 a transaction keeps its items,
  not its tables
- stepfunctions: 4 a state machine from CloudFormation; 5 an execution's end reported; 6 executions
  bounded; 8 a definition parsed once, clients (lean: `clients`) and JSONPaths made once; 10 task
  tokens while executions start; 14 the startExecution.sync:2 integration; 19 a state's JSON data
  copied plainly; 24 the aws-sdk integration's parameter names; 25 a heartbeat or an answer before
  its task waits; 27 Batch's models unloaded
- cloudformation (applied when moto's CloudFormation is first imported): 12 a nested stack's outputs;
  13 function URLs; 15 custom resources' replies (`CloudFormationReplies`); 16 schedule groups

tests/integration/moto_patches/ fail loudly if a moto upgrade breaks any of them.
"""

from __future__ import annotations

from missions.local.moto import awslambda, cloudformation, core, dynamodb, events, functions, stepfunctions
from missions.local.moto._mechanism import LazyInit, Patch, PatchRefused, PatchSet
from missions.local.moto.cloudformation import CloudFormationReplies
from missions.local.moto.functions import (
    DEFAULT_TIMEOUT_SECONDS,
    Deferred,
    FunctionError,
    Handler,
    LocalContext,
    invoking,
    observe,
    register,
    registered,
    resolve_with,
    unregister,
)
from missions.local.moto.stepfunctions import KEEP_ENDED_EXECUTIONS, wait_reported

# core first: its patch 9 must be in place before the other owners' imports load EC2's models
PATCHES = PatchSet(
    core.PATCHES
    + awslambda.PATCHES
    + events.PATCHES
    + dynamodb.PATCHES
    + stepfunctions.PATCHES
    + cloudformation.PATCHES,
    lazy=stepfunctions.LAZY,
)


def install() -> None:
    """Apply every patch (idempotent); PatchRefused if moto no longer has what one replaces."""
    PATCHES.install()


def uninstall() -> None:
    """Restore moto as it was (idempotent)."""
    PATCHES.uninstall()


__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "KEEP_ENDED_EXECUTIONS",
    "PATCHES",
    "LazyInit",
    "CloudFormationReplies",
    "Deferred",
    "FunctionError",
    "Handler",
    "LocalContext",
    "Patch",
    "PatchRefused",
    "PatchSet",
    "functions",
    "install",
    "invoking",
    "observe",
    "register",
    "registered",
    "resolve_with",
    "stepfunctions",
    "uninstall",
    "unregister",
    "wait_reported",
]
