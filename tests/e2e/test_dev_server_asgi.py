"""The dev server as an HTTP server: uvicorn underneath, so malformed requests, wrong lengths, bursts,
keep-alive and streaming behave as a real server's do; a handler's bug is a 502, never a crash.

Fake handlers stand in for the API where a test needs a behaviour no route has (a bug, a stream);
everything else goes to the real handlers over the embedded emulation."""

from __future__ import annotations

import gc
import http.client
import io
import json
import socket
import threading
import time
import urllib.error
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import pytest

from missions.local import moto as moto_patches
from missions.local.devserver import MAX_BODY, DevServer
from missions.local.emulation import LocalCloud
from missions.local.moto import LocalContext

pytestmark = pytest.mark.e2e
AUTH = {"Authorization": "Bearer dev:alice"}


class Streams:
    """What the fake API's streamed responses do, for the tests to drive and watch."""

    def __init__(self) -> None:
        self.release = threading.Event()  # the streamed response's second event waits for this
        self.closed = threading.Event()  # set when a stream's iterator was closed (ended or abandoned)


def fake_api(streams: Streams) -> Any:
    def handler(event: dict[str, Any], context: LocalContext, runtime: Any = None) -> dict[str, Any]:
        path = event["rawPath"]
        if path == "/boom":
            raise RuntimeError("the handler has a bug")
        if path == "/not-a-result":
            return None  # type: ignore[return-value]
        if path == "/context":
            first = context.get_remaining_time_in_millis()
            time.sleep(0.2)
            body = {"first": first, "second": context.get_remaining_time_in_millis(), "name": context.function_name}
            return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": json.dumps(body)}
        if path == "/stream":

            def chunks() -> Any:
                try:
                    yield b"data: one\n\n"
                    if not streams.release.wait(10):
                        yield b"data: never released\n\n"
                        return
                    yield "data: two\n\n"  # str chunks are sent as UTF-8
                    yield b"data: three\n\n"
                finally:
                    streams.closed.set()

            return {"statusCode": 200, "headers": {"content-type": "text/event-stream"}, "body": chunks()}
        if path == "/heartbeats":

            def beats() -> Any:
                try:
                    while True:
                        yield b": heartbeat\n\n"
                        time.sleep(0.05)
                finally:
                    streams.closed.set()

            return {"statusCode": 200, "headers": {"content-type": "text/event-stream"}, "body": beats()}
        if path == "/events":  # a whole event stream in one string: sent event by event
            body = "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n"
            return {"statusCode": 200, "headers": {"content-type": "text/event-stream"}, "body": body}
        return {"statusCode": 404, "headers": {"content-type": "application/json"}, "body": '{"message": "no"}'}

    return handler


@pytest.fixture(scope="module")
def cloud():
    with LocalCloud(["shopping"]) as local:
        yield local


@pytest.fixture(scope="module")
def server(cloud):
    """The real handlers; a body that stops arriving is given up on after one second."""
    with DevServer(cloud, port=0, body_timeout=1.0) as dev:
        yield dev


@pytest.fixture(scope="module")
def streams() -> Streams:
    return Streams()


@pytest.fixture(scope="module")
def fake(cloud, streams):
    with DevServer(cloud, port=0, handlers={"api": fake_api(streams)}) as dev:
        yield dev


def address(server: DevServer) -> tuple[str, int]:
    parts = urlsplit(server.url)
    assert parts.hostname and parts.port
    return parts.hostname, parts.port


def raw(server: DevServer, request: bytes, timeout: float = 10) -> bytes:
    """Send bytes as they are; read until the server closes the connection (or the timeout)."""
    with socket.create_connection(address(server), timeout=timeout) as sock:
        sock.sendall(request)
        received = b""
        while True:
            try:
                data = sock.recv(65536)
            except TimeoutError:
                raise AssertionError(f"the server neither answered nor closed in {timeout} s: {received!r}") from None
            if not data:
                return received
            received += data


def role(cloud: LocalCloud) -> str:
    return str(cloud.iam.get_role(RoleName=f"{cloud.prefix}-role")["Role"]["Arn"])


