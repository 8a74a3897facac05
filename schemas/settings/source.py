"""The environment source of the settings: pydantic-settings' own, but a ``GROUNDWATCH_*`` variable
that names no setting, or a list or mapping that is not JSON, stops the load with a ``SettingError``
naming the variable. ``schemas.settings.env`` applies it to ``Settings``."""

from __future__ import annotations

import difflib
import json
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsError

from schemas.errors import SettingError
from schemas.settings.common import PREFIX, variable_name

# GROUNDWATCH_* variables that are not settings and may share an environment with them: the command
# line's traceback switch (groundwatch.cli), and the ClickHouse data source of the Grafana provisioning
# (deploy/grafana). Other names without ``__`` are not checked (rules files may read secrets from variables
# of any name, e.g. GROUNDWATCH_HOOK_SECRET), unless they start like a section (GROUNDWATCH_JUDGE_MODEL)
# or nearly spell one (GROUNDWATCH_JUGDE)
NOT_SETTINGS = frozenset(
    {"GROUNDWATCH_DEBUG"}
    | {
        f"GROUNDWATCH_CLICKHOUSE_{name}"
        for name in ("HOST", "PORT", "PROTOCOL", "SECURE", "DATABASE", "USER", "PASSWORD")
    }
)


def nests(field: FieldInfo) -> bool:
    """A field whose value has keys of its own (``GROUNDWATCH_JUDGE__PRICES__GPT-4O__INPUT_PER_1K``)."""
    annotation = field.annotation
    return typing.get_origin(annotation) is dict or (
        isinstance(annotation, type) and issubclass(annotation, BaseModel)
    )


def setting_variables_of(settings_cls: type[BaseSettings]) -> dict[str, FieldInfo]:
    """Every setting's environment variable and its field."""
    out: dict[str, FieldInfo] = {}
    for section, info in settings_cls.model_fields.items():
        model = info.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        for name, field in model.model_fields.items():
            out[variable_name(section, name)] = field
    return out


def unknown_variables_of(settings_cls: type[BaseSettings], names: Iterable[str]) -> list[str]:
    """``GROUNDWATCH_* is not a setting (did you mean ...?)`` for each name given that looks like a
    setting but names none (pydantic-settings itself drops those without a word)."""
    known = setting_variables_of(settings_cls)
    sections = {name.upper(): name for name in settings_cls.model_fields}
    problems = []
    for raw in sorted(names):
        name = raw.upper()
        if not name.startswith(PREFIX) or name in NOT_SETTINGS or name in known:
            continue
        rest = name[len(PREFIX) :]
        head, delimiter, tail = rest.partition("__")
        if not delimiter:
            if rest in sections:
                continue
            looks_like_one = any(rest.startswith(f"{s}_") for s in sections) or difflib.get_close_matches(
                rest, sections, n=1, cutoff=0.8
            )
            if not looks_like_one:
                continue
        elif head in sections:
            field = known.get(f"{PREFIX}{head}__{tail.split('__')[0]}")
            if field is not None and nests(field):
                continue
        candidates = [*known, *(variable_name(s) for s in sections.values())]
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
        problems.append(f"{name} is not a setting" + (f" (did you mean {close[0]}?)" if close else ""))
    return problems


class CheckedEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source that first refuses GROUNDWATCH_* variables naming no
    setting (``SettingError`` naming them and the closest setting), and names the variable whose list
    or mapping is not JSON."""

    def __call__(self) -> dict[str, Any]:
        problems = unknown_variables_of(self.settings_cls, self.env_vars)
        if problems:
            raise SettingError("; ".join(problems))
        try:
            return super().__call__()
        except SettingsError as exc:  # a list or mapping that is not JSON
            for name, value in sorted(self.env_vars.items()):
                field = setting_variables_of(self.settings_cls).get(name.upper())
                complex_ = field is not None and (nests(field) or typing.get_origin(field.annotation) is list)
                if complex_ and value:
                    try:
                        json.loads(value)
                    except ValueError as bad:
                        raise SettingError(f"{name.upper()} is not JSON: {bad}") from None
            raise SettingError(f"{exc}: {exc.__cause__}") from None


class MappingEnvSource(CheckedEnvSource):
    """The checked environment source over a given mapping instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = dict(environ)
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        from pydantic_settings.sources.utils import parse_env_vars

        environ, case, empty = self._environ, self.case_sensitive, self.env_ignore_empty
        return parse_env_vars(environ, case, empty, self.env_parse_none_str)
