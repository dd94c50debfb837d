"""Over real HTTP on the local stack (gateway, webhook, queue and worker,
DynamoDB server, Bedrock emulator, Twilio stand-in), with the template's policies enforced:

- 4: a text in flight while its phone is linked is answered as the app user, not lost;
- 5: an erase during a link's merge is not undone by the merge (its writes check the erase mark);
- 6: an erase follows the phone's pending merge and erases the SMS-only user's texts too;
- 7: LINK <code> waits for the phone's YES, and wrong codes, even sent at once, are locked out;
- 8: a dead-lettered text of an erased user, redriven, is answered as nobody.

And the link attempts: right codes texted at once from a fresh phone are never locked out, and a
lockout survives an erase by text; and an erase reaches the dead-letter queue: an erased user's
dead-lettered texts are unreadable after the erase (decision 0031), another user's are not.

Each test fails on the code before its fix (the mutations are named in docs/reliability.md)."""

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import boto3
import httpx
import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from infra.local.stack import LocalStack
from onboarding.config import Settings
from onboarding.persistence import Repositories
from onboarding.persistence.schema import TEXT_KEY_PREFIX
from onboarding.sms.inbound import SmsTurnRequest
from onboarding.sms.sealing import NONCE_BYTES, SealedText, read_queued
from tests.support.deployed_flows import bearer, link, new_phone, new_user, operator_table, replies_to, text
from tests.support.sqs_events import text_keys
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

HTTP = httpx.Client(timeout=120, limits=httpx.Limits(max_connections=40))
LINK_FAILURE_LIMIT = 5


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with pytest.MonkeyPatch.context() as env, LocalStack(api_port=0) as running:
        # The lockout counts wrong codes in fixed windows of wall-clock time: at the longest window
        # a test's few seconds of texts straddle two of them about once in 100,000 runs, not once in 1,000.
        env.setenv("LINK_FAILURE_WINDOW_S", str(7 * 24 * 3600))
        # The operator shortens the queue's visibility timeout (the template's 720 s), so a failing
        # text reaches the dead-letter queue through maxReceiveCount in seconds, not 24 minutes.
        sqs = running.operator_client("sqs")
        sqs.set_queue_attributes(QueueUrl=running.sms_queue_url, Attributes={"VisibilityTimeout": "5"})
        yield running


def _items(stack: LocalStack, user: str) -> dict[str, dict[str, Any]]:
    """The user's items by sort key, as the operator reads them."""
    items = operator_table(stack).query(
        TableName=stack.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"USER#{user}"}},
        ConsistentRead=True,
    )["Items"]
    return {item["sk"]["S"]: item for item in items}


def _left(stack: LocalStack, user: str) -> list[str]:
    """What is left of a user besides the rate counters (kept by design)."""
    return sorted(sk for sk in _items(stack, user) if not sk.startswith("LIMIT#"))


def _owner(stack: LocalStack, phone: str) -> dict[str, Any] | None:
    item = (
        operator_table(stack)
        .get_item(
            TableName=stack.table_name, Key={"pk": {"S": f"PHONE#{phone}"}, "sk": {"S": "~OWNER"}}, ConsistentRead=True
        )
        .get("Item")
    )
    return dict(item) if item else None


def _texter(stack: LocalStack, phone: str, first: str = "Hi coach") -> str:
    """A number that texted before it was linked: its SMS-only user (once its text is answered)."""
    answered = len([sent for sent in stack.twilio.sent if sent.to == phone])
    text(stack, phone, first)
    replies_to(stack, phone, answered + 1)
    owner = _owner(stack, phone)
    assert owner is not None
    return str(owner["user_id"]["S"])


def _history(stack: LocalStack, user: str) -> list[str]:
    answer = HTTP.get(f"{stack.api_url}/history", params={"limit": 50}, headers=bearer(user))
    return [message["content"] for message in answer.json()["messages"]]


# --- item 7: a link the phone agrees to ----------------------------------------------------------


