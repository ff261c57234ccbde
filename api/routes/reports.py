"""/v1/cases/{case_id}/reports: suspicious transaction reports drafted from a case and filed."""

from __future__ import annotations

from fastapi import APIRouter

__all__ = ["router"]

router = APIRouter(tags=["alerts and cases"])
