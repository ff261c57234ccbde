"""One settings object for every entry point; environment variables prefixed ``SEALTRAIL_``."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from ledger.keys import KeyStore

DEFAULT_DB = "sqlite:///./sealtrail.db"


class RateLimit(BaseModel):
    """One principal's token bucket: ``per_second`` requests sustained, ``burst`` at once."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    per_second: float = Field(gt=0, description="requests a second, sustained")
    burst: int = Field(ge=1, description="requests at once, after a quiet spell")


# Per role; "*" is any caller none of whose roles is listed (a certificate granted no role).
# The scorer's is far above what one process decides (a few thousand requests a second, see
# docs/performance.md), so only a runaway or hostile client meets it; people and their tools
# (console pages, queries, exports) stay far below theirs.
DEFAULT_RATE_LIMITS: MappingProxyType[str, RateLimit] = MappingProxyType({
    "scorer": RateLimit(per_second=20_000, burst=20_000),
    "officer": RateLimit(per_second=200, burst=1_000),
    "approver": RateLimit(per_second=200, burst=1_000),
    "regulator": RateLimit(per_second=200, burst=1_000),
    "admin": RateLimit(per_second=200, burst=1_000),
    "*": RateLimit(per_second=50, burst=100),
})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SEALTRAIL_", extra="ignore")

    db: str = Field(DEFAULT_DB, description="SQLAlchemy URL of the ledger database")
    keys: Path = Field(Path("./keys"), description="directory holding signing.key (0600)")
    key_store: str | None = Field(
        None, description="where the checkpoint signing key is: a key file's path, or an RFC 7512 "
                          "pkcs11: URI (pkcs11:token=LABEL;object=LABEL?module-path=/path/to/module.so"
                          "[&pin-source=file:/path]) for a key kept in an HSM (docs/signing-keys.md) "
                          "[default: KEYS/signing.key]")
    pkcs11_pin: SecretStr | None = Field(
        None, description="the PKCS#11 token's user PIN (or pin-source= in the URI); never on a command line")
    origin: str = Field("sealtrail.local/ledger", description="log origin in checkpoints")
    checkpoint_every: int = Field(1000, ge=1, description="sign after this many entries")
    checkpoint_seconds: float = Field(60.0, gt=0, description="... or after this long")
    retention_days: int = Field(3653, ge=1, description="payload retention in days: 10 years, OFAC's "
                                "31 CFR 501.601 (FATF R.11 asks 5; docs/compliance.md)")
    trusted_key: str | None = Field(None, description="verifier key pinned for verification")
    witnesses_file: Path | None = Field(
        None, description="the witnesses the log asks to cosign its checkpoints (TOML, docs/witness.md); "
                          "set: every export has them cosign its checkpoint first (sealtrail.bundle/8)")
    webhooks_file: Path | None = Field(
        None, description="the payment systems' webhook endpoints for held-payment outcomes (TOML, "
                          "docs/webhooks.md); 'sealtrail webhooks deliver' sends to them")
    app_role: str | None = Field(None, description="PostgreSQL role granted INSERT/SELECT only")
    exports_dir: Path = Field(Path("./exports"), description="where POST /v1/exports writes bundles "
                              "(<bundle_id>.zip) and GET /v1/exports/{id} reads them; keep it: the "
                              "ledger records each export, not its file")
    reporting_entity: Path | None = Field(
        None, description="TOML file naming the bank as its FIU registered it (goAML reporting entity) and "
                          "what drafting a report from a case needs beyond it: own BICs, the FIU's "
                          "conduction and funds codes (docs/goaml.md; example: "
                          "docs/reporting-entity.example.toml); unset: reports cannot be drafted")

    # -- serving (sealtrail serve, create_app) --
    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8443, ge=0, le=65535, description="port to listen on (0: any free port)")
    workers: int = Field(1, ge=1, le=64, description="deciding processes sharing the port and the log "
                         "(sealtrail serve; 2 or more for production on one machine)")
    tls_cert: Path | None = Field(None, description="server certificate (PEM)")
    tls_key: Path | None = Field(None, description="server private key (PEM)")
    client_ca: Path | None = Field(None, description="CA bundle client certificates must chain to")
    roles_file: Path | None = Field(None, description="role map (TOML) granting roles to principals")
    proxy_cert_header: str | None = Field(
        None, description="header a TLS-terminating proxy forwards the client certificate in "
                          "(URL-encoded PEM as nginx's $ssl_client_escaped_cert, or Envoy's "
                          "X-Forwarded-Client-Cert); unset: proxies are not trusted")
    trusted_proxies: list[str] = Field(default_factory=list,
                                       description="addresses/CIDRs the proxy header is accepted from")
    backend: str = Field("numpy", description="model backend: numpy | onnxruntime | cupy | tensorrt")
    max_batch: int = Field(1024, ge=1, le=10_000, description="largest batch the pipeline runs")
    velocity_snapshot: Path | None = Field(
        None, description="velocity windows saved at a clean stop, so a restart replays only what "
                          "follows [default: KEYS/velocity.snapshot, mode 0600: it names accounts]")
    state_snapshot_every: int = Field(
        0, ge=0, description="seal the feature state (a state.snapshot record) and save it to the "
                             "velocity snapshot file every this many decisions too, so that a restart "
                             "after a crash catches up only what follows; 0 (default): at a clean stop "
                             "only (the batcher pauses while the state is copied: seconds for a large "
                             "state, longer than the decision deadline)")
    account_risk_snapshot_every: int = Field(
        100_000, ge=0, description="seal the account-risk state (a state.account-risk record) and save it "
                                   "beside the velocity snapshot every this many decisions, so that a "
                                   "restart after a crash applies only the decisions after it; 0: only "
                                   "with the state snapshots (its copy pauses the batcher for "
                                   "milliseconds)")
    decision_timeout_ms: float = Field(250.0, gt=0, description="queue deadline before a fail-safe HOLD")
    screening_max_age_days: int | None = Field(
        None, ge=0, description="a sanctions list dated (published, else loaded) more than this many days "
                                "before a payment screened against it is a finding on the decision; "
                                "unset or 0: no limit")
    screening_budget: int = Field(
        16_384, ge=1, description="units of sanctions-screening work a payment gets (a free text costs a "
                                  "unit per 8 characters, 32 per distinct word and 1 + words/16 per "
                                  "candidate name): a payment whose free text needs more is screened "
                                  "until then, held by the pack's SANCTIONS_SCREENING_INCOMPLETE and "
                                  "sealed as sealtrail.decision/7 naming where it stopped")
    rate_limits: dict[str, RateLimit] = Field(
        default_factory=dict,
        description='per-principal request rates by role, JSON: {"scorer": {"per_second": 20000, '
                    '"burst": 20000}, "*": {...}}; "*" is a caller whose roles have none; roles not '
                    "named keep their defaults (scorer 20000/s, other roles 200/s burst 1000, * 50/s "
                    "burst 100); over it: 429 with Retry-After")
    commit_failure_hold_s: float = Field(
        10.0, gt=0, description="after a failed ledger commit, /healthz answers 503 until a commit "
                                "succeeds or this many seconds pass without another failure")
    account_risk_half_life_hours: int | None = Field(
        None, description="account risk halves every this many hours [default 336, 14 days]")
    account_risk_threshold_milli: int | None = Field(
        None, description="account risk (milli-points) at which an account alert is raised [default 50000]")
    account_risk_score_milli: int | None = Field(
        None, description="milli-points a model score of 1.0 adds [default 10000]")
    account_risk_review_milli: int | None = Field(
        None, description="milli-points a REVIEW adds [default 10000]")
    account_risk_hold_milli: int | None = Field(
        None, description="milli-points a HOLD adds [default 25000]")
    account_risk_block_milli: int | None = Field(
        None, description="milli-points a BLOCK adds [default 50000]")

    @property
    def key_file(self) -> Path:
        return self.keys / "signing.key"

    @property
    def signing_key_store(self) -> KeyStore:
        """The key store ``key_store`` names (default: the key file), opened with the PIN."""
        from ledger.keys import open_key_store

        pin = self.pkcs11_pin.get_secret_value() if self.pkcs11_pin is not None else None
        return open_key_store(self.key_store or self.key_file, pin=pin)

    @property
    def velocity_snapshot_file(self) -> Path:
        chosen = self.velocity_snapshot
        return chosen if chosen is not None else self.keys / "velocity.snapshot"