def test_a_link_code_pulls_nothing_until_the_phone_says_yes(stack: LocalStack) -> None:
    phone, user = new_phone(), new_user()
    sms_user = _texter(stack, phone, "Hi coach, my knee hurts")
    code = HTTP.post(f"{stack.api_url}/phone-links", headers=bearer(user)).json()["code"]
    asked = text(stack, phone, f"LINK {code}")
    assert "Reply YES" in asked.text
    # Nothing moved: the app account has neither the phone nor its texts; the texts are where they were.
    assert HTTP.get(f"{stack.api_url}/phones", headers=bearer(user)).json() == {"phones": []}
    assert "Hi coach, my knee hurts" not in _history(stack, user)
    assert any(sk.startswith("MSG#") for sk in _items(stack, sms_user))
    assert "Linked!" in text(stack, phone, "YES").text
    assert "Hi coach, my knee hurts" in _history(stack, user)
    assert HTTP.get(f"{stack.api_url}/phones", headers=bearer(user)).json() == {"phones": [phone]}


def test_wrong_link_codes_sent_at_once_are_counted_and_the_phone_locked_out(stack: LocalStack) -> None:
    """30 wrong codes at once from one phone (the issue's 30 in 2.3 s): only LINK_FAILURE_LIMIT are
    checked, the rest are refused unread, and then even the right code is refused until the hour ends."""
    phone, user = new_phone(), new_user()
    _texter(stack, phone)
    guesses = [f"LINK {n:010d}".replace("0", "A").replace("1", "B") for n in range(30)]
    gate = threading.Barrier(30)

    def guess(body: str) -> str:
        gate.wait(30)
        return text(stack, phone, body).text

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=30) as pool:
        answers = list(pool.map(guess, guesses, timeout=120))
    elapsed = time.monotonic() - started
    refused = sum("not valid" in answer for answer in answers)
    locked = sum("Too many wrong link codes" in answer for answer in answers)
    print(f"\n30 wrong codes at once in {elapsed:.1f} s: {refused} checked and refused, {locked} locked out")
    assert (refused, locked) == (LINK_FAILURE_LIMIT, 30 - LINK_FAILURE_LIMIT)
    code = HTTP.post(f"{stack.api_url}/phone-links", headers=bearer(user)).json()["code"]
    assert "Too many wrong link codes" in text(stack, phone, f"LINK {code}").text
    assert HTTP.get(f"{stack.api_url}/phones", headers=bearer(user)).json() == {"phones": []}


def test_right_link_codes_texted_at_once_from_a_fresh_phone_are_never_locked_out(stack: LocalStack) -> None:
    """More LINK texts with a right code at once than LINK_FAILURE_LIMIT, from a number never seen:
    each is asked for its YES. Before, all but one could be told "Too many wrong link codes" (the
    counting writes raced; a text that lost fell through to "window full"), with no wrong code sent."""
    phone, user = new_phone(), new_user()
    code = HTTP.post(f"{stack.api_url}/phone-links", headers=bearer(user)).json()["code"]
    texts = 2 * LINK_FAILURE_LIMIT
    gate = threading.Barrier(texts)

    def link_at_once(_: int) -> str:
        gate.wait(30)
        return text(stack, phone, f"LINK {code}").text

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=texts) as pool:
        answers = list(pool.map(link_at_once, range(texts), timeout=120))
    elapsed = time.monotonic() - started
    asked = sum("Reply YES" in answer for answer in answers)
    print(f"\n{texts} right codes at once in {elapsed:.1f} s: {asked} asked to confirm")
    assert asked == texts, [answer for answer in answers if "Reply YES" not in answer]
    assert "Linked!" in text(stack, phone, "YES").text
    assert HTTP.get(f"{stack.api_url}/phones", headers=bearer(user)).json() == {"phones": [phone]}


def test_a_lockout_survives_an_erase_by_text(stack: LocalStack) -> None:
    """Locked out by wrong codes, the number erases its data by text: the next wrong code is still
    refused unread. Before, the count lived on the phone's owner item, which the erase deletes, so
    the erase gave the number LINK_FAILURE_LIMIT fresh guesses."""
    phone = new_phone()
    _texter(stack, phone)
    for guess in range(LINK_FAILURE_LIMIT):
        assert "not valid" in text(stack, phone, f"LINK ABCDEFGH{'JKMNP'[guess]}K").text
    assert "Too many wrong link codes" in text(stack, phone, "LINK ABCDEFGHQK").text
    assert "YES DELETE" in text(stack, phone, "DELETE MY DATA").text
    assert "your data is erased" in text(stack, phone, "YES DELETE").text
    assert _owner(stack, phone) is None
    assert "Too many wrong link codes" in text(stack, phone, "LINK ABCDEFGHRK").text


