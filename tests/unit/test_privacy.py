"""Personal data masking (pipeline.privacy): each detector on planted values, one placeholder per value
in every text of an interaction, keyed pseudonyms, judge mode's restore, a failing detector, storage
without texts, separate retention, and the judge's requests (the fake OpenAI server) free of the
planted values in modes judge and all."""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from groundwatch.commands import eval_cmd
from pipeline.evaluator import Evaluator
from pipeline.judges.lexical import LexicalJudge
from pipeline.privacy.detect import PresidioDetector, Span
from pipeline.privacy.mask import PSEUDONYM, Masker, PrivacyError, PrivacyGuard, restore_evaluation
from schemas.interaction import Interaction
from schemas.settings import Limits, PrivacySettings
from streams.clickhouse.store import ClickHouseStore
from streams.codec import dead_letter, decode, encode, stage_of
from streams.privacy import letter_payload
from tests.fixtures.messages import EVALUATED_AT
from tests.fixtures.privacy import PLANTED, holds_planted, planted_interaction
from tests.fixtures.store import store_settings
from tests.settings_factory import make_settings


@pytest.fixture(scope="module")
def detector() -> PresidioDetector:
    return PresidioDetector(PrivacySettings())


@pytest.mark.parametrize("label", sorted(PLANTED))
def test_each_kind_is_found_and_replaced(detector: PresidioDetector, label: str) -> None:
    text = f"Please note {PLANTED[label]} for the record."
    masked = Masker(detector).mask(Interaction(interaction_id="x", question=text, answer="ok"))
    assert masked.interaction.question == f"Please note <{label}_1> for the record."
    assert masked.originals == {f"<{label}_1>": PLANTED[label]}


def test_one_placeholder_per_value_in_every_text(detector: PresidioDetector) -> None:
    original = planted_interaction()
    masked = Masker(detector).mask(original)
    i = masked.interaction
    texts = [i.question, *(t.content for t in i.history), *(p.text for p in i.contexts), i.answer]
    texts += [i.ground_truth or "", json.dumps(i.metadata)]
    assert not [t for t in texts if holds_planted(t)]
    assert "<EMAIL_1>" in i.question and "<EMAIL_1>" in i.history[0].content
    assert "<EMAIL_1>" in i.contexts[0].text and "<EMAIL_1>" in i.answer and "<EMAIL_1>" in i.ground_truth
    assert "<CARD_1>" in i.answer and "<CARD_1>" in i.contexts[0].text
    assert i.metadata == {"user": "<EMAIL_1>", "tier": "gold"}
    assert (i.interaction_id, i.conversation_id, i.app, i.timestamp) == (
        original.interaction_id, original.conversation_id, original.app, original.timestamp
    )  # fmt: skip
    assert sorted(masked.originals.values()) == sorted(PLANTED.values())


def test_names_documents_and_nested_metadata_are_masked_too(detector: PresidioDetector) -> None:
    """A speaker's name, a document's name and strings inside metadata objects and lists are texts too:
    the judge's prompt names documents, and dimensions, alerts and exports read nested metadata."""
    email = PLANTED["EMAIL"]
    original = Interaction.model_validate(
        {
            "interaction_id": "x",
            "question": f"What did {email} ask?",
            "history": [{"role": "user", "content": "hi", "name": email}],
            "contexts": [{"text": "A passage.", "document": f"Mail from {email} (scan)"}],
            "answer": "Nothing.",
            "metadata": {"user": {"email": email, "ids": [email, 7]}, "emails": [email], "n": 3},
        }
    )
    masked = Masker(detector).mask(original).interaction
    assert email not in masked.model_dump_json()
    assert (
        masked.history[0].name == "<EMAIL_1>" and masked.contexts[0].document == "Mail from <EMAIL_1> (scan)"
    )
    assert masked.metadata == {
        "user": {"email": "<EMAIL_1>", "ids": ["<EMAIL_1>", 7]},
        "emails": ["<EMAIL_1>"],
        "n": 3,
    }


