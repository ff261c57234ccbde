"""GET /v1/models: the registered models and the one scoring now."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter

from api.auth import Caller
from api.deps import RuntimeDep, allow
from audit.governance.models import RegisteredModel, registered_models

__all__ = ["router"]

router = APIRouter(prefix="/v1/models", tags=["models"])


def _json(m: RegisteredModel) -> dict[str, Any]:
    return {"model_sha256": m.model_sha256, "name": m.name, "version": m.version,
            "backends": list(m.backends),
            "registered": {"seq": m.seq, "recorded_at": m.recorded_at, "subject": m.subject,
                           "fingerprint_sha256": m.fingerprint_sha256},
            "card": dict(m.card)}


@router.get("", summary="The active model (its card and SHA-256) and every registered model")
def list_models(rt: RuntimeDep, caller: Annotated[Caller, allow("models.list")]) -> dict[str, Any]:
    models = registered_models(rt.engine)
    active = next((m for m in models if m.model_sha256 == rt.scorer.model_sha256), None)
    return {"active": None if active is None else {**_json(active), "backend": rt.scorer.name},
            "registered": [_json(m) for m in models]}