# --- items 5 and 6: erase and merge ---------------------------------------------------------------


def test_an_erase_follows_a_pending_merge_to_the_sms_only_users_texts(stack: LocalStack) -> None:
    """The link's merge failed and waits for the next text; DELETE /me erases the app user and, by
    the phone's owner item, the SMS-only user whose texts were to join it."""
    phone, user = new_phone(), new_user()
    sms_user = _texter(stack, phone, "My secret is that I hate running")
    code = HTTP.post(f"{stack.api_url}/phone-links", headers=bearer(user)).json()["code"]
    store = Repositories.over(operator_table(stack), stack.table_name, Settings.from_env())
    owner = store.phones.link_by_code(phone, code)  # the link's own write, its merge never ran
    assert owner is not None
    assert owner.merge_from == sms_user
    erased = HTTP.delete(f"{stack.api_url}/me", headers=bearer(user))
    assert erased.status_code == 200, erased.text
    assert erased.json()["deleted"]["messages"] >= 2  # the texts and their replies, counted
    assert _left(stack, user) == []
    assert _left(stack, sms_user) == []  # was: every text left behind, its PHONE# pointer gone
    assert _owner(stack, phone) is None


def test_an_erase_during_a_links_merge_is_not_undone(stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> None:
    """The merge's first write into the app user is held on the wire; the user erases meanwhile
    (DELETE /me answers); then the held write goes through. It must not write back what the erase
    removed (the merged state and profile were re-written 81 ms after the erase answered)."""
    phone, user = new_phone(), new_user()
    sms_user = _texter(stack, phone, "Hi coach, call me Sam, I run twice a week")
    HTTP.post(f"{stack.api_url}/chat", json={"message": "Hi"}, headers=bearer(user))
    code = HTTP.post(f"{stack.api_url}/phone-links", headers=bearer(user)).json()["code"]
    assert "Reply YES" in text(stack, phone, f"LINK {code}").text
    answers: dict[str, Any] = {}
    with TcpProxy(stack.dynamodb.port) as proxy:
        # The functions start cold on the proxy. The held write waits for the test's word, not for a
        # read timeout: it reaches the table after the erase has answered, however loaded the machine.
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.url)
        # A read timeout far longer than an erase takes, and the turn's budget that fits it.
        for name, value in (
            ("DYNAMODB_READ_TIMEOUT_S", "30"),
            ("TURN_STORE_RESERVE_S", "100"),
            ("TURN_DEADLINE_S", "300"),
        ):
            monkeypatch.setenv(name, value)
        proxy.hold_when(b"MSG#")  # the merge's first write carrying a message: its copies

        def confirm() -> None:
            answers["yes"] = text(stack, phone, "YES")

        confirming = threading.Thread(target=confirm)
        confirming.start()
        assert proxy.held.wait(120), "the merge never wrote"
        erased = HTTP.delete(f"{stack.api_url}/me", headers=bearer(user))
        proxy.release()
        confirming.join()
    assert erased.status_code == 200, erased.text
    assert answers["yes"].status_code == 200
    assert _left(stack, user) == []  # no ~STATE, ~PROFILE, copied message or summary came back
    assert _left(stack, sms_user) == []  # the texts went with the erase, not into the erased user
    assert _owner(stack, phone) is None


# --- item 4: a text in flight while its phone is linked -------------------------------------------


def test_a_text_answered_while_its_phone_is_linked_is_answered_as_the_app_user(stack: LocalStack) -> None:
    phone, user = new_phone(), new_user()
    sms_user = _texter(stack, phone)
    code = HTTP.post(f"{stack.api_url}/phone-links", headers=bearer(user)).json()["code"]
    stack.bedrock.chunk_delay_s = 0.15  # the worker's reply is still streaming when the link lands
    try:
        text(stack, phone, "I run twice a week and swim on Sundays")
        deadline = time.monotonic() + 30
        while not any(
            r.conversation and r.conversation[-1].text.startswith("I run twice") for r in stack.bedrock.requests
        ):
            assert time.monotonic() < deadline, "the worker never began the turn"
            time.sleep(0.05)
        assert "Linked!" in link(stack, phone, code).text  # merged and erased mid-turn
        replies = replies_to(stack, phone, 2, timeout_s=60)
    finally:
        stack.bedrock.chunk_delay_s = 0.0
    history = _history(stack, user)
    answered_at = history.index("I run twice a week and swim on Sundays")
    assert answered_at > 0, "the text is stored as the app user's, with a reply after it"
    assert history[answered_at - 1] in " ".join(replies)
    assert _left(stack, sms_user) == []