async def test_tool_steps_are_masked_and_put_back_with_the_evidence(detector: PresidioDetector) -> None:
    """A tool's arguments and result are texts too (the judge reads the result as evidence): masked for
    the judge, tool names kept, and the evidence and ungrounded argument values restored afterwards."""
    email, card = PLANTED["EMAIL"], PLANTED["CARD"]
    original = Interaction.model_validate(
        {
            "interaction_id": "t",
            "question": f"Which card does {email} use?",
            "steps": [{"name": "find_account", "call_id": "c1", "arguments": {"email": email, "n": 1},
                       "result": json.dumps([{"id": "acct", "content": f"{email} pays with card {card}."}])}],
            "answer": f"The card {card}.",
        }
    )  # fmt: skip
    masked = Masker(detector).mask(original)
    step = masked.interaction.steps[0]
    assert email not in masked.interaction.model_dump_json() and card not in (step.result or "")
    assert step.name == "find_account" and step.arguments == {"email": "<EMAIL_1>", "n": 1}
    guard = PrivacyGuard(PrivacySettings(mode="judge"), Masker(detector))
    judged = guard.for_judge(original)
    settings = make_settings(judge={"kind": "lexical"})
    evaluation = await Evaluator(LexicalJudge(), settings).evaluate(judged.interaction, judged.originals)
    assert evaluation.interaction == original
    assert [p.text for p in evaluation.evidence] == [f"{email} pays with card {card}."]
    assert evaluation.ungrounded_arguments is False  # the masked e-mail matched its masked question


def test_a_placeholder_already_in_the_text_is_not_reused(detector: PresidioDetector) -> None:
    question = f"Is <EMAIL_1> the same as {PLANTED['EMAIL']}?"
    original = Interaction(interaction_id="x", question=question, answer="No.")
    masked = Masker(detector).mask(original)
    assert masked.interaction.question == "Is <EMAIL_1> the same as <EMAIL_2>?"
    restored = restore_evaluation(_evaluation_of(masked.interaction), masked.originals).interaction
    assert restored is not None and restored.question == question


def _evaluation_of(interaction: Interaction) -> Any:
    from schemas.evaluation import Evaluation

    return Evaluation(evaluated_at=EVALUATED_AT,
        interaction_id=interaction.interaction_id, timestamp=interaction.timestamp, app="a", model="m",
        judge="lexical", interaction=interaction,
    )  # fmt: skip


def test_keyed_pseudonyms_follow_a_value_across_interactions(detector: PresidioDetector) -> None:
    one = Masker(detector, b"k1").mask(planted_interaction("a")).interaction.answer
    two = Masker(detector, b"k1").mask(planted_interaction("b")).interaction.answer
    other_key = Masker(detector, b"k2").mask(planted_interaction("a")).interaction.answer
    assert one == two and one != other_key
    token = one.split(" is linked to ")[1].split(";")[0]
    assert PSEUDONYM.match(token) and token.startswith("<EMAIL_")
    assert not holds_planted(one)


def test_user_patterns_and_deny_lists() -> None:
    settings = PrivacySettings(
        patterns={"CUSTOMER_ID": r"CUS-[0-9]{6}"}, deny_lists={"PROJECT": ["Bluebird"]}, entities=[]
    )
    masker = Masker(PresidioDetector(settings))
    text = "Customer CUS-123456 works on bluebird and Bluebird."
    masked = masker.mask(Interaction(interaction_id="x", question=text, answer="ok"))
    assert masked.interaction.question == "Customer <CUSTOMER_ID_1> works on <PROJECT_1> and <PROJECT_2>."


def test_the_detectors_never_reach_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"network access: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    masked = Masker(PresidioDetector(PrivacySettings())).mask(planted_interaction())
    assert "<EMAIL_1>" in masked.interaction.answer  # the e-mail check read the bundled suffix list


def test_person_and_location_need_a_model() -> None:
    with pytest.raises(ValueError, match="need spacy_model"):
        PrivacySettings(entities=["EMAIL_ADDRESS", "PERSON"])


class Broken:
    def detect(self, text: str) -> list[Span]:
        raise RuntimeError(f"cannot read {text}")


def test_a_failing_detector_stops_the_interaction_under_stage_privacy() -> None:
    guard = PrivacyGuard(PrivacySettings(mode="all"), Masker(Broken()))
    with pytest.raises(PrivacyError) as raised:
        guard.for_storage(planted_interaction())
    assert stage_of(raised.value, "convert") == "privacy"
    assert not holds_planted(str(raised.value))  # the reason names the failure, not the text


class EmailOnly:
    def detect(self, text: str) -> list[Span]:
        i = text.find(PLANTED["EMAIL"])
        return [] if i < 0 else [Span(i, i + len(PLANTED["EMAIL"]), "EMAIL_ADDRESS", 1.0)]