def get(server: DevServer, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(server.url + path, headers=headers or AUTH)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


# -- what a real server does with bad requests -----------------------------------------------------


def test_a_body_shorter_than_its_content_length_is_given_up_on_and_others_are_served(server):
    # Given a client that announces 100 bytes and sends 10
    answer: list[bytes] = []
    started = time.monotonic()
    stalled = threading.Thread(
        target=lambda: answer.append(
            raw(server, b"POST /missions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{}12345678")
        )
    )
    stalled.start()
    # When another client asks something meanwhile
    status, _ = get(server, "/capabilities")
    # Then it is answered at once, while the stalled one waits
    assert status == 200
    assert stalled.is_alive() or answer
    # And the stalled one gets a 408 and a closed connection once its body stops arriving
    stalled.join(timeout=15)
    assert answer, "no answer"
    assert answer[0].startswith(b"HTTP/1.1 408 "), answer[0]
    assert time.monotonic() - started < 10


def test_a_malformed_request_is_a_400_and_the_server_goes_on(server):
    # When a request line is garbage, or a Content-Length is not a number
    garbage = raw(server, b"THIS IS NOT HTTP\r\n\r\n")
    bad_length = raw(server, b"POST /missions HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n")
    # Then uvicorn answers 400 and closes; the server still serves
    assert garbage.startswith(b"HTTP/1.1 400 "), garbage
    assert bad_length.startswith(b"HTTP/1.1 400 "), bad_length
    assert get(server, "/capabilities")[0] == 200


def test_an_oversized_body_is_refused_before_it_is_read(server):
    # Given a Content-Length over the limit, with no body sent at all
    announced = raw(server, f"POST /missions HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_BODY + 1}\r\n\r\n".encode())
    # Then the answer is 413 at once (the server did not wait for the body) and the connection closes
    assert announced.startswith(b"HTTP/1.1 413 "), announced
    assert json.loads(announced.split(b"\r\n\r\n", 1)[1]) == {"message": "body too large"}


def test_a_chunked_body_is_cut_off_once_past_the_limit(server):
    # Given a chunked body exactly at the limit, whose end never comes
    chunk = b"x" * 65536
    assert MAX_BODY % len(chunk) == 0
    with socket.create_connection(address(server), timeout=10) as sock:
        sock.sendall(b"POST /missions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(MAX_BODY // len(chunk)):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        # When one more byte passes the limit
        sock.sendall(b"1\r\nx\r\n")
        # Then the server answers 413 at once (not at the body's end, which never comes), and closes
        answer = b""
        while data := sock.recv(65536):
            answer += data
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]


def test_keep_alive_serves_several_requests_on_one_connection(server):
    # Given one connection
    connection = http.client.HTTPConnection(*address(server), timeout=10)
    try:
        # When it asks three times
        statuses = []
        for _ in range(3):
            connection.request("GET", "/capabilities", headers=AUTH)
            response = connection.getresponse()
            response.read()
            statuses.append(response.status)
            sock = connection.sock
        # Then each is answered on the same socket
        assert statuses == [200, 200, 200]
        assert connection.sock is sock
    finally:
        connection.close()


def test_a_kept_alive_connection_is_served_without_nagle(server):
    # Given a client on a kept-alive connection
    connection = http.client.HTTPConnection(*address(server), timeout=10)
    try:
        connection.request("GET", "/health")
        connection.getresponse().read()
        # When the server's end of it is looked at
        ends = [c.transport.get_extra_info("socket") for c in server._server.server_state.connections]
        # Then Nagle is off there: a response's body leaves after its headers at once, not after the client's
        # delayed ACK of them (40 ms a request, for every SDK and browser that keeps connections alive)
        assert ends, "the server holds the connection"
        assert all(end.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for end in ends)
    finally:
        connection.close()


def test_a_burst_of_200_requests_from_50_threads_is_all_answered(server):
    # When 200 requests arrive at once, from 50 threads
    def one(_: int) -> int:
        return get(server, "/capabilities")[0]

    with ThreadPoolExecutor(50) as pool:
        statuses = list(pool.map(one, range(200)))  # a connection reset would raise here
    # Then every one is answered, none refused or reset
    assert statuses == [200] * 200


def test_200_mixed_requests_from_16_clients_get_no_server_error(server):
    # Given 16 clients of 4 users, each sending a mix of what users send: starting missions, listing
    # and reading them, writing and reading memory, answering what does not exist, bad bodies
    def send(method: str, path: str, user: str, body: object = None) -> int:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer dev:{user}", "content-type": "application/json"}
        request = urllib.request.Request(server.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                answer = json.loads(response.read() or b"null")
                if method == "POST" and path == "/missions":
                    return send("GET", f"/missions/{answer['mission_id']}", user)
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    mix = [
        ("POST", "/missions", {"capability": "shopping", "goal": "the cheapest USB-C charger"}),
        ("GET", "/missions?limit=5", None),
        ("PUT", "/memory/notes/load", {"value": {"n": 1}}),
        ("GET", "/memory/notes", None),
        ("GET", "/capabilities", None),
        ("POST", "/missions/m_missing/interrupts/i_missing", {"text": "hi"}),
        ("POST", "/missions", {"goal": ""}),
        ("GET", "/metrics/missions", None),
    ]

    def one(n: int) -> int:
        method, path, body = mix[n % len(mix)]
        return send(method, path, f"load-{n % 4}", body)

    # When 200 of them arrive at 16 at a time
    with ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(one, range(200)))
    # Then none is a server error (the 4xx are the requests that are wrong)
    assert [s for s in statuses if s >= 500] == [], sorted(set(statuses))
    assert {200, 202, 404, 422} >= set(statuses) - {200}


# -- handlers: bugs, streams, time left ---------------------------------------------------------------


def test_a_handler_that_raises_is_a_502_with_json_and_the_server_goes_on(fake):
    # When the handler raises, or returns something that is not a proxy result
    status, body = get(fake, "/boom")
    not_a_result, other = get(fake, "/not-a-result")
    # Then each is a 502 with a JSON message, as API Gateway answers a failed Lambda
    assert status == 502 and not_a_result == 502
    assert json.loads(body)["message"] == "internal error: RuntimeError: the handler has a bug"
    assert "TypeError" in json.loads(other)["message"]
    # And the next request is served
    assert get(fake, "/nothing-here")[0] == 404


def test_a_streamed_response_arrives_chunk_by_chunk(fake, streams):
    # Given a handler whose body is an iterator that waits, after its first event, for the test
    streams.release.clear()
    streams.closed.clear()
    connection = http.client.HTTPConnection(*address(fake), timeout=10)
    try:
        connection.request("GET", "/stream", headers=AUTH)
        response = connection.getresponse()
        # Then the status, the headers and the first event arrive before the rest exists
        assert response.status == 200
        assert response.getheader("content-type") == "text/event-stream"
        assert response.getheader("transfer-encoding") == "chunked" and response.getheader("content-length") is None
        assert response.read1(65536) == b"data: one\n\n"  # a buffering server would block here
        # When the iterator may go on
        streams.release.set()
        # Then the rest follows, and the stream ends cleanly
        assert response.read() == b"data: two\n\ndata: three\n\n"
        assert streams.closed.wait(5)
    finally:
        connection.close()


def test_a_whole_event_stream_is_sent_event_by_event(fake):
    # When a handler returns an event stream as one string
    connection = http.client.HTTPConnection(*address(fake), timeout=10)
    try:
        connection.request("GET", "/events", headers=AUTH)
        response = connection.getresponse()
        # Then it is streamed (chunked), and arrives whole
        assert response.getheader("transfer-encoding") == "chunked"
        assert response.read() == b"event: a\ndata: 1\n\nevent: b\ndata: 2\n\n"
    finally:
        connection.close()


def test_a_client_that_leaves_a_stream_gets_its_iterator_closed(fake, streams):
    # Given a stream of heartbeats that never ends by itself
    streams.closed.clear()
    connection = http.client.HTTPConnection(*address(fake), timeout=10)
    connection.request("GET", "/heartbeats", headers=AUTH)
    response = connection.getresponse()
    assert response.read1(65536).startswith(b": heartbeat")
    # When the client goes away
    connection.close()
    response.close()
    # Then the server notices between two chunks and closes the iterator
    assert streams.closed.wait(5)
    assert get(fake, "/nothing-here")[0] == 404


def test_a_handler_knows_how_much_time_it_has_left(fake, cloud):
    # When the API function's handler reads its remaining time twice, 0.2 s apart
    status, body = get(fake, "/context")
    times = json.loads(body)
    # Then it counts down from the function's configured Timeout, as in Lambda
    timeout = cloud.lambda_.get_function_configuration(FunctionName=f"{cloud.prefix}-api")["Timeout"]
    assert status == 200 and times["name"] == f"{cloud.prefix}-api"
    assert timeout * 1000 - 1000 < times["first"] <= timeout * 1000
    assert times["first"] - times["second"] >= 150


# -- the emulation's contexts and what it keeps ------------------------------------------------------


def test_an_invoked_function_counts_down_from_its_own_timeout(cloud):
    # Given a function deployed with a 7-second timeout, whose handler reports its time left
    name = "asgi-test-timeout"
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("handler.py", "def lambda_handler(event, context):\n    raise RuntimeError('in-process')\n")
    cloud.lambda_.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role(cloud),
        Handler="handler.lambda_handler",
        Code={"ZipFile": package.getvalue()},
        Timeout=7,
    )
    moto_patches.register(name, lambda event, context: {"left": context.get_remaining_time_in_millis()})
    try:
        # When it is invoked
        payload = json.loads(cloud.lambda_.invoke(FunctionName=name, Payload=b"{}")["Payload"].read())
    finally:
        moto_patches.unregister(name)
    # Then it has at most 7 seconds left, not a constant
    assert 6000 < payload["left"] <= 7000