# --- item 8: erased texts in the dead-letter queue ------------------------------------------------


def test_a_dead_lettered_text_of_an_erased_user_is_not_answered_when_redriven(stack: LocalStack) -> None:
    """A text that failed into the dead-letter queue belongs to a user who then erased everything by
    text; the number texts again (a new SMS-only user). Redriven, the old text is answered as nobody:
    before, it was answered as the number's new user, bringing the erased text back."""
    phone = new_phone()
    erased_user = _texter(stack, phone)
    secret = f"My secret number is {uuid.uuid4().int % 10_000}"
    queued = SmsTurnRequest(
        message_id=f"SM{uuid.uuid4().hex}",
        user_id=erased_user,
        from_phone=phone,
        to_phone="+15550000000",
        text=secret,
        received_at=datetime.now(UTC),
    )
    sqs = boto3.client("sqs", region_name=stack.region, endpoint_url=stack.dynamodb.url)
    dead_letters = str(stack.deployment.resolve({"Ref": "SmsDeadLetterQueue"}))
    # As the queue leaves it after its last failed try, in the body the version before sealed texts
    # queued (still read, so a deploy loses no queued text): the erase mark is what stops it.
    sqs.send_message(
        QueueUrl=dead_letters, MessageBody=queued.model_dump_json(), MessageGroupId=erased_user,
        MessageDeduplicationId=queued.message_id,
    )  # fmt: skip
    assert "YES DELETE" in text(stack, phone, "DELETE MY DATA").text
    assert "your data is erased" in text(stack, phone, "YES DELETE").text
    new_user_id = _texter(stack, phone, "Hello again")
    assert new_user_id != erased_user
    sent_before = len([s for s in stack.twilio.sent if s.to == phone])
    # The operator's redrive: the dead-letter queue's messages back to the source queue, as they are.
    for message in sqs.receive_message(QueueUrl=dead_letters, MaxNumberOfMessages=10)["Messages"]:
        body = json.loads(message["Body"])
        if body.get("message_id") == queued.message_id:
            sqs.send_message(
                QueueUrl=stack.sms_queue_url, MessageBody=message["Body"], MessageGroupId=body["user_id"],
                MessageDeduplicationId=f"redrive-{queued.message_id}",
            )  # fmt: skip
            sqs.delete_message(QueueUrl=dead_letters, ReceiptHandle=message["ReceiptHandle"])
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not _taken(sqs, stack.sms_queue_url):
        time.sleep(0.2)
    time.sleep(2)  # the worker's turn, had it answered
    assert len([s for s in stack.twilio.sent if s.to == phone]) == sent_before, "the redriven text was answered"
    assert secret not in [item.get("content", {}).get("S") for item in _items(stack, new_user_id).values()]
    assert _left(stack, erased_user) == []


def _taken(sqs: Any, queue_url: str) -> bool:
    attributes: dict[str, str] = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return attributes["ApproximateNumberOfMessages"] == attributes["ApproximateNumberOfMessagesNotVisible"] == "0"


# --- an erase reaches the dead-letter queue (decision 0031) ---------------------------------------