def test_a_dead_letter_in_mode_all_never_carries_a_readable_interaction_unmasked() -> None:
    """Tool arguments nesting 300 levels inside one string (the message passes max_json_depth): the
    masked interaction is still written out, and a failure after the masking dead-letters it masked; an
    interaction that cannot be masked again gets a letter without payload, never the message as read."""
    email = PLANTED["EMAIL"]
    raw = json.dumps({
        "interaction_id": "leak-1", "question": f"I am {email}, where is my order?", "answer": "Shipped.",
        "steps": [{"name": "lookup", "arguments": '{"a":' * 300 + '"ORD-1"' + "}" * 300, "result": "ok"}],
    })  # fmt: skip
    guard = PrivacyGuard(PrivacySettings(mode="all"), Masker(EmailOnly()))
    masked = encode(guard.for_storage(decode(raw, Interaction, Limits()))).decode()
    assert email not in masked and "<EMAIL" in masked
    failure = RuntimeError("the judge failed")
    payload = letter_payload(guard, raw, failure, Limits())
    assert isinstance(payload, str) and email not in payload and "<EMAIL" in payload
    broken = PrivacyGuard(PrivacySettings(mode="all"), Masker(Broken()))
    assert letter_payload(broken, raw, failure, Limits()) is None
    letter = dead_letter(stage="evaluate", error=failure, payload=None, failed_at=EVALUATED_AT)
    assert letter.payload == "" and letter.original is None and letter.error == "the judge failed"
    not_an_interaction = b'{"question": 1}'
    assert letter_payload(guard, not_an_interaction, failure, Limits()) == not_an_interaction


async def test_judge_mode_judges_placeholders_and_keeps_the_originals(detector: PresidioDetector) -> None:
    original = planted_interaction()
    guard = PrivacyGuard(PrivacySettings(mode="judge"), Masker(detector))
    assert guard.for_storage(original) is original
    judged = guard.for_judge(original)
    settings = make_settings(judge={"kind": "lexical"})
    evaluation = await Evaluator(LexicalJudge(), settings).evaluate(judged.interaction, judged.originals)
    assert evaluation.interaction == original
    statements = [s.statement for p in evaluation.pairs for h in p.hypotheses for s in h.statements]
    assert any(PLANTED["CARD"] in s for s in statements)
    assert not any("<CARD_" in s or "<EMAIL_" in s for s in statements)


def test_store_payload_false_keeps_scores_not_texts(detector: PresidioDetector) -> None:
    import asyncio

    settings = make_settings(judge={"kind": "lexical"})
    evaluation = asyncio.run(Evaluator(LexicalJudge(), settings).evaluate(planted_interaction()))
    store = ClickHouseStore.open_sync(store_settings(store_payload=False))
    try:
        store.insert_evaluations_sync([evaluation])
        rows = store.query_sync(f"SELECT * FROM {store.db}.evaluations")
        statements = store.query_sync(f"SELECT * FROM {store.db}.evaluation_statements")
    finally:
        store.close()
    assert rows[0]["context_entailment"] == evaluation.context_entailment and len(statements) > 0
    assert {s["verdict"] for s in statements} <= {"entailed", "contradicted", "not_stated"}
    dumped = json.dumps([rows, statements], default=str)
    assert not holds_planted(dumped) and "linked" not in dumped  # no text of the interaction at all


def test_text_tables_and_aggregates_have_their_own_retention() -> None:
    store = ClickHouseStore.open_sync(store_settings(ttl_days=30, aggregate_ttl_days=400))
    try:
        ddl = {
            table: store.query_sync(f"SHOW CREATE TABLE {store.db}.{table}")[0]["statement"]
            for table in (
                "evaluations",
                "evaluation_statements",
                "dead_letters",
                "labels",
                "window_aggregates",
                "alerts",
                "erasures",
            )
        }
    finally:
        store.close()
    for table in ("evaluations", "evaluation_statements", "dead_letters", "labels"):
        assert "toIntervalDay(30)" in ddl[table], table
    for table in ("window_aggregates", "alerts", "erasures"):
        assert "toIntervalDay(400)" in ddl[table], table


