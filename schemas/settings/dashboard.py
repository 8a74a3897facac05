"""The built-in dashboard (``GROUNDWATCH_DASHBOARD__*``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

#: shortest dashboard token accepted: it is the only credential in front of a dashboard beyond loopback
DASHBOARD_TOKEN_MIN_CHARS = 16


class DashboardSettings(BaseModel):
    """The built-in dashboard, on the worker's web server and in ``groundwatch dashboard``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = Field(
        "127.0.0.1",
        description="address the worker's web server (and `groundwatch dashboard` by default) binds; any "
        "address but loopback needs a token or a username and password",
    )
    token: SecretStr | None = Field(
        None,
        description="bearer token the dashboard and its API require (header or ?token= once); at least "
        f"{DASHBOARD_TOKEN_MIN_CHARS} characters, not blank",
    )
    username: str | None = Field(
        None, description="basic-auth user the dashboard requires (with password); not blank"
    )
    password: SecretStr | None = Field(None, description="basic-auth password (with username); not blank")
    refresh_seconds: int = Field(30, ge=5, le=3600, description="how often an open page reloads its data")

    @property
    def has_credentials(self) -> bool:
        return bool(self.token and self.token.get_secret_value()) or bool(
            self.username and self.password and self.password.get_secret_value()
        )

    @model_validator(mode="after")
    def _both_or_neither(self) -> DashboardSettings:
        if bool(self.username) != bool(self.password):
            raise ValueError("dashboard username and password go together")
        return self

    @model_validator(mode="after")
    def _credentials_are_usable(self) -> DashboardSettings:
        """A credential that is set counts, so it must be worth something: no blank token, user or
        password, no token short enough to guess."""
        token = self.token.get_secret_value() if self.token is not None else None
        if token is not None and (not token.strip() or len(token) < DASHBOARD_TOKEN_MIN_CHARS):
            raise ValueError(
                f"the dashboard token must be at least {DASHBOARD_TOKEN_MIN_CHARS} characters and not blank "
                f"(it has {len(token)})"
            )
        password = self.password.get_secret_value() if self.password is not None else None
        for name, value in (("username", self.username), ("password", password)):
            if value is not None and not value.strip():
                raise ValueError(f"the dashboard {name} is blank")
        return self