def test_an_erased_users_texts_in_the_dead_letter_queue_can_no_longer_be_read(stack: LocalStack) -> None:
    """Twilio fails every send: two numbers' texts end in the dead-letter queue through the queue's
    redrive policy (maxReceiveCount), and one more text of the first is still being retried. The
    first number erases by text. Then nothing in either queue says what the first texted, or from
    which number: not in the clear, and no key left in the table opens it; the second number's
    dead-lettered text still opens, to its text and number. Before, the dead-letter queue kept the
    erased texts and their number in the clear for 14 days."""
    erased_phone, kept_phone = new_phone(), new_phone()
    erased_secret, in_flight_secret, kept_secret = (f"My secret is {uuid.uuid4().hex[:10]}" for _ in range(3))
    sqs = boto3.client("sqs", region_name=stack.region, endpoint_url=stack.dynamodb.url)
    dead_letters = str(stack.deployment.resolve({"Ref": "SmsDeadLetterQueue"}))
    store = Repositories.over(operator_table(stack), stack.table_name, Settings.from_env())
    stack.twilio.transient = [503] * 10_000
    try:
        text(stack, erased_phone, erased_secret)
        text(stack, kept_phone, kept_secret)
        owners = {phone: _owner(stack, phone) for phone in (erased_phone, kept_phone)}
        users = {phone: str(owner["user_id"]["S"]) for phone, owner in owners.items() if owner}
        started = deadline = time.monotonic()
        deadline += 90
        while {_group(m) for m in _dead_letters(sqs, dead_letters)} < set(users.values()):
            assert time.monotonic() < deadline, "the failing texts never reached the dead-letter queue"
            time.sleep(0.5)
        dead_lettered_s = time.monotonic() - started
        text(stack, erased_phone, in_flight_secret)  # queued, failing, when the erase comes
        assert "YES DELETE" in text(stack, erased_phone, "DELETE MY DATA").text
        assert "your data is erased" in text(stack, erased_phone, "YES DELETE").text
    finally:
        stack.twilio.transient = []
    deadline = time.monotonic() + 30
    while not _taken(sqs, stack.sms_queue_url):  # the worker's next try of the text in flight
        assert time.monotonic() < deadline, "the text in flight was never taken again"
        time.sleep(0.2)
    erased_user, kept_user = users[erased_phone], users[kept_phone]
    left = [m for m in _dead_letters(sqs, dead_letters) if _group(m) in (erased_user, kept_user)]
    keys = _every_stored_key(stack)
    for message in left:
        whole = json.dumps(message)
        for secret in (erased_secret, in_flight_secret, kept_secret):
            assert secret not in whole, "a text in the clear in the dead-letter queue"
        assert erased_phone.removeprefix("+") not in whole
        assert kept_phone.removeprefix("+") not in whole
    erased_texts = [m for m in left if _group(m) == erased_user]
    assert erased_texts, "the erased user's dead-lettered text is gone, not sealed: nothing was shown"
    for message in erased_texts:
        assert read_queued(message["Body"], text_keys(store)) is None
        assert not any(_opens(message["Body"], key) for key in keys), "a stored key opens an erased text"
    print(
        f"\ndead-lettered in {dead_lettered_s:.1f} s; after the erase, {len(erased_texts)} of the erased user's"
        f" texts left in the dead-letter queue, opened by 0 of the table's {len(keys)} keys"
    )
    [kept] = [read_queued(m["Body"], text_keys(store)) for m in left if _group(m) == kept_user]
    assert kept is not None
    assert (kept.text, kept.from_phone) == (kept_secret, kept_phone)
    for message in left:  # leave the queue as it was for the other tests
        sqs.delete_message(QueueUrl=dead_letters, ReceiptHandle=message["ReceiptHandle"])


def _dead_letters(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """Every message of the dead-letter queue, each received (hidden for a minute), with its attributes."""
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=60, AttributeNames=["All"]
    ).get("Messages", []):
        messages.extend(batch)
    for message in messages:  # visible again for the next look; the caller deletes what it means to
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    return messages


def _group(message: dict[str, Any]) -> str:
    return str(message["Attributes"]["MessageGroupId"])


def _every_stored_key(stack: LocalStack) -> list[bytes]:
    """The secret of every text key the table holds, as an operator scanning it finds them."""
    table = operator_table(stack)
    request: dict[str, Any] = {
        "TableName": stack.table_name,
        "FilterExpression": "begins_with(sk, :key)",
        "ExpressionAttributeValues": {":key": {"S": TEXT_KEY_PREFIX}},
    }
    keys: list[bytes] = []
    while True:
        page = table.scan(**request)
        keys.extend(bytes(item["secret"]["B"]) for item in page["Items"])
        if "LastEvaluatedKey" not in page:
            return keys
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _opens(body: str, secret: bytes) -> bool:
    sealed = SealedText.model_validate_json(body)
    raw = base64.b64decode(sealed.sealed)
    try:
        AESGCM(secret).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], f"{sealed.user_id}\n{sealed.key_id}".encode())
    except InvalidTag:
        return False
    return True