def _eval_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    eval_cmd.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("mode", ["judge", "all"])
def test_no_request_to_the_judge_holds_a_planted_value(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """groundwatch eval with the openai judge over real HTTP to the fake OpenAI server."""
    from tests.fakes.openai_server import FakeOpenAIServer

    data = tmp_path / "in.jsonl"
    lines = [planted_interaction(f"p-{n}").model_dump(mode="json") for n in range(3)]
    data.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    out = tmp_path / "r.json"
    with FakeOpenAIServer() as fake:
        for name, value in {
            "JUDGE__BASE_URL": fake.base_url, "JUDGE__API_KEY": "test-key", "JUDGE__MODEL": "fake-model",
            "JUDGE__CACHE_ENABLED": "false", "PIPELINE__PRONOUN_REPLACEMENT": "true", "PRIVACY__MODE": mode,
        }.items():  # fmt: skip
            monkeypatch.setenv(f"GROUNDWATCH_{name}", value)
        assert eval_cmd.run(_eval_args(str(data), "--judge", "openai", "--out", str(out), "--quiet")) == 0
        bodies = json.dumps(fake.stats.bodies)
        kinds = set(fake.stats.by_prompt)
    assert "pronouns" in kinds and any(k.startswith("nli") for k in kinds)  # convert and NLI both asked
    assert "<EMAIL_1>" in bodies and "<CARD_1>" in bodies  # the judge saw the placeholders ...
    assert not holds_planted(bodies)  # ... and none of the values
    stored = (tmp_path / "r.evaluations.jsonl").read_text(encoding="utf-8")
    assert json.loads(out.read_text())["evaluated"] == 3
    if mode == "judge":
        assert sorted(holds_planted(stored)) == sorted(PLANTED.values())  # the originals are kept
    else:
        assert not holds_planted(stored)


@pytest.mark.parametrize(
    ("text", "ibans"),
    [
        ("OpenQA-eval ES2707782861993768583004 NQ301 (MIT)", ["ES2707782861993768583004"]),
        ("to account ES13 2631 5546 2394 7500 0134 NQ301 (MIT)", ["ES13 2631 5546 2394 7500 0134"]),
        (
            "IBAN ES1224519592648475646960 IBAN GB05 VNUW 1195 5372 1539 74",
            ["ES1224519592648475646960", "GB05 VNUW 1195 5372 1539 74"],
        ),
        (
            "ES88 6174 4304 8958 2432 6889 GB46 APMY 6781 4658 1270 40",
            ["ES88 6174 4304 8958 2432 6889", "GB46 APMY 6781 4658 1270 40"],
        ),
        ("ES9999999999999999999999 NQ301", []),  # the right length, a wrong checksum
    ],
)
def test_an_iban_followed_by_a_word_is_read_by_its_countrys_length(
    detector: PresidioDetector, text: str, ibans: list[str]
) -> None:
    """Presidio's generic IBAN pattern runs on into a following group of four ("NQ30", "IBAN") and the
    checksum then fails; the country's own format gives the number's exact length."""
    found = [text[s.start : s.end] for s in detector.detect(text) if s.entity == "IBAN_CODE"]
    assert sorted(found) == sorted(ibans)


def test_sentences_glued_together_are_not_urls(detector: PresidioDetector) -> None:
    text = "He played in Spain.Club Deportivo Toledo is based there; see www.toledo-club.es or acme.com/x."
    masked = Masker(detector).mask(Interaction(interaction_id="x", question=text, answer="ok"))
    assert masked.interaction.question == (
        "He played in Spain.Club Deportivo Toledo is based there; see <URL_1> or <URL_2>."
    )


async def test_the_staged_join_puts_the_values_back(detector: PresidioDetector) -> None:
    """Mode judge, staged topology: the convert stage's Converted carries the masked interaction and the
    values; the join's assemble restores the interaction and the statements."""
    from pipeline.assemble import assemble
    from pipeline.convert import convert
    from pipeline.nli import run_nli

    original = planted_interaction()
    judged = PrivacyGuard(PrivacySettings(mode="judge"), Masker(detector)).for_judge(original)
    settings = make_settings(judge={"kind": "lexical"})
    converted = await convert(judged.interaction, LexicalJudge(), settings, judged.originals)
    assert not holds_planted(converted.model_dump_json(exclude={"originals"}))  # what the judge reads
    converted = type(converted).model_validate_json(converted.model_dump_json())  # over Kafka
    nli = await run_nli(converted, LexicalJudge(), settings)
    evaluation = assemble(converted, nli, None, settings, evaluated_at=EVALUATED_AT)
    assert evaluation.interaction == original
    assert PLANTED["EMAIL"] in " ".join(h.hypothesis for p in evaluation.pairs for h in p.hypotheses)


@pytest.mark.parametrize("mode", ["off", "judge", "all"])
def test_a_labels_note_is_masked_for_storage_in_mode_all(detector: PresidioDetector, mode: str) -> None:
    """The labels topic, the dashboard and ``labels import`` store a label through this guard."""
    from schemas.label import Label

    guard = PrivacyGuard(PrivacySettings(mode=mode), Masker(detector))
    note = f"asked by {PLANTED['EMAIL']}"
    label = Label(
        labeled_at=EVALUATED_AT, interaction_id="x", kind="grounded", value=1, reviewer="ann", note=note
    )
    stored = guard.label_for_storage(label)
    assert stored.note == ("asked by <EMAIL_1>" if mode == "all" else note)
    assert guard.label_for_storage(label.model_copy(update={"note": None})).note is None