def test_a_context_runs_out_at_its_timeout():
    # Given a context of a 0.3-second function
    context = LocalContext("short", timeout_seconds=0.3)
    # Then its time left shrinks, and stops at zero
    first = context.get_remaining_time_in_millis()
    time.sleep(0.1)
    assert 0 < context.get_remaining_time_in_millis() < first <= 300
    time.sleep(0.3)
    assert context.get_remaining_time_in_millis() == 0


def test_only_the_last_ended_executions_are_kept(cloud, monkeypatch):
    # Given a state machine, and an emulation that keeps the last 2 ended executions
    monkeypatch.setattr(moto_patches.stepfunctions, "KEEP_ENDED_EXECUTIONS", 2)
    definition = {"StartAt": "done", "States": {"done": {"Type": "Pass", "End": True}}}
    machine = cloud.sfn.create_state_machine(
        name="asgi-test-bounded", definition=json.dumps(definition), roleArn=role(cloud)
    )["stateMachineArn"]
    # When five executions run to their end, one after another
    arns = []
    for n in range(5):
        arn = cloud.sfn.start_execution(stateMachineArn=machine, name=f"run-{n}", input="{}")["executionArn"]
        assert moto_patches.wait_reported(arn, 10)
        arns.append(arn)
    # Then the last two are still described, with their history; the older ones are gone
    listed = {e["executionArn"] for e in cloud.sfn.list_executions(stateMachineArn=machine)["executions"]}
    assert listed == {arns[3], arns[4]}
    assert cloud.sfn.describe_execution(executionArn=arns[4])["status"] == "SUCCEEDED"
    assert cloud.sfn.get_execution_history(executionArn=arns[4])["events"]
    with pytest.raises(cloud.sfn.exceptions.ExecutionDoesNotExist):
        cloud.sfn.describe_execution(executionArn=arns[0])


def test_what_a_transaction_copies_for_its_rollback_is_freed(cloud):
    # Given a table that transactions write to
    from moto.dynamodb.models.table import Table

    table = "asgi-test-transactions"
    cloud.dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )

    def live_tables() -> int:
        gc.collect()
        return sum(1 for _ in Table.instances_tracked)

    before = live_tables()
    # When ten transactions run (moto copies the whole table for each, to roll back)
    for n in range(10):
        cloud.dynamodb.transact_write_items(
            TransactItems=[{"Put": {"TableName": table, "Item": {"pk": {"S": "asgi-test"}, "sk": {"S": str(n)}}}}]
        )
    # Then no copy outlives its transaction
    assert live_tables() == before
