"""One settings object for every entry point; environment variables prefixed ``SEALTRAIL_``."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DB = "sqlite:///./sealtrail.db"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SEALTRAIL_", extra="ignore")

    db: str = Field(DEFAULT_DB, description="SQLAlchemy URL of the ledger database")
    keys: Path = Field(Path("./keys"), description="directory holding signing.key (0600)")
    origin: str = Field("sealtrail.local/ledger", description="log origin in checkpoints")
    checkpoint_every: int = Field(1000, ge=1, description="sign after this many entries")
    checkpoint_seconds: float = Field(60.0, gt=0, description="... or after this long")
    retention_days: int = Field(5 * 365 + 1, ge=1, description="payload retention (FATF R.11)")
    trusted_key: str | None = Field(None, description="verifier key pinned for verification")
    app_role: str | None = Field(None, description="PostgreSQL role granted INSERT/SELECT only")

    @property
    def key_file(self) -> Path:
        return self.keys / "signing.key"
