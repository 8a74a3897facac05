"""Settings from an environment: the ``GROUNDWATCH_*`` variables (``__`` nests, JSON for lists and
mappings), the variables that name no setting, and a ValidationError of ``Settings`` named by variable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from schemas.settings.common import variable_name
from schemas.settings.root import Settings
from schemas.settings.source import MappingEnvSource, setting_variables_of, unknown_variables_of
from schemas.validation import problems as validation_problems


def setting_variables() -> dict[str, FieldInfo]:
    """Every setting's environment variable and its field."""
    return setting_variables_of(Settings)


def unknown_variables(names: Iterable[str]) -> list[str]:
    """``GROUNDWATCH_* is not a setting (did you mean ...?)`` for each name given that looks like a
    setting but names none (pydantic-settings itself drops those without a word)."""
    return unknown_variables_of(Settings, names)


def describe_settings_error(exc: ValidationError) -> str:
    """One line naming each invalid setting by its environment variable, for a ValidationError of
    ``Settings`` (from ``Settings()``, ``from_values`` or ``with_changes``)."""
    problems = []
    for problem in validation_problems(exc):
        loc = [str(p) for p in problem.loc]
        message = problem.why
        if len(loc) >= 2:
            where = variable_name(loc[0], loc[1]) + (f" ({'.'.join(loc[2:])})" if len(loc) > 2 else "")
            problems.append(f"{where}: {message}")
        elif loc and loc[0] in Settings.model_fields:
            problems.append(message if "GROUNDWATCH_" in message else f"{variable_name(loc[0])}: {message}")
        else:
            problems.append(message)
    return "; ".join(problems)


def settings_from_env(environ: Mapping[str, str]) -> Settings:
    """The Settings a process with exactly this environment would read (``GROUNDWATCH_*``, ``__``
    nesting, JSON for complex values), without reading or touching ``os.environ``."""
    values: dict[str, Any] = MappingEnvSource(Settings, environ)()
    return Settings.from_values(values)
